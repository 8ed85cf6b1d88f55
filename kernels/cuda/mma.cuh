// What the hand-written tensor-core kernels share (CUDA sm_80+; HIP builds have none of it):
// mma.sync m16n8k16 with bf16 or f16 operands and f32 accumulation, the s8 ones with s32
// accumulation, the ldmatrix loads of fragments from shared memory, and cp.async copies into
// shared memory.
//
// Fragment layouts (PTX ISA, mma.m16n8k16 with .bf16/.f16): lane = 4 * group + quad_lane;
//   A (16x16): regs {row g, k 2q..2q+1}, {row g+8, same k}, {row g, k 2q+8..}, {row g+8, k 2q+8..}
//   B (16x8):  regs {k 2q..2q+1, col g}, {k 2q+8.., col g}
//   C (16x8):  c0, c1 = row g, cols 2q, 2q+1; c2, c3 = row g+8, same cols
#pragma once

#include "kernels/cuda/gpu_vendor.h"

#if !defined(TESSERA_GPU_HIP)

#include <cstdint>
#include <type_traits>

namespace tessera::gpu {

__device__ __forceinline__ uint32_t shared_address(const void* pointer) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}

// 16 bytes global -> shared without passing through registers; zero-fills when !valid.
__device__ __forceinline__ void copy_async_16(void* shared_target, const void* global_source,
                                              bool valid) {
  asm volatile(
      "cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(shared_target)),
      "l"(global_source), "r"(valid ? 16 : 0));
}

__device__ __forceinline__ void copy_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}

// Waits until at most `kPending` committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void copy_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

// Four 8x8 b16 matrices; lanes 8m .. 8m + 7 give the row addresses of matrix m.
__device__ __forceinline__ void load_matrices(uint32_t (&fragment)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(fragment[0]), "=r"(fragment[1]), "=r"(fragment[2]), "=r"(fragment[3])
               : "r"(shared_address(row)));
}

__device__ __forceinline__ void load_matrices_transposed(uint32_t (&fragment)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(fragment[0]), "=r"(fragment[1]), "=r"(fragment[2]), "=r"(fragment[3])
               : "r"(shared_address(row)));
}

// acc (16x8 f32) += a (16x16) @ b (16x8); T is gpu_bfloat16 or gpu_half.
template <typename T>
__device__ __forceinline__ void mma_16x8x16(float (&acc)[4], const uint32_t (&a)[4], uint32_t b0,
                                            uint32_t b1) {
  if constexpr (std::is_same_v<T, gpu_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    static_assert(std::is_same_v<T, gpu_half>, "mma_16x8x16 takes bf16 or f16 operands");
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// acc (16x8 s32) += a (16x32 s8, four per register) @ b (32x8 s8): A regs {row g, k 4q..4q+3},
// {row g+8, same k}, {row g, k 16+4q..}, {row g+8, k 16+4q..}; B regs {k 4q.., col g},
// {k 16+4q.., col g}; C as the f32 one above.
__device__ __forceinline__ void mma_s8_16x8x32(int (&acc)[4], const uint32_t (&a)[4], uint32_t b0,
                                               uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+r"(acc[0]), "+r"(acc[1]), "+r"(acc[2]), "+r"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// acc (16x8 s32) += a (16x16 s8) @ b (16x8 s8): A regs {row g, k 4q..4q+3}, {row g+8, same k};
// B reg {k 4q.., col g}.
__device__ __forceinline__ void mma_s8_16x8x16(int (&acc)[4], uint32_t a0, uint32_t a1,
                                               uint32_t b0) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5}, {%6}, "
      "{%0, %1, %2, %3};\n"
      : "+r"(acc[0]), "+r"(acc[1]), "+r"(acc[2]), "+r"(acc[3])
      : "r"(a0), "r"(a1), "r"(b0));
}

}  // namespace tessera::gpu

#endif  // !TESSERA_GPU_HIP
