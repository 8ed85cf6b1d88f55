#include "engine/structured_output/grammar_automaton.h"

#include <algorithm>
#include <unordered_set>

#include "runtime/check.h"

namespace tessera {

namespace {

// What one entry of a hash map holds beside its key and value: a node with its hash and link, and
// a bucket pointer (an estimate, for the memory charge).
constexpr size_t kHashEntryBytes = 32;

}  // namespace

GrammarAutomaton::GrammarAutomaton(const Grammar& grammar, GrammarMemory* memory)
    : byte_sets_(grammar.byte_sets()), memory_(memory) {
  for (const GrammarRule& rule : grammar.rules()) {
    std::vector<int32_t> starts;
    const auto rule_index = static_cast<int32_t>(rule_starts_.size());
    for (const GrammarSequence& alternative : rule.alternatives) {
      starts.push_back(static_cast<int32_t>(elements_.size()));
      if (!alternative.empty() && alternative.front().kind == GrammarElement::Kind::byte_set)
        alternative_starts_.push_back(static_cast<int32_t>(elements_.size()));
      for (const GrammarElement& element : alternative)
        elements_.push_back(
            {element.kind == GrammarElement::Kind::rule ? Kind::rule : Kind::byte_set,
             element.index});
      elements_.push_back({Kind::end, 0});
    }
    position_rules_.resize(elements_.size(), rule_index);
    rule_starts_.push_back(std::move(starts));
  }
  try {
    charge(elements_.size() * (sizeof(Element) + sizeof(int32_t)) +
           alternative_starts_.size() * sizeof(int32_t) + byte_sets_.size() * sizeof(ByteSet));
    states_.emplace_back();  // kDead
    state_ids_.emplace(std::string(1, '\0'), kDead);
    // The root rule as if referenced by a one-element alternative of its own.
    const int32_t root_reference = static_cast<int32_t>(elements_.size());
    elements_.push_back({Kind::rule, grammar.root()});
    elements_.push_back({Kind::end, 0});
    position_rules_.resize(elements_.size(), -1);
    std::vector<int32_t> stacks;
    bool accepts = false;
    close(root_reference, -1, stacks, accepts);
    initial_ = intern_state(std::move(stacks), accepts);
  } catch (...) {
    if (memory_ != nullptr) memory_->release(bytes_);
    throw;
  }
}

GrammarAutomaton::~GrammarAutomaton() {
  if (memory_ != nullptr) memory_->release(bytes_);
}

void GrammarAutomaton::charge(size_t bytes) {
  if (memory_ != nullptr && !memory_->try_reserve(bytes)) {
    if (reclaim_) reclaim_();
    memory_->reserve(bytes);
  }
  bytes_ += bytes;
}

int32_t GrammarAutomaton::intern_frame(int32_t position, int32_t parent) {
  const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(position)) << 32) |
                       static_cast<uint32_t>(parent);
  if (auto found = frame_ids_.find(key); found != frame_ids_.end()) return found->second;
  TESSERA_REQUIRE(frames_.size() < kMaxFrames,
                  "structured output: the grammar's parse stacks passed {} frames; the output "
                  "nests too deeply for this grammar",
                  kMaxFrames);
  charge(sizeof(Frame) + sizeof(key) + sizeof(int32_t) + kHashEntryBytes);
  const auto id = static_cast<int32_t>(frames_.size());
  frames_.push_back({position, parent});
  frame_ids_.emplace(key, id);
  return id;
}

void GrammarAutomaton::close(int32_t position, int32_t parent, std::vector<int32_t>& stacks,
                             bool& accepts) {
  std::vector<std::pair<int32_t, int32_t>> work{{position, parent}};
  std::unordered_set<uint64_t> seen;
  while (!work.empty()) {
    auto [at, continuation] = work.back();
    work.pop_back();
    const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(at)) << 32) |
                         static_cast<uint32_t>(continuation);
    if (!seen.insert(key).second) continue;
    const Element& element = elements_[static_cast<size_t>(at)];
    switch (element.kind) {
      case Kind::byte_set:
        stacks.push_back(intern_frame(at, continuation));
        break;
      case Kind::end:
        if (continuation < 0) {
          accepts = true;
        } else {
          const Frame frame = frames_[static_cast<size_t>(continuation)];
          work.push_back({frame.position, frame.parent});
        }
        break;
      case Kind::rule: {
        // A reference in last place continues with its caller's frame: a tail call.
        const int32_t after = elements_[static_cast<size_t>(at) + 1].kind == Kind::end
                                  ? continuation
                                  : intern_frame(at + 1, continuation);
        for (int32_t start : rule_starts_[static_cast<size_t>(element.index)])
          work.push_back({start, after});
        break;
      }
    }
  }
}

GrammarStateId GrammarAutomaton::intern_state(std::vector<int32_t> stacks, bool accepts) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  TESSERA_REQUIRE(stacks.size() <= kMaxStacksPerState,
                  "structured output: the grammar is too ambiguous ({} parses of the output at "
                  "once, at most {}); make its alternatives distinct",
                  stacks.size(), kMaxStacksPerState);
  std::string key(1, accepts ? '\1' : '\0');
  key.append(reinterpret_cast<const char*>(stacks.data()), stacks.size() * sizeof(int32_t));
  auto found = state_ids_.find(key);
  if (found != state_ids_.end()) return found->second;
  TESSERA_REQUIRE(states_.size() < kMaxStates,
                  "structured output: the grammar's automaton passed {} states; simplify the "
                  "schema or grammar",
                  kMaxStates);
  // The state, its stacks, and its key in state_ids_ (the stacks again).
  charge(sizeof(State) + 2 * key.size() + sizeof(std::string) + kHashEntryBytes);
  const auto id = static_cast<GrammarStateId>(states_.size());
  State state;
  state.stacks = std::move(stacks);
  state.accepts = accepts;
  states_.push_back(std::move(state));
  state_ids_.emplace(std::move(key), id);
  return id;
}

GrammarStateId GrammarAutomaton::compute_advance(GrammarStateId state, uint8_t byte) {
  std::vector<int32_t> stacks;
  bool accepts = false;
  // Copied: close() may add frames, and intern_state() states, which moves the vectors.
  const std::vector<int32_t> from = states_[static_cast<size_t>(state)].stacks;
  for (int32_t frame_id : from) {
    const Frame frame = frames_[static_cast<size_t>(frame_id)];
    const Element& element = elements_[static_cast<size_t>(frame.position)];
    if (byte_sets_[static_cast<size_t>(element.index)].test(byte))
      close(frame.position + 1, frame.parent, stacks, accepts);
  }
  const GrammarStateId next =
      stacks.empty() && !accepts ? kDead : intern_state(std::move(stacks), accepts);
  State& source = states_[static_cast<size_t>(state)];
  if (!source.next) {
    charge(sizeof(std::array<GrammarStateId, 256>));
    source.next = std::make_unique<std::array<GrammarStateId, 256>>();
    source.next->fill(-1);
  }
  (*source.next)[byte] = next;
  return next;
}

}  // namespace tessera
