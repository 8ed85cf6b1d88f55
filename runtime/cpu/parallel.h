// A small thread pool for the CPU kernels. parallel_for splits [0, count) into contiguous chunks
// and runs them on the pool's workers and the calling thread; work too small to be worth the
// hand-off, and calls made from inside a parallel region, run inline on the caller.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

namespace tessera::cpu {

// Threads used by parallel_for: TESSERA_NUM_THREADS when set (>= 1), else the hardware count.
int num_threads();

// True while the calling thread runs a chunk of a parallel_for.
bool in_parallel_region();

// The type-erased entry point behind parallel_for.
using ChunkFn = void (*)(const void* context, int64_t begin, int64_t end);
void parallel_for_erased(int64_t count, int64_t min_chunk, ChunkFn fn, const void* context);

// Calls body(begin, end) over disjoint ranges covering [0, count), each at least `min_chunk`
// items long (except the last), possibly on several threads at once. The first exception a chunk
// throws is rethrown on the caller once every chunk has finished.
template <typename Body>
void parallel_for(int64_t count, int64_t min_chunk, Body&& body) {
  using BodyType = std::remove_reference_t<Body>;
  parallel_for_erased(
      count, min_chunk,
      [](const void* context, int64_t begin, int64_t end) {
        (*static_cast<BodyType*>(const_cast<void*>(context)))(begin, end);
      },
      &body);
}

}  // namespace tessera::cpu
