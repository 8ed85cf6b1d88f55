#include "models/tokenizer/byte_tokenizer.h"

namespace tessera {
namespace {

constexpr int32_t kBos = 1, kEos = 2, kFirstByte = 3;

class ByteTokenizer final : public Tokenizer {
 public:
  std::vector<int32_t> encode(const std::string& text, bool add_special) const override {
    std::vector<int32_t> ids;
    if (add_special) ids.push_back(kBos);
    for (unsigned char byte : text) ids.push_back(kFirstByte + byte);
    return ids;
  }
  std::string decode(const std::vector<int32_t>& ids, bool skip_special) const override {
    std::string text;
    for (int32_t id : ids) {
      if (id >= kFirstByte && id < kFirstByte + 256)
        text += static_cast<char>(id - kFirstByte);
      else if (!skip_special)
        text += id == kBos ? "<s>" : id == kEos ? "</s>" : "<unk>";
    }
    return text;
  }
  int64_t vocab_size() const override { return kFirstByte + 256; }
  std::optional<int32_t> bos_id() const override { return kBos; }
  std::vector<int32_t> eos_ids() const override { return {kEos}; }
  std::string name() const override { return "bytes"; }
};

}  // namespace

std::unique_ptr<Tokenizer> make_byte_tokenizer() {
  return std::make_unique<ByteTokenizer>();
}

}  // namespace tessera
