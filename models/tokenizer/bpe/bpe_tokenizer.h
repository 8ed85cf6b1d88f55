// Hugging Face BPE tokenizers (tokenizer.json with model type BPE): byte-level ones (GPT-2,
// Llama-3, Qwen2/3) and sentencepiece-style ones with byte fallback (Llama-2, TinyLlama,
// stories260K-hf). Encoding: added tokens are cut out of the raw text, each remaining segment is
// normalized, pre-tokenized and BPE-merged, and the post-processor's special tokens are added.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "models/tokenizer.h"
#include "models/tokenizer/added_tokens.h"
#include "models/tokenizer/bpe/bpe_model.h"
#include "models/tokenizer/hf_pipeline.h"

namespace tessera {

// Everything an HfBpeTokenizer is made of; tokenizer.json, GPT-2's vocab files and GGUF's
// "gpt2" vocabularies are all turned into this.
struct HfBpeTokenizerParts {
  std::string name;    // what name() returns
  std::string source;  // the file, for messages
  std::vector<std::string> id_to_token;
  std::vector<std::pair<std::string, std::string>> merges;
  BpeModelOptions model_options;
  std::vector<AddedToken> added_tokens;
  hf::Normalizer normalizer;
  hf::PreTokenizer pre_tokenizer;
  hf::Decoder decoder;
  hf::PostProcessor post_processor;
  std::optional<int32_t> bos_id;
  std::vector<int32_t> eos_ids;
};

class HfBpeTokenizer : public Tokenizer {
 public:
  explicit HfBpeTokenizer(HfBpeTokenizerParts parts);

  // tokenizer.json, plus tokenizer_config.json (bos/eos, add_bos_token/add_eos_token) and
  // generation_config.json (eos_token_id) when they sit next to it.
  static std::unique_ptr<HfBpeTokenizer> from_tokenizer_json(const std::string& path);
  // The older pair of files: GPT-2's encoder.json + vocab.bpe (HF's vocab.json + merges.txt).
  // <|endoftext|> becomes a special added token and serves as BOS and EOS, as in HF's GPT-2.
  static std::unique_ptr<HfBpeTokenizer> from_vocab_and_merges(const std::string& vocab_path,
                                                               const std::string& merges_path);

  std::vector<int32_t> encode(const std::string& text, bool add_special = true) const override;
  std::string decode(const std::vector<int32_t>& ids, bool skip_special = true) const override;
  std::string token_to_piece(int32_t id) const override;
  std::optional<int32_t> token_to_id(const std::string& token) const override;
  int64_t vocab_size() const override { return vocab_size_; }
  std::optional<int32_t> bos_id() const override { return bos_id_; }
  std::vector<int32_t> eos_ids() const override { return eos_ids_; }
  std::string name() const override { return name_; }

 private:
  // Normalizes, pre-tokenizes and BPE-encodes one segment of text free of raw added tokens.
  void encode_segment(std::string_view segment, bool at_text_start,
                      std::vector<int32_t>& out) const;
  std::vector<hf::Decoder::Token> tokens_of(const std::vector<int32_t>& ids,
                                            bool skip_special) const;

  std::string name_;
  BpeModel model_;
  std::vector<AddedToken> added_tokens_;
  std::unordered_map<int32_t, size_t> added_token_index_;  // id -> index in added_tokens_
  AddedTokenMatcher raw_matcher_;         // tokens with normalized = false, on the raw text
  AddedTokenMatcher normalized_matcher_;  // tokens with normalized = true, on normalized text
  hf::Normalizer normalizer_;
  hf::PreTokenizer pre_tokenizer_;
  hf::Decoder decoder_;
  hf::PostProcessor post_processor_;
  std::optional<int32_t> bos_id_;
  std::vector<int32_t> eos_ids_;
  int64_t vocab_size_ = 0;
};

}  // namespace tessera
