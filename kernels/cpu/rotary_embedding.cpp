// CPU kernel of the custom op rotary_embedding (compile/ops/custom/rotary_embedding.cpp): rotates
// each head of query [T, Hq * head_size] and key [T, Hk * head_size] by the angle of its token's
// position. cos_sin_cache [max_position, rot_dim] holds cos in its first rot_dim / 2 columns and
// sin in the rest. Pair i of a head is (i, i + rot_dim / 2) in the neox style and (2i, 2i + 1) in
// the gptj style; dims from rot_dim to head_size are copied through. Computed in f32 (cos and sin
// straight from the cache, in whatever float dtype it has) and rounded once; tokens are spread
// over threads.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cpu/kernel_util.h"
#include "kernels/kernel_checks.h"
#include "runtime/cpu/parallel.h"
#include "runtime/kernel_registry.h"

namespace tessera::cpu {
namespace {

constexpr const char* kOp = "rotary_embedding";

// Rotates the heads of one token's row (`width` = heads * head_size elements).
template <typename T>
void rotate_row(const T* in, T* out, int64_t width, const float* cos, const float* sin,
                const RotaryShape& shape) {
  const int64_t half = shape.rot_dim / 2;
  for (int64_t head = 0; head < width; head += shape.head_size) {
    const T* x = in + head;
    T* y = out + head;
    for (int64_t i = 0; i < half; ++i) {
      const int64_t first = shape.is_neox ? i : 2 * i;
      const int64_t second = shape.is_neox ? i + half : 2 * i + 1;
      const float x1 = static_cast<float>(x[first]);
      const float x2 = static_cast<float>(x[second]);
      y[first] = T(x1 * cos[i] - x2 * sin[i]);
      y[second] = T(x2 * cos[i] + x1 * sin[i]);
    }
    std::copy(x + shape.rot_dim, x + shape.head_size, y + shape.rot_dim);
  }
}

void rotary_embedding_kernel(const KernelArgs& args) {
  const RotaryShape shape = check_rotary_embedding(args, /*strided_rows=*/false);
  const Tensor &positions = args.inputs[0], &query = args.inputs[1], &key = args.inputs[2];
  const Tensor &cache = args.inputs[3], &query_out = args.outputs[0], &key_out = args.outputs[1];
  if (shape.tokens == 0) return;

  const std::vector<int64_t> position_values = positions.to_ints();
  for (int64_t token = 0; token < shape.tokens; ++token) {
    const int64_t position = position_values[token];
    TESSERA_REQUIRE(position >= 0 && position < shape.max_position,
                    "{}: position {} of token {} is outside the cos_sin_cache's {} positions; "
                    "build the cache for the model's max_position_embeddings",
                    kOp, position, token, shape.max_position);
  }

  const int64_t query_width = query.size(1);
  const int64_t key_width = key.size(1);
  const int64_t half = shape.rot_dim / 2;
  visit_float_dtype(kOp, cache.dtype(), [&]<typename CacheT>() {
    visit_float_dtype(kOp, query.dtype(), [&]<typename T>() {
      const int64_t min_tokens =
          std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(query_width + key_width, 1));
      parallel_for(shape.tokens, min_tokens, [&](int64_t begin, int64_t end) {
        thread_local std::vector<float> cos_sin;
        cos_sin.resize(static_cast<size_t>(shape.rot_dim));
        for (int64_t token = begin; token < end; ++token) {
          const CacheT* cache_row = cache.data<CacheT>() + position_values[token] * shape.rot_dim;
          for (int64_t i = 0; i < shape.rot_dim; ++i) cos_sin[i] = static_cast<float>(cache_row[i]);
          const float* cos = cos_sin.data();
          const float* sin = cos + half;
          rotate_row(query.data<T>() + token * query_width,
                     query_out.data<T>() + token * query_width, query_width, cos, sin, shape);
          rotate_row(key.data<T>() + token * key_width, key_out.data<T>() + token * key_width,
                     key_width, cos, sin, shape);
        }
      });
    });
  });
}

TESSERA_REGISTER_KERNEL("rotary_embedding", DeviceType::cpu, rotary_embedding_kernel);

}  // namespace
}  // namespace tessera::cpu
