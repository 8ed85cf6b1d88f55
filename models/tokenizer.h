// Tokenizers: text <-> token ids. Implementations: Hugging Face tokenizer.json (byte-level BPE as
// in GPT-2/Llama-3/Qwen, and sentencepiece-style BPE with byte fallback as in Llama-2/TinyLlama),
// llama2.c's tokenizer.bin, and the vocabulary embedded in a GGUF file.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tessera {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // add_special: prepend BOS (and whatever the tokenizer's template adds) as HF does by default.
  virtual std::vector<int32_t> encode(const std::string& text, bool add_special = true) const = 0;
  // Bytes of the ids concatenated (special tokens included unless skip_special).
  virtual std::string decode(const std::vector<int32_t>& ids, bool skip_special = true) const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual std::optional<int32_t> bos_id() const = 0;
  virtual std::vector<int32_t> eos_ids() const = 0;
  virtual std::string name() const = 0;  // "hf-bpe-bytelevel", "llama2c", ...
};

// Turns a stream of ids into text pieces that are always valid UTF-8: bytes of a character split
// across tokens are held back until it is complete.
class StreamingDecoder {
 public:
  explicit StreamingDecoder(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  std::string push(int32_t id);  // the text that became complete with this id (may be empty)
  std::string finish();          // whatever is held back, invalid bytes replaced by U+FFFD

 private:
  const Tokenizer& tokenizer_;
  std::vector<int32_t> ids_;
  size_t emitted_bytes_ = 0;
};

// Loads tokenizer.json, a folder holding one, llama2.c's tokenizer .bin, or a .gguf's embedded
// vocabulary. Errors name the file and what is wrong with it.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);

}  // namespace tessera
