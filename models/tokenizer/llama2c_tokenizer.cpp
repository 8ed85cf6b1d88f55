#include "models/tokenizer/llama2c_tokenizer.h"

#include <cstring>

#include "models/input_file.h"
#include "models/tokenizer/bpe/piece_trie.h"
#include "models/tokenizer/text/replace_all.h"
#include "runtime/check.h"

namespace tessera {
namespace {

// The byte a "<0xNN>" piece stands for, or -1 (run.c's sscanf(piece, "<0x%02hhX>")).
int parse_byte_piece(std::string_view piece) {
  if (piece.size() != 6 || !piece.starts_with("<0x") || piece[5] != '>') return -1;
  int value = 0;
  for (const char digit : piece.substr(3, 2)) {
    value *= 16;
    if (digit >= '0' && digit <= '9') {
      value += digit - '0';
    } else if (digit >= 'A' && digit <= 'F') {
      value += digit - 'A' + 10;
    } else if (digit >= 'a' && digit <= 'f') {
      value += digit - 'a' + 10;
    } else {
      return -1;
    }
  }
  return value;
}

}  // namespace

SentencePieceBpeTokenizer::SentencePieceBpeTokenizer(SentencePieceVocab vocab)
    : vocab_(std::move(vocab)) {
  const size_t count = vocab_.pieces.size();
  const std::string& source = vocab_.source;
  TESSERA_REQUIRE(count > 0, "{}: the vocabulary is empty", source);
  TESSERA_REQUIRE(vocab_.scores.size() == count, "{}: {} pieces but {} scores", source, count,
                  vocab_.scores.size());
  if (vocab_.types.empty()) {
    vocab_.types.assign(count, PieceType::kNormal);
    for (const auto id : {vocab_.bos_id, vocab_.unk_id}) {
      if (id && *id >= 0 && static_cast<size_t>(*id) < count)
        vocab_.types[*id] = PieceType::kControl;
    }
    for (const int32_t id : vocab_.eos_ids) {
      if (id >= 0 && static_cast<size_t>(id) < count) vocab_.types[id] = PieceType::kControl;
    }
  }
  TESSERA_REQUIRE(vocab_.types.size() == count, "{}: {} pieces but {} token types", source, count,
                  vocab_.types.size());
  for (const auto id : {vocab_.bos_id, vocab_.unk_id}) {
    TESSERA_REQUIRE(!id || (*id >= 0 && static_cast<size_t>(*id) < count),
                    "{}: special token id {} is outside the vocabulary of {}", source, *id, count);
  }

  piece_ids_.build(vocab_.pieces);
  piece_bytes_.assign(count, -1);
  std::vector<int32_t> byte_type_ids;
  for (size_t id = 0; id < count; ++id) {
    const std::string& piece = vocab_.pieces[id];
    piece_bytes_[id] = parse_byte_piece(piece);
    if (vocab_.types[id] == PieceType::kByte) {
      byte_type_ids.push_back(static_cast<int32_t>(id));
      // Older exports store byte pieces as the raw byte itself.
      if (piece_bytes_[id] < 0 && piece.size() == 1) {
        piece_bytes_[id] = static_cast<unsigned char>(piece[0]);
      }
    }
  }
  for (int byte = 0; byte < 256; ++byte) {
    const auto id = piece_ids_.find(fmt::format("<0x{:02X}>", byte));
    byte_ids_[byte] = id ? *id : byte_type_ids.size() == 256 ? byte_type_ids[byte] : -1;
  }

  // Every way to write a piece as two pieces is a merge with the piece's score. Control, unknown
  // and byte pieces are never produced by merging text. The splits come from two trie walks per
  // piece (its prefixes and its suffixes that are pieces), not a lookup per split: that would be
  // quadratic in a piece's length.
  merges_.reserve(count * 2);
  const PieceTrie prefixes(vocab_.pieces, PieceTrie::Direction::forward);
  const PieceTrie suffixes(vocab_.pieces, PieceTrie::Direction::backward);
  std::vector<int32_t> right_at;  // right_at[split]: the piece that is piece[split...], or -1
  for (size_t id = 0; id < count; ++id) {
    const PieceType type = vocab_.types[id];
    if (type == PieceType::kControl || type == PieceType::kUnknown || type == PieceType::kByte ||
        type == PieceType::kUnused) {
      continue;
    }
    const std::string_view piece = vocab_.pieces[id];
    if (piece.size() < 2) continue;
    right_at.assign(piece.size(), -1);
    suffixes.for_each_prefix(piece, [&](size_t length, int32_t right) {
      if (length < piece.size()) right_at[piece.size() - length] = right;
    });
    prefixes.for_each_prefix(piece, [&](size_t split, int32_t left) {
      if (split < piece.size() && right_at[split] >= 0)
        merges_.insert_if_absent(left, right_at[split],
                                 {static_cast<int32_t>(id), -vocab_.scores[id]});
    });
  }

  if (vocab_.match_special_pieces) {
    std::vector<AddedToken> specials;
    std::vector<std::string> patterns;
    for (size_t id = 0; id < count; ++id) {
      const PieceType type = vocab_.types[id];
      if (type != PieceType::kControl && type != PieceType::kUserDefined) continue;
      AddedToken token;
      token.content = vocab_.pieces[id];
      token.id = static_cast<int32_t>(id);
      token.special = type == PieceType::kControl;
      specials.push_back(token);
      patterns.push_back(token.content);
    }
    special_matcher_ = AddedTokenMatcher(specials, patterns);
  }
}

bool SentencePieceBpeTokenizer::is_special(int32_t id) const {
  const PieceType type = vocab_.types[id];
  return type == PieceType::kControl || type == PieceType::kUnknown;
}

void SentencePieceBpeTokenizer::encode_text(std::string_view text, bool add_prefix,
                                            std::vector<int32_t>& out) const {
  if (text.empty()) return;
  std::string normalized;
  normalized.reserve(text.size() + 1);
  if (add_prefix) normalized.push_back(' ');
  normalized.append(text);
  replace_all(normalized, " ", vocab_.space_marker);

  std::vector<int32_t> symbols;
  symbols.reserve(normalized.size());
  for (size_t position = 0; position < normalized.size();) {
    // run.c's grouping: a byte and up to three continuation bytes after it.
    size_t length = 1;
    while (position + length < normalized.size() && length < 4 &&
           (static_cast<unsigned char>(normalized[position + length]) & 0xC0) == 0x80) {
      ++length;
    }
    const std::string_view character(normalized.data() + position, length);
    position += length;
    if (const auto id = piece_ids_.find(character)) {
      symbols.push_back(*id);
      continue;
    }
    for (const char byte : character) {
      const int32_t id = byte_ids_[static_cast<unsigned char>(byte)];
      if (id >= 0) {
        symbols.push_back(id);
      } else if (vocab_.unk_id) {
        symbols.push_back(*vocab_.unk_id);
      }
    }
  }
  merges_.apply(symbols);
  out.insert(out.end(), symbols.begin(), symbols.end());
}

std::vector<int32_t> SentencePieceBpeTokenizer::encode(const std::string& text,
                                                       bool add_special) const {
  std::vector<int32_t> ids;
  if (add_special && vocab_.add_bos && vocab_.bos_id) ids.push_back(*vocab_.bos_id);
  if (special_matcher_.empty()) {
    encode_text(text, vocab_.add_dummy_prefix, ids);
  } else {
    // As llama.cpp: the dummy prefix goes on text at the start and right after a special piece.
    bool after_special = true;
    for (const auto& segment : special_matcher_.split(text)) {
      if (segment.token_id >= 0) {
        ids.push_back(segment.token_id);
        after_special = true;
      } else {
        encode_text(std::string_view(text).substr(segment.begin, segment.end - segment.begin),
                    vocab_.add_dummy_prefix && after_special, ids);
        after_special = false;
      }
    }
  }
  if (add_special && vocab_.add_eos && !vocab_.eos_ids.empty()) ids.push_back(vocab_.eos_ids[0]);
  return ids;
}

std::string SentencePieceBpeTokenizer::token_to_piece(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= vocab_.pieces.size()) return {};
  if (piece_bytes_[id] >= 0) return std::string(1, static_cast<char>(piece_bytes_[id]));
  std::string piece = vocab_.pieces[id];
  replace_all(piece, vocab_.space_marker, " ");
  return piece;
}

std::string SentencePieceBpeTokenizer::decode(const std::vector<int32_t>& ids,
                                              bool skip_special) const {
  std::string out;
  bool strip_space = true;  // at the start of the text and right after BOS
  for (const int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= vocab_.pieces.size()) continue;
    const bool is_bos = vocab_.bos_id && id == *vocab_.bos_id;
    if (skip_special && is_special(id)) {
      if (is_bos) strip_space = true;
      continue;
    }
    std::string piece = token_to_piece(id);
    if (strip_space && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
    out += piece;
    strip_space = is_bos;  // one space at most: "▁▁x" after BOS keeps its second space
  }
  return out;
}

std::optional<int32_t> SentencePieceBpeTokenizer::token_to_id(const std::string& token) const {
  return piece_ids_.find(token);
}

std::unique_ptr<SentencePieceBpeTokenizer> load_llama2c_tokenizer(
    const std::string& path, std::optional<int64_t> vocab_size) {
  const std::string contents = read_input_file(path, "tokenizer");
  size_t offset = 0;
  const auto read_int32 = [&](const char* what, size_t record) {
    TESSERA_REQUIRE(offset + 4 <= contents.size(),
                    "{}: truncated llama2.c tokenizer: the file ends inside the {} of token {} "
                    "(at byte {} of {})",
                    path, what, record, offset, contents.size());
    int32_t value;
    std::memcpy(&value, contents.data() + offset, 4);
    offset += 4;
    return value;
  };
  TESSERA_REQUIRE(contents.size() >= 4,
                  "{}: truncated llama2.c tokenizer: {} bytes, not even the max_token_length "
                  "header",
                  path, contents.size());
  const int32_t max_token_length = read_int32("header", 0);
  TESSERA_REQUIRE(max_token_length > 0 && max_token_length <= 4096,
                  "{}: not a llama2.c tokenizer: max_token_length is {}", path, max_token_length);
  SentencePieceVocab vocab;
  vocab.name = "llama2c";
  vocab.source = path;
  vocab.space_marker = " ";
  while (vocab_size ? static_cast<int64_t>(vocab.pieces.size()) < *vocab_size
                    : offset < contents.size()) {
    const size_t record = vocab.pieces.size();
    float score;
    const int32_t score_bits = read_int32("score", record);
    std::memcpy(&score, &score_bits, 4);
    const int32_t length = read_int32("length", record);
    TESSERA_REQUIRE(length >= 0 && length <= max_token_length,
                    "{}: not a llama2.c tokenizer: token {} has length {} (max_token_length {})",
                    path, record, length, max_token_length);
    TESSERA_REQUIRE(
        offset + length <= contents.size(),
        "{}: truncated llama2.c tokenizer: token {} needs {} bytes at byte {}, the file "
        "has {}",
        path, record, length, offset, contents.size());
    vocab.pieces.emplace_back(contents.data() + offset, static_cast<size_t>(length));
    vocab.scores.push_back(score);
    offset += length;
  }
  TESSERA_REQUIRE(vocab.pieces.size() >= 3,
                  "{}: a llama2.c tokenizer needs at least 3 tokens "
                  "(unk, BOS, EOS), found {}",
                  path, vocab.pieces.size());
  vocab.unk_id = 0;
  vocab.bos_id = 1;
  vocab.eos_ids = {2};
  vocab.types.assign(vocab.pieces.size(), PieceType::kNormal);
  vocab.types[0] = PieceType::kUnknown;
  vocab.types[1] = vocab.types[2] = PieceType::kControl;
  if (vocab.pieces.size() >= 259) {
    for (int byte = 0; byte < 256; ++byte) vocab.types[3 + byte] = PieceType::kByte;
  }
  return std::make_unique<SentencePieceBpeTokenizer>(std::move(vocab));
}

}  // namespace tessera
