// `tessera bench sweep` times decode steps, prefill, time to first token, startup and memory
// per compilation mode, CUDA graph mode and batch size (engine/bench/sweep.h); `tessera bench
// serve` is a load generator against an OpenAI-compatible server (engine/bench/serve_load.h).
// Both print a table to stdout and write JSON (the sweep CSV too); progress goes to stderr on a
// terminal. The sweep's --profile prints each row's step profile to stdout as the row completes.
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>

#include "engine/bench/progress_bar.h"
#include "engine/bench/serve_load.h"
#include "engine/bench/serve_report.h"
#include "engine/bench/sweep.h"
#include "engine/bench/sweep_report.h"
#include "engine/cli/command.h"
#include "engine/cli/model_flags.h"
#include "runtime/check.h"

namespace tessera::cli {
namespace {

constexpr int64_t kMaxCount = int64_t{1} << 24;

std::vector<std::string> split_commas(const std::string& flag, const std::string& text) {
  std::vector<std::string> parts;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t comma = std::min(text.find(',', begin), text.size());
    parts.push_back(text.substr(begin, comma - begin));
    if (parts.back().empty()) throw UsageError(fmt::format("{}: empty item in '{}'", flag, text));
    begin = comma + 1;
  }
  return parts;
}

int64_t parse_integer(const std::string& flag, const std::string& text, int64_t minimum,
                      int64_t maximum = kMaxCount) {
  int64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size())
    throw UsageError(fmt::format("{}: '{}' is not an integer", flag, text));
  if (value < minimum || value > maximum)
    throw UsageError(fmt::format("{}: {} is outside [{}, {}]", flag, value, minimum, maximum));
  return value;
}

std::vector<int64_t> parse_integers(const std::string& flag, const std::string& text,
                                    int64_t minimum) {
  std::vector<int64_t> values;
  for (const std::string& part : split_commas(flag, text))
    values.push_back(parse_integer(flag, part, minimum));
  return values;
}

double parse_positive(const std::string& flag, const std::string& text) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || !std::isfinite(value) || value <= 0)
    throw UsageError(fmt::format("{}: '{}' is not a positive number", flag, text));
  return value;
}

// Writes through a temporary name and a rename, so a reader never sees half a file (the sweep
// rewrites its files after every row).
void write_file(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".partial";
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    TESSERA_REQUIRE(file.good(), "cannot write {}", path);
    file << text;
    file.close();
    TESSERA_REQUIRE(file.good(), "cannot write {}", path);
  }
  std::filesystem::rename(temporary, path);
}

// Walks args[i]'s value (the next argument), or throws naming the flag.
const std::string& value_of(const std::vector<std::string>& args, size_t& i) {
  if (i + 1 >= args.size()) throw UsageError(fmt::format("{} needs a value", args[i]));
  return args[++i];
}

bool starts_with_any(const std::string& text, std::initializer_list<const char*> prefixes) {
  for (const char* prefix : prefixes)
    if (text.starts_with(prefix)) return true;
  return false;
}

int run_sweep_command(const std::vector<std::string>& args) {
  ModelFlags flags;
  bench::SweepOptions options;
  std::string json_path, csv_path;
  bool device_given = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (flag == "--mode") throw UsageError("bench sweep sets --mode itself per run; use --modes");
    if (flag == "--device") device_given = true;
    if (flag == "--max-model-len") {  // the sweep's own, not engine.max_model_len
      options.max_model_len = parse_integer(flag, value_of(args, i), 1);
      continue;
    }
    if (parse_model_flag(args, i, flags)) continue;
    if (flag == "--profile") {
      options.profile = true;
    } else if (flag == "--linear") {
      options.linear_path = value_of(args, i);
    } else if (flag == "--batch-sizes") {
      options.batch_sizes = parse_integers(flag, value_of(args, i), 1);
    } else if (flag == "--modes") {
      options.modes = split_commas(flag, value_of(args, i));
    } else if (flag == "--cudagraph-modes") {
      options.cudagraph_modes = split_commas(flag, value_of(args, i));
    } else if (flag == "--context") {
      options.context = parse_integer(flag, value_of(args, i), 1);
    } else if (flag == "--steps") {
      options.steps = parse_integer(flag, value_of(args, i), 1);
    } else if (flag == "--warmup") {
      options.warmup = parse_integer(flag, value_of(args, i), 0);
    } else if (flag == "--prompt-len") {
      options.prompt_len = parse_integer(flag, value_of(args, i), 1);

    } else if (flag == "--json") {
      json_path = value_of(args, i);
    } else if (flag == "--csv") {
      csv_path = value_of(args, i);
    } else {
      throw UsageError(fmt::format("bench sweep: unknown option '{}'", flag));
    }
  }
  for (const std::string& override : flags.overrides) {
    if (starts_with_any(override, {"compilation.mode=", "compilation.cudagraph_mode="}))
      throw UsageError(
          fmt::format("bench sweep: -O {}: use --modes and --cudagraph-modes", override));
    if (override.starts_with("engine.device=")) device_given = true;
  }
  options.config = flags.load();
  options = bench::resolve_sweep_options(options, device_given || !flags.config_path.empty(),
                                         flags.model_given());
  bench::ProgressBar bar;
  size_t rows_seen = 0;
  auto progress = [&](const bench::SweepReport& report, size_t done, size_t total) {
    for (; rows_seen < report.rows.size(); ++rows_seen) {
      const bench::SweepRow& row = report.rows[rows_seen];
      if (row.profile.empty()) continue;
      bar.finish();
      fmt::print("--- profile: {} batch {} (unprofiled median {:.3f} ms/step) ---\n{}\n", row.label,
                 row.batch_size, row.step_ms_median, row.profile);
      std::fflush(stdout);
    }
    bar.update(done, total,
               report.rows.empty() ? ""
                                   : fmt::format("{} batch {}", report.rows.back().label,
                                                 report.rows.back().batch_size));
    if (!json_path.empty()) write_file(json_path, bench::sweep_json(report));
    if (!csv_path.empty()) write_file(csv_path, bench::sweep_csv(report));
  };
  bench::SweepReport report = bench::run_sweep(options, progress);
  bar.finish();
  fmt::print("{}", bench::sweep_table(report));
  return 0;
}

int run_serve_command(const std::vector<std::string>& args) {
  bench::ServeOptions options;
  std::string json_path, dataset;
  std::optional<int64_t> input_len, output_len, num_prompts;
  int64_t vocab_size = 256;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (flag == "--ignore-eos") {
      options.ignore_eos = true;
      continue;
    }
    const std::string& value = value_of(args, i);
    if (flag == "--url") {
      options.url = value;
    } else if (flag == "--endpoint") {
      options.endpoint = value;
    } else if (flag == "--model") {
      options.model = value;
    } else if (flag == "--api-key") {
      options.api_key = value;
    } else if (flag == "--concurrency") {
      options.concurrency = parse_integers(flag, value, 1);
    } else if (flag == "--num-prompts") {
      num_prompts = parse_integer(flag, value, 1);
    } else if (flag == "--request-rate") {
      if (value != "inf") options.request_rate = parse_positive(flag, value);
    } else if (flag == "--input-len") {
      input_len = parse_integer(flag, value, 1);
    } else if (flag == "--output-len") {
      output_len = parse_integer(flag, value, 1);
    } else if (flag == "--vocab-size") {
      vocab_size = parse_integer(flag, value, 1, std::numeric_limits<int32_t>::max());
    } else if (flag == "--dataset") {
      dataset = value;
    } else if (flag == "--seed") {
      options.seed =
          static_cast<uint64_t>(parse_integer(flag, value, 0, std::numeric_limits<int64_t>::max()));
    } else if (flag == "--timeout") {
      options.timeout_seconds = parse_positive(flag, value);
    } else if (flag == "--json") {
      json_path = value;
    } else {
      throw UsageError(fmt::format("bench serve: unknown option '{}'", flag));
    }
  }
  if (options.api_key.empty())
    if (const char* key = std::getenv("TESSERA_API_KEY"); key != nullptr) options.api_key = key;
  const int64_t count = num_prompts.value_or(100);
  if (!dataset.empty()) {
    if (input_len)
      throw UsageError("bench serve: --input-len is for random prompts, not --dataset");
    options.prompts = bench::read_prompt_file(dataset, count, output_len.value_or(128));
    options.prompt_source = "dataset " + dataset;
  } else {
    options.prompts = bench::random_prompts(count, input_len.value_or(128),
                                            output_len.value_or(128), vocab_size, options.seed);
    options.prompt_source =
        fmt::format("random token ids below {}: input {}, output {}", vocab_size,
                    input_len.value_or(128), output_len.value_or(128));
  }
  bench::ProgressBar bar;
  auto progress = [&](int64_t concurrency, int64_t done, int64_t total) {
    bar.update(static_cast<size_t>(done), static_cast<size_t>(total),
               fmt::format("requests at concurrency {}", concurrency));
    if (done == total) bar.finish();
  };
  bench::ServeReport report = bench::run_serve_benchmark(std::move(options), progress);
  fmt::print("{}", bench::serve_table(report));
  if (!json_path.empty()) write_file(json_path, bench::serve_json(report));
  int64_t failed = 0;
  for (const bench::ServeLevel& level : report.levels) failed += level.failed;
  return failed == 0 ? 0 : 1;
}

int run_bench(const std::vector<std::string>& args) {
  if (args.empty())
    throw UsageError("bench: expected 'sweep' or 'serve' (see tessera bench --help)");
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "sweep") return run_sweep_command(rest);
  if (args[0] == "serve") return run_serve_command(rest);
  throw UsageError(fmt::format("bench: unknown benchmark '{}'; expected sweep or serve", args[0]));
}

const std::string kUsage =
    std::string(
        "usage: tessera bench sweep [--model PATH] [--batch-sizes 1,2,4,...] [--modes "
        "eager,compiled]\n"
        "                           [--cudagraph-modes none,piecewise,full,full_and_piecewise]\n"
        "                           [--context N] [--steps N] [--warmup N] [--prompt-len N]\n"
        "                           [--max-model-len N]\n"
        "                           [--profile] [--linear measured|library|library:N|VARIANT]\n"
        "                           [--json FILE] [--csv FILE] [model options]\n"
        "       tessera bench serve [--url http://127.0.0.1:8000] [--concurrency 1,16,64]\n"
        "                           [--num-prompts N] [--request-rate R] [--input-len L "
        "--output-len L |\n"
        "                           --dataset FILE.jsonl] [--json FILE] [options]\n"
        "\n"
        "bench sweep: per compilation mode, CUDA graph mode (compiled mode only) and batch size,\n"
        "the decode step (forward + greedy pick, the ids on the host; device events on a GPU):\n"
        "median and p90 ms, tokens/s; prefill tokens/s at --prompt-len; time to first token for\n"
        "one prompt; for batch 1 the weight-read GB/s against a copy bandwidth measured in the\n"
        "same run; startup (load, compile cold and warm, capture) and memory (weights, KV cache,\n"
        "arena, graphs). Prints a table; --json and --csv write files, rewritten after every "
        "row.\n"
        "Defaults on a GPU (the first one unless --device says): synthetic:llama-1b, batch sizes\n"
        "1..256 in powers of 2, graph modes none,piecewise,full,full_and_piecewise (none without\n"
        "compiled in --modes), --steps 64, --prompt-len 512; on the CPU (no CUDA graphs: none\n"
        "only): synthetic:tiny, batch sizes 1..16, --steps 32, --prompt-len 128. Always --modes\n"
        "eager,compiled, --context 128, --warmup 3. Compiles go to a fresh kernel cache of the\n"
        "sweep's own; it sets the KV cache size, the model length and engine.max_num_seqs (at\n"
        "least the largest batch) itself.\n"
        "  --max-model-len N    build the runners for a model of N tokens instead of the length\n"
        "                       the sweep's sequences need (at least that): decode graphs are\n"
        "                       then captured as tessera serve captures them for that length\n"
        "  --profile            after each row, the launches of one decode step (by kernel class,\n"
        "                       graph replays), then one more step with every launch timed by\n"
        "                       device events (graphs bypassed): tables per kernel class, region\n"
        "                       and the 25 slowest kernels (runtime/profiler/profile_report.h)\n"
        "  --linear PATH        the GPU linear path: measured (default: per shape, the fastest of\n"
        "                       cuBLASLt's first 8 heuristic algorithms and the skinny kernels),\n"
        "                       library (cuBLASLt only, its heuristic's first algorithm, or its\n"
        "                       N-th with library:N, N = 1..8), or a skinny variant wherever it\n"
        "                       fits; the CPU has one path (measured)\n"
        "\n"
        "bench serve: streams completions from an OpenAI-compatible server (POST\n"
        "/v1/completions, stream: true) with at most C requests in flight for each C of\n"
        "--concurrency (default 1,16,64), each level sending all --num-prompts prompts (default\n"
        "100); reports completed/failed requests, request and token throughput, and TTFT, TPOT,\n"
        "ITL and end-to-end latency (mean, median, p90, p99). Exits 1 when a request failed.\n"
        "  --url URL            the server (default http://127.0.0.1:8000); --endpoint PATH\n"
        "  --model NAME         the request's model (default: the first of GET /v1/models)\n"
        "  --api-key KEY        sent as a bearer token (default $TESSERA_API_KEY)\n"
        "  --request-rate R     Poisson arrivals at R requests/s (default inf: all at once)\n"
        "  --input-len L, --output-len L   random prompts of L token ids (default 128 each)\n"
        "  --vocab-size V       random ids are drawn from [0, V) (default 256: every vocabulary\n"
        "                       Tessera loads has them)\n"
        "  --dataset FILE       JSON lines {\"prompt\": \"text\" or [ids], \"max_tokens\": N}\n"
        "  --ignore-eos         ask for exactly max_tokens tokens (vLLM's ignore_eos)\n"
        "  --seed S, --timeout SECONDS (per read, default 600), --json FILE\n"
        "\n") +
    kModelFlagsUsage;

TESSERA_REGISTER_COMMAND((Command{"bench", "benchmark: batch-size sweep, or load on a server",
                                  kUsage, run_bench}));

}  // namespace
}  // namespace tessera::cli
