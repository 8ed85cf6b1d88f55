// The quantized linear on int8 tensor cores (quantized_mma.h). A block of kMmaWarps warps takes
// kMmaRows weight rows (the mma's n) against every row of x (m-tiles of 16, zero past m); its
// warps split the rows' weight blocks and add their partial sums in shared memory at the end.
//
// A format's MmaBlock loads one weight block's raw bits for a lane (load) and multiplies them with
// every m-tile of x (accumulate).
//
// Lane (g = lane / 4, q = lane % 4) holds the B fragment of weight row g and the A fragments of
// x rows 16 t + g and + 8; its results are those x rows against weight rows 2 q and 2 q + 1, so it
// scales them by those two rows' scales. Which 8 values of a 32-value sub-block a lane multiplies
// does not change the sub-block's sum: for Q4_K and Q8_0, lane q takes the sub-block's values
// 8 q .. 8 q + 7 (one 8-byte load each of weight and x) as its k 4 q .. and 16 + 4 q ... Q6_K's
// scales are per 16 values: one k16 mma per group of 16.
#include "kernels/cuda/gemm/quantized_mma.h"

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/gemm/quantized_blocks.cuh"
#include "kernels/cuda/gemm/quantized_dot.cuh"
#include "kernels/cuda/mma.cuh"
#include "kernels/cuda/programmatic_launch.cuh"
#include "runtime/check.h"

namespace tessera::gpu {

#if !defined(TESSERA_GPU_HIP)
namespace {

constexpr int kWarpSize = 32;
constexpr int kMmaWarps = 4;  // warps of a block, splitting the weight rows' blocks
constexpr int kMmaRows = 8;   // weight rows of a block: the mma's n

// What a lane sees of the problem.
struct MmaLane {
  int64_t m, n, k, row_bytes;
  int group, quad;    // g, q
  int64_t first_row;  // the block's first weight row
  const uint8_t* weight;
  QuantizedRows x;
  // Weight row `row` of the block's (0 .. kMmaRows - 1), or nullptr past n.
  __device__ const uint8_t* weight_row(int row) const {
    return first_row + row < n ? weight + (first_row + row) * row_bytes : nullptr;
  }
  // 8 bytes of x row `row` at value `at` (a multiple of 8), zero past m.
  __device__ uint2 x_pair(int64_t row, int64_t at) const {
    return row < m ? *reinterpret_cast<const uint2*>(x.quants + row * k + at) : uint2{0, 0};
  }
  __device__ uint32_t x_word(int64_t row, int64_t at) const {
    return row < m ? *reinterpret_cast<const uint32_t*>(x.quants + row * k + at) : 0u;
  }
  __device__ float x_scale(int64_t row, int64_t at) const {
    return row < m ? x.scales[(row * k + at) / 32] : 0.0f;
  }
};

// acc[t][e] += (d[e % 2] * x scale of the x row of e) * sums[t][e]: a block's integer sums scaled
// once, as the CPU's dot products scale them.
template <int MTiles>
__device__ __forceinline__ void scale_sums(const MmaLane& lane, int64_t at, const float (&d)[2],
                                           const int (&sums)[MTiles][4], float (&acc)[MTiles][4]) {
#pragma unroll
  for (int t = 0; t < MTiles; ++t) {
    const float low = lane.x_scale(16 * t + lane.group, at);
    const float high = lane.x_scale(16 * t + lane.group + 8, at);
#pragma unroll
    for (int e = 0; e < 4; ++e)
      acc[t][e] = fmaf(d[e % 2] * (e < 2 ? low : high), static_cast<float>(sums[t][e]), acc[t][e]);
  }
}

template <DType D>
struct MmaBlock;

// Q8_0: a block is one sub-block of 32 with an f16 scale.
template <>
struct MmaBlock<DType::q8_0> {
  static constexpr int kBytes = 34;
  struct Raw {
    uint32_t b[2];       // weight row g's quants 8 q .. 8 q + 7
    uint32_t d_bits[2];  // the f16 scales of weight rows 2 q and 2 q + 1
  };
  __device__ static Raw load(const MmaLane& lane, int64_t block) {
    Raw raw{{0, 0}, {0, 0}};
    if (const uint8_t* own = lane.weight_row(lane.group)) {
      const uint8_t* quants = own + block * kBytes + 2 + 8 * lane.quad;
      raw.b[0] = load_word_aligned2(quants);
      raw.b[1] = load_word_aligned2(quants + 4);
    }
#pragma unroll
    for (int j = 0; j < 2; ++j)
      if (const uint8_t* row = lane.weight_row(2 * lane.quad + j))
        raw.d_bits[j] = *reinterpret_cast<const uint16_t*>(row + block * kBytes);
    return raw;
  }
  template <int MTiles>
  __device__ static void accumulate(const MmaLane& lane, int64_t block, const Raw& raw,
                                    float (&acc)[MTiles][4]) {
    const float d[2] = {half_bits_to_float(raw.d_bits[0]), half_bits_to_float(raw.d_bits[1])};
    const int64_t at = block * 32;
    int sums[MTiles][4];
#pragma unroll
    for (int t = 0; t < MTiles; ++t) {
      const uint2 low = lane.x_pair(16 * t + lane.group, at + 8 * lane.quad);
      const uint2 high = lane.x_pair(16 * t + lane.group + 8, at + 8 * lane.quad);
      const uint32_t a[4] = {low.x, high.x, low.y, high.y};
      sums[t][0] = sums[t][1] = sums[t][2] = sums[t][3] = 0;
      mma_s8_16x8x32(sums[t], a, raw.b[0], raw.b[1]);
    }
    scale_sums<MTiles>(lane, at, d, sums, acc);
  }
};

// Q4_K: f16 d and dmin, 12 bytes of 6-bit scales and mins, then sub-block s's quants in the low
// (even s) or high (odd s) nibbles of bytes 32 (s / 2) .. + 31 (kernels/quant/q4_k.cpp).
template <>
struct MmaBlock<DType::q4_k> {
  static constexpr int kBytes = 144;
  struct Raw {
    uint2 packed[4];  // weight row g's bytes 32 p + 8 q .. + 7 of its quants, p < 4
    uint4 head[2];    // d, dmin, scales and mins of weight rows 2 q and 2 q + 1
  };
  __device__ static Raw load(const MmaLane& lane, int64_t block) {
    Raw raw{};
    if (const uint8_t* own = lane.weight_row(lane.group))
#pragma unroll
      for (int pair = 0; pair < 4; ++pair)
        raw.packed[pair] =
            *reinterpret_cast<const uint2*>(own + block * kBytes + 16 + 32 * pair + 8 * lane.quad);
#pragma unroll
    for (int j = 0; j < 2; ++j)
      if (const uint8_t* row = lane.weight_row(2 * lane.quad + j))
        raw.head[j] = *reinterpret_cast<const uint4*>(row + block * kBytes);
    return raw;
  }
  template <int MTiles>
  __device__ static void accumulate(const MmaLane& lane, int64_t block, const Raw& raw,
                                    float (&acc)[MTiles][4]) {
    // Byte s of each word pair is sub-block s's scale or min (kernels/quant/block_bytes.h).
    float d[2], dmin[2];
    uint32_t scales[2][2], mins[2][2];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const uint4 head = raw.head[j];
      d[j] = half_bits_to_float(head.x & 0xFFFFu);
      dmin[j] = half_bits_to_float(head.x >> 16);
      scales[j][0] = head.y & 0x3F3F3F3Fu;
      mins[j][0] = head.z & 0x3F3F3F3Fu;
      scales[j][1] = (head.w & 0x0F0F0F0Fu) | (((head.y >> 6) & 0x03030303u) << 4);
      mins[j][1] = ((head.w >> 4) & 0x0F0F0F0Fu) | (((head.z >> 6) & 0x03030303u) << 4);
    }
    const int64_t at = block * 256;
    int sums[MTiles][4] = {};
#pragma unroll
    for (int s = 0; s < 8; ++s) {
      const int shift = 4 * (s % 2);
      const uint32_t b0 = (raw.packed[s / 2].x >> shift) & 0x0F0F0F0Fu;
      const uint32_t b1 = (raw.packed[s / 2].y >> shift) & 0x0F0F0F0Fu;
      int scale[2];
#pragma unroll
      for (int j = 0; j < 2; ++j) scale[j] = (scales[j][s / 4] >> (8 * (s % 4))) & 0xFF;
#pragma unroll
      for (int t = 0; t < MTiles; ++t) {
        const uint2 low = lane.x_pair(16 * t + lane.group, at + 32 * s + 8 * lane.quad);
        const uint2 high = lane.x_pair(16 * t + lane.group + 8, at + 32 * s + 8 * lane.quad);
        const uint32_t a[4] = {low.x, high.x, low.y, high.y};
        int products[4] = {0, 0, 0, 0};
        mma_s8_16x8x32(products, a, b0, b1);
#pragma unroll
        for (int e = 0; e < 4; ++e) sums[t][e] += scale[e % 2] * products[e];
      }
    }
    scale_sums<MTiles>(lane, at, d, sums, acc);
    // The mins: dmin * min * (sum of x's quants over the sub-block), in integers per block.
#pragma unroll
    for (int t = 0; t < MTiles; ++t)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int64_t row = 16 * t + lane.group + 8 * half;
        int group_sums[16] = {};
        if (row < lane.m) {
          const auto* words =
              reinterpret_cast<const int4*>(lane.x.group_sums + (row * lane.k + at) / 16);
#pragma unroll
          for (int w = 0; w < 2; ++w) {
            const int4 word = words[w];
            const int values[4] = {word.x, word.y, word.z, word.w};
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              group_sums[8 * w + 2 * i] = static_cast<int16_t>(values[i] & 0xFFFF);
              group_sums[8 * w + 2 * i + 1] = values[i] >> 16;
            }
          }
        }
        const float x_scale = lane.x_scale(row, at);
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          int min_products = 0;
#pragma unroll
          for (int s = 0; s < 8; ++s) {
            const int min = (mins[j][s / 4] >> (8 * (s % 4))) & 0xFF;
            min_products += min * (group_sums[2 * s] + group_sums[2 * s + 1]);
          }
          float& target = acc[t][2 * half + j];
          target = fmaf(-dmin[j] * x_scale, static_cast<float>(min_products), target);
        }
      }
  }
};

// Q6_K: 128 bytes of low nibbles, 64 of high 2 bits, 16 int8 scales, f16 d
// (kernels/quant/q6_k.cpp): in half h (128 values), value 32 c + l (quarter c, l < 32) is the low
// (c < 2) or high nibble of byte 64 h + 32 (c % 2) + l with bits 2 c of byte 128 + 32 h + l on top,
// minus 32; its scale is 8 h + 2 c + l / 16. Lane q takes l = 16 i + 4 q .. + 3 of each group of 16
// (i = l / 16).
template <>
struct MmaBlock<DType::q6_k> {
  static constexpr int kBytes = 210;
  struct Raw {
    uint32_t low_bits[2][2][2];  // weight row g's: [half][c % 2][i]
    uint32_t high_bits[2][2];    // [half][i]
    uint32_t scales[2][4];       // the 16 int8 scales of weight rows 2 q and 2 q + 1
    uint32_t d_bits[2];
  };
  __device__ static Raw load(const MmaLane& lane, int64_t block) {
    Raw raw{};
    if (const uint8_t* own = lane.weight_row(lane.group)) {
      const uint8_t* base = own + block * kBytes + 4 * lane.quad;
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          raw.high_bits[h][i] = load_word_aligned2(base + 128 + 32 * h + 16 * i);
#pragma unroll
          for (int c = 0; c < 2; ++c)
            raw.low_bits[h][c][i] = load_word_aligned2(base + 64 * h + 32 * c + 16 * i);
        }
    }
#pragma unroll
    for (int j = 0; j < 2; ++j)
      if (const uint8_t* row = lane.weight_row(2 * lane.quad + j)) {
#pragma unroll
        for (int w = 0; w < 4; ++w)
          raw.scales[j][w] = load_word_aligned2(row + block * kBytes + 192 + 4 * w);
        raw.d_bits[j] = *reinterpret_cast<const uint16_t*>(row + block * kBytes + 208);
      }
    return raw;
  }
  template <int MTiles>
  __device__ static void accumulate(const MmaLane& lane, int64_t block, const Raw& raw,
                                    float (&acc)[MTiles][4]) {
    const float d[2] = {half_bits_to_float(raw.d_bits[0]), half_bits_to_float(raw.d_bits[1])};
    const int64_t at = block * 256;
    int sums[MTiles][4] = {};
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int c = 0; c < 4; ++c)
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          const uint32_t nibbles = (raw.low_bits[h][c % 2][i] >> (c < 2 ? 0 : 4)) & 0x0F0F0F0Fu;
          const uint32_t tops = (raw.high_bits[h][i] >> (2 * c)) & 0x03030303u;
          const uint32_t b = static_cast<uint32_t>(minus_per_byte(nibbles | (tops << 4), 32));
          const int index = 8 * h + 2 * c + i;
          int scale[2];
#pragma unroll
          for (int j = 0; j < 2; ++j)
            scale[j] = static_cast<int8_t>(raw.scales[j][index / 4] >> (8 * (index % 4)));
          const int64_t value = at + 128 * h + 32 * c + 16 * i + 4 * lane.quad;
#pragma unroll
          for (int t = 0; t < MTiles; ++t) {
            int products[4] = {0, 0, 0, 0};
            mma_s8_16x8x16(products, lane.x_word(16 * t + lane.group, value),
                           lane.x_word(16 * t + lane.group + 8, value), b);
#pragma unroll
            for (int e = 0; e < 4; ++e) sums[t][e] += scale[e % 2] * products[e];
          }
        }
    scale_sums<MTiles>(lane, at, d, sums, acc);
  }
};

template <DType D, typename T, int MTiles>
__global__ void __launch_bounds__(kMmaWarps* kWarpSize)
    quantized_mma_kernel(int64_t m, int64_t n, int64_t k, const uint8_t* __restrict__ weight,
                         QuantizedRows x, const T* bias, T* out) {
  using Layout = BlockLayout<D>;
  __shared__ float partial[kMmaWarps - 1][MTiles * 4][kWarpSize];
  const int warp = threadIdx.x / kWarpSize, lane_index = threadIdx.x % kWarpSize;
  const int64_t blocks = k / Layout::elements;
  const MmaLane lane{m,
                     n,
                     k,
                     blocks * Layout::bytes,
                     lane_index / 4,
                     lane_index % 4,
                     static_cast<int64_t>(blockIdx.x) * kMmaRows,
                     weight,
                     x};
  // Warp w takes a run of consecutive blocks; each block's raw bits are loaded while the one
  // before is computed. The weights are constants: the first load may come before the wait.
  const int64_t per_warp = (blocks + kMmaWarps - 1) / kMmaWarps;
  const int64_t first_block = warp * per_warp, end = min(blocks, first_block + per_warp);
  using Block = MmaBlock<D>;
  typename Block::Raw next{};
  if (first_block < end) next = Block::load(lane, first_block);
  wait_for_prior_grids();  // x's quants come from the kernel before
  allow_next_grid();
  float acc[MTiles][4] = {};
  for (int64_t block = first_block; block < end; ++block) {
    const typename Block::Raw current = next;
    if (block + 1 < end) next = Block::load(lane, block + 1);
    Block::template accumulate<MTiles>(lane, block, current, acc);
  }
  if (warp > 0) {
#pragma unroll
    for (int t = 0; t < MTiles; ++t)
#pragma unroll
      for (int e = 0; e < 4; ++e) partial[warp - 1][4 * t + e][lane_index] = acc[t][e];
  }
  __syncthreads();
  if (warp > 0) return;
#pragma unroll
  for (int t = 0; t < MTiles; ++t)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float sum = acc[t][e];
#pragma unroll
      for (int w = 0; w < kMmaWarps - 1; ++w) sum += partial[w][4 * t + e][lane_index];
      const int64_t x_row = 16 * t + lane.group + (e < 2 ? 0 : 8);
      const int64_t weight_row = lane.first_row + 2 * lane.quad + e % 2;
      if (x_row >= m || weight_row >= n) continue;
      if (bias != nullptr) sum += to_float(bias[weight_row]);
      out[x_row * n + weight_row] = from_compute<T>(sum);
    }
}

template <DType D, typename T>
void launch(int64_t m, int64_t n, int64_t k, const uint8_t* weight, const QuantizedRows& x,
            const void* bias, void* out, gpuStream_t stream, int device) {
  const auto run = [&]<int MTiles>() {
    launch_programmatic(quantized_mma_kernel<D, T, MTiles>,
                        static_cast<unsigned int>(ceil_div(n, kMmaRows)), kMmaWarps * kWarpSize, 0,
                        stream, device, m, n, k, weight, x, static_cast<const T*>(bias),
                        static_cast<T*>(out));
  };
  if (m <= 16) {
    run.template operator()<1>();
  } else if (m <= 32) {
    run.template operator()<2>();
  } else {
    run.template operator()<4>();
  }
  GPU_CHECK_LAUNCH("quantized linear (int8 tensor cores)");
}

}  // namespace

bool quantized_mma_available(DType dtype) {
  return dtype == DType::q4_k || dtype == DType::q6_k || dtype == DType::q8_0;
}

void launch_quantized_mma(DType dtype, DType x_dtype, int64_t m, int64_t n, int64_t k,
                          const uint8_t* weight, const QuantizedRows& x, const void* bias,
                          void* out, gpuStream_t stream, int device) {
  TESSERA_CHECK(quantized_mma_available(dtype) && m >= 1 && m <= 64,
                "quantized mma of {} rows of {}", m, dtype_name(dtype));
  visit_device_float_dtype("linear", x_dtype, [&]<typename T>() {
    switch (dtype) {
      case DType::q4_k:
        return launch<DType::q4_k, T>(m, n, k, weight, x, bias, out, stream, device);
      case DType::q6_k:
        return launch<DType::q6_k, T>(m, n, k, weight, x, bias, out, stream, device);
      default:
        return launch<DType::q8_0, T>(m, n, k, weight, x, bias, out, stream, device);
    }
  });
}

#else  // TESSERA_GPU_HIP: no int8 mma.sync

bool quantized_mma_available(DType) {
  return false;
}

void launch_quantized_mma(DType dtype, DType, int64_t, int64_t, int64_t, const uint8_t*,
                          const QuantizedRows&, const void*, void*, gpuStream_t, int) {
  TESSERA_CHECK(false, "quantized mma of {} on HIP", dtype_name(dtype));
}

#endif

}  // namespace tessera::gpu
