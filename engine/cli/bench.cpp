// `tessera bench sweep` times decode steps, prefill, time to first token, startup and memory
// per compilation mode, CUDA graph mode and batch size (engine/bench/sweep.h); `tessera bench
// serve` is a load generator against an OpenAI-compatible server (engine/bench/serve_load.h).
// Both print a table to stdout and write JSON (the sweep CSV too); progress goes to stderr on a
// terminal. The sweep's --profile prints each row's step profile to stdout as the row completes.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "engine/bench/progress_bar.h"

#include "engine/bench/serve_load.h"
#include "engine/bench/serve_report.h"
#include "engine/bench/sweep.h"
#include "engine/bench/sweep_report.h"
#include "engine/cli/command.h"
#include "engine/cli/flag_parser.h"
#include "engine/cli/model_flags.h"
#include "runtime/check.h"

namespace tessera::cli {
namespace {

constexpr int64_t kMaxCount = int64_t{1} << 24;

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

bool starts_with_any(const std::string& text, std::initializer_list<const char*> prefixes) {
  for (const char* prefix : prefixes)
    if (text.starts_with(prefix)) return true;
  return false;
}

struct SweepCommandOptions {
  ModelFlags model;
  bench::SweepOptions sweep;
  std::string json_path, csv_path;
};

FlagSet sweep_flags(SweepCommandOptions& options) {
  bench::SweepOptions& sweep = options.sweep;
  FlagSet flags("bench sweep");
  // Defaults that depend on the device are the paragraph's in --help, not the flags'.
  flags
      .integer_list({"--batch-sizes", "", "1,2,4,...", "the batch sizes to time", ""},
                    &sweep.batch_sizes, 1, kMaxCount)
      .text_list({"--modes", "", "eager,compiled", "compilation modes: eager, traced, compiled"},
                 &sweep.modes)
      .text_list({"--cudagraph-modes", "", "MODES",
                  "CUDA graph modes of compiled mode: none, piecewise, full, full_and_piecewise"},
                 &sweep.cudagraph_modes)
      .integer({"--context", "", "N", "tokens each sequence holds before the timed steps", ""},
               &sweep.context, 1, kMaxCount)
      .integer({"--steps", "", "N", "timed decode steps per batch size", ""}, &sweep.steps, 1,
               kMaxCount)
      .integer({"--warmup", "", "N", "untimed decode steps before them", ""}, &sweep.warmup, 0,
               kMaxCount)
      .integer({"--prompt-len", "", "N", "the prompt of the prefill and first-token timings", ""},
               &sweep.prompt_len, 1, kMaxCount)
      .flag({"--profile", "", "",
             "after each row, the launches of one decode step (by kernel class, graph replays), "
             "then one more step with every launch timed by device events (graphs bypassed): "
             "tables per kernel class, region and the 25 slowest kernels "
             "(runtime/profiler/profile_report.h)"},
            &sweep.profile)
      .text({"--linear", "", "PATH",
             "the GPU linear path: measured (per shape, the fastest of cuBLASLt's first 8 "
             "heuristic algorithms and the skinny kernels), library (cuBLASLt only, its "
             "heuristic's first algorithm, or its N-th with library:N, N = 1..8), or a skinny "
             "variant wherever it fits; the CPU has one path (measured)"},
            &sweep.linear_path)
      .text({"--json", "", "FILE", "write the report as JSON, rewritten after every row"},
            &options.json_path)
      .text({"--csv", "", "FILE", "write the report as CSV, rewritten after every row"},
            &options.csv_path);
  declare_model_flags(flags, options.model);
  // The sweep sets the mode per run (--modes), and the model's length is its own.
  flags.remove("--mode").section("options").integer(
      {"--max-model-len", "", "N",
       "build the runners for a model of N tokens instead of the length the sweep's "
       "sequences need (at least that): decode graphs are then captured as tessera serve "
       "captures them for that length",
       ""},
      &sweep.max_model_len, 1, kMaxCount);
  return flags;
}

int run_sweep_command(const std::vector<std::string>& args) {
  SweepCommandOptions command;
  sweep_flags(command).parse(args);
  const ModelFlags& flags = command.model;
  bench::SweepOptions& options = command.sweep;
  const std::string& json_path = command.json_path;
  const std::string& csv_path = command.csv_path;
  bool device_given = false;  // --device is an engine.device override too
  for (const std::string& override : flags.overrides) {
    if (starts_with_any(override, {"compilation.mode=", "compilation.cudagraph_mode="}))
      throw UsageError(
          fmt::format("bench sweep: -O {}: use --modes and --cudagraph-modes", override));
    if (override.starts_with("engine.device=")) device_given = true;
  }
  options.config = flags.load();
  if (options.config.speculative.enabled())
    throw UsageError(
        "bench sweep: --speculative-config: the sweep times the model's own decode steps; "
        "speculative decoding runs in serve and generate (time it with bench serve against a "
        "server started with it)");
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

struct ServeCommandOptions {
  bench::ServeOptions serve;
  std::string json_path, dataset;
  int64_t input_len = 128, output_len = 128;
  int64_t vocab_size = 256;  // every vocabulary Tessera loads has these ids
};

FlagSet serve_flags(ServeCommandOptions& options) {
  bench::ServeOptions& serve = options.serve;
  FlagSet flags("bench serve");
  flags.text({"--url", "", "URL", "the server"}, &serve.url)
      .text({"--endpoint", "", "PATH", "the completions route"}, &serve.endpoint)
      .text({"--model", "", "NAME", "the request's model (default: the first of GET /v1/models)"},
            &serve.model)
      .text({"--api-key", "", "KEY", "sent as a bearer token (default $TESSERA_API_KEY)"},
            &serve.api_key)
      .integer_list({"--concurrency", "", "C,...", "requests in flight at most, one level each"},
                    &serve.concurrency, 1, kMaxCount)
      .integer({"--num-prompts", "", "N", "prompts each level sends"}, &serve.num_prompts, 1,
               kMaxCount)
      .add({"--request-rate", "", "R",
            "Poisson arrivals at R requests/s (default inf: all at once)"},
           "inf or a positive number",
           [&serve](const std::string& flag, const std::string& value) {
             if (value != "inf") serve.request_rate = parse_positive_number(flag, value);
           })
      .integer({"--input-len", "", "L", "random prompts of L token ids"}, &options.input_len, 1,
               kMaxCount)
      .integer({"--output-len", "", "L", "tokens each request asks for"}, &options.output_len, 1,
               kMaxCount)
      .integer({"--vocab-size", "", "V", "random ids are drawn from [0, V)"}, &options.vocab_size,
               1, std::numeric_limits<int32_t>::max())
      .text({"--dataset", "", "FILE",
             "JSON lines {\"prompt\": \"text\" or [ids], \"max_tokens\": N} instead of random "
             "prompts"},
            &options.dataset)
      .flag({"--ignore-eos", "", "", "ask for exactly max_tokens tokens (vLLM's ignore_eos)"},
            &serve.ignore_eos)
      .integer({"--seed", "", "S", "of the arrivals and random prompts"}, &serve.seed, uint64_t{0},
               static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      .positive_number({"--timeout", "", "SECONDS", "per read"}, &serve.timeout_seconds)
      .text({"--extra-body", "", "JSON",
             "fields added to every request (an object, e.g. {\"guided_json\": {...}})"},
            &serve.extra_body)
      .text({"--json", "", "FILE", "write the report as JSON"}, &options.json_path);
  return flags;
}

int run_serve_command(const std::vector<std::string>& args) {
  ServeCommandOptions command;
  FlagSet flags = serve_flags(command);
  flags.parse(args);
  bench::ServeOptions& options = command.serve;
  const std::string& dataset = command.dataset;
  if (options.api_key.empty())
    if (const char* key = std::getenv("TESSERA_API_KEY"); key != nullptr) options.api_key = key;
  if (!options.extra_body.empty()) {
    const auto extra = nlohmann::json::parse(options.extra_body, nullptr, false);
    if (!extra.is_object()) throw UsageError("bench serve: --extra-body must be a JSON object");
    for (const char* owned : {"model", "prompt", "max_tokens", "stream", "stream_options"})
      if (extra.contains(owned))
        throw UsageError(
            fmt::format("bench serve: --extra-body may not set '{}'; the "
                        "benchmark sets it",
                        owned));
  }
  const int64_t count = options.num_prompts;
  if (!dataset.empty()) {
    if (flags.given("--input-len"))
      throw UsageError("bench serve: --input-len is for random prompts, not --dataset");
    options.prompts = bench::read_prompt_file(dataset, count, command.output_len);
    options.prompt_source = "dataset " + dataset;
  } else {
    options.prompts = bench::random_prompts(count, command.input_len, command.output_len,
                                            command.vocab_size, options.seed);
    options.prompt_source = fmt::format("random token ids below {}: input {}, output {}",
                                        command.vocab_size, command.input_len, command.output_len);
  }
  bench::ProgressBar bar;
  auto progress = [&](int64_t concurrency, int64_t done, int64_t total) {
    bar.update(static_cast<size_t>(done), static_cast<size_t>(total),
               fmt::format("requests at concurrency {}", concurrency));
    if (done == total) bar.finish();
  };
  bench::ServeReport report = bench::run_serve_benchmark(std::move(options), progress);
  fmt::print("{}", bench::serve_table(report));
  if (!command.json_path.empty()) write_file(command.json_path, bench::serve_json(report));
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

std::string usage() {
  SweepCommandOptions sweep_defaults;
  ServeCommandOptions serve_defaults;
  return "usage: tessera bench sweep [--model PATH] [--batch-sizes 1,2,4,...] [--modes "
         "eager,compiled] [options]\n"
         "       tessera bench serve [--url http://127.0.0.1:8000] [--concurrency 1,16,64] "
         "[options]\n"
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
         "\n" +
         sweep_flags(sweep_defaults).help() +
         "\n"
         "bench serve: streams completions from an OpenAI-compatible server (POST\n"
         "/v1/completions, stream: true) with at most C requests in flight for each C of\n"
         "--concurrency, each level sending all --num-prompts prompts; reports completed/failed\n"
         "requests, request and token throughput, and TTFT, TPOT, ITL and end-to-end latency\n"
         "(mean, median, p90, p99). Exits 1 when a request failed.\n"
         "\n" +
         serve_flags(serve_defaults).help();
}

TESSERA_REGISTER_COMMAND((Command{"bench", "benchmark: batch-size sweep, or load on a server",
                                  usage, run_bench}));

}  // namespace
}  // namespace tessera::cli
