// rotary_attention's rotation inside the tensor-core decode kernel (attention_decode_mma.cuh):
// the query as the mma's A fragments in registers, the step's own key in its shared-memory tile
// row and as it is written to the cache. The math is rotary_embedding's
// (kernels/cuda/pointwise/rotary_embedding.cu): f32 with cos and sin from the f32 cache, pairs (i,
// i + head_size / 2) in the neox style and (2i, 2i + 1) in the gptj style over the whole head, the
// results rounded once to T; a position outside the cache gives NaN, as there.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cuda/attention/attention_common.cuh"
#include "kernels/cuda/attention/attention_mma_tile.cuh"

namespace tessera::gpu::attention {

// One token's cos/sin row (or none).
struct RopeRow {
  const float* cos_sin = nullptr;  // null: no rotation
  bool valid = false;              // the position lies inside the cache
  int half = 0;                    // head_size / 2
  bool is_neox = true;

  __device__ __forceinline__ float cos(int pair) const { return valid ? cos_sin[pair] : NAN; }
  __device__ __forceinline__ float sin(int pair) const {
    return valid ? cos_sin[half + pair] : NAN;
  }
};

// The rotation of `token` (read after the kernel's wait: positions are the step's inputs).
template <typename T, typename C>
__device__ __forceinline__ RopeRow rope_row(const AttentionParams<T, C>& params, int token,
                                            int head_size) {
  RopeRow row;
  if (params.rope_cos_sin == nullptr) return row;
  const int64_t position = params.rope_positions_i64
                               ? static_cast<const int64_t*>(params.rope_positions)[token]
                               : static_cast<const int32_t*>(params.rope_positions)[token];
  row.valid = position >= 0 && position < params.rope_max_position;
  row.cos_sin = params.rope_cos_sin + (row.valid ? position : 0) * head_size;
  row.half = head_size / 2;
  row.is_neox = params.rope_is_neox;
  return row;
}

__device__ __forceinline__ void rotate(float x1, float x2, float c, float s, float& y1, float& y2) {
  y1 = x1 * c - x2 * s;
  y2 = x2 * c + x1 * s;
}

template <typename T>
__device__ __forceinline__ float2 unpack_pair(uint32_t bits) {
  T pair[2];
  memcpy(pair, &bits, sizeof(bits));
  return make_float2(to_compute(pair[0]), to_compute(pair[1]));
}

// Rotates the A fragments of load_query_fragments in place. A lane holds columns step * 16 +
// 2 * quad_lane + {0, 1} (registers 0, 1) and + 8 + {0, 1} (registers 2, 3) of each step, for
// its rows `group` (even registers) and `group + 8` (odd): a gptj pair is one register's two
// halves, and a neox pair (i, i + kHeadSize / 2) is the same register of steps s and
// s + kSteps / 2.
template <typename T, int kSteps>
__device__ __forceinline__ void rotate_query_fragments(uint32_t (&fragments)[kSteps][4],
                                                       int quad_lane, const RopeRow& rope) {
  static_assert(kSteps % 2 == 0);
  // Two loops with constant bounds, so that the fragments stay in registers.
  if (rope.is_neox) {
#pragma unroll
    for (int step = 0; step < kSteps / 2; ++step) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int column = step * 16 + 2 * quad_lane + (r >= 2 ? 8 : 0);
        const float2 x1 = unpack_pair<T>(fragments[step][r]);
        const float2 x2 = unpack_pair<T>(fragments[step + kSteps / 2][r]);
        float2 y1, y2;
        rotate(x1.x, x2.x, rope.cos(column), rope.sin(column), y1.x, y2.x);
        rotate(x1.y, x2.y, rope.cos(column + 1), rope.sin(column + 1), y1.y, y2.y);
        fragments[step][r] = pack_pair<T>(y1.x, y1.y);
        fragments[step + kSteps / 2][r] = pack_pair<T>(y2.x, y2.y);
      }
    }
  } else {
#pragma unroll
    for (int step = 0; step < kSteps; ++step) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int column = step * 16 + 2 * quad_lane + (r >= 2 ? 8 : 0);
        const float2 x = unpack_pair<T>(fragments[step][r]);
        float2 y;
        rotate(x.x, x.y, rope.cos(column / 2), rope.sin(column / 2), y.x, y.y);
        fragments[step][r] = pack_pair<T>(y.x, y.y);
      }
    }
  }
}

// One warp rotates a key row of kHeadSize elements from `in` into `out` (the same row is fine:
// each lane reads and writes only its own pairs).
template <typename T, int kHeadSize>
__device__ __forceinline__ void rotate_key_row(const T* in, T* out, int lane, const RopeRow& rope) {
#pragma unroll
  for (int pair = lane; pair < kHeadSize / 2; pair += 32) {
    const int first = rope.is_neox ? pair : 2 * pair;
    const int second = rope.is_neox ? pair + kHeadSize / 2 : 2 * pair + 1;
    float y1, y2;
    rotate(to_compute(in[first]), to_compute(in[second]), rope.cos(pair), rope.sin(pair), y1, y2);
    out[first] = from_compute<T>(y1);
    out[second] = from_compute<T>(y2);
  }
}

}  // namespace tessera::gpu::attention
