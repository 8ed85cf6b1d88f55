#include "engine/decode_graphs.h"

#include <algorithm>
#include <numeric>

#include "kernels/backend.h"
#include "kernels/check.h"
#include "kernels/profiler.h"

namespace tessera {

DecodeGraphs::DecodeGraphs(Device device, std::vector<int64_t> sizes, int64_t max_blocks_per_seq,
                           int64_t max_seq_len, int64_t warmups, PiecewiseBackend& forward,
                           PiecewiseBackend& logits, std::vector<PagedKVCache>& kv_caches)
    : device_(device),
      max_blocks_per_seq_(max_blocks_per_seq),
      max_seq_len_(max_seq_len),
      forward_(forward),
      logits_(logits),
      kv_caches_(kv_caches),
      sizes_(std::move(sizes)) {
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
  staging_ = Tensor::empty({staged_words(largest)}, DType::i32, device_);
  host_staging_.assign(static_cast<size_t>(staged_words(largest)), 0);
  std::unique_ptr<Stream> stream = backend(device_).create_stream(device_.index);
  captured_.resize(sizes_.size());
  for (size_t i = sizes_.size(); i-- > 0;) {  // largest first, as vLLM does
    const int64_t size = sizes_[i];
    Captured& captured = captured_[i];
    captured.forward = &forward_.bind_tokens(size);
    captured.logits = &logits_.bind_tokens(size);
    // Warm-ups and capture see padding: token 0 at position 0, one cached token in block 0,
    // written nowhere (slot -1).
    std::fill(host_staging_.begin(), host_staging_.end(), 0);
    std::fill_n(host_staging_.begin() + 2 * size, size, 1);
    std::fill_n(host_staging_.begin() + 3 * size, size, -1);
    staging_.copy_from(Tensor::from_blob(host_staging_.data(), staging_.sizes(), DType::i32, kCPU));
    AttentionMetadata meta = device_metadata(size);
    ForwardContextScope scope(ForwardContext{&meta, &kv_caches_});
    for (int64_t w = 0; w < warmups; ++w) launch_step(size, captured, *stream);
    CapturedGraph graph =
        capture_graph(device_, *stream, [&](Stream& on) { launch_step(size, captured, on); });
    captured.graph = std::move(graph.graph);
    device_bytes_ += graph.device_bytes;
  }
}

int64_t DecodeGraphs::staged_words(int64_t sequences) const {
  return sequences * (4 + max_blocks_per_seq_);
}

AttentionMetadata DecodeGraphs::device_metadata(int64_t sequences) const {
  AttentionMetadata meta;
  meta.num_seqs = sequences;
  meta.num_tokens = sequences;
  meta.max_query_len = 1;
  // Any length up to the model's: decode partitions split each sequence by its own length.
  meta.max_seq_len = max_seq_len_;
  meta.max_blocks_per_seq = max_blocks_per_seq_;
  meta.device_query_start_loc = query_start_loc_.slice(0, 0, sequences + 1);
  meta.device_seq_lens = staging_.slice(0, 2 * sequences, 3 * sequences);
  meta.device_slot_mapping = staging_.slice(0, 3 * sequences, 4 * sequences);
  meta.device_block_tables = staging_.slice(0, 4 * sequences, staged_words(sequences));
  return meta;
}

void DecodeGraphs::launch_step(int64_t sequences, const Captured& captured, Stream& stream) const {
  StreamGuard on_stream(stream);
  const Tensor inputs[] = {staging_.slice(0, 0, sequences),
                           staging_.slice(0, sequences, 2 * sequences)};
  forward_.copy_inputs(*captured.forward, inputs);
  forward_.launch_all(*captured.forward, stream);
  {
    ProfileRegion region("logits");
    logits_.copy_inputs(*captured.logits, captured.forward->outputs);
    logits_.launch_all(*captured.logits, stream);
  }
}

int64_t DecodeGraphs::size_for(int64_t sequences) const {
  auto found = std::lower_bound(sizes_.begin(), sizes_.end(), sequences);
  return found == sizes_.end() ? 0 : *found;
}

Tensor DecodeGraphs::run(const AttentionMetadata& meta, std::span<const int32_t> token_ids,
                         std::span<const int32_t> positions) {
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
  const size_t index =
      static_cast<size_t>(std::lower_bound(sizes_.begin(), sizes_.end(), size) - sizes_.begin());
  const Captured& captured = captured_[index];
  // Padding sequences (past `sequences`) keep what the capture staged or an earlier step left:
  // token ids and block ids that are valid, and slot -1, so they are written nowhere.
  int32_t* staged = host_staging_.data();
  const int64_t block_size = kv_caches_.front().block_size();
  std::copy(token_ids.begin(), token_ids.end(), staged);
  std::copy(positions.begin(), positions.end(), staged + size);
  std::fill(staged + sequences, staged + size, 0);
  std::fill(staged + size + sequences, staged + 2 * size, 0);
  std::copy(meta.seq_lens.begin(), meta.seq_lens.end(), staged + 2 * size);
  std::fill(staged + 2 * size + sequences, staged + 3 * size, 1);
  std::copy(meta.slot_mapping.begin(), meta.slot_mapping.end(), staged + 3 * size);
  std::fill(staged + 3 * size + sequences, staged + 4 * size, -1);
  int64_t words = 4 * size;
  for (int64_t s = 0; s < sequences; ++s) {
    // Attention reads a sequence's first ceil(seq_len / block_size) entries, and no others.
    const int64_t used = (meta.seq_lens[static_cast<size_t>(s)] + block_size - 1) / block_size;
    TESSERA_CHECK(used <= meta.max_blocks_per_seq, "sequence {} needs {} blocks", s, used);
    const int32_t* row = meta.block_tables.data() + s * meta.max_blocks_per_seq;
    std::copy(row, row + used, staged + 4 * size + s * max_blocks_per_seq_);
    words = 4 * size + s * max_blocks_per_seq_ + used;
  }
  staging_.slice(0, 0, words).copy_from(Tensor::from_blob(staged, {words}, DType::i32, kCPU));
  Stream& stream = backend(device_).current_stream(device_.index);
  const KernelProfiler* profiler = active_profiler();
  if (profiler != nullptr && profiler->bypasses_graphs()) {
    // A timing profile launches what the graph holds, one kernel at a time, over the same
    // buffers; the batch's host lengths give the profile attention's bytes.
    AttentionMetadata launched = device_metadata(size);
    launched.query_start_loc = meta.query_start_loc;
    launched.seq_lens = meta.seq_lens;
    ForwardContextScope scope(ForwardContext{&launched, &kv_caches_});
    launch_step(size, captured, stream);
  } else {
    ProfiledGraphReplay profiled(captured.graph->num_nodes());
    captured.graph->replay(stream);
  }
  return captured.logits->outputs.at(0).slice(0, 0, sequences);
}

}  // namespace tessera
