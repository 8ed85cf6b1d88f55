#include "models/tokenizer/bpe/piece_trie.h"

namespace tessera {

PieceTrie::PieceTrie(const std::vector<std::string>& pieces, Direction direction)
    : direction_(direction) {
  root_children_.fill(-1);
  nodes_.emplace_back();
  for (size_t id = 0; id < pieces.size(); ++id) {
    const std::string& piece = pieces[id];
    if (piece.empty()) continue;
    int32_t node = kRoot;
    for (size_t i = 0; i < piece.size(); ++i) {
      const auto byte = static_cast<unsigned char>(
          direction == Direction::forward ? piece[i] : piece[piece.size() - 1 - i]);
      const int32_t next = child(node, byte);
      node = next >= 0 ? next : add_child(node, byte);
    }
    if (nodes_[node].id < 0) nodes_[node].id = static_cast<int32_t>(id);
  }
}

int32_t PieceTrie::child(int32_t node, unsigned char byte) const {
  if (node == kRoot) return root_children_[byte];
  for (int32_t at = nodes_[node].first_child; at >= 0; at = nodes_[at].next_sibling)
    if (nodes_[at].byte == byte) return at;
  return -1;
}

int32_t PieceTrie::add_child(int32_t node, unsigned char byte) {
  const auto created = static_cast<int32_t>(nodes_.size());
  Node added;
  added.byte = byte;
  if (node == kRoot) {
    root_children_[byte] = created;
  } else {
    added.next_sibling = nodes_[node].first_child;
    nodes_[node].first_child = created;
  }
  nodes_.push_back(added);
  return created;
}

}  // namespace tessera
