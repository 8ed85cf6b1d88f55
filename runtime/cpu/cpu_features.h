// What the running CPU can execute, asked once per process. Kernels compiled for AVX2/FMA/F16C with
// target attributes pick them only when these say so.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define TESSERA_CPU_X86 1
#endif

namespace tessera::cpu {

inline bool cpu_has_avx2_fma() {
#ifdef TESSERA_CPU_X86
  static const bool supported = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return supported;
#else
  return false;
#endif
}

// F16C from CPUID (leaf 1, ECX): clang before 17 has no "f16c" for __builtin_cpu_supports. "avx"
// also says the OS saves the YMM registers the conversions write.
inline bool cpu_has_f16c() {
#ifdef TESSERA_CPU_X86
  static const bool supported = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) &&
           __builtin_cpu_supports("avx");
  }();
  return supported;
#else
  return false;
#endif
}

}  // namespace tessera::cpu
