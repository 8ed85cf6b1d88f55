// A process that compiles kernels through the CPU kernel cache, for test_kernel_cache_crash,
// which kills it (SIGKILL) at random moments:
//   kernel_cache_writer CACHE_DIR COUNT [--verify]
// loads kernels 0..COUNT-1 of tools/crash_test_kernels.h. With --verify it also calls each and
// exits 1 unless every value is right and no entry had to be rebuilt (a half-written entry left
// by a killed writer would be).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "compile/codegen/kernel_cache.h"
#include "tools/crash_test_kernels.h"

int main(int argc, char** argv) {
  using namespace tessera;
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s CACHE_DIR COUNT [--verify]\n", argv[0]);
    return 2;
  }
  const int count = std::atoi(argv[2]);
  const bool verify = argc > 3 && std::string(argv[3]) == "--verify";
  CpuKernelCache cache(argv[1]);
  for (int k = 0; k < count; ++k) {
    void* function =
        cache.load(testing::crash_test_kernel_source(k), "crash_test_" + std::to_string(k));
    if (verify &&
        testing::call_crash_test_kernel(function) != testing::crash_test_kernel_value(k)) {
      std::fprintf(stderr, "kernel %d gives a wrong value\n", k);
      return 1;
    }
  }
  if (verify && cache.stats().rebuilt != 0) {
    std::fprintf(stderr, "%zu entries were not whole and were rebuilt\n", cache.stats().rebuilt);
    return 1;
  }
  return 0;
}
