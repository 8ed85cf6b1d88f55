// GPU code generation: a fused row kernel as CUDA C source, compiled at run time by NVRTC, or
// as the same source in HIP's dialect for hipRTC (gpu_kernel_cache.h). One block per row, so
// one compiled kernel serves every token count: the grid is the row count, passed at launch.
// Reductions go through warp shuffles and shared memory; their per-row results live in shared
// arrays every thread of the block reads. Outputs with a vector form (row_kernel.h) are computed 16
// bytes per thread at a time: unit-stride inputs read with 16-byte loads and the results written
// with one 16-byte store, element by element instead when a buffer turns out not to be aligned at
// run time; the other outputs one element per thread.
#pragma once

#include <string>

#include "compile/codegen/row_kernel.h"

namespace tessera {

// extern "C" __global__ void tessera_kernel(long long rows, tsr_buffers buffers), launched with
// `rows` blocks of cuda_block_size(body) threads. tsr_buffers is a struct of one void* per buffer
// (the inputs, then the outputs, in FusedKernel order) passed by value, so no device array of
// pointers is needed: launch with the address of a host array of those pointers as the argument.
// The GPU compiler a source is for: NVRTC (32-lane warps, the toolkit's 16-bit types) or hipRTC
// (64-lane wavefronts, its own 16-bit types). The kernel body is the same.
enum class GpuDialect { cuda, hip };
std::string generate_cuda_kernel(const RowKernelBody& body, GpuDialect dialect = GpuDialect::cuda);

// Threads per block of the generated kernel: 256 for rows of 1024 elements or more, else 128.
int cuda_block_size(const RowKernelBody& body);
// Blocks per row: 1 when the kernel reduces over its rows; otherwise enough blocks (at most 256)
// that each thread writes about one 16-byte group of a long row, or one element of an output
// without the vector form (rope's halves): a pointwise kernel over a few long rows, such as the
// f32 cast of one row of logits or the rope of a decode step's q and k, would leave the GPU idle
// with one block per row, its threads each waiting on several elements' loads in turn. The launch
// grid is rows x this.
int cuda_blocks_per_row(const RowKernelBody& body);

}  // namespace tessera
