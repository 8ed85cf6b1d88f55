// The batch-size sweep: for every compilation mode, CUDA graph mode and batch size, the time of a
// decode step (forward plus the greedy pick, the ids on the host), prefill throughput at a prompt
// length, time to first token, and for batch 1 the weight-read bandwidth against a copy bandwidth
// measured in the same run; plus startup (load, compile cold and warm, capture) and memory per
// mode; with profile, the launches and per-kernel times of a decode step after each row.
// `tessera bench sweep` (engine/cli/bench.cpp) prints and writes what this measures
// (sweep_report.h).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/bench/machine_info.h"
#include "engine/config.h"
#include "kernels/linear_path.h"

namespace tessera::bench {

// Empty lists and 0 lengths mean "the default for the device" (resolve_sweep_options).
struct SweepOptions {
  // engine.model, device, dtype, max_num_batched_tokens, max_num_seqs, block_size and the
  // compilation settings other than mode and cudagraph_mode, which the sweep sets per run.
  RunConfig config;
  std::vector<int64_t> batch_sizes;          // GPU: 1, 2, 4, ..., 256; CPU: 1, 2, 4, 8, 16
  std::vector<std::string> modes;            // eager | traced | compiled (eager, compiled)
  std::vector<std::string> cudagraph_modes;  // none | piecewise | full | full_and_piecewise
  int64_t context = 0;     // tokens each sequence holds before the timed decode steps (128)
  int64_t steps = 0;       // timed decode steps per batch size (GPU 64, CPU 32)
  int64_t warmup = -1;     // untimed decode steps before them (3)
  int64_t prompt_len = 0;  // prompt length for prefill throughput and TTFT (GPU 512, CPU 128)
  // The model length the runners are built for (0: what the sweep's sequences need). A served
  // model's length (131072 for Llama 3.2) times decode graphs as `tessera serve` captures them.
  int64_t max_model_len = 0;
  // After each row's timed steps, one decode step under a counting profiler and one under a
  // timing profiler (runtime/profiler/profiler.h): SweepRow::profile.
  bool profile = false;
  // The GPU linear path for the whole sweep (kernels/linear_path.h): measured, library or a
  // skinny variant. The CPU has one linear path: measured only.
  std::string linear_path = kLinearPathMeasured;
};

// One runner: a compilation mode with one CUDA graph mode (graph modes apply to compiled mode).
struct ModeResult {
  std::string label;  // "eager", "compiled", "compiled+piecewise", ...
  std::string mode;
  std::string cudagraph_mode;
  // Startup, seconds. Compile: the first step at max_num_batched_tokens tokens less the same
  // step run again, with an empty kernel cache (cold) and with the cache it filled (warm); eager
  // mode compiles nothing. Capture: the runner's construction with graphs (a profile forward, warm,
  // then the capture) less the construction without graphs and the warm first step.
  std::optional<double> compile_cold_seconds, compile_warm_seconds, capture_seconds;
  double runner_seconds = 0;  // constructing the runner (KV cache, profile, capture)
  // Memory, bytes: KV cache, the compiled arena, and the graphs (device memory the runner's
  // construction took beyond what the allocator reserved; 0 without graphs).
  size_t kv_cache_bytes = 0;
  size_t arena_bytes = 0;
  size_t graph_bytes = 0;
  double ttft_ms = 0;  // one prompt of prompt_len tokens, to its first sampled id on the host
  std::string notes;
};

struct SweepRow {
  std::string label, mode, cudagraph_mode;
  int64_t batch_size = 0;
  double step_ms_median = 0, step_ms_p90 = 0, step_ms_min = 0;
  double tokens_per_second = 0;                // batch_size / median step
  double prefill_tokens_per_second = 0;        // batch_size prompts of prompt_len, chunked
  std::optional<double> weight_gb_per_second;  // batch 1: weight bytes a step reads / median
  // With SweepOptions::profile: the launch counts of one step (format_launch_counts) and the
  // tables of one more with every launch timed (format_profile); printed, not in the JSON or CSV.
  std::string profile;
};

struct SweepReport {
  MachineInfo machine;
  DeviceInfo device;
  std::string commit;
  std::string created;  // UTC, ISO 8601
  SweepOptions options;
  std::string dtype;
  std::string model_description;  // the model's config in one line
  int64_t model_length = 0;       // the longest sequence the runners were built for
  double copy_gb_per_second = 0;  // device-to-device copy, bytes read + written
  double weight_bytes = 0;        // all weights
  double weight_bytes_per_step = 0;
  double load_seconds = 0;
  std::vector<std::string> notes;  // about the whole run (e.g. the CPU has no CUDA graphs)
  std::vector<ModeResult> modes;
  std::vector<SweepRow> rows;
  bool complete = false;
};

// Called after each measured row and when the sweep is complete: (report so far, rows done,
// rows in all).
using SweepProgress = std::function<void(const SweepReport&, size_t, size_t)>;

// Fills in the defaults of the device it runs on (without device_given: the first GPU, else the
// CPU; without model_given: synthetic:llama-1b on a GPU, synthetic:tiny on the CPU) and checks
// every option, throwing tessera::Error naming the flag or key and the fix.
SweepOptions resolve_sweep_options(SweepOptions options, bool device_given, bool model_given);
SweepReport run_sweep(const SweepOptions& options, const SweepProgress& progress = {});

}  // namespace tessera::bench
