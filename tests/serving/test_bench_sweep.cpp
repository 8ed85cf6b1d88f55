// `tessera bench sweep` on the CPU: a tiny sweep (synthetic:tiny, batch 1 and 4, eager and
// compiled) writes JSON and CSV that parse and hold every row asked for, bench/plot_sweep.py draws
// PNGs from it, and options that cannot apply are errors; --profile prints each row's launch
// counts and profile tables; the percentiles both benchmarks use.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "engine/bench/statistics.h"
#include "runtime/backend/backend.h"
#include "support/server_process.h"
#include "support/test_tensors.h"

using namespace tessera;
using namespace tessera::testing;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

std::string read_text(const std::string& path) {
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  return text.str();
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  std::string part;
  while (std::getline(stream, part, separator)) parts.push_back(part);
  if (!text.empty() && text.back() == separator) parts.emplace_back();
  return parts;
}

// One sweep for the whole suite: it compiles kernels, which takes a while on two cores.
class BenchSweep : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    directory_ = new std::string(fresh_temp_dir("bench_sweep"));
    std::filesystem::create_directories(*directory_);
    result_ = new CommandResult(run_shell(
        fmt::format("'{}' bench sweep --model synthetic:tiny --device cpu --batch-sizes 1,4 "
                    "--modes eager,compiled --context 16 --steps 4 --warmup 1 --prompt-len 24 "
                    "--json '{}/sweep.json' --csv '{}/sweep.csv'",
                    TESSERA_BINARY, *directory_, *directory_),
        true));
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*directory_);
    delete result_;
    delete directory_;
  }
  static std::string path(const std::string& name) { return *directory_ + "/" + name; }

  static std::string* directory_;
  static CommandResult* result_;
};

std::string* BenchSweep::directory_ = nullptr;
CommandResult* BenchSweep::result_ = nullptr;

const std::set<std::pair<std::string, int64_t>> kRowsAskedFor = {
    {"eager", 1}, {"eager", 4}, {"compiled", 1}, {"compiled", 4}};

TEST_F(BenchSweep, PrintsTheTableOnStdoutAndLogsOnStderr) {
  ASSERT_EQ(result_->status, 0) << result_->error_output;
  EXPECT_THAT(result_->output, HasSubstr("=== tessera bench sweep: synthetic:tiny"));
  EXPECT_THAT(result_->output, HasSubstr("the CPU has no CUDA graphs"));
  EXPECT_THAT(result_->output, Not(HasSubstr("[info]")));
  EXPECT_THAT(result_->output, Not(HasSubstr("--- profile:")));  // only with --profile
  EXPECT_THAT(result_->error_output, HasSubstr("[info]"));
}

TEST_F(BenchSweep, JsonHoldsEveryRowModeAndTheRunsContext) {
  ASSERT_EQ(result_->status, 0) << result_->error_output;
  const json report = json::parse(read_text(path("sweep.json")));
  EXPECT_EQ(report["schema"], "tessera-sweep/1");
  EXPECT_EQ(report["engine"], "tessera");
  EXPECT_TRUE(report["complete"].get<bool>());
  EXPECT_FALSE(report["commit"].get<std::string>().empty());
  EXPECT_FALSE(report["machine"]["hostname"].get<std::string>().empty());
  EXPECT_GT(report["machine"]["cores"].get<int64_t>(), 0);
  EXPECT_EQ(report["device"]["device"], "cpu");
  const json& config = report["config"];
  EXPECT_EQ(config["model"], "synthetic:tiny");
  EXPECT_EQ(config["dtype"], "f32");
  EXPECT_EQ(config["batch_sizes"], json({1, 4}));
  EXPECT_EQ(config["cudagraph_modes"], json({"none"}));
  EXPECT_EQ(config["context"], 16);
  EXPECT_EQ(config["steps"], 4);
  EXPECT_EQ(config["prompt_len"], 24);
  EXPECT_EQ(config["max_model_len"], 0);
  EXPECT_EQ(config["model_length"], 24);  // the longest sequence: the 24-token prompt
  EXPECT_EQ(config["profile"], false);
  EXPECT_EQ(config["linear"], "measured");
  EXPECT_GT(report["copy_gb_per_s"].get<double>(), 0);
  EXPECT_GT(report["weight_bytes_per_step"].get<double>(), 0);
  EXPECT_GT(report["startup"]["load_s"].get<double>(), 0);

  std::set<std::pair<std::string, int64_t>> rows;
  for (const json& row : report["rows"]) {
    const int64_t batch = row["batch_size"].get<int64_t>();
    rows.insert({row["label"].get<std::string>(), batch});
    EXPECT_EQ(row["cudagraph_mode"], "none");
    const double median = row["step_ms_median"].get<double>();
    EXPECT_GT(median, 0);
    EXPECT_GE(row["step_ms_p90"].get<double>(), median);
    EXPECT_LE(row["step_ms_min"].get<double>(), median);
    EXPECT_NEAR(row["tokens_per_s"].get<double>(), static_cast<double>(batch) / (median * 1e-3),
                1e-6 * row["tokens_per_s"].get<double>());
    EXPECT_GT(row["prefill_tokens_per_s"].get<double>(), 0);
    // Weight-read bandwidth is a batch-1 figure.
    EXPECT_EQ(row["weight_gb_per_s"].is_null(), batch != 1) << row.dump();
    EXPECT_EQ(row["weight_read_fraction_of_copy"].is_null(), batch != 1) << row.dump();
    if (batch == 1) {
      EXPECT_GT(row["weight_gb_per_s"].get<double>(), 0);
    }
  }
  EXPECT_EQ(rows, kRowsAskedFor);
  EXPECT_EQ(report["rows"].size(), kRowsAskedFor.size());

  ASSERT_EQ(report["modes"].size(), 2u);
  for (const json& mode : report["modes"]) {
    const json& startup = mode["startup"];
    EXPECT_GT(mode["ttft_ms"].get<double>(), 0);
    EXPECT_GT(mode["memory"]["kv_cache_bytes"].get<double>(), 0);
    EXPECT_TRUE(startup["capture_s"].is_null());  // no graphs on the CPU
    if (mode["label"] == "eager") {
      EXPECT_TRUE(startup["compile_cold_s"].is_null());
      EXPECT_EQ(mode["memory"]["arena_bytes"], 0);
    } else {
      EXPECT_EQ(mode["label"], "compiled");
      EXPECT_GE(startup["compile_cold_s"].get<double>(), 0);
      EXPECT_GE(startup["compile_warm_s"].get<double>(), 0);
      EXPECT_GT(mode["memory"]["arena_bytes"].get<double>(), 0);
    }
  }
}

TEST_F(BenchSweep, CsvHasAHeaderAndOneLinePerRow) {
  ASSERT_EQ(result_->status, 0) << result_->error_output;
  std::vector<std::string> lines = split(read_text(path("sweep.csv")), '\n');
  ASSERT_FALSE(lines.empty());
  ASSERT_EQ(lines.back(), "");  // ends with a newline
  lines.pop_back();
  const std::vector<std::string> header = split(lines.front(), ',');
  EXPECT_EQ(header.front(), "engine");
  ASSERT_EQ(lines.size(), kRowsAskedFor.size() + 1);
  std::set<std::pair<std::string, int64_t>> rows;
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::vector<std::string> cells = split(lines[i], ',');
    ASSERT_EQ(cells.size(), header.size()) << lines[i];
    std::map<std::string, std::string> row;
    for (size_t c = 0; c < cells.size(); ++c) row[header[c]] = cells[c];
    EXPECT_EQ(row["engine"], "tessera");
    rows.insert({row["label"], std::stoll(row["batch_size"])});
    for (const char* number :
         {"step_ms_median", "step_ms_p90", "tokens_per_s", "prefill_tokens_per_s", "ttft_ms"})
      EXPECT_GT(std::stod(row[number]), 0) << number << " in " << lines[i];
    EXPECT_EQ(row["weight_gb_per_s"].empty(), row["batch_size"] != "1") << lines[i];
  }
  EXPECT_EQ(rows, kRowsAskedFor);
}

// A Python with matplotlib: Debian's (scripts/setup.sh installs python3-matplotlib), else the
// first python3 on PATH that has it; empty when none has.
std::string python_with_matplotlib() {
  for (const char* python : {"/usr/bin/python3", "python3"})
    if (run_shell(fmt::format("{} -c 'import matplotlib' >/dev/null 2>&1", python)).status == 0)
      return python;
  return "";
}

TEST_F(BenchSweep, PlotScriptRendersPngsFromTheJson) {
  ASSERT_EQ(result_->status, 0) << result_->error_output;
  const std::string python = python_with_matplotlib();
  if (python.empty())
    GTEST_SKIP() << "no python3 with matplotlib (apt-get install python3-matplotlib)";
  const std::string plots = path("plots");
  CommandResult plot = run_shell(fmt::format("{} '{}/bench/plot_sweep.py' '{}' --out-dir '{}'",
                                             python, TESSERA_SOURCE_DIR, path("sweep.json"), plots),
                                 true);
  ASSERT_EQ(plot.status, 0) << plot.error_output;
  for (const char* name : {"sweep.png", "startup.png"}) {
    const std::string png = read_text(plots + "/" + name);
    ASSERT_GT(png.size(), 1000u) << name;
    EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8)) << name;
  }
  // Not a sweep: a clear error, status 2.
  std::ofstream(path("other.json")) << R"({"schema": "something-else"})";
  CommandResult wrong =
      run_shell(fmt::format("{} '{}/bench/plot_sweep.py' '{}' --out-dir '{}'", python,
                            TESSERA_SOURCE_DIR, path("other.json"), plots),
                true);
  EXPECT_EQ(wrong.status, 2);
  EXPECT_THAT(wrong.error_output, HasSubstr("not a tessera-sweep/1 file"));
}

CommandResult run_sweep(const std::string& arguments) {
  return run_shell(fmt::format("'{}' bench sweep {}", TESSERA_BINARY, arguments), true);
}

TEST(BenchSweepOptions, WhatCannotApplyIsAnError) {
  CommandResult graphs = run_sweep("--device cpu --cudagraph-modes none,piecewise");
  EXPECT_EQ(graphs.status, 1);
  EXPECT_THAT(graphs.error_output, HasSubstr("the CPU has no CUDA graphs"));
  CommandResult batch = run_sweep("--device cpu --batch-sizes 1,4096");
  EXPECT_EQ(batch.status, 1);
  EXPECT_THAT(batch.error_output, HasSubstr("engine.max_num_batched_tokens"));
  CommandResult twice = run_sweep("--device cpu --modes eager,eager");
  EXPECT_EQ(twice.status, 1);
  EXPECT_THAT(twice.error_output, HasSubstr("listed twice"));
  EXPECT_EQ(run_sweep("--mode eager").status, 2);  // --modes is the sweep's
  EXPECT_EQ(run_sweep("-O compilation.mode=eager").status, 2);
  EXPECT_EQ(run_sweep("--batch-sizes 1,,4").status, 2);
  EXPECT_EQ(run_sweep("--steps 0").status, 2);
  CommandResult short_model = run_sweep("--device cpu --context 16 --steps 4 --max-model-len 20");
  EXPECT_EQ(short_model.status, 1);
  EXPECT_THAT(short_model.error_output,
              HasSubstr("--max-model-len 20 is shorter than the 128 tokens"));
  CommandResult kv = run_sweep("--device cpu -O engine.num_kv_blocks=8");
  EXPECT_EQ(kv.status, 1);
  EXPECT_THAT(kv.error_output, HasSubstr("engine.num_kv_blocks"));
  // The linear paths are the GPU's: on the CPU anything but measured is an error.
  for (const char* path : {"library", "fastest"}) {
    CommandResult linear = run_sweep(fmt::format("--device cpu --linear {}", path));
    EXPECT_EQ(linear.status, 1);
    EXPECT_THAT(linear.error_output,
                HasSubstr(fmt::format("--linear {}: the CPU has one linear path", path)));
  }
  EXPECT_EQ(run_sweep("--linear").status, 2);  // needs a value
  CommandResult which = run_shell(fmt::format("'{}' bench fly", TESSERA_BINARY), true);
  EXPECT_EQ(which.status, 2);
  EXPECT_THAT(which.error_output, HasSubstr("expected sweep or serve"));
}

// With asynchronous scheduling the first decode step runs untimed even without warm-up, and the
// model the sweep sizes holds that step too.
TEST(BenchSweepOptions, NoWarmUpStillFitsTheUntimedFirstStep) {
  for (const char* async : {"true", "false"}) {
    CommandResult result = run_sweep(fmt::format(
        "--device cpu --model synthetic:tiny --modes eager --batch-sizes 1 --context 8 --steps 2 "
        "--warmup 0 --prompt-len 8 -O engine.async_scheduling={}",
        async));
    EXPECT_EQ(result.status, 0) << async << ": " << result.error_output;
    EXPECT_THAT(result.output, HasSubstr(fmt::format("async scheduling {}",
                                                     std::string(async) == "true" ? "on" : "off")));
  }
}

// A mixture of experts: a decode step of one token reads the experts it chooses, not all of them
// (synthetic:qwen3-moe-tiny: 2 of 8 experts of 3 x 64 x 32 f32 in each of 2 layers; the untied
// 512 x 64 table is gathered from, not read), on one rank or two, in f32 or Q8_0.
TEST(BenchSweepOptions, AMixtureOfExpertsReadsTheChosenExpertsPerStep) {
  const std::string directory = fresh_temp_dir("bench_sweep_moe");
  std::filesystem::create_directories(directory);
  // The bytes the sweep counts as held but not read per step, for a model and flags.
  auto unread = [&](const std::string& model_and_flags) {
    CommandResult result = run_sweep(fmt::format(
        "--device cpu --model {} --modes eager --batch-sizes 1 --context 8 --steps 2 --warmup 1 "
        "--prompt-len 8 --json '{}/sweep.json'",
        model_and_flags, directory));
    EXPECT_EQ(result.status, 0) << result.error_output;
    const json report = json::parse(read_text(directory + "/sweep.json"));
    return report["weight_bytes"].get<double>() - report["weight_bytes_per_step"].get<double>();
  };
  EXPECT_DOUBLE_EQ(unread("synthetic:qwen3-moe-tiny"),
                   512.0 * 64 * 4 + 2 * 6 * (3.0 * 64 * 32 * 4));
  // Two CPU ranks, per rank: its half of the table, and tensor parallel, the halves (intermediate
  // 16) of the 6 experts a token leaves; expert parallel, 3 of the rank's 4 whole experts (a
  // token's 2 choices of the 8 fall on each rank's experts once on average).
  EXPECT_DOUBLE_EQ(unread("synthetic:qwen3-moe-tiny -tp 2"),
                   256.0 * 64 * 4 + 2 * 6 * (3.0 * 64 * 16 * 4));
  EXPECT_DOUBLE_EQ(unread("synthetic:qwen3-moe-tiny -tp 2 --enable-expert-parallel"),
                   256.0 * 64 * 4 + 2 * 3 * (3.0 * 64 * 32 * 4));
  // Q8_0 (blocks of 32 values in 34 bytes), counted as stored: the table's rows of 64, and each
  // unchosen expert's gate and up rows of 64 and down rows of 32.
  EXPECT_DOUBLE_EQ(unread("synthetic:qwen3-moe-tiny:q8_0"),
                   512.0 * 68 + 2 * 6 * (2 * 32 * 68.0 + 64 * 34));
  std::filesystem::remove_all(directory);
}

// --linear takes the GPU's skinny variants by name (registered when its module loads) on a
// device given on the command line.
TEST(GpuBenchSweepOptions, ASkinnyVariantIsALinearPath) {
  Device gpu;
  if (!first_gpu(&gpu)) GTEST_SKIP() << "no GPU device is available";
  const std::string directory = fresh_temp_dir("bench_sweep_variant");
  std::filesystem::create_directories(directory);
  CommandResult forced = run_sweep(fmt::format(
      "--device {} --model synthetic:tiny --modes compiled --cudagraph-modes none --batch-sizes 2 "
      "--context 8 --steps 2 --warmup 0 --prompt-len 8 --linear simt_r4 --json '{}/sweep.json'",
      gpu.str(), directory));
  ASSERT_EQ(forced.status, 0) << forced.error_output;
  std::ifstream file(directory + "/sweep.json");
  EXPECT_EQ(nlohmann::json::parse(file)["config"]["linear"], "simt_r4");
  CommandResult unknown = run_sweep(fmt::format("--device {} --linear fastest", gpu.str()));
  EXPECT_EQ(unknown.status, 1);
  EXPECT_THAT(unknown.error_output, HasSubstr("simt_r4"));  // the choices are listed
}

// The profile of a compiled decode step after the row: the launch counts of one step, then the
// three tables of one more, with the greedy pick in its own region. The model is loaded for the
// two extra steps: with a prompt no longer than the context, a model length of context + warm-up
// + steps would refuse them.
TEST(BenchSweepProfile, PrintsLaunchCountsAndTablesAfterEachRow) {
  const std::string directory = fresh_temp_dir("bench_sweep_profile");
  std::filesystem::create_directories(directory);
  CommandResult profiled = run_sweep(fmt::format(
      "--model synthetic:tiny --device cpu --batch-sizes 1,2 --modes compiled --context 8 "
      "--steps 2 --warmup 0 --prompt-len 8 --profile --linear measured --max-model-len 96 "
      "--json '{}/sweep.json'",
      directory));
  ASSERT_EQ(profiled.status, 0) << profiled.error_output;
  const std::string& output = profiled.output;
  for (const char* row : {"--- profile: compiled batch 1 (unprofiled median ",
                          "--- profile: compiled batch 2 (unprofiled median "})
    EXPECT_THAT(output, HasSubstr(row));
  EXPECT_THAT(output, HasSubstr("launches per step: "));
  EXPECT_THAT(output, HasSubstr(" launched from the host (gemm "));
  EXPECT_THAT(output, HasSubstr("on the device the step took "));
  EXPECT_THAT(output, HasSubstr("by class "));
  EXPECT_THAT(output, HasSubstr("by region (in step order) "));
  EXPECT_THAT(output, HasSubstr("kernels by total time (top 25) "));
  EXPECT_THAT(output, HasSubstr("\nsampling "));  // the region of the greedy pick
  // The profiles come before the sweep's table.
  EXPECT_LT(output.find("--- profile: compiled batch 2"),
            output.find("=== tessera bench sweep: synthetic:tiny"));
  EXPECT_THAT(output, HasSubstr("linear path measured; model length 96"));
  const json report = json::parse(read_text(directory + "/sweep.json"));
  EXPECT_EQ(report["config"]["max_model_len"], 96);
  EXPECT_EQ(report["config"]["model_length"],
            96);  // built for it, not for the 12 tokens its steps need
  EXPECT_EQ(report["config"]["profile"], true);
  EXPECT_EQ(report["config"]["linear"], "measured");
  EXPECT_EQ(report["rows"].size(), 2u);
  std::filesystem::remove_all(directory);
}

TEST(BenchStatistics, PercentilesInterpolateBetweenRanks) {
  const std::vector<double> samples{4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(bench::percentile(samples, 0), 1);
  EXPECT_DOUBLE_EQ(bench::percentile(samples, 50), 2.5);
  EXPECT_DOUBLE_EQ(bench::percentile(samples, 90), 3.7);
  EXPECT_DOUBLE_EQ(bench::percentile(samples, 100), 4);
  EXPECT_DOUBLE_EQ(bench::percentile(std::vector<double>{7}, 99), 7);
  const bench::Distribution distribution = bench::Distribution::of(samples);
  EXPECT_DOUBLE_EQ(distribution.mean, 2.5);
  EXPECT_DOUBLE_EQ(distribution.median, 2.5);
  EXPECT_DOUBLE_EQ(distribution.p99, 3.97);
  EXPECT_DOUBLE_EQ(bench::Distribution::of({}).p90, 0);
}

}  // namespace
