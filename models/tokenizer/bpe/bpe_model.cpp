#include "models/tokenizer/bpe/bpe_model.h"

#include <algorithm>

#include "models/tokenizer/text/unicode.h"
#include "runtime/check.h"

namespace tessera {

BpeModel::BpeModel(std::vector<std::string> id_to_token,
                   const std::vector<std::pair<std::string, std::string>>& merges,
                   BpeModelOptions options, const std::string& source)
    : id_to_token_(std::move(id_to_token)), options_(options) {
  token_index_.build(id_to_token_);
  const auto& byte_chars = unicode::byte_to_char_utf8();
  for (int byte = 0; byte < 256; ++byte) {
    byte_ids_[byte] = find(byte_chars[byte]).value_or(-1);
    byte_fallback_ids_[byte] = find(fmt::format("<0x{:02X}>", byte)).value_or(-1);
  }
  merges_.reserve(merges.size());
  std::string merged;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    const auto left_id = find(left), right_id = find(right);
    merged.assign(left).append(right);
    const auto merged_id = find(merged);
    TESSERA_REQUIRE(left_id && right_id && merged_id,
                    "{}: merge {} ('{}' '{}') uses a token missing from the vocabulary ('{}')",
                    source, rank, left, right,
                    !left_id    ? left
                    : !right_id ? right
                                : merged);
    merges_.insert(*left_id, *right_id, {*merged_id, static_cast<float>(rank)});
  }
}

std::optional<int32_t> BpeModel::find(std::string_view token) const {
  return token_index_.find(token);
}

const std::string* BpeModel::token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size() || id_to_token_[id].empty()) {
    return nullptr;
  }
  return &id_to_token_[id];
}

void BpeModel::push_unknown(std::vector<int32_t>& symbols) const {
  if (!options_.unk_id) return;  // HF drops characters it cannot represent without an unk token
  if (options_.fuse_unk && !symbols.empty() && symbols.back() == *options_.unk_id) return;
  symbols.push_back(*options_.unk_id);
}

void BpeModel::encode(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  // Reused across calls: most pieces are a few bytes, and an allocation each would dominate.
  thread_local std::vector<int32_t> symbols;
  symbols.clear();
  if (options_.byte_level) {
    if (options_.ignore_merges) {
      std::string mapped;
      const auto& byte_chars = unicode::byte_to_char_utf8();
      for (const char byte : piece) mapped += byte_chars[static_cast<unsigned char>(byte)];
      if (const auto id = find(mapped)) {
        out.push_back(*id);
        return;
      }
    }
    for (const char byte : piece) {
      const int32_t id = byte_ids_[static_cast<unsigned char>(byte)];
      if (id >= 0) {
        symbols.push_back(id);
      } else {
        push_unknown(symbols);
      }
    }
  } else {
    if (options_.ignore_merges) {
      if (const auto id = find(piece)) {
        out.push_back(*id);
        return;
      }
    }
    for (size_t position = 0; position < piece.size();) {
      const size_t length =
          std::min(unicode::utf8_sequence_length(piece[position]), piece.size() - position);
      const std::string_view character = piece.substr(position, length);
      position += length;
      if (const auto id = find(character)) {
        symbols.push_back(*id);
        continue;
      }
      bool all_bytes_known = options_.byte_fallback;
      for (size_t i = 0; i < character.size() && all_bytes_known; ++i) {
        all_bytes_known = byte_fallback_ids_[static_cast<unsigned char>(character[i])] >= 0;
      }
      if (all_bytes_known) {
        for (const char byte : character) {
          symbols.push_back(byte_fallback_ids_[static_cast<unsigned char>(byte)]);
        }
      } else {
        push_unknown(symbols);
      }
    }
  }
  merges_.apply(symbols);
  out.insert(out.end(), symbols.begin(), symbols.end());
}

}  // namespace tessera
