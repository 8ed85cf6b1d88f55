#include "engine/structured_output/token_vocabulary.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "runtime/check.h"

namespace tessera {

TokenVocabulary::TokenVocabulary(const Tokenizer& tokenizer, int64_t logits_width)
    : logits_width_(logits_width) {
  // Ids past the logits (a tokenizer larger than the model's vocabulary) are never drawn.
  const int64_t vocab = std::min(tokenizer.vocab_size(), logits_width);
  TESSERA_CHECK(vocab > 0 && logits_width < (int64_t{1} << 31),
                "tokenizer vocabulary {} for {} logits", tokenizer.vocab_size(), logits_width);
  token_bytes_.resize(static_cast<size_t>(vocab));
  std::vector<int32_t> order;
  for (int32_t id = 0; id < vocab; ++id) {
    // A special token decodes differently when special tokens are skipped.
    if (tokenizer.decode({id}, true) != tokenizer.decode({id}, false)) continue;
    std::string bytes = tokenizer.token_to_piece(id);
    if (bytes.empty() || bytes.size() > std::numeric_limits<uint16_t>::max()) continue;
    token_bytes_[static_cast<size_t>(id)] = std::move(bytes);
    order.push_back(id);
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return token_bytes_[static_cast<size_t>(a)] < token_bytes_[static_cast<size_t>(b)];
  });
  // Preorder nodes: a token shares the path of its longest common prefix with the one before.
  std::vector<int32_t> path;  // node per depth - 1
  std::vector<std::pair<int32_t, int32_t>> node_tokens;
  const std::string* previous = nullptr;
  for (int32_t id : order) {
    const std::string& bytes = token_bytes_[static_cast<size_t>(id)];
    size_t common = 0;
    if (previous)
      while (common < previous->size() && common < bytes.size() &&
             (*previous)[common] == bytes[common])
        ++common;
    while (path.size() > common) {
      subtree_ends_[static_cast<size_t>(path.back())] = static_cast<int32_t>(bytes_.size());
      path.pop_back();
    }
    for (size_t depth = common; depth < bytes.size(); ++depth) {
      path.push_back(static_cast<int32_t>(bytes_.size()));
      bytes_.push_back(static_cast<uint8_t>(bytes[depth]));
      depths_.push_back(static_cast<uint16_t>(depth + 1));
      subtree_ends_.push_back(-1);
      first_tokens_.push_back(id);
    }
    max_depth_ = std::max(max_depth_, bytes.size());
    node_tokens.emplace_back(path.back(), id);
    previous = &bytes;
  }
  for (int32_t node : path)
    subtree_ends_[static_cast<size_t>(node)] = static_cast<int32_t>(bytes_.size());
  // node_tokens is in node order already (tokens come sorted, each ending at its last node).
  token_starts_.assign(bytes_.size() + 1, 0);
  for (const auto& [node, id] : node_tokens) ++token_starts_[static_cast<size_t>(node) + 1];
  std::partial_sum(token_starts_.begin(), token_starts_.end(), token_starts_.begin());
  std::vector<int32_t> fill(token_starts_.begin(), token_starts_.end() - 1);
  token_ids_.resize(node_tokens.size());
  for (const auto& [node, id] : node_tokens)
    token_ids_[static_cast<size_t>(fill[static_cast<size_t>(node)]++)] = id;
}

}  // namespace tessera
