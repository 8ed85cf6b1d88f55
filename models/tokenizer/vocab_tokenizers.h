// Tokenizers built from a vocabulary already in memory, for GGUF files (which embed their
// tokenizer as tokenizer.ggml.* metadata) and other in-memory vocabularies.
//
// load_gguf_tokenizer(path) reads a .gguf's keys into a GgufVocab and calls make_gguf_tokenizer(),
// which dispatches on tokenizer.ggml.model:
//   "llama": sentencepiece BPE by piece scores with byte fallback (pieces write spaces as U+2581;
//            the same algorithm as llama2.c's tokenizer.bin). Needs tokens, scores, token_type.
//   "gpt2":  byte-level BPE (tokens + merges) with the pre-tokenizer regex named by
//            tokenizer.ggml.pre: "default"/"gpt2"/"gpt-2"/"mpt"/"olmo" (GPT-2's),
//            "llama-bpe"/"llama3"/"smaug-bpe" (Llama-3's), "qwen2"/"deepseek-r1-qwen" (Qwen2's).
// Errors name `source` and what is missing or unsupported.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/tokenizer.h"
#include "models/tokenizer/llama2c_tokenizer.h"

namespace tessera {

struct GgufVocab {
  std::string source;                    // the .gguf path, for messages
  std::string model;                     // tokenizer.ggml.model: "llama" or "gpt2"
  std::string pre;                       // tokenizer.ggml.pre; "" when absent (= "default")
  std::vector<std::string> tokens;       // tokenizer.ggml.tokens
  std::vector<float> scores;             // tokenizer.ggml.scores (llama; empty for gpt2)
  std::vector<int32_t> token_types;      // tokenizer.ggml.token_type (see PieceType); may be empty
  std::vector<std::string> merges;       // tokenizer.ggml.merges, "left right" (gpt2)
  std::optional<int32_t> bos_id;         // tokenizer.ggml.bos_token_id
  std::optional<int32_t> eos_id;         // tokenizer.ggml.eos_token_id
  std::optional<int32_t> eot_id;         // tokenizer.ggml.eot_token_id: also ends generation
  std::optional<int32_t> unk_id;         // tokenizer.ggml.unknown_token_id
  std::optional<bool> add_bos;           // tokenizer.ggml.add_bos_token
  std::optional<bool> add_eos;           // tokenizer.ggml.add_eos_token
  std::optional<bool> add_space_prefix;  // tokenizer.ggml.add_space_prefix (llama)
};

// The tokenizer a GGUF file describes. Defaults where a key is absent follow llama.cpp: llama
// vocabularies add BOS (id 1 unless given), use EOS 2 and unk 0, and prefix a space; gpt2
// vocabularies add BOS only when add_bos_token says so.
std::unique_ptr<Tokenizer> make_gguf_tokenizer(const GgufVocab& vocab);

// Lower-level factories, for other in-memory vocabularies.
std::unique_ptr<Tokenizer> make_sentencepiece_tokenizer(SentencePieceVocab vocab);
// Byte-level BPE: `merges` as "left right" strings, ranked by order; `pre_tokenizer_pattern` is
// the regex splitting text before BPE (e.g. hf::kLlama3Pattern). Tokens whose type is control
// (3) or user-defined (4) are matched whole in the text first; control ones are special.
struct ByteLevelBpeVocab {
  std::string source;
  std::string name = "bpe-bytelevel";
  std::vector<std::string> tokens;
  std::vector<std::string> merges;
  std::vector<int32_t> token_types;  // may be empty
  std::string pre_tokenizer_pattern;
  std::optional<int32_t> bos_id;
  std::vector<int32_t> eos_ids;
  bool add_bos = false;
};
std::unique_ptr<Tokenizer> make_byte_level_bpe_tokenizer(ByteLevelBpeVocab vocab);
// The regex for a tokenizer.ggml.pre name; throws naming `source` for names not supported.
std::string gguf_pre_tokenizer_pattern(const std::string& pre, const std::string& source);

// Reads a .gguf file's embedded tokenizer (tokenizer.ggml.*) through loaders::GgufFile and
// make_gguf_tokenizer(). Errors name the file.
std::unique_ptr<Tokenizer> load_gguf_tokenizer(const std::string& path);

}  // namespace tessera
