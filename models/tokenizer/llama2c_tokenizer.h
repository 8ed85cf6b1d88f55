// Sentencepiece-style BPE by piece scores, as llama2.c's run.c encodes (and sentencepiece and
// llama.cpp's "llama" vocabularies do): a dummy-prefix space, one symbol per UTF-8 character,
// byte fallback for characters missing from the vocabulary, then repeatedly merge the adjacent
// pair whose concatenation is the best-scoring piece (leftmost among equals). Serves llama2.c's
// tokenizer.bin (pieces with plain spaces) and GGUF's tokenizer.ggml.model == "llama" (pieces
// with U+2581 for spaces).
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "models/tokenizer.h"
#include "models/tokenizer/added_tokens.h"
#include "models/tokenizer/bpe/merge_table.h"
#include "models/tokenizer/token_index.h"

namespace tessera {

// GGUF's tokenizer.ggml.token_type values.
enum class PieceType : int32_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,      // <s>, </s>: special, skipped by decode(skip_special)
  kUserDefined = 4,  // matched in the text as a whole before BPE
  kUnused = 5,
  kByte = 6,  // <0xNN>
};

struct SentencePieceVocab {
  std::vector<std::string> pieces;
  std::vector<float> scores;
  std::vector<PieceType> types;    // empty: all normal, except the bos/eos/unk ids (control)
  std::string space_marker = " ";  // how pieces write a space: " " (llama2.c) or "\u2581"
  bool add_dummy_prefix = true;    // prepend a space to non-empty text (sentencepiece default)
  std::optional<int32_t> bos_id, unk_id;
  std::vector<int32_t> eos_ids;
  bool add_bos = true;
  bool add_eos = false;
  // Split control and user-defined pieces out of the text before BPE (llama.cpp does; llama2.c's
  // run.c does not, so "<s>" in a prompt is plain text there).
  bool match_special_pieces = false;
  std::string name = "sentencepiece-bpe";
  std::string source;  // the file, for messages
};

class SentencePieceBpeTokenizer : public Tokenizer {
 public:
  explicit SentencePieceBpeTokenizer(SentencePieceVocab vocab);
  SentencePieceBpeTokenizer(const SentencePieceBpeTokenizer&) = delete;
  SentencePieceBpeTokenizer& operator=(const SentencePieceBpeTokenizer&) = delete;

  std::vector<int32_t> encode(const std::string& text, bool add_special = true) const override;
  // Pieces' space markers become spaces and <0xNN> pieces raw bytes; the leading space of the
  // first piece, or of the piece right after BOS, is dropped (sentencepiece's decoder, run.c).
  std::string decode(const std::vector<int32_t>& ids, bool skip_special = true) const override;
  std::string token_to_piece(int32_t id) const override;
  std::optional<int32_t> token_to_id(const std::string& token) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(vocab_.pieces.size()); }
  std::optional<int32_t> bos_id() const override { return vocab_.bos_id; }
  std::vector<int32_t> eos_ids() const override { return vocab_.eos_ids; }
  std::string name() const override { return vocab_.name; }

 private:
  void encode_text(std::string_view text, bool add_prefix, std::vector<int32_t>& out) const;
  bool is_special(int32_t id) const;

  SentencePieceVocab vocab_;
  TokenIndex piece_ids_;  // over vocab_.pieces
  MergeTable merges_;
  std::array<int32_t, 256> byte_ids_;  // the <0xNN> piece of each byte, -1 when absent
  std::vector<int> piece_bytes_;       // per id: the raw byte of a <0xNN> piece, else -1
  AddedTokenMatcher special_matcher_;
};

// Reads llama2.c's tokenizer.bin: int32 max_token_length, then per token {float32 score, int32
// length, bytes}. The file does not store the vocabulary size (run.c takes it from the
// checkpoint): pass the model's vocab_size to require exactly that many records, or nullopt to
// read records up to the end of the file. BOS = 1, EOS = 2, unk = 0; bytes fall back to the
// <0xNN> pieces (ids byte + 3, as run.c assumes). Throws naming the file when it is missing,
// truncated or implausible.
std::unique_ptr<SentencePieceBpeTokenizer> load_llama2c_tokenizer(
    const std::string& path, std::optional<int64_t> vocab_size = std::nullopt);

}  // namespace tessera
