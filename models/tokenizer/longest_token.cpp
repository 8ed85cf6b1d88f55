#include <algorithm>

#include "models/tokenizer.h"

namespace tessera {

size_t longest_token_bytes(const Tokenizer& tokenizer) {
  size_t longest = 1;
  for (int64_t id = 0; id < tokenizer.vocab_size(); ++id)
    longest = std::max(longest, tokenizer.token_to_piece(static_cast<int32_t>(id)).size());
  return longest;
}

}  // namespace tessera
