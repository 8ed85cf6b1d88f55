#include "engine/runner/run_setup.h"

#include <algorithm>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "engine/kv_cache_manager.h"
#include "engine/runner/tensor_parallel_runner.h"
#include "models/architecture_registry.h"
#include "models/embedded_model.h"
#include "models/tensor_parallel.h"
#include "models/tokenizer/byte_tokenizer.h"
#include "runtime/backend/backend.h"
#include "runtime/check.h"
#include "runtime/checked_math.h"

namespace tessera {

Device run_device(const ModelLoadConfig& model) {
  return parse_device(model.device);
}

DType run_dtype(const ModelLoadConfig& model, Device device) {
  if (model.dtype == "auto") return device.is_cpu() ? DType::f32 : DType::bf16;
  return parse_dtype(model.dtype);
}

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string gib(std::optional<int64_t> bytes) {
  return bytes ? fmt::format("{:.2f} GiB", static_cast<double>(*bytes) / kGiB)
               : std::string("more than 2^63 bytes");
}

// Throws when `bytes` (nullopt: past int64) exceed the memory `device` has in all, naming what
// they are for and the setting to change, before anything of that size is allocated.
void require_fits(std::optional<int64_t> bytes, Device device, const std::string& what,
                  const std::string& fix) {
  const size_t total = backend(device).memory_info(device.index).first;
  TESSERA_REQUIRE(bytes && static_cast<uint64_t>(*bytes) <= total,
                  "{} needs {}, more than the {:.2f} GiB {} has; {}", what, gib(bytes),
                  static_cast<double>(total) / kGiB, device.str(), fix);
}

std::optional<int64_t> product(std::initializer_list<int64_t> factors) {
  std::optional<int64_t> result = 1;
  for (int64_t factor : factors)
    if (result) result = checked_multiply(*result, factor);
  return result;
}

}  // namespace

namespace {

// The positions a run serves (see load_run_model), checked against the model and against the
// memory of `devices` for the RoPE table.
int64_t run_positions(const ModelLoadConfig& load, const ModelConfig& config, int64_t max_positions,
                      std::span<const Device> devices) {
  const int64_t limit = config.max_position_embeddings;
  int64_t positions = max_positions > 0        ? max_positions
                      : load.max_model_len > 0 ? std::min(load.max_model_len, limit)
                                               : limit;
  TESSERA_REQUIRE(positions <= limit,
                  "{} positions were asked for but {} serves at most max_position_embeddings = {}",
                  positions, load.model, limit);
  // The RoPE cos/sin table (f32, head_dim per position) is built on the host, then moved.
  const std::optional<int64_t> table_bytes = product({positions, config.head_dim, 4});
  const std::string what =
      fmt::format("the RoPE table of {} for {} positions ({})", load.model, positions,
                  load.max_model_len > 0 || max_positions > 0
                      ? "engine.max_model_len"
                      : "the model's max_position_embeddings, as engine.max_model_len is unset");
  const std::string fix = "lower engine.max_model_len (--max-model-len)";
  require_fits(table_bytes, kCPU, what, fix);
  for (const Device& device : devices) require_fits(table_bytes, device, what, fix);
  return positions;
}

}  // namespace

std::shared_ptr<const CausalLM> load_run_model(const EngineConfig& config, int64_t max_positions) {
  TESSERA_REQUIRE(config.parallel.tensor_parallel_size == 1,
                  "this command runs one device; engine.tensor_parallel_size must be 1, got {}",
                  config.parallel.tensor_parallel_size);
  return load_run_models(config, max_positions).front();
}

std::vector<Device> run_devices(const EngineConfig& config) {
  const Device first = run_device(config.model);
  const int64_t ranks = config.parallel.tensor_parallel_size;
  if (first.is_cpu()) return std::vector<Device>(static_cast<size_t>(ranks), kCPU);
  const int count = backend(first).device_count();
  TESSERA_REQUIRE(first.index + ranks <= count,
                  "engine.tensor_parallel_size {} needs {} devices from {} on, but this machine "
                  "has {} {} device(s)",
                  ranks, ranks, first.str(), count, device_type_name(first.type));
  std::vector<Device> devices;
  for (int r = 0; r < ranks; ++r) devices.push_back(Device{first.type, first.index + r});
  return devices;
}

std::vector<std::shared_ptr<const CausalLM>> load_run_models(const EngineConfig& config,
                                                             int64_t max_positions) {
  const ModelLoadConfig& load = config.model;
  const std::vector<Device> devices = run_devices(config);
  const DType dtype = run_dtype(load, devices.front());
  const int ranks = static_cast<int>(devices.size());
  const std::string quantization = load.quantization == "none" ? "" : load.quantization;
  if (ranks == 1) {
    ModelWeights weights =
        load_model(load.model, LoadOptions{dtype, devices.front(), quantization});
    check_tensor_parallel(weights.config, 1, config.parallel.enable_expert_parallel);
    const int64_t positions = run_positions(load, weights.config, max_positions, devices);
    std::shared_ptr<const CausalLM> model = create_model(std::move(weights), positions);
    spdlog::info("weights of {}: {}", load.model, model->weight_formats_str());
    return {model};
  }
  // The whole model is read to the host once, then each rank's shard goes to its device.
  const ModelWeights full = load_model(load.model, LoadOptions{dtype, kCPU, quantization});
  const bool expert_parallel = config.parallel.enable_expert_parallel;
  check_tensor_parallel(full.config, ranks, expert_parallel);
  const int64_t positions = run_positions(load, full.config, max_positions, devices);
  std::vector<std::shared_ptr<const CausalLM>> models;
  for (int r = 0; r < ranks; ++r) {
    models.push_back(create_model(shard_weights(full, TensorParallel{r, ranks, expert_parallel},
                                                devices[static_cast<size_t>(r)]),
                                  positions));
  }
  spdlog::info("tensor parallel: {} sharded over {} ranks ({:.1f} MiB of weights on each){}",
               load.model, ranks, static_cast<double>(models.front()->weight_bytes()) / 1048576.0,
               expert_parallel ? fmt::format("; expert parallel: {} whole experts on each",
                                             models.front()->config().local_experts())
                               : "");
  return models;
}

std::unique_ptr<ModelExecutor> make_model_executor(
    std::vector<std::shared_ptr<const CausalLM>> models, const RunnerConfig& config) {
  TESSERA_CHECK(!models.empty(), "no model to run");
  if (models.size() == 1) return std::make_unique<ModelRunner>(models.front(), config);
  return std::make_unique<TensorParallelRunner>(std::move(models), config);
}

std::unique_ptr<Tokenizer> load_run_tokenizer(const ModelLoadConfig& load) {
  const std::string model = resolve_model_path(load.model);
  if (!load.tokenizer.empty()) return load_tokenizer(load.tokenizer);
  if (model.starts_with("synthetic:")) return make_byte_tokenizer();
  std::filesystem::path path(model);
  std::error_code error;
  if (std::filesystem::is_directory(path, error) || path.extension() == ".gguf")
    return load_tokenizer(model);
  throw Error(
      fmt::format("{} has no tokenizer inside; pass --tokenizer PATH (for llama2.c "
                  "checkpoints, its tokenizer .bin)",
                  model));
}

RunnerConfig make_serving_runner_config(const EngineConfig& config, const CausalLM& model) {
  RunnerConfig runner = make_runner_config(config, model);
  if (config.cache.num_kv_blocks > 0 || !run_device(config.model).is_cpu()) return runner;
  CacheConfig& cache = runner.cache;
  const ModelConfig& c = model.config();
  const size_t bytes_per_block =
      2 * static_cast<size_t>(c.num_layers) * static_cast<size_t>(c.num_kv_heads) *
      static_cast<size_t>(c.head_dim) * element_size(cache.dtype(model.dtype())) *
      static_cast<size_t>(cache.block_size);
  const int64_t per_sequence = KVCacheManager::blocks_for(model.max_positions(), cache.block_size);
  const int64_t affordable =
      static_cast<int64_t>(cpu_kv_cache_bytes / std::max<size_t>(bytes_per_block, 1));
  const int64_t max_num_seqs = runner.scheduler.max_num_seqs;
  cache.num_kv_blocks = std::max(per_sequence, std::min(per_sequence * max_num_seqs, affordable));
  spdlog::info(
      "KV cache: {} blocks of {} tokens of {} ({} tokens, {:.1f} MiB; up to "
      "engine.max_num_seqs = {} sequences of {} tokens within {} GiB on the CPU)",
      cache.num_kv_blocks, cache.block_size, dtype_name(cache.dtype(model.dtype())),
      cache.num_kv_blocks * cache.block_size,
      static_cast<double>(bytes_per_block) * static_cast<double>(cache.num_kv_blocks) / 1048576.0,
      max_num_seqs, model.max_positions(), cpu_kv_cache_bytes >> 30);
  check_run_memory(runner, model);
  return runner;
}

void check_run_memory(const RunnerConfig& runner, const CausalLM& model) {
  const ModelConfig& config = model.config();
  const auto element = static_cast<int64_t>(element_size(model.dtype()));
  const Device device = model.device();
  const CacheConfig& cache = runner.cache;
  if (cache.num_kv_blocks > 0) {
    require_fits(
        product({2, config.num_layers, cache.num_kv_blocks, cache.block_size, config.num_kv_heads,
                 config.head_dim, static_cast<int64_t>(element_size(cache.dtype(model.dtype())))}),
        device,
        fmt::format("a KV cache of {} blocks of {} tokens", cache.num_kv_blocks, cache.block_size),
        "lower engine.num_kv_blocks or engine.block_size");
  }
  // Lower bounds of what one forward at the token budget holds: the MLP's gate and up outputs,
  // and the logits of up to max_num_seqs rows.
  const SchedulerConfig& step = runner.scheduler;
  require_fits(product({step.max_num_batched_tokens, 2, config.intermediate_size, element}), device,
               fmt::format("a forward of {} tokens (engine.max_num_batched_tokens)",
                           step.max_num_batched_tokens),
               "lower engine.max_num_batched_tokens");
  const int64_t rows = std::min(step.max_num_seqs, step.max_num_batched_tokens);
  require_fits(product({rows, config.vocab_size, 4}), device,
               fmt::format("the logits of {} sequences (engine.max_num_seqs)", rows),
               "lower engine.max_num_seqs");
}

RunnerConfig with_kv_blocks_for(RunnerConfig config, int64_t max_positions) {
  CacheConfig& cache = config.cache;
  if (cache.num_kv_blocks == 0)
    cache.num_kv_blocks = KVCacheManager::blocks_for(max_positions, cache.block_size);
  return config;
}

RunnerConfig make_runner_config(const EngineConfig& config, const CausalLM& model) {
  RunnerConfig runner{config.compilation, config.scheduler, config.cache};
  // Verifying k proposed tokens scores k + 1 rows of a sequence in one step.
  if (config.speculative.enabled())
    runner.logits_rows_per_sequence = 1 + config.speculative.num_speculative_tokens;
  const CacheConfig& cache = runner.cache;
  if (cache.num_kv_blocks > 0) {
    spdlog::info("KV cache: {} blocks of {} tokens of {} (engine.num_kv_blocks; {} tokens)",
                 cache.num_kv_blocks, cache.block_size, dtype_name(cache.dtype(model.dtype())),
                 cache.num_kv_blocks * cache.block_size);
  } else if (run_device(config.model).is_cpu()) {
    runner = with_kv_blocks_for(runner, model.max_positions());
    spdlog::info(
        "KV cache: {} blocks of {} tokens of {} (one sequence of the model's length; {} tokens)",
        cache.num_kv_blocks, cache.block_size, dtype_name(cache.dtype(model.dtype())),
        cache.num_kv_blocks * cache.block_size);
  }  // else the runner sizes it from engine.gpu_memory_utilization after profiling
  check_run_memory(runner, model);
  return runner;
}

}  // namespace tessera
