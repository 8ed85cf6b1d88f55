// Tensor parallelism of decoder models, Megatron-style: q/k/v and gate/up projections split by
// output rows (heads across ranks; key/value heads replicated when fewer than ranks), o and down
// projections split by input columns and followed by an all-reduce, the embedding and the LM head
// split over the vocabulary (the embedding's shards summed by an all-reduce, the logits gathered).
// A rank's model is the family's own code over its shard: its config has the rank's heads and
// intermediate size, and these layers add the collectives where the shards meet.
#pragma once

#include "models/model_config.h"
#include "runtime/tensor.h"

namespace tessera {

struct ModelWeights;

struct TensorParallel {
  int rank = 0;
  int size = 1;
  bool expert_parallel = false;  // whole experts per rank (engine.enable_expert_parallel)
  bool enabled() const { return size > 1; }
};

// Throws, naming engine.tensor_parallel_size and the config field, unless `config` splits over
// `size` ranks: its architecture shards, and `size` divides the attention heads and the
// intermediate size, and divides or is a multiple of the key/value heads.
// With `expert_parallel`, `size` must divide num_experts instead of each expert's intermediate
// size.
void check_tensor_parallel(const ModelConfig& config, int size, bool expert_parallel = false);
// The config of one rank's shard: heads, key/value heads and intermediate size per rank;
// vocab_size stays the model's.
// With `expert_parallel` the experts' sizes stay whole and each rank takes num_experts / size of
// them (shard_weights sets which).
ModelConfig rank_config(const ModelConfig& config, int size, bool expert_parallel = false);
// The vocabulary rows each rank holds: ceil(vocab / size) (the last shard padded with zero rows).
int64_t vocab_shard_rows(int64_t vocab, int size);
// Rank `parallel.rank`'s shard of `full` (the whole model's weights, best on the host), placed on
// `device`.
ModelWeights shard_weights(const ModelWeights& full, TensorParallel parallel, Device device);

// The layers where shards meet, for model code (each is the plain op without parallelism):
// rows of the token embedding (a vocabulary shard) summed over ranks;
Tensor parallel_embedding(const Tensor& table, const Tensor& ids, TensorParallel parallel);
// a row-parallel projection's partial sums added up over ranks;
Tensor reduce_over_ranks(const Tensor& partial, TensorParallel parallel);
// each rank's logits [N, vocab shard] joined into [N, vocab].
Tensor gather_vocab(const Tensor& local_logits, TensorParallel parallel, int64_t vocab);

}  // namespace tessera
