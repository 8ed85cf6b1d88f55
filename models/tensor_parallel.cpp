#include "models/tensor_parallel.h"

#include <cstring>
#include <optional>

#include "compile/ops/ops.h"
#include "kernels/quant/fp8_scaling.h"
#include "models/architecture_registry.h"
#include "models/mixture_of_experts.h"
#include "models/model_weights.h"
#include "runtime/check.h"

namespace tessera {
namespace {

// Rows or columns [start, start + count) of a quantized [N, K] weight, whole rows of blocks or
// whole blocks of every row: a split inside a block is refused naming the tensor and the setting.
Tensor quantized_block(const Tensor& tensor, const std::string& name, int64_t dim, int64_t start,
                       int64_t count, int size) {
  const DType dtype = tensor.dtype();
  const int64_t rows = tensor.size(0), columns = tensor.size(1);
  const int64_t elements = block_elements(dtype);
  TESSERA_REQUIRE(dim == 0 || (start % elements == 0 && count % elements == 0),
                  "tensor '{}' is {} (blocks of {} values) and engine.tensor_parallel_size {} "
                  "splits its rows of {} into {}, not whole blocks: use a tensor_parallel_size "
                  "that gives whole blocks, or 1",
                  name, dtype_name(dtype), elements, size, columns, count);
  const size_t row_bytes = static_cast<size_t>(storage_bytes(dtype, columns));
  const auto* source = static_cast<const std::byte*>(tensor.contiguous().data_ptr());
  Tensor part = Tensor::empty(dim == 0 ? Shape{count, columns} : Shape{rows, count}, dtype, kCPU);
  auto* target = static_cast<std::byte*>(part.data_ptr());
  if (dim == 0) {
    std::memcpy(target, source + start * row_bytes, static_cast<size_t>(count) * row_bytes);
    return part;
  }
  const size_t part_bytes = static_cast<size_t>(storage_bytes(dtype, count));
  const size_t offset = static_cast<size_t>(storage_bytes(dtype, start));
  for (int64_t row = 0; row < rows; ++row)
    std::memcpy(target + row * part_bytes, source + row * row_bytes + offset, part_bytes);
  return part;
}

// The scales of an FP8 weight's rows or columns [start, start + count): per channel, the rows'
// (every column shares them); per 128x128 block, whole blocks only, or the split is refused.
Tensor fp8_scale_shard(const Tensor& scale, const std::string& name, int64_t dim, int64_t start,
                       int64_t count, int size) {
  if (scale.dim() == 1) return dim == 0 ? scale.slice(0, start, start + count).contiguous() : scale;
  TESSERA_REQUIRE(start % kFp8Block == 0 && count % kFp8Block == 0,
                  "'{}' scales 128x128 blocks and engine.tensor_parallel_size {} splits its "
                  "weight's {} into parts of {}, not whole blocks: use a tensor_parallel_size "
                  "that gives whole blocks, or 1",
                  name, size, dim == 0 ? "rows" : "columns", count);
  return scale.slice(dim, start / kFp8Block, (start + count) / kFp8Block).contiguous();
}

// Vocabulary rows [rank * rows, ...) padded with zero rows to `rows` (all-zero blocks of a
// quantized table are zero values in every format).
Tensor vocab_block(const Tensor& table, int64_t rows, int rank) {
  const int64_t vocab = table.size(0), start = std::min<int64_t>(rank * rows, vocab);
  const int64_t real = std::min(vocab, start + rows) - start;
  Shape sizes = table.sizes();
  sizes[0] = rows;
  Tensor padded = Tensor::empty(sizes, table.dtype(), kCPU);
  std::memset(padded.data_ptr(), 0, padded.nbytes());
  if (real > 0) {
    const Tensor whole = table.contiguous();
    const size_t row_bytes = padded.nbytes() / static_cast<size_t>(rows);
    std::memcpy(padded.data_ptr(),
                static_cast<const std::byte*>(whole.data_ptr()) + start * row_bytes,
                static_cast<size_t>(real) * row_bytes);
  }
  return padded;
}

}  // namespace

void check_tensor_parallel(const ModelConfig& config, int size, bool expert_parallel) {
  TESSERA_REQUIRE(size >= 1 && size <= 64,
                  "engine.tensor_parallel_size must be between 1 and 64, got {}", size);
  TESSERA_REQUIRE(!expert_parallel || config.num_experts > 0,
                  "engine.enable_expert_parallel: {} has no experts; leave it false",
                  config.architecture);
  if (size == 1) return;
  const Architecture& architecture =
      ArchitectureRegistry::global().get(config.architecture, "engine.tensor_parallel_size");
  TESSERA_REQUIRE(architecture.tensor_parallel,
                  "engine.tensor_parallel_size {}: {} models do not shard yet; use 1", size,
                  config.architecture);
  TESSERA_REQUIRE(config.num_heads % size == 0,
                  "engine.tensor_parallel_size {} must divide num_attention_heads ({})", size,
                  config.num_heads);
  TESSERA_REQUIRE(config.num_kv_heads % size == 0 || size % config.num_kv_heads == 0,
                  "engine.tensor_parallel_size {} must divide num_key_value_heads ({}) or be a "
                  "multiple of it (then each key/value head is replicated)",
                  size, config.num_kv_heads);
  TESSERA_REQUIRE(config.intermediate_size % size == 0,
                  "engine.tensor_parallel_size {} must divide intermediate_size ({})", size,
                  config.intermediate_size);
  if (expert_parallel) {
    TESSERA_REQUIRE(config.num_experts % size == 0,
                    "engine.tensor_parallel_size {} with engine.enable_expert_parallel must "
                    "divide num_experts ({})",
                    size, config.num_experts);
  } else {
    TESSERA_REQUIRE(config.moe_intermediate_size % size == 0,
                    "engine.tensor_parallel_size {} must divide moe_intermediate_size ({}), or "
                    "set engine.enable_expert_parallel to place whole experts on each rank",
                    size, config.moe_intermediate_size);
  }
}

ModelConfig rank_config(const ModelConfig& config, int size, bool expert_parallel) {
  check_tensor_parallel(config, size, expert_parallel);
  ModelConfig rank = config;
  rank.num_heads = config.num_heads / size;
  rank.num_kv_heads = std::max<int64_t>(config.num_kv_heads / size, 1);
  rank.intermediate_size = config.intermediate_size / size;
  if (expert_parallel) {
    rank.num_local_experts = config.num_experts / size;
  } else {
    rank.moe_intermediate_size = config.moe_intermediate_size / size;
  }
  return rank;
}

int64_t vocab_shard_rows(int64_t vocab, int size) {
  return (vocab + size - 1) / size;
}

ModelWeights shard_weights(const ModelWeights& full, TensorParallel parallel, Device device) {
  const ModelConfig& c = full.config;
  const int n = parallel.size, r = parallel.rank;
  TESSERA_CHECK(r >= 0 && r < n, "rank {} of {}", r, n);
  ModelWeights shard;
  shard.config = rank_config(c, n, parallel.expert_parallel);
  if (parallel.expert_parallel)
    shard.config.first_local_expert = r * shard.config.num_local_experts;
  shard.source = full.source;
  shard.parallel = parallel;
  const int64_t d = c.head_dim;
  const int64_t q_rows = c.num_heads / n * d;
  // Key/value heads: a contiguous block per rank, or rank r's one replicated head r * Hk / n.
  const int64_t kv_rows = shard.config.num_kv_heads * d;
  const int64_t kv_start = c.num_kv_heads >= n ? r * kv_rows : (r * c.num_kv_heads / n) * d;
  const int64_t ffn = c.intermediate_size / n;
  const int64_t expert_ffn = c.moe_intermediate_size / n;  // each expert's, like a dense MLP's
  const int64_t vocab_rows = vocab_shard_rows(c.vocab_size, n);
  // The rows (dim 0) or columns (dim 1) of a projection's [N, K] weight that this rank holds.
  struct Split {
    int64_t dim, start, count;
  };
  const auto split_of = [&](const std::string& module) -> std::optional<Split> {
    if (module.ends_with("self_attn.q_proj")) return Split{0, r * q_rows, q_rows};
    if (module.ends_with("self_attn.k_proj") || module.ends_with("self_attn.v_proj"))
      return Split{0, kv_start, kv_rows};
    if (module.ends_with("self_attn.o_proj")) return Split{1, r * q_rows, q_rows};
    if (module.ends_with("mlp.gate_proj") || module.ends_with("mlp.up_proj"))
      return Split{0, r * ffn, ffn};
    if (module.ends_with("mlp.down_proj")) return Split{1, r * ffn, ffn};
    return std::nullopt;
  };
  // An expert's projection: split like a dense MLP's, or under expert parallelism whole on its
  // rank and absent from the others (nullopt, and `skip`). The router is whole on every rank.
  const auto expert_split = [&](const ExpertWeightName& expert,
                                bool& skip) -> std::optional<Split> {
    if (parallel.expert_parallel) {
      const int64_t first = shard.config.first_local_expert;
      skip = expert.expert < first || expert.expert >= first + shard.config.num_local_experts;
      return std::nullopt;
    }
    if (expert.projection == ExpertProjection::down) return Split{1, r * expert_ffn, expert_ffn};
    return Split{0, r * expert_ffn, expert_ffn};
  };
  for (const auto& [name, tensor] : full.tensors) {
    const size_t dot = name.rfind('.');
    const std::string module = name.substr(0, dot), kind = name.substr(dot + 1);
    bool skip = false;
    const std::optional<ExpertWeightName> expert = parse_expert_weight(name);
    const std::optional<Split> split = expert ? expert_split(*expert, skip) : split_of(module);
    if (skip) continue;
    Tensor part = tensor;  // norms, input scales: every rank applies them whole
    if (name == "model.embed_tokens.weight" || name == "lm_head.weight") {
      part = vocab_block(tensor, vocab_rows, r);
    } else if (split && (kind == "weight" || (kind == "bias" && split->dim == 0))) {
      // Rows or columns of this weight, whole blocks where it is quantized.
      part = is_quantized(tensor.dtype())
                 ? quantized_block(tensor, name, split->dim, split->start, split->count, n)
                 : tensor.slice(split->dim, split->start, split->start + split->count).contiguous();
    } else if (split && kind == "weight_scale") {
      part = fp8_scale_shard(tensor, name, split->dim, split->start, split->count, n);
    }
    shard.tensors.emplace(name, part.to(device));
  }
  return shard;
}

Tensor parallel_embedding(const Tensor& table, const Tensor& ids, TensorParallel parallel) {
  if (!parallel.enabled()) return ops::embedding(table, ids);
  return ops::all_reduce(ops::embedding_shard(table, ids, parallel.rank * table.size(0)));
}

Tensor reduce_over_ranks(const Tensor& partial, TensorParallel parallel) {
  return parallel.enabled() ? ops::all_reduce(partial) : partial;
}

Tensor gather_vocab(const Tensor& local_logits, TensorParallel parallel, int64_t vocab) {
  if (!parallel.enabled()) return local_logits;
  const int64_t shard = local_logits.size(-1), n = parallel.size;
  // [n * N, shard] in rank order -> [N, n * shard]: row i's shards side by side.
  Tensor stacked = ops::reshape(ops::all_gather(local_logits, n), {n, -1, shard});
  Tensor joined = ops::reshape(ops::transpose(stacked, 0, 1), {-1, n * shard});
  return n * shard == vocab ? joined : ops::contiguous(ops::slice(joined, 1, 0, vocab));
}

}  // namespace tessera
