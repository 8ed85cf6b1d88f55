// What the attention op needs beyond q/k/v, as in vLLM: it comes from the forward context the
// model runner sets for the step, not from the graph, so one captured/compiled graph serves
// every batch. Tokens of the batch are laid out sequence after sequence.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/tensor.h"

namespace tessera {

// A layer's cache holds the model's dtype, or e4m3 codes (f8_e4m3) of K / key_scale and
// V / value_scale: per-tensor scales, the checkpoint's or 1 (engine.kv_cache_dtype fp8).
struct PagedKVCache {
  Tensor key;    // [num_blocks, block_size, num_kv_heads, head_size]
  Tensor value;  // same
  float key_scale = 1.0f;
  float value_scale = 1.0f;
  int64_t block_size() const { return key.size(1); }
  int64_t num_blocks() const { return key.size(0); }
};

// Throws naming the layer unless its cache holds `query_dtype` or FP8 codes with positive finite
// scales.
void check_cache_dtype(const PagedKVCache& cache, DType query_dtype, int64_t layer);

struct AttentionMetadata {
  int64_t num_seqs = 0;
  // Tokens in this step (the sum of query lengths). The q/k/v rows given to attention may be
  // more (a batch padded up to a captured graph's size): rows past num_tokens are not cached and
  // not attended, and their output rows are left as they are.
  int64_t num_tokens = 0;
  int64_t max_query_len = 0;
  int64_t max_seq_len = 0;
  int64_t max_blocks_per_seq = 0;
  // Host copies (the CPU kernel reads these; the runner fills them).
  std::vector<int32_t> query_start_loc;  // [num_seqs + 1]: prefix sums of query lengths
  std::vector<int32_t> seq_lens;         // [num_seqs]: cached + new tokens
  std::vector<int32_t> block_tables;     // [num_seqs * max_blocks_per_seq], -1 padded
  std::vector<int32_t> slot_mapping;     // [num_tokens]: block * block_size + offset; -1 skips
  // The same on the device of the KV cache (i32), for GPU kernels; undefined on the CPU.
  Tensor device_query_start_loc, device_seq_lens, device_block_tables, device_slot_mapping;
};

struct ForwardContext {
  const AttentionMetadata* attention = nullptr;
  std::vector<PagedKVCache>* kv_caches = nullptr;  // one per layer
};

// Fills meta's device tensors on `device` from its host vectors, one copy each (the model runner
// packs them into one staging copy instead; this is for tests and kernel labs).
void upload_metadata(AttentionMetadata& meta, Device device);

// The context of the forward running on this thread; throws when none is set.
ForwardContext& current_forward_context();
bool has_forward_context();

class ForwardContextScope {
 public:
  explicit ForwardContextScope(ForwardContext context);
  ~ForwardContextScope();
  ForwardContextScope(const ForwardContextScope&) = delete;
  ForwardContextScope& operator=(const ForwardContextScope&) = delete;

 private:
  ForwardContext previous_;
  bool had_previous_;
};

}  // namespace tessera
