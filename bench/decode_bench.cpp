// Decode benchmark: the time of one decode step (one new token for each of B sequences that
// already hold `context` tokens in the KV cache) through ModelRunner::execute, per mode and batch
// size. Batch 1 decode reads every weight once per step, so its weight bytes / step time is the
// achieved weight-read bandwidth; it is set against the device-to-device copy bandwidth measured
// here (1 GiB on a GPU, Tensor::copy_from timed with events), the practical HBM ceiling.
//
//   decode_bench [--model synthetic:llama-1b] [--device cuda|cpu] [--dtype bf16|f32|auto]
//                [--batch 1,32] [--mode eager,compiled] [--steps 64] [--context 512]
//                [--warmup 3] [--graphs none,piecewise,full] [--profile] [--linear PATH]
//                [-O section.key=value ...]
//
// Each step's time is wall clock around execute() and the greedy pick of every sequence's next
// token (argmax on the device, the ids copied back), which waits for the device: it is what a
// decode loop sees, host work included.
// The table printed last has the median step time, tokens/s and, for batch 1, GB/s of weights.
// --profile adds, after each mode and batch, the launches of one step (as it runs, graphs
// included) and the tables of one more step with every launch timed by device events
// (kernels/profile_report.h).
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "engine/config.h"
#include "engine/kv_cache_manager.h"
#include "engine/model_runner.h"
#include "engine/run_setup.h"
#include "engine/sampler.h"
#include "kernels/backend.h"
#include "kernels/check.h"
#include "kernels/linear_path.h"
#include "kernels/logging.h"
#include "kernels/profile_report.h"
#include "kernels/profiler.h"
#include "models/model.h"
#include "models/model_weights.h"

namespace tessera::bench {
namespace {

constexpr double kGB = 1e9;

constexpr const char* kUsage =
    "usage: decode_bench [--model PATH] [--device cuda|cpu] [--dtype bf16|f32|auto]\n"
    "                    [--batch 1,32] [--mode eager,compiled] [--steps 64] [--context 512]\n"
    "                    [--warmup 3] [--graphs none,piecewise,full] [--profile]\n"
    "                    [--linear measured|library|VARIANT] [-O section.key=value ...]\n"
    "--graphs: the CUDA graph modes to time compiled mode in (default none; eager and traced\n"
    "run without graphs).\n"
    "--profile: after each mode and batch, the launches per step, then one step with every\n"
    "launch timed by device events (graphs bypassed), per kernel class, region and kernel.\n"
    "--linear: the GPU linear path (kernels/linear_path.h): measured per shape (default), the\n"
    "library (cuBLASLt) only, or one skinny kernel wherever it fits.\n"
    "\n"
    "Prefills B sequences of --context tokens each, then times --steps decode steps (one token\n"
    "per sequence per step) through the model runner, for every batch size and mode listed. "
    "Prints\n"
    "the median step time, tokens/s and, for batch 1, the weight-read bandwidth against the\n"
    "device-to-device copy bandwidth. Defaults: --model synthetic:llama-1b, the first GPU (else\n"
    "the CPU), --dtype auto (bf16 on a GPU, f32 on the CPU). -O overrides any run-config key\n"
    "(engine.max_num_batched_tokens bounds the prefill chunks, engine.block_size, ...).\n";

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Options {
  std::string model = "synthetic:llama-1b";
  std::string device;  // empty: the first GPU, else the CPU
  std::string dtype = "auto";
  std::vector<int64_t> batches{1, 32};
  std::vector<std::string> modes{"eager", "compiled"};
  std::vector<std::string> graph_modes{"none"};
  int64_t steps = 64;
  int64_t context = 512;
  int64_t warmup = 3;
  bool profile = false;
  std::string linear_path = kLinearPathMeasured;
  std::vector<std::string> overrides;
};

int64_t parse_integer(std::string_view flag, std::string_view text, int64_t minimum) {
  int64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size())
    throw UsageError(fmt::format("{}: '{}' is not an integer", flag, text));
  if (value < minimum) throw UsageError(fmt::format("{}: {} is below {}", flag, value, minimum));
  return value;
}

std::vector<std::string> split_commas(std::string_view text) {
  std::vector<std::string> parts;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t comma = std::min(text.find(',', begin), text.size());
    parts.emplace_back(text.substr(begin, comma - begin));
    begin = comma + 1;
  }
  return parts;
}

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (flag == "--profile") {
      options.profile = true;
      continue;
    }
    if (i + 1 >= argc) throw UsageError(fmt::format("{} needs a value", flag));
    std::string value = argv[++i];
    if (flag == "--model") {
      options.model = value;
    } else if (flag == "--device") {
      options.device = value;
    } else if (flag == "--dtype") {
      options.dtype = value;
    } else if (flag == "--batch") {
      options.batches.clear();
      for (const std::string& part : split_commas(value))
        options.batches.push_back(parse_integer(flag, part, 1));
    } else if (flag == "--mode") {
      options.modes = split_commas(value);
      for (const std::string& mode : options.modes)
        if (mode != "eager" && mode != "traced" && mode != "compiled")
          throw UsageError(fmt::format("--mode: '{}' is not eager, traced or compiled", mode));
    } else if (flag == "--graphs") {
      options.graph_modes = split_commas(value);
      for (const std::string& mode : options.graph_modes)
        if (mode != "none" && mode != "piecewise" && mode != "full" && mode != "full_and_piecewise")
          throw UsageError(fmt::format(
              "--graphs: '{}' is not none, piecewise, full or full_and_piecewise", mode));
    } else if (flag == "--steps") {
      options.steps = parse_integer(flag, value, 1);
    } else if (flag == "--context") {
      options.context = parse_integer(flag, value, 1);
    } else if (flag == "--warmup") {
      options.warmup = parse_integer(flag, value, 0);
    } else if (flag == "--linear") {
      options.linear_path = value;
    } else if (flag == "-O") {
      options.overrides.push_back(value);
    } else {
      throw UsageError(fmt::format("unknown option '{}'", flag));
    }
  }
  return options;
}

double median(std::vector<double> values) {
  TESSERA_CHECK(!values.empty(), "median of no values");
  std::sort(values.begin(), values.end());
  size_t middle = values.size() / 2;
  return values.size() % 2 ? values[middle] : 0.5 * (values[middle - 1] + values[middle]);
}

// Device-to-device copy bandwidth in GB/s, counting bytes read plus bytes written: the median of
// a few event-timed Tensor::copy_from calls after one warm-up copy. 1 GiB on a GPU (far beyond
// any L2); 256 MiB on the CPU, which is still far beyond its caches.
double measure_copy_gb_per_s(Device device) {
  const int64_t bytes = device.is_cpu() ? int64_t{256} << 20 : int64_t{1} << 30;
  Tensor source = Tensor::empty({bytes / 2}, DType::bf16, device);
  Tensor destination = Tensor::empty({bytes / 2}, DType::bf16, device);
  DeviceBackend& backend_for_device = backend(device);
  Stream& stream = backend_for_device.current_stream(device.index);
  auto start = backend_for_device.create_event(device.index);
  auto end = backend_for_device.create_event(device.index);
  destination.copy_from(source);  // first-touch page faults, lazy context setup
  stream.synchronize();
  std::vector<double> seconds;
  for (int sample = 0; sample < 5; ++sample) {
    start->record(stream);
    destination.copy_from(source);
    end->record(stream);
    end->synchronize();
    seconds.push_back(std::max<double>(start->elapsed_ms(*end), 1e-6) * 1e-3);
  }
  return 2.0 * static_cast<double>(bytes) / median(seconds) / kGB;
}

// A deterministic token id that varies with the sequence and the position (the values do not
// change the work, but a real mix of ids keeps the embedding gathers honest).
int32_t token_id(int64_t sequence, int64_t position, int64_t vocab) {
  uint64_t mixed = static_cast<uint64_t>(sequence) * 0x9e3779b97f4a7c15ull +
                   static_cast<uint64_t>(position) * 0xbf58476d1ce4e5b9ull + 12345;
  mixed ^= mixed >> 31;
  return static_cast<int32_t>(mixed % static_cast<uint64_t>(vocab));
}

struct Sequence {
  std::vector<int32_t> tokens;  // every token it will ever hold: context, warm-up and timed
  int64_t cached = 0;           // tokens already in the KV cache
};

// Feeds each sequence `count` more tokens; steps hold at most `token_budget` tokens, so a long
// prefill is split into chunks and short ones share a step (chunked prefill).
void advance(ModelRunner& runner, KVCacheManager& blocks, std::vector<Sequence>& sequences,
             int64_t count, int64_t token_budget) {
  std::vector<int64_t> target(sequences.size());
  for (size_t s = 0; s < sequences.size(); ++s) {
    target[s] = sequences[s].cached + count;
    blocks.allocate(static_cast<SequenceId>(s), target[s]);
  }
  size_t next = 0;
  while (next < sequences.size()) {
    std::vector<SequenceInput> batch;
    std::vector<size_t> members;
    int64_t budget = token_budget;
    for (size_t s = next; s < sequences.size() && budget > 0; ++s) {
      Sequence& sequence = sequences[s];
      int64_t take = std::min(target[s] - sequence.cached, budget);
      if (take == 0) continue;
      batch.push_back(SequenceInput{std::span(sequence.tokens).subspan(sequence.cached, take),
                                    sequence.cached,
                                    blocks.block_table(static_cast<SequenceId>(s))});
      members.push_back(s);
      budget -= take;
    }
    Tensor logits = runner.execute(batch);
    ProfileRegion region("sampling");
    greedy_token_ids(logits);
    for (size_t i = 0; i < members.size(); ++i)
      sequences[members[i]].cached += static_cast<int64_t>(batch[i].token_ids.size());
    while (next < sequences.size() && sequences[next].cached == target[next]) ++next;
  }
}

// CausalLM::weight_bytes() less the embedding table when the LM head is separate: a step only
// gathers a row per token from it. Tied, the table is the LM head and is read whole.
double weight_bytes_read_per_step(const CausalLM& model) {
  const ModelConfig& config = model.config();
  double bytes = static_cast<double>(model.weight_bytes());
  if (!config.tie_word_embeddings)
    bytes -= static_cast<double>(config.vocab_size * config.hidden_size) *
             static_cast<double>(element_size(model.dtype()));
  return bytes;
}

struct Row {
  std::string mode;
  int64_t batch = 0;
  double median_ms = 0;
  double min_ms = 0;
  double tokens_per_second = 0;
  double weight_gb_per_s = 0;  // batch 1 only
};

// Steps a sequence takes beyond --context: warm-up, timed, and with --profile one counted and one
// profiled step.
int64_t steps_after_context(const Options& options) {
  return options.warmup + options.steps + (options.profile ? 2 : 0);
}

// One decode step of every sequence under a counting profiler, then one under a timing profiler;
// prints the launch counts and the profile's tables.
void profile_decode(ModelRunner& runner, KVCacheManager& blocks, std::vector<Sequence>& sequences,
                    const Row& row, double copy_gb_per_s) {
  const Device device = runner.model().device();
  const int64_t batch = static_cast<int64_t>(sequences.size());
  KernelProfiler counter(device, /*timing=*/false);
  {
    ProfilerScope active(counter);
    counter.start();
    advance(runner, blocks, sequences, 1, batch);
    counter.stop();
  }
  KernelProfiler timer(device, /*timing=*/true);
  {
    ProfilerScope active(timer);
    timer.start();
    advance(runner, blocks, sequences, 1, batch);
    timer.stop();
  }
  fmt::print("\n--- profile: {} batch {} (unprofiled median {:.3f} ms/step) ---\n", row.mode, batch,
             row.median_ms);
  fmt::print("launches per step: {}\n", format_launch_counts(counter));
  fmt::print("{}\n", format_profile(timer, ProfileCeilings{copy_gb_per_s, 0}, 25));
  std::fflush(stdout);
}

Row time_decode(ModelRunner& runner, const std::string& mode, int64_t batch, const Options& options,
                int64_t token_budget, double copy_gb_per_s) {
  const int64_t vocab = runner.model().config().vocab_size;
  const int64_t total = options.context + steps_after_context(options);
  std::vector<Sequence> sequences(static_cast<size_t>(batch));
  for (int64_t s = 0; s < batch; ++s)
    for (int64_t position = 0; position < total; ++position)
      sequences[s].tokens.push_back(token_id(s, position, vocab));

  KVCacheManager blocks(runner.num_kv_blocks(), runner.options().block_size);
  advance(runner, blocks, sequences, options.context, token_budget);
  for (int64_t step = 0; step < options.warmup; ++step)
    advance(runner, blocks, sequences, 1, batch);
  std::vector<double> step_ms;
  for (int64_t step = 0; step < options.steps; ++step) {
    auto begin = std::chrono::steady_clock::now();
    advance(runner, blocks, sequences, 1, batch);
    step_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin)
            .count());
  }

  Row row{mode, batch, median(step_ms), *std::min_element(step_ms.begin(), step_ms.end())};
  row.tokens_per_second = static_cast<double>(batch) / (row.median_ms * 1e-3);
  if (batch == 1)
    row.weight_gb_per_s = weight_bytes_read_per_step(runner.model()) / (row.median_ms * 1e-3) / kGB;
  fmt::print("{} batch {}: median {:.3f} ms/step (min {:.3f}) over {} steps, {:.1f} tokens/s\n",
             mode, batch, row.median_ms, row.min_ms, options.steps, row.tokens_per_second);
  std::fflush(stdout);
  if (options.profile) profile_decode(runner, blocks, sequences, row, copy_gb_per_s);
  return row;
}

int run(const Options& options) {
  ForceLinearPath linear_path(options.linear_path);
  RunConfig config = load_run_config("", options.overrides);
  Device device = kCPU;
  if (!options.device.empty()) {
    device = parse_device(options.device);
  } else if (!first_gpu(&device)) {
    device = kCPU;
  }
  config.engine.dtype = options.dtype;
  DType dtype = run_dtype(config.engine, device);

  const int64_t largest_batch = *std::max_element(options.batches.begin(), options.batches.end());
  const int64_t token_budget = config.engine.max_num_batched_tokens;
  TESSERA_REQUIRE(largest_batch <= token_budget,
                  "batch {} exceeds engine.max_num_batched_tokens {}: a decode step holds one "
                  "token per sequence; raise it with -O engine.max_num_batched_tokens=N",
                  largest_batch, token_budget);

  const double copy_gb_per_s = measure_copy_gb_per_s(device);
  backend(device).allocator(device.index).empty_cache();  // the 2 GiB of copy buffers
  fmt::print("device {}: copy bandwidth {:.0f} GB/s (read + write, {} MiB Tensor::copy_from)\n",
             device.str(), copy_gb_per_s, device.is_cpu() ? 256 : 1024);

  config.engine.model = options.model;
  config.engine.device = device.str();
  config.engine.dtype = dtype_name(dtype);
  const int64_t length = options.context + steps_after_context(options);  // per sequence
  auto model = load_run_model(config.engine, length);
  fmt::print("model {}: {}, {} on {}, weights {:.1f} MiB; context {}, {} timed steps\n",
             options.model, model->config().str(), dtype_name(dtype), device.str(),
             model->weight_bytes() / 1048576.0, options.context, options.steps);

  config.engine.num_kv_blocks =
      largest_batch * KVCacheManager::blocks_for(length, config.engine.block_size);
  // Every timed batch is a decode batch the engine accepts (and full graphs cover).
  config.engine.max_num_seqs = std::max(config.engine.max_num_seqs, largest_batch);

  std::vector<Row> rows;
  for (const std::string& mode : options.modes) {
    for (const std::string& graphs : options.graph_modes) {
      if (mode != "compiled" && graphs != "none") continue;  // graphs capture compiled pieces
      RunConfig mode_config = config;
      mode_config.compilation.mode = mode;
      mode_config.compilation.cudagraph_mode = graphs;
      RunnerOptions runner_options = make_runner_options(mode_config, model->max_positions());
      ModelRunner runner(model, runner_options);  // one per mode: its KV cache is freed after
      const std::string label = graphs == "none" ? mode : mode + "+" + graphs;
      for (int64_t batch : options.batches)
        rows.push_back(time_decode(runner, label, batch, options, token_budget, copy_gb_per_s));
    }
  }

  fmt::print(
      "\n=== decode_bench: {} {} on {}, context {}, median of {} steps, linear path {} ===\n",
      options.model, dtype_name(dtype), device.str(), options.context, options.steps,
      options.linear_path);
  fmt::print("{:<20} {:>6} {:>12} {:>12} {:>14} {:>16} {:>10}\n", "mode", "batch", "median ms",
             "min ms", "tokens/s", "weights GB/s", "% of copy");
  for (const Row& row : rows) {
    std::string bandwidth = "-", share = "-";
    if (row.batch == 1) {
      bandwidth = fmt::format("{:.1f}", row.weight_gb_per_s);
      share = fmt::format("{:.1f}%", 100.0 * row.weight_gb_per_s / copy_gb_per_s);
    }
    fmt::print("{:<20} {:>6} {:>12.3f} {:>12.3f} {:>14.1f} {:>16} {:>10}\n", row.mode, row.batch,
               row.median_ms, row.min_ms, row.tokens_per_second, bandwidth, share);
  }
  fmt::print(
      "weights GB/s: {:.1f} MiB of weights read per batch-1 step / median step time; "
      "copy: {:.0f} GB/s device-to-device (read + write)\n",
      weight_bytes_read_per_step(*model) / 1048576.0, copy_gb_per_s);
  return 0;
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) {
  tessera::log_to_stderr();
  try {
    return tessera::bench::run(tessera::bench::parse(argc, argv));
  } catch (const tessera::bench::UsageError& error) {
    std::fprintf(stderr, "decode_bench: %s\n%s", error.what(), tessera::bench::kUsage);
    return 2;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "decode_bench: %s\n", error.what());
    return 1;
  }
}
