#include "models/tensor_parallel.h"

#include <cstring>

#include "compile/ops/ops.h"
#include "models/architecture_registry.h"
#include "models/model_weights.h"
#include "runtime/check.h"

namespace tessera {
namespace {

bool ends_with(const std::string& text, std::string_view suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Rows or columns [start, start + count) of a 2-D (or rows of a 1-D) tensor, contiguous.
Tensor block(const Tensor& tensor, int64_t dim, int64_t start, int64_t count) {
  return tensor.slice(dim, start, start + count).contiguous();
}

// Vocabulary rows [rank * rows, ...) padded with zero rows to `rows`.
Tensor vocab_block(const Tensor& table, int64_t rows, int rank) {
  const int64_t vocab = table.size(0), start = std::min<int64_t>(rank * rows, vocab);
  const int64_t real = std::min(vocab, start + rows) - start;
  if (real == rows) return block(table, 0, start, rows);
  Shape sizes = table.sizes();
  sizes[0] = rows;
  Tensor padded = Tensor::empty(sizes, table.dtype(), kCPU);
  std::memset(padded.data_ptr(), 0, padded.nbytes());
  if (real > 0) padded.slice(0, 0, real).copy_from(table.slice(0, start, start + real));
  return padded;
}

}  // namespace

void check_tensor_parallel(const ModelConfig& config, int size) {
  TESSERA_REQUIRE(size >= 1 && size <= 64,
                  "engine.tensor_parallel_size must be between 1 and 64, got {}", size);
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
}

ModelConfig rank_config(const ModelConfig& config, int size) {
  check_tensor_parallel(config, size);
  ModelConfig rank = config;
  rank.num_heads = config.num_heads / size;
  rank.num_kv_heads = std::max<int64_t>(config.num_kv_heads / size, 1);
  rank.intermediate_size = config.intermediate_size / size;
  return rank;
}

int64_t vocab_shard_rows(int64_t vocab, int size) {
  return (vocab + size - 1) / size;
}

ModelWeights shard_weights(const ModelWeights& full, TensorParallel parallel, Device device) {
  const ModelConfig& c = full.config;
  const int n = parallel.size, r = parallel.rank;
  TESSERA_CHECK(r >= 0 && r < n, "rank {} of {}", r, n);
  for (const auto& [name, tensor] : full.tensors)
    TESSERA_REQUIRE(!is_quantized(tensor.dtype()),
                    "{}: tensor '{}' is quantized ({}); tensor parallelism does not shard "
                    "quantized weights yet: run with engine.tensor_parallel_size 1, or an F16/BF16 "
                    "file",
                    full.source, name, dtype_name(tensor.dtype()));
  ModelWeights shard;
  shard.config = rank_config(c, n);
  shard.source = full.source;
  shard.parallel = parallel;
  const int64_t d = c.head_dim;
  const int64_t q_rows = c.num_heads / n * d;
  // Key/value heads: a contiguous block per rank, or rank r's one replicated head r * Hk / n.
  const int64_t kv_rows = shard.config.num_kv_heads * d;
  const int64_t kv_start = c.num_kv_heads >= n ? r * kv_rows : (r * c.num_kv_heads / n) * d;
  const int64_t ffn = c.intermediate_size / n;
  const int64_t vocab_rows = vocab_shard_rows(c.vocab_size, n);
  for (const auto& [name, tensor] : full.tensors) {
    Tensor part;
    if (ends_with(name, "self_attn.q_proj.weight") || ends_with(name, "self_attn.q_proj.bias")) {
      part = block(tensor, 0, r * q_rows, q_rows);
    } else if (ends_with(name, "self_attn.k_proj.weight") ||
               ends_with(name, "self_attn.k_proj.bias") ||
               ends_with(name, "self_attn.v_proj.weight") ||
               ends_with(name, "self_attn.v_proj.bias")) {
      part = block(tensor, 0, kv_start, kv_rows);
    } else if (ends_with(name, "self_attn.o_proj.weight")) {
      part = block(tensor, 1, r * q_rows, q_rows);
    } else if (ends_with(name, "mlp.gate_proj.weight") || ends_with(name, "mlp.up_proj.weight")) {
      part = block(tensor, 0, r * ffn, ffn);
    } else if (ends_with(name, "mlp.down_proj.weight")) {
      part = block(tensor, 1, r * ffn, ffn);
    } else if (name == "model.embed_tokens.weight" || name == "lm_head.weight") {
      part = vocab_block(tensor, vocab_rows, r);
    } else {
      part = tensor;  // norms: every rank applies them whole
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
