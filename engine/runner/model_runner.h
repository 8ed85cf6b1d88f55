// Runs the model one step at a time over a batch of sequences: lays their new tokens out back to
// back, builds the attention metadata (positions, slot mapping, block tables), runs the forward
// in the configured mode and returns the logits of each sequence's last token, on the device (the
// sampler copies what it needs). It owns the KV cache memory, sized from the block count it is
// given; which blocks a sequence holds is the KVCacheManager's business
// (engine/kv_cache_manager.h).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "compile/compiled_function.h"
#include "compile/compiler.h"
#include "engine/engine_config.h"
#include "engine/runner/decode_graphs.h"
#include "engine/runner/model_executor.h"
#include "kernels/attention_metadata.h"
#include "models/model.h"
#include "runtime/communicator.h"

namespace tessera {

// The parts of a run's EngineConfig a runner reads (make_runner_config builds it from the tree).
struct RunnerConfig {
  // Mode, custom ops, passes, graphs, cache and dump settings.
  CompilationConfig compilation;
  // The largest step: compiled plans are sized for max_num_batched_tokens tokens, the logits
  // profiled for max_num_seqs rows.
  SchedulerConfig scheduler;
  // num_kv_blocks 0 on a GPU: sized from gpu_memory_utilization after a profile forward at
  // max_num_batched_tokens (make_runner_config fills it on the CPU).
  CacheConfig cache;
  // The most logits rows one sequence asks for in a step (SequenceInput::logits_rows): 1, or
  // 1 + num_speculative_tokens when proposals are verified. The LM head is compiled and profiled
  // for max_num_seqs times this many rows (at most max_num_batched_tokens).
  int64_t logits_rows_per_sequence = 1;
  int64_t max_logits_rows() const;
};

struct SequenceInput {
  std::span<const int32_t> token_ids;  // the tokens to process this step
  int64_t start_position = 0;          // tokens of this sequence already in the KV cache
  std::span<const int32_t> block_table;
  // >= 0: the one new token is row `sampled_row` of the previous step's draws, still on the
  // device (execute's sampled_ids); token_ids then holds one placeholder, which is not read.
  int32_t sampled_row = -1;
  // How many of its last tokens get a logits row (1 <= logits_rows <= its tokens, at most
  // RunnerConfig::logits_rows_per_sequence): more than one to verify proposed tokens.
  int32_t logits_rows = 1;
};

class ModelRunner final : public ModelExecutor {
 public:
  // `communicator`: a tensor-parallel rank's (the runner installs it around its forwards);
  // nullptr on one device.
  ModelRunner(std::shared_ptr<const CausalLM> model, RunnerConfig config,
              Communicator* communicator = nullptr);
  // The compiler's callbacks hold the address of the members they fill.
  ModelRunner(const ModelRunner&) = delete;
  ModelRunner& operator=(const ModelRunner&) = delete;

  // Logits [rows, vocab] as f32 on the model's device, a sequence's logits_rows rows (of its last
  // new tokens, in order) after the rows of the sequences before it, valid until the next call.
  // Nothing is copied to the host: the sampler asks for ids or rows. A step of more than
  // max_num_seqs sequences is an error.
  using ModelExecutor::execute;
  Tensor execute(std::span<const SequenceInput> batch, const Tensor& sampled_ids) override;
  // In compiled mode with compilation.fuse_greedy_sampling, the argmax reads the compiled LM
  // head's logits in the model's dtype (the f32 cast is exact, so the pick is the same), and a
  // decode batch replays its greedy decode graph.
  Tensor execute_greedy(std::span<const SequenceInput> batch, const Tensor& sampled_ids) override;

  const CausalLM& model() const override { return *model_; }
  const RunnerConfig& config() const override { return config_; }
  // Blocks in the KV cache (config().cache.num_kv_blocks, or what free memory allowed).
  int64_t num_kv_blocks() const override { return num_kv_blocks_; }
  size_t kv_cache_bytes() const override;
  // Weights, KV cache, the compiled arena, and what the device allocator holds (peak, reserved).
  std::string memory_report() const override;
  // The forward as a compiled function (backend "eager" in eager mode): its entries, compiles.
  const CompiledFunction* compiled() const override { return compiled_.get(); }
  // The plan of the latest compilation in `compiled` mode (nullptr before the first step).
  std::shared_ptr<const CompiledPlan> latest_plan() const override { return latest_plan_; }
  // The token counts captured into CUDA graphs (compilation.cudagraph_mode=piecewise), ascending.
  std::vector<int64_t> captured_sizes() const override;
  // The full decode graphs (compilation.cudagraph_mode full or full_and_piecewise; nullptr
  // otherwise).
  const DecodeGraphs* decode_graphs() const { return decode_graphs_.get(); }

 private:
  // The construction's steps, in order. The forward as a CompiledFunction in the configured mode
  // (traced and compiled on its first call, not here).
  void build_forward();
  // Compiled mode: the LM heads as compiled functions (compiled on their first call too).
  void build_lm_heads();
  // Throws, naming the setting, unless the model's device can capture `graphs`.
  void require_graph_support(CUDAGraphMode graphs) const;
  // When the KV cache is sized from memory or graphs are captured: profiles a forward, captures
  // piecewise graphs, sizes and allocates the KV cache, then captures full graphs.
  void profile_and_capture(CUDAGraphMode graphs, bool size_from_memory);

  void allocate_kv_cache(int64_t blocks);
  // One forward at max_num_batched_tokens plus the logits of max_num_seqs rows, caching and
  // attending nothing: compiles the plan; returns the device memory the step needed beyond
  // what it holds afterwards (its transient peak).
  size_t profile_forward();
  // cudagraph_mode=piecewise: every compiled piece captured at each capture size; returns the
  // device memory the graphs took.
  size_t capture_graphs();
  // cudagraph_mode=full: a decode step (forward, LM head) captured per decode batch size, for
  // the capture sizes up to max_num_seqs (engine/runner/decode_graphs.h).
  void capture_decode_graphs();
  // The f32 logits of `hidden`'s rows: the compiled LM head in compiled mode, else eager.
  Tensor compute_logits(const Tensor& hidden);
  // The argmax of each row's logits (i64), over the model dtype's logits when there is a head
  // for them, else over compute_logits'.
  Tensor compute_greedy_ids(const Tensor& hidden);
  // execute (greedy false) or execute_greedy (true).
  Tensor run_step(std::span<const SequenceInput> batch, const Tensor& sampled_ids, bool greedy);
  // The blocks that fit in total * gpu_memory_utilization beside everything held now and the
  // profiled transient peak; logs every term, fails naming the settings when below one sequence.
  // graph_bytes: graphs held now (counted in used memory); graph_budget: left for graphs to come.
  int64_t kv_blocks_from_memory(size_t transient_peak, size_t graph_bytes, size_t graph_budget,
                                bool final);
  // The step's host metadata; its device copies too unless `host_only` (a decode graph stages
  // its own).
  AttentionMetadata build_metadata(std::span<const SequenceInput> batch,
                                   std::vector<int32_t>& token_ids, std::vector<int32_t>& positions,
                                   std::vector<int32_t>& last_token_rows, bool host_only) const;

  std::shared_ptr<const CausalLM> model_;
  RunnerConfig config_;
  CustomOpConfig custom_ops_;  // compilation.custom_ops parsed
  Communicator* communicator_ = nullptr;
  std::vector<PagedKVCache> kv_caches_;
  int64_t num_kv_blocks_ = 0;
  std::unique_ptr<CompiledFunction> compiled_;
  // Compiled mode: the latest plan of the forward and the backend that runs it, as the compiler
  // hands them back (the callbacks write here).
  std::shared_ptr<const CompiledPlan> latest_plan_;
  std::shared_ptr<PiecewiseBackend> forward_backend_;
  // Compiled mode: the LM head and the cast to f32 as a compiled function of the hidden rows
  // (up to max_num_seqs of them), and the backend that runs it.
  std::unique_ptr<CompiledFunction> logits_compiled_;
  std::shared_ptr<PiecewiseBackend> logits_backend_;
  // Compiled mode with compilation.fuse_greedy_sampling: the LM head in the model's dtype (no f32
  // cast), whose rows' argmax is the greedy pick, and its backend; nullptr otherwise.
  std::unique_ptr<CompiledFunction> head_compiled_;
  std::shared_ptr<PiecewiseBackend> head_backend_;
  std::unique_ptr<DecodeGraphs> decode_graphs_;  // cudagraph_mode full
};

// Throws, naming what is wrong, unless `batch` holds 1..max_num_seqs sequences and each has new
// tokens inside the model's vocabulary, fits its maximum length and asks for 1 to
// min(its tokens, logits_rows_per_sequence) logits rows, and every sampled_row names a row of
// `sampled_ids` for a sequence of one new token (ModelRunner::execute checks this first).
void check_batch(std::span<const SequenceInput> batch, const CausalLM& model,
                 const RunnerConfig& config, const Tensor& sampled_ids);

// The rows of host-readable logits as vectors: for tests and dumps, not for the decode loop.
std::vector<std::vector<float>> logits_to_host(const Tensor& logits);

}  // namespace tessera
