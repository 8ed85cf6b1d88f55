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
#include "runtime/cpu/parallel.h"
#include "runtime/kernel_registry.h"

namespace tessera::cpu {
namespace {

constexpr const char* kOp = "rotary_embedding";

struct RotaryShape {
  int64_t tokens;
  int64_t head_size;
  int64_t rot_dim;
  int64_t max_position;
  bool is_neox;
};

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
  const Tensor& positions = args.inputs[0];
  const Tensor& query = args.inputs[1];
  const Tensor& key = args.inputs[2];
  const Tensor& cache = args.inputs[3];
  const Tensor& query_out = args.outputs[0];
  const Tensor& key_out = args.outputs[1];
  for (const Tensor* tensor : {&positions, &query, &key, &cache, &query_out, &key_out})
    require_contiguous(kOp, "every input and output", *tensor);
  TESSERA_REQUIRE(positions.dtype() == DType::i32 || positions.dtype() == DType::i64,
                  "{}: positions have dtype {}; use i32 or i64", kOp,
                  dtype_name(positions.dtype()));
  TESSERA_REQUIRE(positions.dim() == 1 && query.dim() == 2 && key.dim() == 2 && cache.dim() == 2,
                  "{}: expected positions [T], query [T, Hq * head_size], key [T, Hk * head_size] "
                  "and cos_sin_cache [max_position, rot_dim], got {}, {}, {} and {}",
                  kOp, positions.str(), query.str(), key.str(), cache.str());
  const RotaryShape shape{positions.size(0), args.attributes.get_int("head_size"), cache.size(1),
                          cache.size(0), args.attributes.get_bool("is_neox", true)};
  TESSERA_REQUIRE(shape.head_size > 0 && shape.rot_dim % 2 == 0 &&
                      shape.rot_dim <= shape.head_size && query.size(1) % shape.head_size == 0 &&
                      key.size(1) % shape.head_size == 0,
                  "{}: head_size {} must divide the widths of query {} and key {}, and the cache's "
                  "rot_dim {} must be even and at most head_size",
                  kOp, shape.head_size, query.str(), key.str(), shape.rot_dim);
  require_dtype(kOp, "key", key, query.dtype());
  require_dtype(kOp, "query_out", query_out, query.dtype());
  require_dtype(kOp, "key_out", key_out, query.dtype());
  require_sizes(kOp, "query", query, {shape.tokens, query.size(1)});
  require_sizes(kOp, "key", key, {shape.tokens, key.size(1)});
  require_sizes(kOp, "query_out", query_out, query.sizes());
  require_sizes(kOp, "key_out", key_out, key.sizes());
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
