// Fuzz target: arbitrary bytes through real tokenizers (the first byte picks one: llama2.c .bin,
// Hugging Face sentencepiece-style and byte-level tokenizer.json, GPT-2's vocab files, a GGUF's
// vocabulary, bytes), encoded and decoded, and read as ids and decoded, whole and streamed.
// Beyond not crashing: ids stay inside the vocabulary, GPT-2's byte-level BPE gives the text
// back exactly (special tokens kept), and a stream's pieces add up to the whole decode whenever
// that is valid UTF-8.
#include <cstring>
#include <memory>
#include <vector>

#include "fuzz/fuzz_support.h"
#include "models/tokenizer.h"
#include "models/tokenizer/byte_tokenizer.h"
#include "models/tokenizer/text/unicode.h"

using namespace tessera;

namespace {

struct Loaded {
  std::unique_ptr<Tokenizer> tokenizer;
  bool round_trips;  // decode(encode(text)) == text for any bytes
};

std::vector<Loaded>& tokenizers() {
  static std::vector<Loaded> loaded;
  return loaded;
}

void check_stream(const Tokenizer& tokenizer, const std::vector<int32_t>& ids, bool skip_special) {
  const std::string whole = tokenizer.decode(ids, skip_special);
  StreamingDecoder stream(tokenizer, skip_special);
  std::string streamed;
  for (int32_t id : ids) streamed += stream.push(id);
  streamed += stream.finish();
  fuzz::require(unicode::is_valid_utf8(streamed), "the stream emitted invalid UTF-8");
  if (unicode::is_valid_utf8(whole) && streamed != whole) {
    std::string ids_text;
    for (int32_t id : ids) ids_text += std::to_string(id) + " ";
    fuzz::require(false, "the stream's pieces differ from the whole decode of ids " + ids_text +
                             "\nwhole:    '" + whole + "'\nstreamed: '" + streamed + "'");
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quiet_logs();
  const std::string models = std::string(TESSERA_SHARED_DIR) + "/models";
  tokenizers().push_back({load_tokenizer(models + "/stories260K/tok512.bin"), false});
  tokenizers().push_back({load_tokenizer(models + "/stories260K-hf/tokenizer.json"), false});
  tokenizers().push_back({load_tokenizer(models + "/tokenizers/gpt2"), true});
  tokenizers().push_back({load_tokenizer(models + "/tokenizers/qwen3/tokenizer.json"), false});
  tokenizers().push_back({load_tokenizer(models + "/stories260K/stories260K.gguf"), false});
  tokenizers().push_back({make_byte_tokenizer(), true});
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const Loaded& loaded = tokenizers()[data[0] % tokenizers().size()];
  const Tokenizer& tokenizer = *loaded.tokenizer;
  const bool add_special = data[0] & 0x40, skip_special = data[0] & 0x80;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);

  const std::vector<int32_t> ids = tokenizer.encode(text, add_special);
  for (int32_t id : ids)
    fuzz::require(id >= 0 && id < tokenizer.vocab_size(),
                  "encode gave an id outside the vocabulary");
  const std::string decoded = tokenizer.decode(ids, skip_special);
  // Special tokens written in the text encode as themselves, so skipping them on decode drops
  // that text: the round trip holds only when they are kept.
  if (loaded.round_trips && !add_special && !skip_special)
    fuzz::require(decoded == text, "decode(encode(text)) is not the text");
  check_stream(tokenizer, ids, skip_special);

  // The bytes as ids, in range or not.
  std::vector<int32_t> raw((size - 1) / 4);
  if (!raw.empty()) std::memcpy(raw.data(), data + 1, raw.size() * 4);
  for (int32_t& id : raw)
    if (id % 4 != 0) id = static_cast<int32_t>(static_cast<uint32_t>(id) % tokenizer.vocab_size());
  check_stream(tokenizer, raw, skip_special);
  for (int32_t id : raw) tokenizer.token_to_piece(id);
  return 0;
}
