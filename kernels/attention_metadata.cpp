#include "kernels/attention_metadata.h"

#include <cmath>

#include "runtime/check.h"

namespace tessera {
namespace {
thread_local ForwardContext active_context;
thread_local bool context_set = false;
}  // namespace

void upload_metadata(AttentionMetadata& meta, Device device) {
  auto ints = [&](const std::vector<int32_t>& values) {
    const std::vector<int64_t> wide(values.begin(), values.end());
    return Tensor::from_ints(wide, {static_cast<int64_t>(values.size())}, DType::i32, device);
  };
  meta.device_query_start_loc = ints(meta.query_start_loc);
  meta.device_seq_lens = ints(meta.seq_lens);
  meta.device_block_tables = ints(meta.block_tables);
  meta.device_slot_mapping = ints(meta.slot_mapping);
}

void check_cache_dtype(const PagedKVCache& cache, DType query_dtype, int64_t layer) {
  const DType dtype = cache.key.dtype();
  TESSERA_REQUIRE(cache.value.dtype() == dtype && (dtype == query_dtype || dtype == DType::f8_e4m3),
                  "attention: layer {}'s KV cache holds {} keys and {} values; it must hold the "
                  "query's {} or f8_e4m3 (engine.kv_cache_dtype fp8)",
                  layer, dtype_name(dtype), dtype_name(cache.value.dtype()),
                  dtype_name(query_dtype));
  TESSERA_REQUIRE(std::isfinite(cache.key_scale) && cache.key_scale > 0 &&
                      std::isfinite(cache.value_scale) && cache.value_scale > 0,
                  "attention: layer {}'s KV cache scales (key {}, value {}) must be positive and "
                  "finite",
                  layer, cache.key_scale, cache.value_scale);
}

ForwardContext& current_forward_context() {
  TESSERA_REQUIRE(context_set,
                  "attention ran without a forward context: the model runner sets the attention "
                  "metadata and KV caches for each step (ForwardContextScope)");
  return active_context;
}

bool has_forward_context() {
  return context_set;
}

ForwardContextScope::ForwardContextScope(ForwardContext context)
    : previous_(active_context), had_previous_(context_set) {
  active_context = context;
  context_set = true;
}

ForwardContextScope::~ForwardContextScope() {
  active_context = previous_;
  context_set = had_previous_;
}

}  // namespace tessera
