// GPU kernels that move elements without computing on them: embedding (rows of a table by id),
// cat (blocks side by side) and copy (any strides on both sides). They copy raw bytes, in the
// widest chunks (up to 16 bytes) that the sizes and addresses allow, so one code path serves
// every dtype.
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/gemm/quantized_linear.h"
#include "kernels/cuda/gpu_runtime.h"
#include "kernels/kernel_checks.h"
#include "runtime/check.h"
#include "runtime/kernel_registry.h"

namespace tessera::gpu {
namespace {

// The largest power of two up to 16 that divides every value (byte counts and addresses).
size_t common_alignment(std::initializer_list<uintptr_t> values) {
  size_t alignment = 16;
  for (uintptr_t value : values) {
    while (alignment > 1 && value % alignment != 0) alignment /= 2;
  }
  return alignment;
}

// Calls fn<Chunk>() with the unsigned type (or vector type) of `alignment` bytes.
template <typename Fn>
void visit_chunk(size_t alignment, Fn&& fn) {
  switch (alignment) {
    case 16:
      return fn.template operator()<uint4>();
    case 8:
      return fn.template operator()<uint2>();
    case 4:
      return fn.template operator()<uint32_t>();
    case 2:
      return fn.template operator()<uint16_t>();
    default:
      return fn.template operator()<uint8_t>();
  }
}

// Threads per block for rows of `chunks` chunks: a multiple of the warp size, at most 256.
unsigned int row_threads(int64_t chunks) {
  const int64_t warps = ceil_div(chunks, GPU_WARP_SIZE);
  return static_cast<unsigned int>(std::min<int64_t>(warps * GPU_WARP_SIZE, 256));
}

// ---- embedding

// One block per id (grid-stride). An id outside [0, vocab) writes a zero row instead of reading
// out of bounds: checking ids on the host would need a device-to-host copy and a sync in the hot
// path (and is impossible inside a captured graph), so the engine validates token ids when
// requests arrive, and this kernel only guarantees it never reads outside the table. A shard
// of a larger table (tensor parallelism) holds rows [vocab_start, vocab_start + vocab), and
// writes zeros for the other ids by the same rule.
template <typename Chunk, typename Id>
__global__ void embedding_kernel(int64_t count, int64_t vocab, int64_t vocab_start,
                                 int64_t chunks_per_row, const Id* ids, const Chunk* weight,
                                 Chunk* out) {
  for (int64_t row = blockIdx.x; row < count; row += gridDim.x) {
    const auto id = static_cast<int64_t>(ids[row]) - vocab_start;
    Chunk* destination = out + row * chunks_per_row;
    if (id >= 0 && id < vocab) {
      const Chunk* source = weight + id * chunks_per_row;
      for (int64_t c = threadIdx.x; c < chunks_per_row; c += blockDim.x) destination[c] = source[c];
    } else {
      for (int64_t c = threadIdx.x; c < chunks_per_row; c += blockDim.x) destination[c] = Chunk{};
    }
  }
}

void embedding_entry(const KernelArgs& args) {
  const EmbeddingArgs embedding = check_embedding(args);
  const Tensor &weight = embedding.weight, &ids = embedding.ids, &out = embedding.out;
  const int64_t vocab = embedding.vocab, width = embedding.width, count = embedding.count;
  // The whole table is the shard that starts at 0 (an id outside it gives a zero row).
  const int64_t vocab_start = std::max<int64_t>(embedding.vocab_start, 0);
  if (out.numel() == 0) return;
  if (is_quantized(weight.dtype())) return quantized_embedding(weight, ids, vocab_start, out);
  const auto row_bytes = static_cast<uintptr_t>(width * element_size(weight.dtype()));
  const size_t chunk_bytes =
      common_alignment({row_bytes, reinterpret_cast<uintptr_t>(weight.data_ptr()),
                        reinterpret_cast<uintptr_t>(out.data_ptr())});
  const auto chunks_per_row = static_cast<int64_t>(row_bytes / chunk_bytes);
  LaunchScope scope(out.device());
  visit_chunk(chunk_bytes, [&]<typename Chunk>() {
    visit_device_dtype(ids.dtype(), [&]<typename Id>() {
      if constexpr (std::is_integral_v<Id>) {
        embedding_kernel<Chunk, Id>
            <<<grid_size(count, 1), row_threads(chunks_per_row), 0, scope.stream()>>>(
                count, vocab, vocab_start, chunks_per_row, static_cast<const Id*>(ids.data_ptr()),
                static_cast<const Chunk*>(weight.data_ptr()), static_cast<Chunk*>(out.data_ptr()));
      }
    });
  });
  GPU_CHECK_LAUNCH("embedding");
}

// ---- cat

// Copies `rows` contiguous source rows of `chunks_per_row` chunks into destination rows that are
// `destination_stride` chunks apart (one input's block of every output row).
template <typename Chunk>
__global__ void copy_rows_kernel(int64_t rows, int64_t chunks_per_row, const Chunk* source,
                                 Chunk* destination, int64_t destination_stride) {
  const int64_t total = rows * chunks_per_row;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const bool fits_32bit = total <= static_cast<int64_t>(UINT32_MAX);
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += step) {
    int64_t row;
    if (fits_32bit) {
      row = static_cast<uint32_t>(i) / static_cast<uint32_t>(chunks_per_row);
    } else {
      row = i / chunks_per_row;
    }
    const int64_t column = i - row * chunks_per_row;
    destination[row * destination_stride + column] = source[i];
  }
}

// Inputs are contiguous: per index of the dims before `dim`, each input contributes one
// contiguous block, and the output row is those blocks side by side.
void cat_entry(const KernelArgs& args) {
  const Tensor& out = args.outputs[0];
  TESSERA_CHECK(out.is_contiguous(), "cat: the output must be contiguous");
  const int64_t dim = wrap_dim(args.attributes.get_int("dim"), out.dim(), "cat");
  const Shape& sizes = out.sizes();
  int64_t outer = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= sizes[d];
  int64_t inner = 1;
  for (int64_t d = dim + 1; d < out.dim(); ++d) inner *= sizes[d];
  const size_t element = element_size(out.dtype());
  int64_t total = 0;
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    const Tensor& input = args.inputs[i];
    TESSERA_REQUIRE(input.dtype() == out.dtype(),
                    "cat: tensors[{}] has dtype {} but {} was expected", i,
                    dtype_name(input.dtype()), dtype_name(out.dtype()));
    Shape expected = sizes;
    expected[dim] = input.dim() == out.dim() ? input.size(dim) : -1;
    TESSERA_REQUIRE(input.sizes() == expected, "cat: tensors[{}] has shape {} but {} was expected",
                    i, shape_str(input.sizes()), shape_str(expected));
    TESSERA_CHECK(input.is_contiguous(), "cat: the GPU kernel needs contiguous inputs");
    total += input.size(dim);
  }
  TESSERA_REQUIRE(total == sizes[dim],
                  "cat: inputs add up to {} along dim {} but the output {} has {}", total, dim,
                  out.str(), sizes[dim]);
  if (out.numel() == 0) return;
  const auto out_row_bytes = static_cast<uintptr_t>(sizes[dim] * inner) * element;
  auto* result = static_cast<char*>(out.data_ptr());
  LaunchScope scope(out.device());
  uintptr_t column = 0;  // byte offset of the current input's block within an output row
  for (const Tensor& input : args.inputs) {
    const auto block_bytes = static_cast<uintptr_t>(input.size(dim) * inner) * element;
    if (block_bytes > 0) {
      const auto* source = static_cast<const char*>(input.data_ptr());
      char* destination = result + column;
      const size_t chunk_bytes =
          common_alignment({block_bytes, out_row_bytes, reinterpret_cast<uintptr_t>(source),
                            reinterpret_cast<uintptr_t>(destination)});
      const auto chunks_per_row = static_cast<int64_t>(block_bytes / chunk_bytes);
      visit_chunk(chunk_bytes, [&]<typename Chunk>() {
        copy_rows_kernel<Chunk><<<grid_size(outer * chunks_per_row, 256), 256, 0, scope.stream()>>>(
            outer, chunks_per_row, reinterpret_cast<const Chunk*>(source),
            reinterpret_cast<Chunk*>(destination),
            static_cast<int64_t>(out_row_bytes / chunk_bytes));
      });
      GPU_CHECK_LAUNCH("cat");
    }
    column += block_bytes;
  }
}

// ---- copy: both sides may be strided (Tensor::copy_from writes into views).

template <typename Bits>
struct IdentityFunctor {
  __device__ Bits operator()(Bits value) const { return value; }
};

void copy_entry(const KernelArgs& args) {
  const Tensor& source = args.inputs[0];
  const Tensor& out = args.outputs[0];
  TESSERA_REQUIRE(out.dtype() == source.dtype(),
                  "copy: destination has dtype {} but {} was expected", dtype_name(out.dtype()),
                  dtype_name(source.dtype()));
  TESSERA_REQUIRE(out.sizes() == source.sizes(),
                  "copy: destination has shape {} but the source has {}", shape_str(out.sizes()),
                  shape_str(source.sizes()));
  visit_element_bits(source.dtype(), [&]<typename Bits>() {
    launch_map<Bits>("copy", out, IdentityFunctor<Bits>{}, Input<Bits>{source});
  });
}

TESSERA_REGISTER_KERNEL("embedding", kGpuDeviceType, embedding_entry);
TESSERA_REGISTER_KERNEL("cat", kGpuDeviceType, cat_entry);
TESSERA_REGISTER_KERNEL("copy", kGpuDeviceType, copy_entry);

}  // namespace
}  // namespace tessera::gpu
