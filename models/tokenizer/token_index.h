// Token string -> id lookup for large vocabularies: open addressing over (hash, id) slots that
// point back into the owner's vector of token strings, so building it allocates once and a
// lookup touches one slot and one string.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

class TokenIndex {
 public:
  // Indexes tokens[id] for every id; empty strings are skipped and a duplicate keeps the first
  // id. The strings are read through tokens.data(): the vector must outlive the index and keep
  // its elements in place (moving the vector itself is fine, resizing it is not).
  void build(const std::vector<std::string>& tokens);
  std::optional<int32_t> find(std::string_view token) const;

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  size_t first_slot(uint64_t hash) const { return static_cast<size_t>(hash >> shift_); }

  const std::string* tokens_ = nullptr;
  std::vector<uint64_t> slots_;  // (hash's top 32 bits << 32) | id, or kEmpty
  int shift_ = 64;
};

}  // namespace tessera
