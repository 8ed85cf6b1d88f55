#include "engine/run_setup.h"

#include <algorithm>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "engine/kv_cache_manager.h"
#include "kernels/check.h"
#include "models/architecture_registry.h"
#include "models/tokenizer/byte_tokenizer.h"

namespace tessera {

Device run_device(const EngineConfig& engine) {
  return parse_device(engine.device);
}

DType run_dtype(const EngineConfig& engine, Device device) {
  if (engine.dtype == "auto") return device.is_cpu() ? DType::f32 : DType::bf16;
  return parse_dtype(engine.dtype);
}

std::shared_ptr<const CausalLM> load_run_model(const EngineConfig& engine, int64_t max_positions) {
  Device device = run_device(engine);
  ModelWeights weights = load_model(engine.model, LoadOptions{run_dtype(engine, device), device});
  const int64_t limit = weights.config.max_position_embeddings;
  int64_t positions = max_positions > 0          ? max_positions
                      : engine.max_model_len > 0 ? std::min(engine.max_model_len, limit)
                                                 : limit;
  TESSERA_REQUIRE(positions <= limit,
                  "{} positions were asked for but {} serves at most max_position_embeddings = {}",
                  positions, engine.model, limit);
  return create_model(std::move(weights), positions);
}

std::unique_ptr<Tokenizer> load_run_tokenizer(const EngineConfig& engine) {
  const std::string& model = engine.model;
  if (!engine.tokenizer.empty()) return load_tokenizer(engine.tokenizer);
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

RunnerOptions make_serving_runner_options(const RunConfig& config, const CausalLM& model) {
  RunnerOptions options = make_runner_options(config, model.max_positions());
  if (config.engine.num_kv_blocks > 0 || !run_device(config.engine).is_cpu()) return options;
  const ModelConfig& c = model.config();
  const size_t bytes_per_block = 2 * static_cast<size_t>(c.num_layers) *
                                 static_cast<size_t>(c.num_kv_heads) *
                                 static_cast<size_t>(c.head_dim) * element_size(model.dtype()) *
                                 static_cast<size_t>(options.block_size);
  const int64_t per_sequence =
      KVCacheManager::blocks_for(model.max_positions(), options.block_size);
  const int64_t affordable =
      static_cast<int64_t>(cpu_kv_cache_bytes / std::max<size_t>(bytes_per_block, 1));
  options.num_kv_blocks =
      std::max(per_sequence, std::min(per_sequence * options.max_num_seqs, affordable));
  spdlog::info(
      "KV cache: {} blocks of {} tokens ({} tokens, {:.1f} MiB; up to "
      "engine.max_num_seqs = {} sequences of {} tokens within {} GiB on the CPU)",
      options.num_kv_blocks, options.block_size, options.num_kv_blocks * options.block_size,
      static_cast<double>(bytes_per_block) * static_cast<double>(options.num_kv_blocks) / 1048576.0,
      options.max_num_seqs, model.max_positions(), cpu_kv_cache_bytes >> 30);
  return options;
}

RunnerOptions with_kv_blocks_for(RunnerOptions options, int64_t max_positions) {
  if (options.num_kv_blocks == 0)
    options.num_kv_blocks = KVCacheManager::blocks_for(max_positions, options.block_size);
  return options;
}

RunnerOptions make_runner_options(const RunConfig& config, int64_t max_positions) {
  RunnerOptions options;
  options.mode = config.compilation.mode;
  options.compilation = config.compilation;
  options.custom_ops = CustomOpConfig::parse(config.compilation.custom_ops,
                                             config.compilation.custom_ops_default_enabled());
  options.max_num_batched_tokens = config.engine.max_num_batched_tokens;
  options.block_size = config.engine.block_size;
  options.num_kv_blocks = config.engine.num_kv_blocks;
  options.gpu_memory_utilization = config.engine.gpu_memory_utilization;
  options.max_num_seqs = config.engine.max_num_seqs;
  if (options.num_kv_blocks > 0) {
    spdlog::info("KV cache: {} blocks of {} tokens (engine.num_kv_blocks; {} tokens)",
                 options.num_kv_blocks, options.block_size,
                 options.num_kv_blocks * options.block_size);
  } else if (run_device(config.engine).is_cpu()) {
    options = with_kv_blocks_for(options, max_positions);
    spdlog::info("KV cache: {} blocks of {} tokens (one sequence of the model's length; {} tokens)",
                 options.num_kv_blocks, options.block_size,
                 options.num_kv_blocks * options.block_size);
  }  // else the runner sizes it from engine.gpu_memory_utilization after profiling
  return options;
}

}  // namespace tessera
