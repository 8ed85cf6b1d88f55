// The compilation config (the `compilation:` section of a run's YAML), with vLLM's names.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

struct PassConfig {
  bool enable_fusion = true;            // fuse pointwise chains and row reductions into kernels
  bool enable_noop_elimination = true;  // drop reshapes/casts/slices that change nothing
  bool enable_cse = true;               // merge identical computations
  // Put a gated activation into the prologue of the linear that reads it (one op,
  // <activation>_and_mul_linear; compile/passes/linear_prologue.cpp). Off by default: on the H100
  // its kernels do not yet beat the generated activation kernel plus the GEMM
  // (docs/perf/decode_log.md).
  bool enable_linear_prologue_fusion = false;
  // On CUDA devices, each skinny GEMM starts pulling the next GEMM's weight into the L2 cache as
  // it ends, so it streams in while the small kernels between them run
  // (compile/passes/weight_prefetch.cpp).
  bool enable_weight_prefetch = true;
  // Fold rotary_embedding into the attention that reads it (one splitting op, rotary_attention,
  // over the qkv projection's rows; compile/passes/rotary_attention.cpp): a GPU decode step on
  // tensor cores (bf16/f16, head 64 or 128) rotates the query and key inside its attention
  // kernel instead of in a launch of its own. While on, rotary_embedding is traced as itself
  // (custom_ops_for_passes), unless custom_ops lists "-rotary_embedding".
  bool enable_rotary_attention_fusion = true;
};

struct CompilationConfig {
  std::string mode = "compiled";  // eager | traced | compiled
  // Entries "all", "none", "+name", "-name"; empty: all in eager mode, none when compiled.
  std::vector<std::string> custom_ops;
  std::vector<std::string> splitting_ops = {"attention"};
  // none | piecewise | full | full_and_piecewise (graphs need a GPU and compiled mode); empty:
  // full_and_piecewise on a GPU in compiled mode, none otherwise (resolved_cudagraph_mode).
  std::string cudagraph_mode;
  std::vector<int64_t> cudagraph_capture_sizes;  // empty: vLLM's default list
  int64_t max_cudagraph_capture_size = 512;
  int64_t cudagraph_num_warmups = 1;
  // Launch the model's kernels with programmatic dependent launch on GPUs of compute capability
  // 9.0+ (runtime/backend/programmatic_launch.h): each kernel's launch overlaps the previous
  // kernel's tail, in graphs too. false: plain stream order.
  bool programmatic_dependent_launch = true;
  // A step whose every row is plain greedy (no penalties, no logprobs) takes its argmax in the
  // compiled LM head, over the model dtype's logits, and a full decode graph holds that pick and
  // the next step's hand-over of the draws (engine/decode_graphs.h): no f32 logits, no launches
  // outside the graph. false: the LM head gives f32 logits and the sampler picks from them.
  bool fuse_greedy_sampling = true;
  PassConfig pass_config;
  std::string cache_dir;  // empty: $XDG_CACHE_HOME/tessera or ~/.cache/tessera
  std::string dump_dir;   // empty: no dumps
  int64_t recompile_limit = 8;

  // cudagraph_mode, with the empty default resolved for a run on `gpu` (or the CPU) in
  // `run_mode` (eager | traced | compiled).
  std::string resolved_cudagraph_mode(bool gpu, const std::string& run_mode) const;
  // True when custom ops default to enabled (eager and traced modes).
  bool custom_ops_default_enabled() const { return mode != "compiled"; }
  // vLLM's default capture sizes (1, 2, 4, then every 8 to 248, then every 16) up to `limit`.
  std::vector<int64_t> resolved_capture_sizes(int64_t max_num_batched_tokens) const;
};

}  // namespace tessera
