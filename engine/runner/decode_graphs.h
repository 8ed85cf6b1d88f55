// cudagraph_mode=full: one device graph per decode batch size holding a whole decode step: the
// copy of the step's token ids and positions out of a staging buffer into the forward's input
// slots, the forward (every piece and attention), and the LM head with the cast of the logits to
// f32. A decode step then costs the host one packed host-to-device copy (token ids, positions,
// sequence lengths, slots and block tables together) and one graph launch.
//
// Given an LM head for the greedy pick (compilation.fuse_greedy_sampling: the model dtype's, or
// the f32 logits' own where a cast would not be exact), each batch size also gets a greedy graph,
// whose LM head is followed by the argmax of each row ("greedy_pick", split over the SMs as the
// argmax op splits few rows outside a graph), written into `draws`, one buffer all graphs share.
// Every graph then takes its sequences' pending tokens from `draws` as it moves the token ids into
// the forward's input (take_sampled_ids in place of that copy): when the step before was a greedy
// graph's, asynchronous scheduling's hand-over needs no launch outside the graph either. Draws held
// elsewhere (the sampler's) are taken by a launch before the replay, as without greedy graphs.
//
// Each batch size has one graph per length tier (decode_length_tiers), and a step replays the
// graph of the smallest tier that holds its longest sequence. A graph sized for the model's
// length (131072 tokens) would make every short step pay for it: its block tables are rows of
// 8192 entries, which the step's copy spans (4 MB at 128 sequences), and attention's launch
// splits keys into partitions for the longest sequence it may see, most of them empty.
//
// The staging buffer: token ids, positions, sequence lengths and slots at fixed offsets (each
// `largest` words, the largest size), then the block tables, rows of the tier's blocks per
// sequence. Block-table words thus only ever hold block ids (or the capture's zeros), so the
// rows of padding sequences, which a step does not copy, name a valid block whatever an earlier
// step of another size or tier left there.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "compile/piecewise_backend.h"
#include "kernels/attention_metadata.h"

namespace tessera {

// The longest sequence each tier of decode graphs is captured for, ascending: 256 keys, then
// four times more up to 16384, and the model's length `max_seq_len` (which caps them all).
// Attention's partition count stops growing with the length well before 16384 keys at the
// GQA shapes served, so longer tiers would repeat the same launches.
std::vector<int64_t> decode_length_tiers(int64_t max_seq_len);

class DecodeGraphs {
 public:
  // Captures a graph at each of `sizes` (decode batches, any order), after `warmups` launches
  // on zero inputs. `forward` maps (input_ids, positions) to hidden states, `logits` maps hidden
  // states to f32 logits; both must already be compiled with sizes up to the largest. Attention
  // reads `kv_caches` and this object's metadata buffers, whose addresses the graphs hold.
  // `head`, when given, maps hidden states to the logits the greedy pick reads (in the model's
  // dtype, or `logits` itself), compiled like `logits`: the greedy graphs are captured too.
  DecodeGraphs(Device device, std::vector<int64_t> sizes, int64_t max_blocks_per_seq,
               int64_t max_seq_len, int64_t warmups, PiecewiseBackend& forward,
               PiecewiseBackend& logits, PiecewiseBackend* head,
               std::vector<PagedKVCache>& kv_caches);

  // The smallest captured size that holds `sequences`, or 0 when none does.
  int64_t size_for(int64_t sequences) const;
  // Runs one decode step of `meta`'s sequences (one token each, ids and positions given) in the
  // graph of size_for(num_seqs); returns the f32 logits [num_seqs, vocab]: a view valid until
  // the next run; or, with `greedy` (has_greedy() only), the argmax of each row [num_seqs] (i64),
  // a view of the draws buffer valid until the next greedy run. An id -1 - r is row r of
  // `sampled_ids`, taken on the device before the forward.
  Tensor run(const AttentionMetadata& meta, std::span<const int32_t> token_ids,
             std::span<const int32_t> positions, const Tensor& sampled_ids, bool greedy);
  // Whether greedy graphs were captured.
  bool has_greedy() const { return head_ != nullptr; }

  const std::vector<int64_t>& sizes() const { return sizes_; }
  const std::vector<int64_t>& length_tiers() const { return length_tiers_; }
  size_t device_bytes() const { return device_bytes_; }

 private:
  struct Captured {
    const BoundPlan* forward = nullptr;
    const BoundPlan* logits = nullptr;
    const BoundPlan* head = nullptr;  // with greedy graphs
    std::unique_ptr<GraphExec> graph;
    std::unique_ptr<GraphExec> greedy_graph;
  };
  // Offsets (i32 words) into the staging buffer; `field` 0..3: token ids, positions, sequence
  // lengths, slots.
  int64_t field_offset(int field) const { return field * sizes_.back(); }
  int64_t block_tables_offset() const { return 4 * sizes_.back(); }
  // Attention's metadata for `sequences` padded sequences of tier `tier`, over the staging buffer.
  AttentionMetadata device_metadata(int64_t sequences, size_t tier) const;
  // What each graph holds: input copies (the token ids' with the hand-over from `draws_`), forward,
  // LM head (when `greedy`: `head_`, then the argmax into `draws_`).
  void launch_step(int64_t sequences, const Captured& captured, bool greedy, Stream& stream) const;

  Device device_;
  int64_t max_blocks_per_seq_;
  int64_t max_seq_len_;
  PiecewiseBackend& forward_;
  PiecewiseBackend& logits_;
  PiecewiseBackend* head_;  // nullptr: no greedy graphs
  std::vector<PagedKVCache>& kv_caches_;
  Tensor query_start_loc_;  // 0, 1, ..., largest: one token per sequence, never rewritten
  Tensor staging_;          // device i32: the header and the largest tier's block tables
  std::vector<int32_t> host_staging_;
  Tensor draws_;  // device i64 [largest]: the latest greedy graph's ids (with greedy graphs)
  Tensor pick_workspace_;  // the greedy pick's scratch (kernels/sampling.h), with greedy graphs
  std::vector<int64_t> sizes_;         // ascending
  std::vector<int64_t> length_tiers_;  // ascending, decode_length_tiers(max_seq_len)
  std::vector<int64_t> tier_blocks_;   // per tier: block-table entries per sequence
  // Per size, then per tier: captured_[size index * length_tiers_.size() + tier index].
  std::vector<Captured> captured_;
  size_t device_bytes_ = 0;
};

}  // namespace tessera
