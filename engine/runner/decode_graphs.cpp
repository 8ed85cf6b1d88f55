#include "engine/runner/decode_graphs.h"

#include <algorithm>
#include <numeric>

#include "engine/sampler.h"
#include "kernels/sampling.h"
#include "runtime/backend/backend.h"
#include "runtime/check.h"
#include "runtime/profiler/profiler.h"

namespace tessera {
namespace {

// The first maximum of each row of `logits` written into `ids` (i64 [rows]): the "greedy_pick"
// kernel (kernels/sampling.h), split over the SMs with `workspace` as its scratch, at addresses a
// graph may hold.
void greedy_pick(const Tensor& logits, Tensor ids, Tensor workspace) {
  ProfiledLaunch profiled("greedy_pick", KernelClass::sampling, [&] {
    return LaunchDetail{
        static_cast<double>(logits.nbytes() + ids.nbytes()), 0,
        fmt::format("{}x{} {}", logits.size(0), logits.size(1), dtype_name(logits.dtype()))};
  });
  const Tensor inputs[] = {logits};
  Tensor outputs[] = {ids, workspace};
  run_kernel("greedy_pick", logits.device().type, KernelArgs{inputs, Attributes{}, outputs});
}

}  // namespace

std::vector<int64_t> decode_length_tiers(int64_t max_seq_len) {
  TESSERA_CHECK(max_seq_len >= 1, "decode graphs for sequences of {} keys", max_seq_len);
  constexpr int64_t kFirstTier = 256, kLastGrowingTier = 16384, kGrowth = 4;
  std::vector<int64_t> tiers;
  for (int64_t tier = kFirstTier; tier < max_seq_len && tier <= kLastGrowingTier; tier *= kGrowth)
    tiers.push_back(tier);
  tiers.push_back(max_seq_len);
  return tiers;
}

DecodeGraphs::DecodeGraphs(Device device, std::vector<int64_t> sizes, int64_t max_blocks_per_seq,
                           int64_t max_seq_len, int64_t warmups, PiecewiseBackend& forward,
                           PiecewiseBackend& logits, PiecewiseBackend* head,
                           std::vector<PagedKVCache>& kv_caches)
    : device_(device),
      max_blocks_per_seq_(max_blocks_per_seq),
      max_seq_len_(max_seq_len),
      forward_(forward),
      logits_(logits),
      head_(head),
      kv_caches_(kv_caches),
      sizes_(std::move(sizes)),
      length_tiers_(decode_length_tiers(max_seq_len)) {
  TESSERA_CHECK(!kv_caches_.empty() && max_blocks_per_seq_ >= 1, "decode graphs need a KV cache");
  const int64_t block_size = kv_caches_.front().block_size();
  for (int64_t tier : length_tiers_)
    tier_blocks_.push_back(std::min(max_blocks_per_seq_, (tier + block_size - 1) / block_size));
  std::sort(sizes_.begin(), sizes_.end());
  sizes_.erase(std::unique(sizes_.begin(), sizes_.end()), sizes_.end());
  TESSERA_CHECK(!sizes_.empty() && sizes_.front() >= 1, "decode graphs need sizes >= 1");
  TESSERA_REQUIRE(warmups >= 1,
                  "compilation.cudagraph_num_warmups must be >= 1: the first launch of a size "
                  "loads library state that cannot be created inside a capture (got {})",
                  warmups);
  const int64_t largest = sizes_.back();
  std::vector<int64_t> starts(static_cast<size_t>(largest + 1));
  std::iota(starts.begin(), starts.end(), int64_t{0});
  query_start_loc_ = Tensor::from_ints(starts, {largest + 1}, DType::i32, device_);
  const int64_t staged_words = block_tables_offset() + largest * tier_blocks_.back();
  staging_ = Tensor::empty({staged_words}, DType::i32, device_);
  host_staging_.assign(static_cast<size_t>(staged_words), 0);
  if (head_ != nullptr) {
    // Zeros: the capture's hand-over reads them (its staged ids take none).
    draws_ = Tensor::from_ints(std::vector<int64_t>(static_cast<size_t>(largest), 0), {largest},
                               DType::i64, device_);
    pick_workspace_ = Tensor::empty({kGreedyPickWorkspaceWords * largest}, DType::i64, device_);
  }
  std::unique_ptr<Stream> stream = backend(device_).create_stream(device_.index);
  const size_t tiers = length_tiers_.size();
  captured_.resize(sizes_.size() * tiers);
  for (size_t i = sizes_.size(); i-- > 0;) {  // largest first, as vLLM does
    const int64_t size = sizes_[i];
    for (size_t tier = tiers; tier-- > 0;) {
      Captured& captured = captured_[i * tiers + tier];
      captured.forward = &forward_.bind_tokens(size);
      captured.logits = &logits_.bind_tokens(size);
      if (head_ != nullptr) captured.head = &head_->bind_tokens(size);
      // Warm-ups and capture see padding: token 0 at position 0, one cached token in block 0,
      // written nowhere (slot -1).
      std::fill(host_staging_.begin(), host_staging_.end(), 0);
      std::fill_n(host_staging_.begin() + field_offset(2), size, 1);
      std::fill_n(host_staging_.begin() + field_offset(3), size, -1);
      staging_.copy_from(
          Tensor::from_blob(host_staging_.data(), staging_.sizes(), DType::i32, kCPU));
      AttentionMetadata meta = device_metadata(size, tier);
      ForwardContextScope scope(ForwardContext{&meta, &kv_caches_});
      for (bool greedy : {false, true}) {
        if (greedy && head_ == nullptr) continue;
        for (int64_t w = 0; w < warmups; ++w) launch_step(size, captured, greedy, *stream);
        CapturedGraph graph = capture_graph(
            device_, *stream, [&](Stream& on) { launch_step(size, captured, greedy, on); });
        (greedy ? captured.greedy_graph : captured.graph) = std::move(graph.graph);
        device_bytes_ += graph.device_bytes;
      }
    }
  }
}

AttentionMetadata DecodeGraphs::device_metadata(int64_t sequences, size_t tier) const {
  AttentionMetadata meta;
  meta.num_seqs = sequences;
  meta.num_tokens = sequences;
  meta.max_query_len = 1;
  // Any length up to the tier's: decode partitions split each sequence by its own length.
  meta.max_seq_len = length_tiers_[tier];
  meta.max_blocks_per_seq = tier_blocks_[tier];
  meta.device_query_start_loc = query_start_loc_.slice(0, 0, sequences + 1);
  meta.device_seq_lens = staging_.slice(0, field_offset(2), field_offset(2) + sequences);
  meta.device_slot_mapping = staging_.slice(0, field_offset(3), field_offset(3) + sequences);
  meta.device_block_tables = staging_.slice(0, block_tables_offset(),
                                            block_tables_offset() + sequences * tier_blocks_[tier]);
  return meta;
}

void DecodeGraphs::launch_step(int64_t sequences, const Captured& captured, bool greedy,
                               Stream& stream) const {
  StreamGuard on_stream(stream);
  Tensor inputs[] = {staging_.slice(0, field_offset(0), field_offset(0) + sequences),
                     staging_.slice(0, field_offset(1), field_offset(1) + sequences)};
  if (draws_.defined()) {
    // The ids go into the forward's input slot with the hand-over, so copy_inputs skips them.
    ProfileRegion region("inputs");
    Tensor slot = captured.forward->inputs.at(0);
    take_sampled_ids(inputs[0], draws_, slot);
    inputs[0] = slot;
  }
  forward_.copy_inputs(*captured.forward, inputs);
  forward_.launch_all(*captured.forward, stream);
  ProfileRegion region("logits");
  if (!greedy) {
    logits_.copy_inputs(*captured.logits, captured.forward->outputs);
    logits_.launch_all(*captured.logits, stream);
    return;
  }
  head_->copy_inputs(*captured.head, captured.forward->outputs);
  head_->launch_all(*captured.head, stream);
  ProfileRegion sampling("sampling");
  greedy_pick(captured.head->outputs.at(0), draws_.slice(0, 0, sequences), pick_workspace_);
}

int64_t DecodeGraphs::size_for(int64_t sequences) const {
  auto found = std::lower_bound(sizes_.begin(), sizes_.end(), sequences);
  return found == sizes_.end() ? 0 : *found;
}

Tensor DecodeGraphs::run(const AttentionMetadata& meta, std::span<const int32_t> token_ids,
                         std::span<const int32_t> positions, const Tensor& sampled_ids,
                         bool greedy) {
  TESSERA_CHECK(!greedy || has_greedy(), "a greedy decode step without greedy graphs");
  const int64_t sequences = meta.num_seqs;
  const int64_t size = size_for(sequences);
  TESSERA_CHECK(size > 0, "no decode graph holds {} sequences", sequences);
  TESSERA_CHECK(static_cast<int64_t>(token_ids.size()) == sequences &&
                    static_cast<int64_t>(positions.size()) == sequences && meta.max_query_len == 1,
                "a decode graph runs one token per sequence ({} tokens, {} sequences)",
                token_ids.size(), sequences);
  TESSERA_CHECK(meta.max_blocks_per_seq <= max_blocks_per_seq_,
                "block tables of {} blocks exceed the graphs' {}", meta.max_blocks_per_seq,
                max_blocks_per_seq_);
  TESSERA_CHECK(meta.max_seq_len >= 1 && meta.max_seq_len <= max_seq_len_,
                "a decode step of sequences up to {} keys in graphs of up to {}", meta.max_seq_len,
                max_seq_len_);
  const size_t index =
      static_cast<size_t>(std::lower_bound(sizes_.begin(), sizes_.end(), size) - sizes_.begin());
  const size_t tier = static_cast<size_t>(
      std::lower_bound(length_tiers_.begin(), length_tiers_.end(), meta.max_seq_len) -
      length_tiers_.begin());
  const Captured& captured = captured_[index * length_tiers_.size() + tier];
  // Padding sequences (past `sequences`) are token 0 at position 0 with one cached token, written
  // nowhere (slot -1); their block-table rows keep what the capture or an earlier step left there,
  // which is a valid block id (the header's note).
  int32_t* staged = host_staging_.data();
  const int64_t block_size = kv_caches_.front().block_size();
  auto field = [&](int f) { return staged + field_offset(f); };
  std::copy(token_ids.begin(), token_ids.end(), field(0));
  std::fill(field(0) + sequences, field(0) + size, 0);
  std::copy(positions.begin(), positions.end(), field(1));
  std::fill(field(1) + sequences, field(1) + size, 0);
  std::copy(meta.seq_lens.begin(), meta.seq_lens.end(), field(2));
  std::fill(field(2) + sequences, field(2) + size, 1);
  std::copy(meta.slot_mapping.begin(), meta.slot_mapping.end(), field(3));
  std::fill(field(3) + sequences, field(3) + size, -1);
  const int64_t stride = tier_blocks_[tier];
  int64_t words = block_tables_offset();
  for (int64_t s = 0; s < sequences; ++s) {
    // Attention reads a sequence's first ceil(seq_len / block_size) entries, and no others.
    const int64_t used = (meta.seq_lens[static_cast<size_t>(s)] + block_size - 1) / block_size;
    TESSERA_CHECK(used <= meta.max_blocks_per_seq && used <= stride,
                  "sequence {} needs {} blocks (tier of {})", s, used, stride);
    const int32_t* row = meta.block_tables.data() + s * meta.max_blocks_per_seq;
    std::copy(row, row + used, staged + block_tables_offset() + s * stride);
    words = block_tables_offset() + s * stride + used;
  }
  staging_.slice(0, 0, words).copy_from(Tensor::from_blob(staged, {words}, DType::i32, kCPU));
  // The graph takes draws from `draws_` itself; others are taken here.
  const bool in_draws = draws_.defined() && sampled_ids.defined() &&
                        sampled_ids.data_ptr() == draws_.data_ptr() &&
                        sampled_ids.dtype() == draws_.dtype();
  if (!in_draws &&
      std::any_of(token_ids.begin(), token_ids.end(), [](int32_t id) { return id < 0; })) {
    Tensor staged_ids = staging_.slice(0, field_offset(0), field_offset(0) + sequences);
    take_sampled_ids(staged_ids, sampled_ids, staged_ids);
  }
  Stream& stream = backend(device_).current_stream(device_.index);
  const KernelProfiler* profiler = active_profiler();
  if (profiler != nullptr && profiler->bypasses_graphs()) {
    // A timing profile launches what the graph holds, one kernel at a time, over the same
    // buffers; the batch's host lengths give the profile attention's bytes.
    AttentionMetadata launched = device_metadata(size, tier);
    launched.query_start_loc = meta.query_start_loc;
    launched.seq_lens = meta.seq_lens;
    ForwardContextScope scope(ForwardContext{&launched, &kv_caches_});
    launch_step(size, captured, greedy, stream);
  } else {
    GraphExec& graph = greedy ? *captured.greedy_graph : *captured.graph;
    ProfiledGraphReplay profiled(graph.num_nodes());
    graph.replay(stream);
  }
  if (greedy) return draws_.slice(0, 0, sequences);
  return captured.logits->outputs.at(0).slice(0, 0, sequences);
}

}  // namespace tessera
