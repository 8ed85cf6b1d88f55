#include "compile/launch_profile.h"

#include <fmt/format.h>

#include <cstdint>

#include "kernels/attention_metadata.h"

namespace tessera {

namespace {

// linear, and the ops that fuse work into its input read (activation_and_mul_linear).
bool is_linear(const OpDef& op) {
  return op.name == "linear" || op.name.ends_with("_linear");
}

bool is_gemm(const OpDef& op) {
  return op.name == "matmul" || is_linear(op);
}

// Adds what attention reads beyond q/k/v: each sequence's cached keys and values, and writes: the
// new rows into the cache. FLOPs count every (query, key) pair a causal step attends.
void add_attention_cache(const Tensor& query, const Attributes& attributes, LaunchDetail& detail) {
  if (!has_forward_context()) return;
  const ForwardContext& context = current_forward_context();
  const AttentionMetadata* meta = context.attention;
  if (meta == nullptr || meta->seq_lens.empty() || meta->query_start_loc.size() < 2) return;
  const int64_t heads = attributes.get_int("num_heads");
  const int64_t kv_heads = attributes.get_int("num_kv_heads");
  const int64_t head_size = attributes.get_int("head_size");
  // The cache's own element (an FP8 cache holds e4m3 codes, not the query's dtype).
  const int64_t layer = attributes.get_int("layer", -1);
  const bool has_cache = context.kv_caches != nullptr && layer >= 0 &&
                         layer < static_cast<int64_t>(context.kv_caches->size());
  const DType cache_dtype =
      has_cache ? (*context.kv_caches)[static_cast<size_t>(layer)].key.dtype() : query.dtype();
  const double row_bytes = 2.0 * static_cast<double>(kv_heads * head_size) *
                           static_cast<double>(element_size(cache_dtype));
  double pairs = 0, cached_rows = 0;
  for (size_t s = 0; s < meta->seq_lens.size() && s + 1 < meta->query_start_loc.size(); ++s) {
    const double queries = meta->query_start_loc[s + 1] - meta->query_start_loc[s];
    const double length = meta->seq_lens[s];
    cached_rows += length;
    pairs += queries * (length - queries) + queries * (queries + 1) / 2;
  }
  detail.bytes += (cached_rows + static_cast<double>(meta->num_tokens)) * row_bytes;
  detail.flops += 4.0 * pairs * static_cast<double>(heads * head_size);
}

}  // namespace

double tensor_bytes(std::span<const Tensor> tensors) {
  double bytes = 0;
  for (const Tensor& tensor : tensors) bytes += static_cast<double>(tensor.nbytes());
  return bytes;
}

double read_bytes(const Tensor& input, int64_t rows) {
  const double bytes = static_cast<double>(input.nbytes());
  if (input.dim() < 2 || input.size(0) <= rows) return bytes;
  return bytes / static_cast<double>(input.size(0)) * static_cast<double>(rows);
}

KernelClass kernel_class_of(const OpDef& op) {
  if (is_gemm(op)) return KernelClass::gemm;
  if (op.kind == OpKind::splitting) return KernelClass::attention;
  if (op.name == "argmax" || op.name.starts_with("sample")) return KernelClass::sampling;
  if (op.name == "copy" || op.name == "contiguous") return KernelClass::copy;
  if (op.name == "all_reduce" || op.name == "all_gather") return KernelClass::collective;
  if (op.custom) return KernelClass::fused;
  return KernelClass::pointwise;
}

LaunchDetail launch_detail(const OpDef& op, std::span<const Tensor> inputs,
                           std::span<const Tensor> outputs, const Attributes& attributes) {
  LaunchDetail detail;
  // A splitting op's output 0 is its result; rotary_attention's others are scratch that its
  // fused kernel never writes.
  detail.bytes =
      tensor_bytes(op.kind == OpKind::splitting && !outputs.empty() ? outputs.first(1) : outputs);
  const int64_t rows = op.kind == OpKind::gather && !outputs.empty() && outputs[0].dim() > 0
                           ? outputs[0].size(0)
                           : INT64_MAX;
  for (const Tensor& input : inputs) detail.bytes += read_bytes(input, rows);
  if (is_gemm(op) && inputs.size() >= 2 && !outputs.empty() && inputs[0].dim() > 0) {
    // K: a linear's weight is [N, K] (its x may be wider: a gated input holds 2K).
    const int64_t k = is_linear(op) ? inputs[1].size(-1) : inputs[0].size(-1);
    const Tensor& out = outputs[0];
    const int64_t n = out.dim() > 0 ? out.size(-1) : 1;
    const int64_t m = n > 0 ? out.numel() / n : 0;
    detail.flops = 2.0 * static_cast<double>(out.numel()) * static_cast<double>(k);
    detail.shape = fmt::format("{}x{}x{} {}", m, n, k, dtype_name(out.dtype()));
  } else if (op.kind == OpKind::splitting && !outputs.empty() && attributes.has("layer")) {
    // attention and rotary_attention: output 0 has the query's rows.
    add_attention_cache(outputs[0], attributes, detail);
    detail.shape = fmt::format("{} tokens", outputs[0].size(0));
  } else if (!outputs.empty()) {
    detail.shape =
        fmt::format("{} {}", fmt::join(outputs[0].sizes(), "x"), dtype_name(outputs[0].dtype()));
  }
  return detail;
}

}  // namespace tessera
