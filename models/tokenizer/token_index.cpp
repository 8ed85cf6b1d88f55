#include "models/tokenizer/token_index.h"

#include <algorithm>
#include <bit>
#include <functional>

namespace tessera {
namespace {

uint64_t hash_of(std::string_view token) {
  // Mixed again so that both the top bits (slot) and the next 32 (tag) are well spread.
  const uint64_t hash = std::hash<std::string_view>{}(token);
  return (hash ^ (hash >> 29)) * 0xBF58476D1CE4E5B9ull;
}

}  // namespace

void TokenIndex::build(const std::vector<std::string>& tokens) {
  tokens_ = tokens.data();
  const size_t capacity = std::bit_ceil(std::max<size_t>(16, tokens.size() * 2));
  slots_.assign(capacity, kEmpty);
  shift_ = 64 - std::countr_zero(capacity);
  const size_t mask = capacity - 1;
  for (size_t id = 0; id < tokens.size(); ++id) {
    const std::string& token = tokens[id];
    if (token.empty()) continue;
    const uint64_t hash = hash_of(token);
    const uint64_t tag = hash >> 32 << 32;
    size_t slot = first_slot(hash);
    bool duplicate = false;
    while (slots_[slot] != kEmpty) {
      if ((slots_[slot] & ~uint64_t{0xFFFFFFFF}) == tag &&
          tokens[slots_[slot] & 0xFFFFFFFF] == token) {
        duplicate = true;
        break;
      }
      slot = (slot + 1) & mask;
    }
    if (!duplicate) slots_[slot] = tag | id;
  }
}

std::optional<int32_t> TokenIndex::find(std::string_view token) const {
  if (slots_.empty() || token.empty()) return std::nullopt;
  const uint64_t hash = hash_of(token);
  const uint64_t tag = hash >> 32 << 32;
  const size_t mask = slots_.size() - 1;
  for (size_t slot = first_slot(hash); slots_[slot] != kEmpty; slot = (slot + 1) & mask) {
    const uint64_t entry = slots_[slot];
    if ((entry & ~uint64_t{0xFFFFFFFF}) == tag) {
      const auto id = static_cast<int32_t>(entry & 0xFFFFFFFF);
      if (tokens_[id] == token) return id;
    }
  }
  return std::nullopt;
}

}  // namespace tessera
