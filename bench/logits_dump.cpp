// Dumps the logits Tessera computes for a token sequence, for comparison with another engine
// (tests/hf_reference/compare_gpu.py compares them with transformers on a GPU machine).
//
//   logits_dump --model PATH --ids 1,2,3,... --prefill N --out FILE
//               [--device cuda|cpu] [--dtype bf16|f32] [--mode eager|traced|compiled]
//               [-O section.key=value ...]
//
// Runs a prefill of the first N ids, then one decode step per remaining id (teacher forcing: the
// next input is the given id, not a sampled one), and writes the logits of every step's last
// token: FILE holds [steps, vocab] little-endian float32 (steps = 1 + ids - N), FILE.json says
// {"steps", "vocab", "ids", "prefill", ...}. Exit status: 0 done, 1 runtime error, 2 bad usage.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "engine/config.h"
#include "engine/kv_cache_manager.h"
#include "engine/runner/model_runner.h"
#include "engine/runner/run_setup.h"
#include "models/model.h"
#include "models/model_weights.h"
#include "runtime/check.h"
#include "runtime/logging.h"

namespace tessera::bench {
namespace {

constexpr const char* kUsage =
    "usage: logits_dump --model PATH --ids 1,2,3,... --prefill N --out FILE\n"
    "                   [--device cuda|cpu] [--dtype bf16|f32] [--mode eager|traced|compiled]\n"
    "                   [-O section.key=value ...]\n"
    "\n"
    "Prefills the first N ids, then decodes the rest one id per step (teacher forcing), and\n"
    "writes each step's last-token logits to FILE as little-endian float32 [steps, vocab]\n"
    "(steps = 1 + number of ids - N) with FILE.json holding {steps, vocab, ids, prefill}.\n"
    "PATH is anything `tessera generate --model` takes (HF folder, .bin, .gguf, synthetic:NAME).\n"
    "Defaults: --device cpu, --dtype auto (f32 on the CPU, bf16 on a GPU), --mode eager;\n"
    "-O overrides any run-config key (engine.block_size, compilation.custom_ops, ...).\n";

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Options {
  std::string model;
  std::vector<int32_t> ids;
  int64_t prefill = 0;
  std::string out;
  // Empty when not given: the run config's value (after -O overrides) stands.
  std::string device, dtype, mode;
  std::vector<std::string> overrides{"compilation.mode=eager"};  // eager unless told otherwise
};

int64_t parse_integer(std::string_view flag, std::string_view text) {
  int64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size())
    throw UsageError(fmt::format("{}: '{}' is not an integer", flag, text));
  return value;
}

std::vector<int32_t> parse_ids(std::string_view text) {
  std::vector<int32_t> ids;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t comma = std::min(text.find(',', begin), text.size());
    int64_t id = parse_integer("--ids", text.substr(begin, comma - begin));
    if (id < 0 || id > INT32_MAX) throw UsageError(fmt::format("--ids: {} is not a token id", id));
    ids.push_back(static_cast<int32_t>(id));
    begin = comma + 1;
  }
  return ids;
}

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (i + 1 >= argc) throw UsageError(fmt::format("{} needs a value", flag));
    std::string value = argv[++i];
    if (flag == "--model") {
      options.model = value;
    } else if (flag == "--ids") {
      options.ids = parse_ids(value);
    } else if (flag == "--prefill") {
      options.prefill = parse_integer(flag, value);
    } else if (flag == "--out") {
      options.out = value;
    } else if (flag == "--device") {
      options.device = value;
    } else if (flag == "--dtype") {
      options.dtype = value;
    } else if (flag == "--mode") {
      options.mode = value;
    } else if (flag == "-O") {
      options.overrides.push_back(value);
    } else {
      throw UsageError(fmt::format("unknown option '{}'", flag));
    }
  }
  if (options.model.empty()) throw UsageError("--model is required");
  if (options.out.empty()) throw UsageError("--out is required");
  if (options.ids.empty()) throw UsageError("--ids is required");
  if (options.prefill < 1 || options.prefill > static_cast<int64_t>(options.ids.size()))
    throw UsageError(fmt::format("--prefill must be between 1 and the number of ids ({}), not {}",
                                 options.ids.size(), options.prefill));
  return options;
}

// Prefill, then teacher-forced decode steps; one logits row per step.
std::vector<std::vector<float>> run_steps(ModelRunner& runner, const std::vector<int32_t>& ids,
                                          int64_t prefill) {
  KVCacheManager blocks(runner.num_kv_blocks(), runner.config().cache.block_size);
  std::vector<std::vector<float>> rows;
  int64_t done = 0;
  while (done < static_cast<int64_t>(ids.size())) {
    int64_t count = done == 0 ? prefill : 1;
    blocks.allocate(0, done + count);
    SequenceInput input{std::span(ids).subspan(done, count), done, blocks.block_table(0)};
    rows.push_back(logits_to_host(runner.execute(std::span(&input, 1))).at(0));
    done += count;
  }
  return rows;
}

void write_outputs(const Options& options, const std::vector<std::vector<float>>& rows,
                   int64_t vocab, Device device, DType dtype, const std::string& mode) {
  static_assert(std::endian::native == std::endian::little, "the dump format is little-endian");
  std::ofstream data(options.out, std::ios::binary);
  TESSERA_REQUIRE(data.good(), "cannot write {}", options.out);
  for (const std::vector<float>& row : rows) {
    TESSERA_CHECK(static_cast<int64_t>(row.size()) == vocab, "logits row of {} values, vocab {}",
                  row.size(), vocab);
    data.write(reinterpret_cast<const char*>(row.data()),
               static_cast<std::streamsize>(row.size() * sizeof(float)));
  }
  TESSERA_REQUIRE(data.good(), "writing {} failed (disk full?)", options.out);
  nlohmann::json sidecar = {{"steps", rows.size()},       {"vocab", vocab},
                            {"ids", options.ids},         {"prefill", options.prefill},
                            {"model", options.model},     {"device", device.str()},
                            {"dtype", dtype_name(dtype)}, {"mode", mode}};
  std::ofstream(options.out + ".json") << sidecar.dump() << "\n";
}

int run(const Options& options) {
  // The flags are keys of the config too, applied after -O.
  std::vector<std::string> overrides = options.overrides;
  if (!options.device.empty()) overrides.push_back("engine.device=" + options.device);
  if (!options.dtype.empty()) overrides.push_back("engine.dtype=" + options.dtype);
  if (!options.mode.empty()) overrides.push_back("compilation.mode=" + options.mode);
  overrides.push_back("engine.model=" + options.model);
  EngineConfig config = load_run_config("", overrides);
  config.scheduler.max_num_batched_tokens =
      std::max(config.scheduler.max_num_batched_tokens, options.prefill);
  Device device = run_device(config.model);
  DType dtype = run_dtype(config.model, device);
  // The RoPE table and KV cache only need to hold this sequence.
  auto model = load_run_model(config, static_cast<int64_t>(options.ids.size()));
  ModelRunner runner(model, make_runner_config(config, *model));
  const std::string mode(enum_name(config.compilation.mode));

  std::vector<std::vector<float>> rows = run_steps(runner, options.ids, options.prefill);
  write_outputs(options, rows, model->config().vocab_size, device, dtype, mode);
  fmt::print("{}: {} steps x {} logits ({} {} {}, prefill {}) -> {}\n", options.model, rows.size(),
             model->config().vocab_size, device.str(), dtype_name(dtype), mode, options.prefill,
             options.out);
  return 0;
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) {
  tessera::log_to_stderr();
  try {
    return tessera::bench::run(tessera::bench::parse(argc, argv));
  } catch (const tessera::bench::UsageError& error) {
    std::fprintf(stderr, "logits_dump: %s\n%s", error.what(), tessera::bench::kUsage);
    return 2;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "logits_dump: %s\n", error.what());
    return 1;
  }
}
