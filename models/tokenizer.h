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

  // The bytes one token stands for on its own, as it reads in the middle of a text (no leading
  // space stripped), for logprobs and stop strings. May be an incomplete UTF-8 sequence.
  virtual std::string token_to_piece(int32_t id) const { return decode({id}, false); }
  // The id of a token given as it is stored ("<|im_end|>", "</s>"), if there is one.
  virtual std::optional<int32_t> token_to_id(const std::string& /*token*/) const {
    return std::nullopt;
  }
};

// The most bytes of text one token stands for: a text of B bytes has at least B / this many tokens
// (up to normalization), which bounds a prompt's length before it is tokenized.
size_t longest_token_bytes(const Tokenizer& tokenizer);

// Turns a stream of ids into text pieces that are always valid UTF-8: bytes of a character split
// across tokens are held back until it is complete.
// Bytes that can never become valid (a stray continuation byte, a broken sequence) are emitted
// as U+FFFD right away. The concatenation of all pushes and finish() equals decode(ids) whenever
// that is valid UTF-8.
class StreamingDecoder {
 public:
  explicit StreamingDecoder(const Tokenizer& tokenizer, bool skip_special = true)
      : tokenizer_(tokenizer), skip_special_(skip_special) {}
  // `context_ids`: ids already shown (the prompt); they are not emitted, but the first pushed
  // token decodes as it would after them (a sentencepiece "▁word" keeps its space).
  StreamingDecoder(const Tokenizer& tokenizer, const std::vector<int32_t>& context_ids,
                   bool skip_special = true);
  std::string push(int32_t id);  // the text that became complete with this id (may be empty)
  std::string finish();          // whatever is held back, invalid bytes replaced by U+FFFD
  // The bytes the last pushed id added to the text, as it reads here (after <s>, sentencepiece's
  // "▁Once" adds "Once"); none for a skipped special token. May be part of a character.
  const std::string& last_added_bytes() const { return last_added_bytes_; }

 private:
  // Adds `id` to the context; trim() then drops what no later id's text depends on.
  void append(int32_t id);
  void trim();

  const Tokenizer& tokenizer_;
  bool skip_special_ = true;
  std::vector<int32_t> ids_;  // the last few ids: the context the next id decodes after
  std::vector<bool> shows_;   // per id of ids_: whether it decodes to any text
  std::string pending_;       // decoded bytes not emitted yet (an unfinished UTF-8 sequence)
  std::string last_added_bytes_;
};

// Loads tokenizer.json, a folder holding one, llama2.c's tokenizer .bin, or a .gguf's embedded
// vocabulary. Errors name the file and what is wrong with it.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);

}  // namespace tessera
