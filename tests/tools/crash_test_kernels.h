// The kernels test_kernel_cache_crash compiles through the CPU kernel cache (in the
// kernel_cache_writer process it kills): kernel k stores its value k * 7 + 1, so an entry found
// on disk can be checked by calling it.
#pragma once

#include <cstdint>
#include <string>

namespace tessera::testing {

using TestKernel = void (*)(int64_t, int64_t, void* const*);

inline int64_t crash_test_kernel_value(int k) {
  return int64_t{k} * 7 + 1;
}

inline std::string crash_test_kernel_source(int k) {
  return "#include <cstdint>\n"
         "extern \"C\" void tessera_kernel(int64_t, int64_t, void* const* args) {\n"
         "  *static_cast<int64_t*>(args[0]) = " +
         std::to_string(crash_test_kernel_value(k)) + ";\n}\n";
}

// Calls a loaded kernel; returns the value it stores.
inline int64_t call_crash_test_kernel(void* function) {
  int64_t value = 0;
  void* args[] = {&value};
  reinterpret_cast<TestKernel>(function)(0, 1, args);
  return value;
}

}  // namespace tessera::testing
