#include "engine/bench/sweep.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/bench/statistics.h"
#include "engine/bench/workload.h"
#include "engine/kv_cache_manager.h"
#include "engine/runner/model_runner.h"
#include "engine/runner/run_setup.h"
#include "kernels/linear_path.h"
#include "models/mixture_of_experts.h"
#include "models/model.h"
#include "models/tensor_parallel.h"
#include "runtime/backend/backend.h"
#include "runtime/check.h"
#include "runtime/profiler/profile_report.h"
#include "runtime/profiler/profiler.h"

namespace tessera::bench {
namespace {

// The decode steps before the timed ones: --warmup, and at least one with asynchronous scheduling
// (the first step has no step before it to collect, so it would time only its launch).
int64_t untimed_decode_steps(const SweepOptions& options) {
  return std::max<int64_t>(options.warmup, options.config.scheduler.async_scheduling ? 1 : 0);
}

// The tokens a decode measurement's sequence holds: its context, then untimed and timed steps,
// and with profile one counted and one profiled step.
int64_t decode_sequence_length(const SweepOptions& options) {
  return options.context + untimed_decode_steps(options) + options.steps +
         (options.profile ? 2 : 0);
}

// The longest sequence any measurement holds: a decode sequence or a prefill prompt.
int64_t longest_sequence(const SweepOptions& options) {
  return std::max(decode_sequence_length(options), options.prompt_len);
}

constexpr double kGB = 1e9;
constexpr int kTtftRuns = 5;
// Timed prefills fill at least this many steps' worth of tokens (at least one run), so that small
// batches are timed over several runs and large ones once.
constexpr int64_t kPrefillSteps = 3;
// Lengths well inside int32 positions, so that their sums cannot overflow.
constexpr int64_t kMaxLength = int64_t{1} << 24;

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

template <typename T>
bool contains(const std::vector<T>& values, const T& value) {
  return std::find(values.begin(), values.end(), value) != values.end();
}

// Device-to-device copy bandwidth in GB/s, counting bytes read plus bytes written: the median of
// a few event-timed Tensor::copy_from calls after one warm-up copy. 1 GiB on a GPU (far beyond
// any L2); 256 MiB on the CPU, which is still far beyond its caches.
double measure_copy_gb_per_second(Device device) {
  const int64_t bytes = device.is_cpu() ? int64_t{256} << 20 : int64_t{1} << 30;
  DeviceBackend& device_backend = backend(device);
  std::vector<double> seconds;
  {
    Tensor source = Tensor::empty({bytes / 2}, DType::bf16, device);
    Tensor destination = Tensor::empty({bytes / 2}, DType::bf16, device);
    Stream& stream = device_backend.current_stream(device.index);
    auto start = device_backend.create_event(device.index);
    auto end = device_backend.create_event(device.index);
    destination.copy_from(source);  // first-touch page faults, lazy context setup
    stream.synchronize();
    for (int sample = 0; sample < 5; ++sample) {
      start->record(stream);
      destination.copy_from(source);
      end->record(stream);
      end->synchronize();
      seconds.push_back(std::max<double>(start->elapsed_ms(*end), 1e-6) * 1e-3);
    }
  }
  device_backend.allocator(device.index).empty_cache();  // the copy buffers
  return 2.0 * static_cast<double>(bytes) / percentile(seconds, 50) / kGB;
}

// What a decode step of one token reads: CausalLM::weight_bytes() less the embedding table when
// the LM head is separate (a step only gathers a row per token from it; tied, the table is the LM
// head and is read whole) and less the experts the token does not choose (a rank its share of
// them: of its own experts under expert parallelism, each expert's shard under tensor
// parallelism; the rank's config says which), as the model holds them (quantized or not). Under
// tensor parallelism, of one rank.
double weight_bytes_read_per_step(const CausalLM& model) {
  const ModelConfig& config = model.config();
  double bytes = static_cast<double>(model.weight_bytes() - model.gathered_table_bytes());
  if (config.num_experts > 0)
    bytes -= static_cast<double>(model.expert_weight_bytes()) * unchosen_experts_per_layer(config) /
             static_cast<double>(config.local_experts());
  return bytes;
}

// A kernel cache directory of its own, empty at first (cold compiles), removed at the end.
class FreshDirectory {
 public:
  explicit FreshDirectory(const std::string& name)
      : path_(std::filesystem::temp_directory_path() /
              fmt::format("tessera-sweep-{}-{}", getpid(), name)) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~FreshDirectory() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  FreshDirectory(const FreshDirectory&) = delete;
  FreshDirectory& operator=(const FreshDirectory&) = delete;
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

int64_t ceil_divide(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// One decode step of every sequence under a counting profiler, then one under a timing profiler:
// the launch counts and the profile's tables.
std::string profile_decode(Workload& workload, Device device, double copy_gb_per_second) {
  KernelProfiler counter(device, /*timing=*/false);
  {
    ProfilerScope active(counter);
    counter.start();
    workload.advance();
    counter.stop();
  }
  KernelProfiler timer(device, /*timing=*/true);
  {
    ProfilerScope active(timer);
    timer.start();
    workload.advance();
    timer.stop();
  }
  return fmt::format("launches per step: {}\n{}", format_launch_counts(counter),
                     format_profile(timer, ProfileCeilings{copy_gb_per_second, 0}, 25));
}

struct DecodeMeasurement {
  std::vector<double> step_ms;
  std::string profile;  // SweepOptions::profile only
};

class Sweep {
 public:
  Sweep(const SweepOptions& options, const SweepProgress& progress)
      : options_(options), progress_(progress) {}

  SweepReport run();

 private:
  int64_t budget() const { return options_.config.scheduler.max_num_batched_tokens; }
  int64_t decode_length() const { return decode_sequence_length(options_); }
  // The model length the runners are built for (the model is loaded for it).
  int64_t max_length() const {
    return std::max(longest_sequence(options_), options_.max_model_len);
  }
  // One step of exactly max_num_batched_tokens tokens: prompts of up to the model's length.
  int64_t full_step_length() const { return std::min(budget(), model_->max_positions()); }
  // The KV blocks the largest measurement holds at once.
  int64_t kv_blocks_needed() const;
  RunnerConfig runner_config(const std::string& mode, const std::string& graphs,
                             const std::string& cache_dir) const;
  // (first, second) wall seconds of the full step, each on fresh sequences.
  std::pair<double, double> time_full_step(ModelExecutor& runner) const;
  void measure_mode(const std::string& mode);
  // Builds the runner for one graph mode, measuring its construction and the memory it took.
  std::unique_ptr<ModelExecutor> build_runner(ModeResult& result, const std::string& cache_dir);
  void measure_rows(ModeResult result, ModelExecutor& runner);
  double time_to_first_token_ms(ModelExecutor& runner) const;
  double prefill_tokens_per_second(ModelExecutor& runner, int64_t batch) const;
  DecodeMeasurement measure_decode(ModelExecutor& runner, int64_t batch) const;
  void report_progress() {
    if (progress_) progress_(report_, report_.rows.size(), total_rows_);
  }

  const SweepOptions& options_;
  const SweepProgress& progress_;
  SweepReport report_;
  Device device_;
  std::vector<std::shared_ptr<const CausalLM>> models_;  // one per tensor-parallel rank
  std::shared_ptr<const CausalLM> model_;                // rank 0's
  int64_t largest_batch_ = 0;
  int64_t max_sequences_ = 0;
  size_t total_rows_ = 0;
};

int64_t Sweep::kv_blocks_needed() const {
  const int64_t block = options_.config.cache.block_size;
  const int64_t decode = largest_batch_ * KVCacheManager::blocks_for(decode_length(), block);
  const int64_t prefill = largest_batch_ * KVCacheManager::blocks_for(options_.prompt_len, block);
  const int64_t full_step = ceil_divide(budget(), full_step_length()) *
                            KVCacheManager::blocks_for(full_step_length(), block);
  return std::max({decode, prefill, full_step});
}

RunnerConfig Sweep::runner_config(const std::string& mode, const std::string& graphs,
                                  const std::string& cache_dir) const {
  EngineConfig run = options_.config;
  run.compilation.mode = parse_enum<CompilationMode>(mode, "--modes");
  run.compilation.cudagraph_mode = parse_enum<CUDAGraphMode>(graphs, "--cudagraph-modes");
  run.compilation.cache_dir = cache_dir;
  run.cache.num_kv_blocks = kv_blocks_needed();
  // Every timed batch is a decode batch the engine accepts (and full graphs cover).
  run.scheduler.max_num_seqs = max_sequences_;
  return make_runner_config(run, *model_);
}

std::pair<double, double> Sweep::time_full_step(ModelExecutor& runner) const {
  auto once = [&](uint64_t seed) {
    Workload workload(runner, budget(), max_sequences_);
    for (int64_t left = budget(); left > 0; left -= full_step_length())
      workload.add_prompt(std::min(left, full_step_length()), seed);
    const auto start = Clock::now();
    workload.advance();
    return seconds_since(start);
  };
  const double first = once(1000);
  return {first, once(2000)};
}

double Sweep::time_to_first_token_ms(ModelExecutor& runner) const {
  std::vector<double> milliseconds;
  for (int run = 0; run <= kTtftRuns; ++run) {  // run 0 warms up
    Workload workload(runner, budget(), max_sequences_);
    workload.add_prompt(options_.prompt_len, 3000 + static_cast<uint64_t>(run));
    const auto start = Clock::now();
    workload.advance();
    if (run > 0) milliseconds.push_back(seconds_since(start) * 1e3);
  }
  return percentile(milliseconds, 50);
}

double Sweep::prefill_tokens_per_second(ModelExecutor& runner, int64_t batch) const {
  const int64_t prompt = options_.prompt_len;
  {  // warm-up: one step's worth of prompts
    Workload workload(runner, budget(), max_sequences_);
    const int64_t prompts = std::min(batch, std::max<int64_t>(1, budget() / prompt));
    for (int64_t p = 0; p < prompts; ++p) workload.add_prompt(prompt, 5000);
    workload.advance();
  }
  const int64_t tokens = batch * prompt;
  const int64_t runs = std::max<int64_t>(1, ceil_divide(kPrefillSteps * budget(), tokens));
  double seconds = 0;
  for (int64_t run = 0; run < runs; ++run) {
    Workload workload(runner, budget(), max_sequences_);
    for (int64_t p = 0; p < batch; ++p)
      workload.add_prompt(prompt, 6000 + static_cast<uint64_t>(run * batch));
    const auto start = Clock::now();
    workload.advance();
    seconds += seconds_since(start);
  }
  return static_cast<double>(runs * tokens) / std::max(seconds, 1e-9);
}

DecodeMeasurement Sweep::measure_decode(ModelExecutor& runner, int64_t batch) const {
  Workload workload(runner, budget(), max_sequences_, options_.config.scheduler.async_scheduling);
  for (int64_t s = 0; s < batch; ++s) workload.add_prompt(options_.context, 7000);
  workload.advance();  // the prefill; each sequence then holds its first sampled token
  for (int64_t step = 0; step < untimed_decode_steps(options_); ++step) workload.decode_step();
  DecodeMeasurement measurement;
  // A step is the time between two steps' returns on the host: forward, greedy pick on the
  // device, ids to the host (with asynchronous scheduling the ids of the step before, so the
  // rate at which a serving loop gets tokens).
  auto last = Clock::now();
  for (int64_t step = 0; step < options_.steps; ++step) {
    workload.decode_step();
    const auto now = Clock::now();
    measurement.step_ms.push_back(std::chrono::duration<double, std::milli>(now - last).count());
    last = now;
  }
  workload.drain();
  if (options_.profile)
    measurement.profile = profile_decode(workload, device_, report_.copy_gb_per_second);
  return measurement;
}

std::unique_ptr<ModelExecutor> Sweep::build_runner(ModeResult& result,
                                                   const std::string& cache_dir) {
  DeviceBackend& device_backend = backend(device_);
  Allocator& allocator = device_backend.allocator(device_.index);
  auto device_used = [&] {
    device_backend.synchronize(device_.index);
    const auto [total, free] = device_backend.memory_info(device_.index);
    return total - free;
  };
  allocator.empty_cache();
  const size_t used_before = device_used();
  const size_t reserved_before = allocator.stats().reserved_bytes;
  const auto start = Clock::now();
  auto runner =
      make_model_executor(models_, runner_config(result.mode, result.cudagraph_mode, cache_dir));
  result.runner_seconds = seconds_since(start);
  if (result.cudagraph_mode != "none") {
    // Graphs hold device memory outside the allocator: what the construction took beyond it.
    const size_t used_after = device_used();
    const size_t used = used_after - std::min(used_after, used_before);
    const size_t reserved = allocator.stats().reserved_bytes - reserved_before;
    result.graph_bytes = used > reserved ? used - reserved : 0;
  }
  result.kv_cache_bytes = runner->kv_cache_bytes();
  return runner;
}

void Sweep::measure_rows(ModeResult result, ModelExecutor& runner) {
  result.ttft_ms = time_to_first_token_ms(runner);
  auto plan = runner.latest_plan();
  result.arena_bytes = plan ? plan->memory.arena_bytes : 0;
  report_.modes.push_back(result);
  report_progress();
  for (int64_t batch : options_.batch_sizes) {
    const double prefill = prefill_tokens_per_second(runner, batch);
    DecodeMeasurement decode = measure_decode(runner, batch);
    const std::vector<double>& steps = decode.step_ms;
    SweepRow row;
    row.label = result.label;
    row.mode = result.mode;
    row.cudagraph_mode = result.cudagraph_mode;
    row.batch_size = batch;
    row.step_ms_median = percentile(steps, 50);
    row.step_ms_p90 = percentile(steps, 90);
    row.step_ms_min = *std::min_element(steps.begin(), steps.end());
    row.tokens_per_second = static_cast<double>(batch) / (row.step_ms_median * 1e-3);
    row.prefill_tokens_per_second = prefill;
    if (batch == 1)
      row.weight_gb_per_second = report_.weight_bytes_per_step / (row.step_ms_median * 1e-3) / kGB;
    row.profile = std::move(decode.profile);
    spdlog::info(
        "{} batch {}: step median {:.3f} ms, p90 {:.3f} ms, {:.1f} tokens/s; prefill "
        "{:.0f} tokens/s",
        row.label, batch, row.step_ms_median, row.step_ms_p90, row.tokens_per_second, prefill);
    report_.rows.push_back(row);
    report_progress();
  }
}

void Sweep::measure_mode(const std::string& mode) {
  const bool compiles = mode != "eager";
  FreshDirectory cache(mode);
  auto result_for = [&](const std::string& graphs) {
    ModeResult result;
    result.label = graphs == "none" ? mode : mode + "+" + graphs;
    result.mode = mode;
    result.cudagraph_mode = graphs;
    if (!compiles) result.notes = "eager mode compiles nothing";
    return result;
  };
  std::optional<double> cold, warm;
  if (compiles) {  // an empty kernel cache
    auto runner = make_model_executor(models_, runner_config(mode, "none", cache.str()));
    const auto [first, second] = time_full_step(*runner);
    cold = std::max(0.0, first - second);
  }
  // Without graphs (graphs capture compiled pieces: every mode has this runner).
  double none_seconds = 0, warm_first = 0;
  const bool none_timed =
      mode != "compiled" || contains(options_.cudagraph_modes, std::string("none"));
  if (compiles || none_timed) {
    ModeResult result = result_for("none");
    auto runner = build_runner(result, cache.str());
    none_seconds = result.runner_seconds;
    if (compiles) {
      const auto [first, second] = time_full_step(*runner);
      warm = std::max(0.0, first - second);
      warm_first = first;
      result.compile_cold_seconds = cold;
      result.compile_warm_seconds = warm;
    }
    if (none_timed) measure_rows(result, *runner);
  }
  if (mode != "compiled") return;
  for (const std::string& graphs : options_.cudagraph_modes) {
    if (graphs == "none") continue;
    ModeResult result = result_for(graphs);
    result.compile_cold_seconds = cold;
    result.compile_warm_seconds = warm;
    auto runner = build_runner(result, cache.str());
    result.capture_seconds = std::max(0.0, result.runner_seconds - none_seconds - warm_first);
    measure_rows(result, *runner);
  }
}

SweepReport Sweep::run() {
  ForceLinearPath linear_path(options_.linear_path);  // this thread runs every step
  device_ = run_device(options_.config.model);
  report_.machine = machine_info();
  report_.device = device_info(device_);
  report_.commit = source_commit();
  report_.created = utc_timestamp();
  report_.options = options_;
  largest_batch_ = *std::max_element(options_.batch_sizes.begin(), options_.batch_sizes.end());
  max_sequences_ = std::max(options_.config.scheduler.max_num_seqs, largest_batch_);
  if (device_.is_cpu()) report_.notes.push_back("the CPU has no CUDA graphs: graph mode none only");
  for (const std::string& mode : options_.modes)
    total_rows_ +=
        options_.batch_sizes.size() * (mode == "compiled" ? options_.cudagraph_modes.size() : 1);

  report_.copy_gb_per_second = measure_copy_gb_per_second(device_);
  spdlog::info("{}: copy bandwidth {:.0f} GB/s (read + write)", device_.str(),
               report_.copy_gb_per_second);
  const auto start = Clock::now();
  models_ = load_run_models(options_.config, max_length());
  model_ = models_.front();
  // The runner takes the full step's prompts (max_model_len each) in one step too.
  max_sequences_ = std::max(max_sequences_, ceil_divide(budget(), full_step_length()));
  report_.load_seconds = seconds_since(start);
  report_.dtype = dtype_name(model_->dtype());
  report_.model_description = model_->config().str();
  report_.model_length = model_->max_positions();
  if (model_->parallel().enabled())  // the config above is one rank's
    report_.model_description +=
        fmt::format(" (one rank of tensor_parallel_size {}: weights and GB/s are per device)",
                    model_->parallel().size);
  report_.weight_bytes = static_cast<double>(model_->weight_bytes());
  report_.weight_bytes_per_step = weight_bytes_read_per_step(*model_);
  spdlog::info("model {} ({}) loaded in {:.2f} s: {:.1f} MiB of weights",
               options_.config.model.model, report_.dtype, report_.load_seconds,
               report_.weight_bytes / 1048576.0);
  report_progress();
  for (const std::string& mode : options_.modes) measure_mode(mode);
  report_.complete = true;
  report_progress();
  return report_;
}

}  // namespace

SweepOptions resolve_sweep_options(SweepOptions options, bool device_given, bool model_given) {
  ModelLoadConfig& load = options.config.model;
  const CompilationConfig& compilation = options.config.compilation;
  const SchedulerConfig& scheduler = options.config.scheduler;
  // Keys the sweep sets itself, per run: a value from a config file would be ignored.
  TESSERA_REQUIRE(compilation.cache_dir.empty(),
                  "compilation.cache_dir is set ({}): the sweep compiles into a fresh directory of "
                  "its own to time cold and warm compiles; remove the key",
                  compilation.cache_dir);
  TESSERA_REQUIRE(!compilation.cudagraph_mode,
                  "compilation.cudagraph_mode is set ({}): the sweep takes --cudagraph-modes",
                  enum_name(compilation.cudagraph_mode.value_or(CUDAGraphMode::none)));
  TESSERA_REQUIRE(options.config.cache.num_kv_blocks == 0 && load.max_model_len == 0,
                  "engine.num_kv_blocks and engine.max_model_len are set: the sweep sizes the KV "
                  "cache and the model length from the batch sizes, --context, --steps and "
                  "--prompt-len (--max-model-len for a longer model); remove them");
  Device device = kCPU;
  if (device_given) {
    device = run_device(load);
  } else if (!first_gpu(&device)) {
    device = kCPU;
  }
  load.device = device.str();
  const bool gpu = !device.is_cpu();
  // The GPU's module registers its skinny GEMM variants (--linear's choices) as it loads; a
  // missing module or device is an error here, naming it.
  if (gpu) (void)backend(device);
  if (!model_given) load.model = gpu ? "synthetic:llama-1b" : "synthetic:tiny";
  if (options.batch_sizes.empty())
    options.batch_sizes = gpu ? std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64, 128, 256}
                              : std::vector<int64_t>{1, 2, 4, 8, 16};
  if (options.modes.empty()) options.modes = {"eager", "compiled"};
  if (options.cudagraph_modes.empty())
    options.cudagraph_modes =
        gpu && contains(options.modes, std::string("compiled"))
            ? std::vector<std::string>{"none", "piecewise", "full", "full_and_piecewise"}
            : std::vector<std::string>{"none"};
  if (options.context == 0) options.context = 128;
  if (options.steps == 0) options.steps = gpu ? 64 : 32;
  if (options.warmup < 0) options.warmup = 3;
  if (options.prompt_len == 0) options.prompt_len = gpu ? 512 : 128;

  auto check_length = [](const char* flag, int64_t value, int64_t minimum) {
    TESSERA_REQUIRE(value >= minimum && value <= kMaxLength, "{} {} is outside [{}, {}]", flag,
                    value, minimum, kMaxLength);
  };
  check_length("--context", options.context, 1);
  check_length("--steps", options.steps, 1);
  check_length("--warmup", options.warmup, 0);
  check_length("--prompt-len", options.prompt_len, 1);
  if (options.max_model_len != 0) {
    check_length("--max-model-len", options.max_model_len, 1);
    const int64_t needed = longest_sequence(options);
    TESSERA_REQUIRE(options.max_model_len >= needed,
                    "--max-model-len {} is shorter than the {} tokens the sweep's sequences hold "
                    "(--context + --warmup (at least 1 with engine.async_scheduling) + --steps, 2 "
                    "more with --profile, or --prompt-len)",
                    options.max_model_len, needed);
  }
  for (int64_t batch : options.batch_sizes)
    TESSERA_REQUIRE(batch >= 1 && batch <= scheduler.max_num_batched_tokens,
                    "--batch-sizes: {} is outside [1, engine.max_num_batched_tokens = {}] (a "
                    "decode step holds one token per sequence; raise it with -O "
                    "engine.max_num_batched_tokens=N)",
                    batch, scheduler.max_num_batched_tokens);
  auto check_list = [](const char* flag, const auto& values, const auto& valid) {
    for (size_t i = 0; i < values.size(); ++i) {
      TESSERA_REQUIRE(valid.empty() || contains(valid, values[i]), "{}: '{}' is not one of {}",
                      flag, values[i], fmt::join(valid, ", "));
      for (size_t j = 0; j < i; ++j)
        TESSERA_REQUIRE(values[j] != values[i], "{}: {} is listed twice", flag, values[i]);
    }
  };
  check_list("--batch-sizes", options.batch_sizes, std::vector<int64_t>{});
  check_list("--modes", options.modes, enum_names<CompilationMode>());
  check_list("--cudagraph-modes", options.cudagraph_modes, enum_names<CUDAGraphMode>());
  if (gpu) {
    TESSERA_REQUIRE(is_linear_path(options.linear_path, device.type),
                    "--linear: '{}' is not one of {}", options.linear_path,
                    fmt::join(linear_path_names(device.type), ", "));
  } else {
    TESSERA_REQUIRE(options.linear_path == kLinearPathMeasured,
                    "--linear {}: the CPU has one linear path; --linear chooses among the GPU's "
                    "(leave it out, or measured)",
                    options.linear_path);
  }
  const bool graphs = options.cudagraph_modes != std::vector<std::string>{"none"};
  TESSERA_REQUIRE(!graphs || gpu,
                  "--cudagraph-modes {}: the CPU has no CUDA graphs, only none applies there",
                  fmt::join(options.cudagraph_modes, ","));
  TESSERA_REQUIRE(!graphs || contains(options.modes, std::string("compiled")),
                  "--cudagraph-modes {}: graphs capture compiled pieces; add compiled to --modes",
                  fmt::join(options.cudagraph_modes, ","));
  return options;
}

SweepReport run_sweep(const SweepOptions& options, const SweepProgress& progress) {
  return Sweep(options, progress).run();
}

}  // namespace tessera::bench
