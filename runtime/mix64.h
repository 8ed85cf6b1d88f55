// splitmix64's finalizer: a cheap, well-mixed 64-bit hash step, the same on the host and on the
// GPU. The sampler's noise keys and the prefix cache's block hashes are built from it.
#pragma once

#include <cstdint>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define TESSERA_MIX64_QUALIFIERS __host__ __device__ inline
#else
#define TESSERA_MIX64_QUALIFIERS inline
#endif

namespace tessera {

TESSERA_MIX64_QUALIFIERS uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace tessera
