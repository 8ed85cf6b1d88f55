// The interface every model family implements, and the weights it expects. A family is one file
// (models/llama.cpp, models/gemma.cpp): a CausalLM subclass written against ops:: (eager, traced
// and compiled alike) and a registration in the architecture registry
// (models/architecture_registry.h) under its Hugging Face `architectures` names.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "models/model_config.h"
#include "models/model_weights.h"
#include "runtime/tensor.h"

namespace tessera {

// One tensor a model of a given config has, by Hugging Face name and shape.
struct WeightSpec {
  std::string name;  // "model.layers.0.self_attn.q_proj.weight"
  Shape shape;
  bool rope_rows = false;  // a q/k projection (weight or bias): rows follow the RoPE convention
};

// The per-tensor scales of one layer's FP8 KV cache (engine.kv_cache_dtype fp8): the cache holds
// e4m3 codes of K / key and V / value.
struct KVCacheScales {
  float key = 1.0f;
  float value = 1.0f;
};

class CausalLM {
 public:
  virtual ~CausalLM() = default;

  // input_ids [T] (i32), positions [T] (i32) -> final hidden states [T, hidden]. Attention reads
  // its metadata and KV caches from the forward context. Must not branch on T: tracing records no
  // guard on the token count, so one compiled plan serves every step.
  virtual Tensor forward(const Tensor& input_ids, const Tensor& positions) const = 0;
  // hidden [N, hidden] -> logits [N, vocab].
  virtual Tensor compute_logits(const Tensor& hidden) const = 0;
  // Whether compute_logits' result is what its GEMM stores, nothing computed after it: then
  // casting it to f32 is exact, and a greedy pick may read it in the model's dtype (the runner's
  // compilation.fuse_greedy_sampling). A tail such as a softcap, computed in f32 when fused with
  // that cast, would round differently. By default false: the pick reads the f32 logits.
  virtual bool logits_end_in_gemm() const { return false; }

  // Under tensor parallelism, this rank's config (models/tensor_parallel.h: its heads and
  // intermediate size; vocab_size is the model's).
  const ModelConfig& config() const { return config_; }
  TensorParallel parallel() const { return parallel_; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  int64_t max_positions() const { return max_positions_; }
  // What stays resident: the weights as the model holds them (fused copies included).
  size_t weight_bytes() const { return weight_bytes_; }
  // Of those, what the experts' projections of a mixture hold (0 for a dense model), and the
  // embedding table when a separate LM head holds the output (a step gathers rows of it; 0 when
  // tied): the parts a decode step does not read whole.
  size_t expert_weight_bytes() const { return expert_weight_bytes_; }
  size_t gathered_table_bytes() const { return gathered_table_bytes_; }
  // The same by dtype: quantized weights keep their format ("q4_k", ...).
  const std::map<DType, size_t>& weight_bytes_by_dtype() const { return weight_bytes_by_dtype_; }
  // "q4_k 30.1 MiB, q6_k 12.0 MiB, f32 0.1 MiB", largest first, for logs and explain.
  std::string weight_formats_str() const;
  // The FP8 KV cache scales of `layer`: the checkpoint's (self_attn.k_scale / v_scale) where it
  // gives them, else 1.
  KVCacheScales kv_cache_scales(int64_t layer) const;

 protected:
  // Validates the config and checks that `weights` holds every tensor of `expected` with its
  // shape, so the subclass takes them by name only; dtype and device follow the first one.
  CausalLM(const ModelWeights& weights, const std::vector<WeightSpec>& expected,
           int64_t max_positions);
  // Sums the bytes of the defined tensors given (for weight_bytes()), as `role` (for
  // expert_weight_bytes() and gathered_table_bytes()).
  enum class WeightRole { read_whole, experts, gathered_table };
  void count_weight_bytes(std::initializer_list<const Tensor*> tensors,
                          WeightRole role = WeightRole::read_whole);
  void count_weight_bytes(const std::vector<const Tensor*>& tensors,
                          WeightRole role = WeightRole::read_whole);

  ModelConfig config_;
  TensorParallel parallel_;
  std::vector<KVCacheScales> kv_cache_scales_;  // per layer; empty: 1 everywhere

 private:
  DType dtype_ = DType::f32;
  Device device_ = kCPU;
  int64_t max_positions_ = 0;
  size_t weight_bytes_ = 0;
  size_t expert_weight_bytes_ = 0;
  size_t gathered_table_bytes_ = 0;
  std::map<DType, size_t> weight_bytes_by_dtype_;
};

}  // namespace tessera
