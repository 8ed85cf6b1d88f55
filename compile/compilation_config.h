// The compilation config (the `compilation:` section of a run's YAML), with vLLM's names.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compile/config_enum.h"

namespace tessera {

class CustomOpConfig;  // compile/custom_op_config.h

// How the model's forward runs (torch.compile's backends): as called, traced and run node by
// node, or through the whole compiler.
enum class CompilationMode { eager, traced, compiled };
template <>
struct EnumNames<CompilationMode> {
  static constexpr std::array values{
      std::pair{CompilationMode::eager, std::string_view("eager")},
      std::pair{CompilationMode::traced, std::string_view("traced")},
      std::pair{CompilationMode::compiled, std::string_view("compiled")}};
};

// Which device graphs a compiled forward is captured into (vLLM's CUDAGraphMode).
enum class CUDAGraphMode { none, piecewise, full, full_and_piecewise };
template <>
struct EnumNames<CUDAGraphMode> {
  static constexpr std::array values{
      std::pair{CUDAGraphMode::none, std::string_view("none")},
      std::pair{CUDAGraphMode::piecewise, std::string_view("piecewise")},
      std::pair{CUDAGraphMode::full, std::string_view("full")},
      std::pair{CUDAGraphMode::full_and_piecewise, std::string_view("full_and_piecewise")}};
};
// Each compiled piece captured per size (attention runs between the replays).
inline bool has_piecewise_graphs(CUDAGraphMode mode) {
  return mode == CUDAGraphMode::piecewise || mode == CUDAGraphMode::full_and_piecewise;
}
// A decode step (forward and LM head) captured whole per decode batch size.
inline bool has_full_graphs(CUDAGraphMode mode) {
  return mode == CUDAGraphMode::full || mode == CUDAGraphMode::full_and_piecewise;
}

struct PassConfig {
  bool enable_fusion = true;            // fuse pointwise chains and row reductions into kernels
  bool enable_noop_elimination = true;  // drop reshapes/casts/slices that change nothing
  bool enable_cse = true;               // merge identical computations
  // Put a gated activation into the prologue of the linear that reads it (one op,
  // <activation>_and_mul_linear; compile/passes/linear_prologue.cpp). Off by default: its kernels
  // do not yet beat the generated activation kernel plus the GEMM (docs/performance.md
  // "Linear-prologue fusion").
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
  CompilationMode mode = CompilationMode::compiled;
  // Entries "all", "none", "+name", "-name"; empty: all in eager mode, none when compiled.
  std::vector<std::string> custom_ops;
  std::vector<std::string> splitting_ops = {"attention"};
  // Graphs need a GPU and compiled mode; unset: full_and_piecewise on a GPU in compiled mode, none
  // otherwise (resolved_cudagraph_mode).
  std::optional<CUDAGraphMode> cudagraph_mode;
  std::vector<int64_t> cudagraph_capture_sizes;  // empty: vLLM's default list
  int64_t max_cudagraph_capture_size = 512;
  int64_t cudagraph_num_warmups = 1;
  // Launch the model's kernels with programmatic dependent launch on GPUs of compute capability
  // 9.0+ (runtime/backend/programmatic_launch.h): each kernel's launch overlaps the previous
  // kernel's tail, in graphs too. false: plain stream order.
  bool programmatic_dependent_launch = true;
  // A step whose every row is plain greedy (no penalties, no logprobs) takes its argmax in the
  // compiled LM head, over the model dtype's logits, and a full decode graph holds that pick and
  // the next step's hand-over of the draws (engine/runner/decode_graphs.h): no f32 logits, no
  // launches outside the graph. false: the LM head gives f32 logits and the sampler picks from
  // them.
  bool fuse_greedy_sampling = true;
  PassConfig pass_config;
  std::string cache_dir;  // empty: $XDG_CACHE_HOME/tessera or ~/.cache/tessera
  std::string dump_dir;   // empty: no dumps
  int64_t recompile_limit = 8;

  // cudagraph_mode, with the unset default resolved for a run on `gpu` (or the CPU) in `mode`.
  CUDAGraphMode resolved_cudagraph_mode(bool gpu) const;
  // True when custom ops default to enabled (eager and traced modes).
  bool custom_ops_default_enabled() const { return mode != CompilationMode::compiled; }
  // custom_ops parsed, empty meaning the mode's default; throws naming a bad entry.
  CustomOpConfig custom_op_config() const;
  // vLLM's default capture sizes (1, 2, 4, then every 8 to 248, then every 16) up to `limit`.
  std::vector<int64_t> resolved_capture_sizes(int64_t max_num_batched_tokens) const;
};

}  // namespace tessera
