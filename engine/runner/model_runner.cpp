#include "engine/runner/model_runner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>

#include <spdlog/spdlog.h>
#include <unistd.h>

#include "compile/ops/ops.h"
#include "compile/piecewise_backend.h"
#include "compile/trace/dispatch.h"
#include "engine/kv_cache_manager.h"
#include "engine/sampler.h"
#include "runtime/backend/backend.h"
#include "runtime/backend/programmatic_launch.h"
#include "runtime/check.h"
#include "runtime/profiler/profiler.h"

namespace tessera {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
// What the KV-cache sizing leaves for full graphs, captured after the cache exists (the issue's
// budget for all graphs; 51 piecewise sizes of a 1B model took 0.14 GiB).
constexpr size_t kFullGraphBudget = size_t{1} << 28;

Tensor int_tensor(const std::vector<int32_t>& values, Device device) {
  std::vector<int64_t> wide(values.begin(), values.end());
  return Tensor::from_ints(wide, {static_cast<int64_t>(values.size())}, DType::i32, device);
}

// A compiler callback that keeps the backend it is handed in `slot` (a member of the runner).
PiecewiseBackendCallback keep_backend_in(std::shared_ptr<PiecewiseBackend>& slot) {
  return [&slot](std::shared_ptr<PiecewiseBackend> backend) { slot = std::move(backend); };
}

}  // namespace

ModelRunner::ModelRunner(std::shared_ptr<const CausalLM> model, RunnerConfig config,
                         Communicator* communicator)
    : model_(std::move(model)),
      config_(std::move(config)),
      custom_ops_(config_.compilation.custom_op_config()),
      communicator_(communicator) {
  // Profiling and capture run forwards: a rank's collectives need its communicator, and the
  // captures record the launches' kind.
  CommunicatorScope communicator_scope(communicator_);
  ProgrammaticLaunchScope programmatic(config_.compilation.programmatic_dependent_launch);
  const bool size_from_memory = config_.cache.num_kv_blocks == 0;
  TESSERA_REQUIRE(!size_from_memory || !model_->device().is_cpu(),
                  "the KV cache on the CPU needs engine.num_kv_blocks (make_runner_config sizes "
                  "it for one sequence of the model's length)");
  // Sized from memory, the profile runs against a one-block cache it never touches.
  allocate_kv_cache(size_from_memory ? 1 : config_.cache.num_kv_blocks);
  if (config_.cache.dtype(model_->dtype()) == DType::f8_e4m3)
    spdlog::info(model_->config().fp8.kv_cache_scales
                     ? "FP8 KV cache: each layer's K and V scales from the checkpoint (k_scale, "
                       "v_scale)"
                     : "FP8 KV cache: K and V scales 1 (the checkpoint gives none): values past "
                       "+-448 saturate");
  build_forward();
  if (config_.compilation.mode == CompilationMode::compiled) build_lm_heads();
  const CUDAGraphMode graphs =
      config_.compilation.resolved_cudagraph_mode(!model_->device().is_cpu());
  require_graph_support(graphs);
  if (size_from_memory || graphs != CUDAGraphMode::none)
    profile_and_capture(graphs, size_from_memory);
}

void ModelRunner::build_forward() {
  // The token count: one symbol shared by input_ids and positions.
  std::vector<DynamicDim> token_dims = {{0, 0}, {1, 0}};
  const CompilationConfig& compilation = config_.compilation;
  CompileOptions compile;
  if (compilation.mode == CompilationMode::compiled) {
    CompilerOptions compiler{compilation, config_.scheduler.max_num_batched_tokens, "forward"};
    compile = compiled_mode_options(
        compiler, token_dims, custom_ops_,
        [this](std::shared_ptr<const CompiledPlan> plan) { latest_plan_ = std::move(plan); },
        keep_backend_in(forward_backend_));
  } else {
    // "eager" runs the forward as called, with custom_ops; "traced" runs its graph node by node.
    compile.backend = std::string(enum_name(compilation.mode));
    compile.custom_ops = custom_ops_;
    compile.dynamic_dims = token_dims;
    compile.recompile_limit = static_cast<int>(compilation.recompile_limit);
  }
  compile.input_names = {"input_ids", "positions"};
  auto forward = [model = model_](std::span<const Tensor> inputs) {
    return std::vector<Tensor>{model->forward(inputs[0], inputs[1])};
  };
  compiled_ = std::make_unique<CompiledFunction>(forward, compile);
}

void ModelRunner::build_lm_heads() {
  // The LM head of up to max_logits_rows() rows, in `dtype` (none: the model's), compiled; its
  // backend goes to `backend`. What a decode graph captures after the forward.
  const int64_t rows = config_.max_logits_rows();
  auto compiled_head = [&](std::optional<DType> dtype, std::shared_ptr<PiecewiseBackend>& backend) {
    CompileOptions head = compiled_mode_options(
        CompilerOptions{config_.compilation, rows, dtype ? "logits_head" : "greedy_head"}, {{0, 0}},
        custom_ops_, {}, keep_backend_in(backend));
    head.input_names = {"hidden"};
    return std::make_unique<CompiledFunction>(
        [model = model_, dtype](std::span<const Tensor> inputs) {
          Tensor logits = model->compute_logits(inputs[0]);
          return std::vector<Tensor>{dtype ? ops::cast(logits, *dtype) : logits};
        },
        head);
  };
  logits_compiled_ = compiled_head(DType::f32, logits_backend_);
  // The greedy pick reads the LM head's own dtype where a cast to f32 is exact (its argmax is
  // then the same), without writing and reading the f32 logits; otherwise it reads those.
  if (config_.compilation.fuse_greedy_sampling && model_->logits_end_in_gemm())
    head_compiled_ = compiled_head(std::nullopt, head_backend_);
}

void ModelRunner::require_graph_support(CUDAGraphMode graphs) const {
  if (graphs == CUDAGraphMode::none) return;
  // compilation.mode=compiled is checked with the config (engine/config.cpp).
  TESSERA_REQUIRE(!model_->device().is_cpu() && backend(model_->device()).supports_graphs(),
                  "compilation.cudagraph_mode={} needs a GPU ({} has no graphs); use none",
                  enum_name(graphs), model_->device().str());
}

void ModelRunner::profile_and_capture(CUDAGraphMode graphs, bool size_from_memory) {
  const size_t transient_peak = profile_forward();
  // Full graphs hold the KV cache's addresses, so they are captured after it is allocated; the
  // KV cache leaves them kFullGraphBudget.
  const size_t full_graph_budget = has_full_graphs(graphs) ? kFullGraphBudget : 0;
  // Nothing left for the KV cache is an error before the capture, not after it.
  if (size_from_memory) kv_blocks_from_memory(transient_peak, 0, full_graph_budget, false);
  const size_t piecewise_bytes = has_piecewise_graphs(graphs) ? capture_graphs() : 0;
  if (size_from_memory) {
    int64_t blocks =
        kv_blocks_from_memory(transient_peak, piecewise_bytes, full_graph_budget, true);
    kv_caches_.clear();
    allocate_kv_cache(blocks);
  }
  if (has_full_graphs(graphs)) capture_decode_graphs();
}

void ModelRunner::capture_decode_graphs() {
  std::vector<int64_t> sizes =
      config_.compilation.resolved_capture_sizes(config_.scheduler.max_num_batched_tokens);
  std::erase_if(sizes, [&](int64_t size) { return size > config_.scheduler.max_num_seqs; });
  TESSERA_REQUIRE(!sizes.empty(),
                  "full CUDA graphs: no capture size is <= engine.max_num_seqs ({})",
                  config_.scheduler.max_num_seqs);
  TESSERA_CHECK(
      forward_backend_ != nullptr && logits_backend_ != nullptr,
      "full graphs need the compiled forward and LM head (profile_forward compiles them)");
  // The greedy graphs' LM head: the model dtype's, or the f32 logits' (logits_end_in_gemm).
  PiecewiseBackend* greedy_head = nullptr;
  if (config_.compilation.fuse_greedy_sampling)
    greedy_head = head_compiled_ ? head_backend_.get() : logits_backend_.get();
  const auto start = std::chrono::steady_clock::now();
  decode_graphs_ = std::make_unique<DecodeGraphs>(
      model_->device(), sizes,
      KVCacheManager::blocks_for(model_->max_positions(), config_.cache.block_size),
      model_->max_positions(), config_.compilation.cudagraph_num_warmups, *forward_backend_,
      *logits_backend_, greedy_head, kv_caches_);
  const std::vector<int64_t>& tiers = decode_graphs_->length_tiers();
  spdlog::info(
      "captured {} decode graphs (forward and LM head{}) for batches of [{}] sequences of up to "
      "[{}] tokens in {:.2f} s, {:.3f} GiB",
      sizes.size() * tiers.size() * (greedy_head != nullptr ? 2 : 1),
      greedy_head != nullptr ? "; with f32 logits and with the greedy pick" : "",
      fmt::join(sizes, ", "), fmt::join(tiers, ", "),
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
      decode_graphs_->device_bytes() / kGiB);
  if (decode_graphs_->device_bytes() > kFullGraphBudget)
    spdlog::warn(
        "the decode graphs took {:.3f} GiB, more than the {:.3f} GiB the KV cache's sizing left "
        "them: lower engine.gpu_memory_utilization if the device runs out of memory",
        decode_graphs_->device_bytes() / kGiB, kFullGraphBudget / kGiB);
}

Tensor ModelRunner::compute_logits(const Tensor& hidden) {
  if (logits_compiled_) return (*logits_compiled_)(std::span(&hidden, 1)).at(0);
  return ops::cast(model_->compute_logits(hidden), DType::f32);
}

Tensor ModelRunner::compute_greedy_ids(const Tensor& hidden) {
  return greedy_ids(head_compiled_ ? (*head_compiled_)(std::span(&hidden, 1)).at(0)
                                   : compute_logits(hidden));
}

void ModelRunner::allocate_kv_cache(int64_t blocks) {
  const ModelConfig& config = model_->config();
  Shape cache_shape{blocks, config_.cache.block_size, config.num_kv_heads, config.head_dim};
  const DType dtype = config_.cache.dtype(model_->dtype());
  for (int64_t layer = 0; layer < config.num_layers; ++layer) {
    PagedKVCache cache{Tensor::empty(cache_shape, dtype, model_->device()),
                       Tensor::empty(cache_shape, dtype, model_->device())};
    if (dtype == DType::f8_e4m3) {
      const KVCacheScales scales = model_->kv_cache_scales(layer);
      cache.key_scale = scales.key;
      cache.value_scale = scales.value;
    }
    kv_caches_.push_back(std::move(cache));
  }
  num_kv_blocks_ = blocks;
}

size_t ModelRunner::profile_forward() {
  const int64_t tokens = config_.scheduler.max_num_batched_tokens;
  const Device device = model_->device();
  Allocator& allocator = backend(device).allocator(device.index);
  backend(device).synchronize(device.index);
  const size_t held_before = allocator.stats().current_bytes;
  allocator.reset_peak();
  const auto start = std::chrono::steady_clock::now();
  AttentionMetadata meta;  // no sequences: tokens are cached nowhere (slot -1), attend nothing
  meta.num_tokens = tokens;
  meta.query_start_loc = {0};
  meta.slot_mapping.assign(static_cast<size_t>(tokens), -1);
  if (!device.is_cpu()) {
    meta.device_query_start_loc = int_tensor(meta.query_start_loc, device);
    meta.device_slot_mapping = int_tensor(meta.slot_mapping, device);
  }
  std::vector<int32_t> zeros(static_cast<size_t>(tokens), 0);
  {
    std::vector<Tensor> inputs{int_tensor(zeros, device), int_tensor(zeros, device)};
    ForwardContextScope scope(ForwardContext{&meta, &kv_caches_});
    Tensor hidden = (*compiled_)(inputs).at(0);
    const int64_t rows = std::min(config_.max_logits_rows(), tokens);
    Tensor last_rows = hidden.slice(0, 0, rows).contiguous();
    Tensor logits = compute_logits(last_rows);
    if (head_compiled_) (void)compute_greedy_ids(last_rows);
    backend(device).synchronize(device.index);
  }
  const MemoryStats stats = allocator.stats();
  const size_t peak = stats.peak_bytes > held_before ? stats.peak_bytes - held_before : 0;
  const size_t kept = stats.current_bytes > held_before ? stats.current_bytes - held_before : 0;
  spdlog::info(
      "profile forward at {} tokens in {:.2f} s: peak {:.3f} GiB above what was held, {:.3f} "
      "GiB of it still held after (the compiled arena, library workspaces)",
      tokens, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
      peak / kGiB, kept / kGiB);
  return peak - kept;
}

size_t ModelRunner::capture_graphs() {
  TESSERA_CHECK(forward_backend_ != nullptr, "the compiled forward has no piecewise backend");
  std::vector<int64_t> sizes =
      config_.compilation.resolved_capture_sizes(config_.scheduler.max_num_batched_tokens);
  // A progress bar on a terminal; logs alone otherwise.
  const bool terminal = isatty(fileno(stderr)) != 0;
  auto progress = [terminal](size_t done, size_t total) {
    if (!terminal) return;
    const size_t width = 30, filled = width * done / std::max<size_t>(total, 1);
    fmt::print(stderr, "\rcapturing CUDA graphs [{}{}] {}/{} sizes{}", std::string(filled, '#'),
               std::string(width - filled, ' '), done, total, done == total ? "\n" : "");
  };
  CaptureSummary summary =
      forward_backend_->capture(sizes, config_.compilation.cudagraph_num_warmups, progress);
  spdlog::info("captured {} graphs ({} pieces) for sizes [{}] in {:.2f} s, {:.3f} GiB",
               summary.graphs, forward_backend_->pieces().size(), fmt::join(summary.sizes, ", "),
               summary.seconds, summary.device_bytes / kGiB);
  return summary.device_bytes;
}

int64_t ModelRunner::kv_blocks_from_memory(size_t transient_peak, size_t graph_bytes,
                                           size_t graph_budget, bool final) {
  const Device device = model_->device();
  DeviceBackend& gpu = backend(device);
  gpu.synchronize(device.index);
  Allocator& allocator = gpu.allocator(device.index);
  allocator.empty_cache();  // cached free blocks are free memory for the KV cache
  const auto [total, free] = gpu.memory_info(device.index);
  const double budget = static_cast<double>(total) * config_.cache.gpu_memory_utilization;
  const size_t placeholder = kv_cache_bytes();  // the profile's one-block cache, freed next
  const size_t used = total - free - placeholder;
  const size_t weights = model_->weight_bytes();
  auto plan = latest_plan();
  const size_t arena = plan ? plan->memory.arena_bytes : 0;
  const size_t known = weights + arena + graph_bytes;
  const size_t other = used > known ? used - known : 0;
  const double left = budget - static_cast<double>(used) - static_cast<double>(transient_peak) -
                      static_cast<double>(graph_budget);
  const ModelConfig& config = model_->config();
  const size_t block_bytes =
      2 * static_cast<size_t>(config.num_layers) *
      static_cast<size_t>(config_.cache.block_size * config.num_kv_heads * config.head_dim) *
      element_size(config_.cache.dtype(model_->dtype()));
  // Slots (block * block_size + offset) are i32 in the attention metadata.
  const double fitting = left > 0 ? left / static_cast<double>(block_bytes) : 0.0;
  const int64_t blocks = static_cast<int64_t>(
      std::min(fitting, static_cast<double>(INT32_MAX / config_.cache.block_size)));
  const int64_t tokens = blocks * config_.cache.block_size;
  const int64_t one_sequence = model_->max_positions();
  TESSERA_REQUIRE(
      tokens >= one_sequence,
      "the KV cache would hold {} tokens ({:.2f} GiB left of {:.2f} GiB x "
      "engine.gpu_memory_utilization {} after weights {:.2f} GiB, activations {:.2f} GiB, CUDA "
      "graphs {:.2f} GiB and {:.2f} GiB of other memory), fewer than one sequence of {} tokens: "
      "raise engine.gpu_memory_utilization, or lower engine.max_model_len or "
      "engine.max_num_batched_tokens, or set engine.num_kv_blocks",
      std::max<int64_t>(tokens, 0), std::max(left, 0.0) / kGiB, total / kGiB,
      config_.cache.gpu_memory_utilization, weights / kGiB, (arena + transient_peak) / kGiB,
      (graph_bytes + graph_budget) / kGiB, other / kGiB, one_sequence);
  if (final) {
    spdlog::info(
        "memory on {}: {:.2f} GiB x {} = {:.2f} GiB: weights {:.3f} GiB, activation peak {:.3f} "
        "GiB (arena {:.3f} + transient {:.3f}), CUDA graphs {:.3f} GiB (piecewise, measured) + "
        "{:.3f} GiB (full graphs' budget, captured after), other {:.3f} GiB (context, library "
        "workspaces, other processes)",
        device.str(), total / kGiB, config_.cache.gpu_memory_utilization, budget / kGiB,
        weights / kGiB, (arena + transient_peak) / kGiB, arena / kGiB, transient_peak / kGiB,
        graph_bytes / kGiB, graph_budget / kGiB, other / kGiB);
    spdlog::info(
        "KV cache: {:.2f} GiB of {}, {} blocks, {} tokens, {:.1f}x concurrency at {} tokens",
        static_cast<double>(blocks) * static_cast<double>(block_bytes) / kGiB,
        dtype_name(config_.cache.dtype(model_->dtype())), blocks, tokens,
        static_cast<double>(tokens) / static_cast<double>(one_sequence), one_sequence);
  }
  return blocks;
}

std::vector<int64_t> ModelRunner::captured_sizes() const {
  return forward_backend_ ? forward_backend_->captured_sizes() : std::vector<int64_t>{};
}

size_t ModelRunner::kv_cache_bytes() const {
  size_t total = 0;
  for (const PagedKVCache& cache : kv_caches_) total += cache.key.nbytes() + cache.value.nbytes();
  return total;
}

std::string ModelRunner::memory_report() const {
  auto mib = [](size_t bytes) { return bytes / 1048576.0; };
  Device device = model_->device();
  MemoryStats stats = backend(device).allocator(device.index).stats();
  auto plan = latest_plan();
  return fmt::format(
      "memory on {}: weights {:.1f} MiB, KV cache {:.1f} MiB ({} blocks of {} tokens), compiled "
      "arena {:.1f} MiB; allocator: in use {:.1f} MiB, peak {:.1f} MiB, reserved {:.1f} MiB",
      device.str(), mib(model_->weight_bytes()), mib(kv_cache_bytes()), num_kv_blocks_,
      config_.cache.block_size, plan ? mib(plan->memory.arena_bytes) : 0.0,
      mib(stats.current_bytes), mib(stats.peak_bytes), mib(stats.reserved_bytes));
}

int64_t RunnerConfig::max_logits_rows() const {
  return std::min(scheduler.max_num_seqs * std::max<int64_t>(logits_rows_per_sequence, 1),
                  scheduler.max_num_batched_tokens);
}

AttentionMetadata ModelRunner::build_metadata(std::span<const SequenceInput> batch,
                                              std::vector<int32_t>& token_ids,
                                              std::vector<int32_t>& positions,
                                              std::vector<int32_t>& last_token_rows,
                                              bool host_only) const {
  AttentionMetadata meta;
  meta.num_seqs = static_cast<int64_t>(batch.size());
  meta.query_start_loc.push_back(0);
  for (const SequenceInput& sequence : batch) {
    int64_t count = static_cast<int64_t>(sequence.token_ids.size());
    int64_t seq_len = sequence.start_position + count;
    TESSERA_CHECK(
        static_cast<int64_t>(sequence.block_table.size()) * config_.cache.block_size >= seq_len,
        "block table of {} blocks cannot hold {} tokens", sequence.block_table.size(), seq_len);
    meta.max_query_len = std::max(meta.max_query_len, count);
    meta.max_seq_len = std::max(meta.max_seq_len, seq_len);
    meta.max_blocks_per_seq =
        std::max(meta.max_blocks_per_seq, static_cast<int64_t>(sequence.block_table.size()));
    meta.seq_lens.push_back(static_cast<int32_t>(seq_len));
    for (int64_t i = 0; i < count; ++i) {
      int64_t position = sequence.start_position + i;
      // A draw still on the device: -1 - its row, for take_sampled_ids.
      token_ids.push_back(sequence.sampled_row >= 0 ? -1 - sequence.sampled_row
                                                    : sequence.token_ids[i]);
      positions.push_back(static_cast<int32_t>(position));
      meta.slot_mapping.push_back(static_cast<int32_t>(
          sequence.block_table[position / config_.cache.block_size] * config_.cache.block_size +
          position % config_.cache.block_size));
    }
    meta.query_start_loc.push_back(static_cast<int32_t>(token_ids.size()));
    for (int32_t row = sequence.logits_rows; row >= 1; --row)
      last_token_rows.push_back(static_cast<int32_t>(token_ids.size()) - row);
  }
  meta.num_tokens = static_cast<int64_t>(token_ids.size());
  meta.block_tables.assign(static_cast<size_t>(meta.num_seqs * meta.max_blocks_per_seq), -1);
  for (size_t s = 0; s < batch.size(); ++s)
    std::copy(batch[s].block_table.begin(), batch[s].block_table.end(),
              meta.block_tables.begin() + static_cast<int64_t>(s) * meta.max_blocks_per_seq);
  Device device = model_->device();
  if (!device.is_cpu() && !host_only) {
    meta.device_query_start_loc = int_tensor(meta.query_start_loc, device);
    meta.device_seq_lens = int_tensor(meta.seq_lens, device);
    meta.device_block_tables = int_tensor(meta.block_tables, device);
    meta.device_slot_mapping = int_tensor(meta.slot_mapping, device);
  }
  return meta;
}

void check_batch(std::span<const SequenceInput> batch, const CausalLM& model,
                 const RunnerConfig& config, const Tensor& sampled_ids) {
  TESSERA_REQUIRE(!batch.empty(), "execute: the batch is empty");
  const int64_t max_num_seqs = config.scheduler.max_num_seqs;
  TESSERA_REQUIRE(static_cast<int64_t>(batch.size()) <= max_num_seqs,
                  "a step of {} sequences exceeds engine.max_num_seqs ({})", batch.size(),
                  max_num_seqs);
  const int64_t vocab = model.config().vocab_size;
  for (const SequenceInput& sequence : batch) {
    const auto count = static_cast<int64_t>(sequence.token_ids.size());
    TESSERA_REQUIRE(count > 0, "a sequence in the batch has no new tokens");
    TESSERA_REQUIRE(sequence.logits_rows >= 1 && sequence.logits_rows <= count &&
                        sequence.logits_rows <= config.logits_rows_per_sequence,
                    "a sequence of {} new tokens asks for {} logits rows; between 1 and {} (its "
                    "tokens, and the runner's logits_rows_per_sequence {}) can be given",
                    count, sequence.logits_rows, std::min(count, config.logits_rows_per_sequence),
                    config.logits_rows_per_sequence);
    TESSERA_REQUIRE(
        sequence.start_position >= 0 && sequence.start_position <= model.max_positions() - count,
        "sequence of {} tokens exceeds the maximum model length {}",
        sequence.start_position + count, model.max_positions());
    if (sequence.sampled_row >= 0) {
      TESSERA_REQUIRE(count == 1 && sampled_ids.defined() && sampled_ids.dim() == 1 &&
                          sequence.sampled_row < sampled_ids.size(0) &&
                          sampled_ids.device() == model.device(),
                      "a sequence takes its new token from row {} of the previous step's draws, "
                      "which {}",
                      sequence.sampled_row,
                      count != 1               ? "needs exactly one new token"
                      : !sampled_ids.defined() ? "were not given"
                                               : "do not hold that row on the model's device");
      continue;
    }
    for (int32_t id : sequence.token_ids)
      TESSERA_REQUIRE(id >= 0 && id < vocab, "token id {} is outside the model's vocabulary of {}",
                      id, vocab);
  }
}

Tensor ModelRunner::execute(std::span<const SequenceInput> batch, const Tensor& sampled_ids) {
  return run_step(batch, sampled_ids, false);
}

Tensor ModelRunner::execute_greedy(std::span<const SequenceInput> batch,
                                   const Tensor& sampled_ids) {
  return run_step(batch, sampled_ids, true);
}

Tensor ModelRunner::run_step(std::span<const SequenceInput> batch, const Tensor& sampled_ids,
                             bool greedy) {
  check_batch(batch, *model_, config_, sampled_ids);
  CommunicatorScope communicator(communicator_);
  ProgrammaticLaunchScope programmatic(config_.compilation.programmatic_dependent_launch);
  std::vector<int32_t> token_ids, positions, last_token_rows;
  std::optional<ProfileRegion> region(std::in_place, "metadata");
  // A decode-only batch replays a decode graph, padded up to the nearest captured batch.
  const bool decode_only = std::all_of(
      batch.begin(), batch.end(), [](const SequenceInput& s) { return s.token_ids.size() == 1; });
  const bool use_graph = decode_only && decode_graphs_ &&
                         decode_graphs_->size_for(static_cast<int64_t>(batch.size())) > 0;
  AttentionMetadata meta = build_metadata(batch, token_ids, positions, last_token_rows, use_graph);
  if (use_graph) {
    region.emplace("forward");
    if (greedy && !decode_graphs_->has_greedy())
      return greedy_ids(decode_graphs_->run(meta, token_ids, positions, sampled_ids, false));
    return decode_graphs_->run(meta, token_ids, positions, sampled_ids, greedy);
  }
  // Otherwise the batch runs padded up to the nearest piecewise-captured size, if any: the
  // padding rows are token 0 at position 0, outside the metadata's tokens, so attention neither
  // caches nor attends them.
  const Device device = model_->device();
  const std::vector<int64_t> sizes = captured_sizes();
  auto padded = std::lower_bound(sizes.begin(), sizes.end(), meta.num_tokens);
  if (padded != sizes.end()) {
    token_ids.resize(static_cast<size_t>(*padded), 0);
    positions.resize(static_cast<size_t>(*padded), 0);
  }
  std::vector<Tensor> inputs{int_tensor(token_ids, device), int_tensor(positions, device)};
  if (std::any_of(token_ids.begin(), token_ids.end(), [](int32_t id) { return id < 0; }))
    take_sampled_ids(inputs[0], sampled_ids, inputs[0]);
  ForwardContextScope scope(ForwardContext{&meta, &kv_caches_});
  region.emplace("forward");
  Tensor hidden = (*compiled_)(inputs).at(0);
  region.emplace("logits");
  const Tensor last_rows = ops::embedding(hidden, int_tensor(last_token_rows, device));
  return greedy ? compute_greedy_ids(last_rows) : compute_logits(last_rows);
}

std::vector<std::vector<float>> logits_to_host(const Tensor& logits) {
  TESSERA_CHECK(logits.dim() == 2 && logits.dtype() == DType::f32,
                "logits must be f32 [rows, vocab]");
  Tensor host = logits.to(kCPU).contiguous();
  const int64_t rows = host.size(0), vocab = host.size(1);
  std::vector<std::vector<float>> result;
  const float* data = host.data<float>();
  for (int64_t row = 0; row < rows; ++row)
    result.emplace_back(data + row * vocab, data + (row + 1) * vocab);
  return result;
}

}  // namespace tessera
