// The pushdown automaton of a Grammar over bytes, built as it is walked. A parse stack is a chain
// of frames: a position in a flattened alternative (the element to match next) and the frame to
// go on with when that alternative ends. Frames are interned, so a stack is one id and equal
// stacks are equal ids; a rule referenced last in its alternative continues with the caller's
// frame (a tail call), so right recursion does not grow the stack. A state is the set of stacks
// a prefix of text may be in, interned as well, with a table of its transition on each byte
// filled in as bytes are tried. Not thread-safe: CompiledGrammar serializes its use.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/structured_output/grammar.h"
#include "engine/structured_output/grammar_memory.h"

namespace tessera {

using GrammarStateId = int32_t;

class GrammarAutomaton {
 public:
  // What one grammar's walk may hold; passing a limit throws Error (the request is refused or
  // stopped, never the engine).
  static constexpr size_t kMaxFrames = 1 << 22;
  static constexpr size_t kMaxStates = 1 << 15;
  static constexpr size_t kMaxStacksPerState = 1 << 12;
  static constexpr GrammarStateId kDead = 0;  // no stack left: nothing can follow

  // `memory`, when given, is charged for the frames, states and transition tables as they are
  // made (an Error when it is full), and released when the automaton goes.
  explicit GrammarAutomaton(const Grammar& grammar, GrammarMemory* memory = nullptr);
  ~GrammarAutomaton();
  // Called when the memory is full, before the automaton gives up: its owner frees what it can
  // (CompiledGrammar drops its cached masks).
  void on_memory_full(std::function<void()> reclaim) { reclaim_ = std::move(reclaim); }
  GrammarAutomaton(const GrammarAutomaton&) = delete;
  GrammarAutomaton& operator=(const GrammarAutomaton&) = delete;

  GrammarStateId initial() const { return initial_; }
  GrammarStateId advance(GrammarStateId state, uint8_t byte) {
    State& from = states_[static_cast<size_t>(state)];
    if (from.next) {
      const GrammarStateId cached = (*from.next)[byte];
      if (cached >= 0) return cached;
    }
    return compute_advance(state, byte);
  }
  // The state after all of `bytes`; kDead as soon as one is refused.
  GrammarStateId advance(GrammarStateId state, std::string_view bytes) {
    for (char byte : bytes) {
      state = advance(state, static_cast<uint8_t>(byte));
      if (state == kDead) break;
    }
    return state;
  }
  // Whether `text` is a whole match of the grammar.
  bool matches(std::string_view text) { return accepts(advance(initial(), text)); }
  // The text so far is a whole match of the grammar.
  bool accepts(GrammarStateId state) const { return states_[static_cast<size_t>(state)].accepts; }
  // Some byte may still follow.
  bool can_continue(GrammarStateId state) const {
    return !states_[static_cast<size_t>(state)].stacks.empty();
  }
  // The positions of byte elements that start an alternative: where the top of a stack stands
  // between one match of a rule and the next (the others are inside a literal or a character).
  const std::vector<int32_t>& alternative_starts() const { return alternative_starts_; }
  // The rule whose alternative holds the element at `position`.
  int32_t rule_at(int32_t position) const { return position_rules_[static_cast<size_t>(position)]; }
  // The state of one stack at `position` below which nothing lies: it accepts where the
  // alternative holding `position` may end. What it takes is what any stack with that top takes
  // without leaving the alternative (position_tokens.h).
  GrammarStateId position_state(int32_t position) {
    return intern_state({intern_frame(position, -1)}, false);
  }
  // Adds the positions of the tops of `state`'s stacks to `positions` (repeats included).
  void add_top_positions(GrammarStateId state, std::vector<int32_t>& positions) const {
    for (int32_t frame : states_[static_cast<size_t>(state)].stacks)
      positions.push_back(frames_[static_cast<size_t>(frame)].position);
  }
  size_t num_states() const { return states_.size(); }
  size_t num_frames() const { return frames_.size(); }
  // The heap bytes charged to the memory so far (an estimate of what the automaton holds).
  size_t bytes() const { return bytes_; }

 private:
  enum class Kind : uint8_t { byte_set, rule, end };
  struct Element {
    Kind kind;
    int32_t index;
  };
  struct Frame {
    int32_t position;  // into elements_
    int32_t parent;    // the frame after the rule this alternative belongs to; -1: the root's
  };
  struct State {
    std::vector<int32_t> stacks;  // sorted frame ids, each at a byte_set element
    bool accepts = false;
    std::unique_ptr<std::array<GrammarStateId, 256>> next;  // -1: not computed yet
  };

  GrammarStateId compute_advance(GrammarStateId state, uint8_t byte);
  int32_t intern_frame(int32_t position, int32_t parent);
  // Adds to `stacks` every stack that (position, parent) expands to whose top is a byte set;
  // sets `accepts` when the root can end.
  void close(int32_t position, int32_t parent, std::vector<int32_t>& stacks, bool& accepts);
  GrammarStateId intern_state(std::vector<int32_t> stacks, bool accepts);
  void charge(size_t bytes);

  std::vector<Element> elements_;                  // every alternative, each closed by an end
  std::vector<std::vector<int32_t>> rule_starts_;  // per rule: its alternatives' positions
  std::vector<int32_t> position_rules_;  // per element: its rule; -1: the root's reference
  std::vector<int32_t> alternative_starts_;
  std::vector<ByteSet> byte_sets_;
  std::vector<Frame> frames_;
  std::unordered_map<uint64_t, int32_t> frame_ids_;
  std::vector<State> states_;
  std::unordered_map<std::string, GrammarStateId> state_ids_;
  GrammarStateId initial_ = kDead;
  GrammarMemory* memory_ = nullptr;
  size_t bytes_ = 0;
  std::function<void()> reclaim_;
};

}  // namespace tessera
