// The heap bytes that the compiled grammars of one server hold together (their automata and cached
// token masks), against one limit: a hostile or unlucky mix of schemas cannot grow them without
// bound. A grammar reserves before it grows; when a reservation would pass the limit, the grammar
// drops its own cached masks and tries again, and failing that its request is stopped with an
// error (GrammarCompiler also drops the least recently used grammars no request holds).
#pragma once

#include <atomic>
#include <cstddef>

#include "runtime/check.h"

namespace tessera {

class GrammarMemory {
 public:
  explicit GrammarMemory(size_t limit_bytes) : limit_(limit_bytes) {}

  // Adds `bytes` when the total stays within the limit; false (and nothing added) otherwise.
  bool try_reserve(size_t bytes) {
    size_t used = used_.load();
    do {
      if (bytes > limit_ || used > limit_ - bytes) return false;
    } while (!used_.compare_exchange_weak(used, used + bytes));
    return true;
  }
  void release(size_t bytes) {
    const size_t before = used_.fetch_sub(bytes);
    TESSERA_CHECK(before >= bytes, "grammar memory released {} bytes of {}", bytes, before);
  }
  // Reserves `bytes` or throws Error naming the limit.
  void reserve(size_t bytes) {
    TESSERA_REQUIRE(try_reserve(bytes),
                    "structured output: the compiled grammars in use would need more than their "
                    "{:.4g} MiB together; send fewer distinct schemas at once, or simpler ones",
                    static_cast<double>(limit_) / (1 << 20));
  }
  size_t used() const { return used_.load(); }
  size_t limit() const { return limit_; }

 private:
  const size_t limit_;
  std::atomic<size_t> used_{0};
};

}  // namespace tessera
