// cudagraph_mode=full: one device graph per decode batch size holding a whole decode step: the
// copy of the step's token ids and positions out of a staging buffer into the forward's input
// slots, the forward (every piece and attention), and the LM head with the cast of the logits to
// f32. A decode step then costs the host one packed host-to-device copy (token ids, positions,
// sequence lengths, slots and block tables together) and one graph launch.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "compile/piecewise_backend.h"
#include "kernels/attention_metadata.h"

namespace tessera {

class DecodeGraphs {
 public:
  // Captures a graph at each of `sizes` (decode batches, any order), after `warmups` launches
  // on zero inputs. `forward` maps (input_ids, positions) to hidden states, `logits` maps hidden
  // states to f32 logits; both must already be compiled with sizes up to the largest. Attention
  // reads `kv_caches` and this object's metadata buffers, whose addresses the graphs hold.
  DecodeGraphs(Device device, std::vector<int64_t> sizes, int64_t max_blocks_per_seq,
               int64_t max_seq_len, int64_t warmups, PiecewiseBackend& forward,
               PiecewiseBackend& logits, std::vector<PagedKVCache>& kv_caches);

  // The smallest captured size that holds `sequences`, or 0 when none does.
  int64_t size_for(int64_t sequences) const;
  // Runs one decode step of `meta`'s sequences (one token each, ids and positions given) in the
  // graph of size_for(num_seqs); returns the f32 logits [num_seqs, vocab]: a view valid until
  // the next run.
  Tensor run(const AttentionMetadata& meta, std::span<const int32_t> token_ids,
             std::span<const int32_t> positions);

  const std::vector<int64_t>& sizes() const { return sizes_; }
  size_t device_bytes() const { return device_bytes_; }

 private:
  struct Captured {
    const BoundPlan* forward = nullptr;
    const BoundPlan* logits = nullptr;
    std::unique_ptr<GraphExec> graph;
  };
  // The staging layout of a padded batch of `sequences`: token ids, positions, sequence lengths,
  // slots, then the block tables (sequences x max_blocks_per_seq), all i32 from offset 0.
  int64_t staged_words(int64_t sequences) const;
  // Attention's metadata for `sequences` padded sequences, over the device staging buffer.
  AttentionMetadata device_metadata(int64_t sequences) const;
  // What each graph holds: input copies, forward, LM head.
  void launch_step(int64_t sequences, const Captured& captured, Stream& stream) const;

  Device device_;
  int64_t max_blocks_per_seq_;
  int64_t max_seq_len_;
  PiecewiseBackend& forward_;
  PiecewiseBackend& logits_;
  std::vector<PagedKVCache>& kv_caches_;
  Tensor query_start_loc_;  // 0, 1, ..., largest: one token per sequence, never rewritten
  Tensor staging_;          // device i32, staged_words(largest)
  std::vector<int32_t> host_staging_;
  std::vector<int64_t> sizes_;      // ascending
  std::vector<Captured> captured_;  // as sizes_
  size_t device_bytes_ = 0;
};

}  // namespace tessera
