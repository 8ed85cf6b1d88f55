// A byte trie over a vocabulary's pieces, read forwards or backwards: every piece that is a
// prefix (or, backwards, a suffix) of a text is found in one walk over the text, so listing the
// ways to split each piece of a vocabulary into two pieces costs time linear in its bytes, however
// long its pieces are.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

class PieceTrie {
 public:
  enum class Direction { forward, backward };

  // Indexes pieces[id] for every id; an empty piece is skipped and a duplicate keeps the first id.
  PieceTrie(const std::vector<std::string>& pieces, Direction direction);

  // Calls on_piece(length, id) for every piece equal to the first `length` bytes of `text` (the
  // last `length` bytes, backwards), shortest first.
  template <typename OnPiece>
  void for_each_prefix(std::string_view text, OnPiece&& on_piece) const {
    int32_t node = kRoot;
    for (size_t i = 0; i < text.size(); ++i) {
      const auto byte = static_cast<unsigned char>(
          direction_ == Direction::forward ? text[i] : text[text.size() - 1 - i]);
      node = child(node, byte);
      if (node < 0) return;
      if (nodes_[node].id >= 0) on_piece(i + 1, nodes_[node].id);
    }
  }

 private:
  static constexpr int32_t kRoot = 0;
  // Children as sibling lists, which keeps a node at 16 bytes; the root, the only node with many
  // children in real vocabularies, has a table.
  struct Node {
    int32_t first_child = -1;
    int32_t next_sibling = -1;
    int32_t id = -1;
    unsigned char byte = 0;
  };

  int32_t child(int32_t node, unsigned char byte) const;
  int32_t add_child(int32_t node, unsigned char byte);

  Direction direction_;
  std::vector<Node> nodes_;
  std::array<int32_t, 256> root_children_;
};

}  // namespace tessera
