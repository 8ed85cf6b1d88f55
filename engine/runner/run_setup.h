// From a run config to a model and a runner config: what `tessera generate`, `tessera explain`
// and the bench programs all need, in one place.
#pragma once

#include <memory>

#include "engine/config.h"
#include "engine/runner/model_runner.h"
#include "models/tokenizer.h"

namespace tessera {

Device run_device(const ModelLoadConfig& model);
// engine.dtype, with "auto" meaning f32 on the CPU and bf16 on a GPU.
DType run_dtype(const ModelLoadConfig& model, Device device);
// Loads engine.model on the run device in the run dtype. The positions it serves: `max_positions`
// when given, else engine.max_model_len when set, else the model's max_position_embeddings; more
// than the model's own is an error.
// One device only (engine.tensor_parallel_size must be 1).
std::shared_ptr<const CausalLM> load_run_model(const EngineConfig& config,
                                               int64_t max_positions = 0);
// The devices of engine.tensor_parallel_size ranks: engine.device and the next indices of its
// type (every rank on cpu on the CPU); an error naming the setting when the machine has fewer.
std::vector<Device> run_devices(const EngineConfig& config);
// One model per rank: without tensor parallelism the model on the run device; with it, the
// weights read to the host once and each rank's shard (models/tensor_parallel.h) on its device.
std::vector<std::shared_ptr<const CausalLM>> load_run_models(const EngineConfig& config,
                                                             int64_t max_positions = 0);
// A ModelRunner for one model, a TensorParallelRunner for several ranks.
std::unique_ptr<ModelExecutor> make_model_executor(
    std::vector<std::shared_ptr<const CausalLM>> models, const RunnerConfig& config);
// engine.tokenizer when given, else the tokenizer inside the model (folder, .gguf), else the byte
// tokenizer for synthetic models; a llama2.c checkpoint without --tokenizer is an error saying so.
std::unique_ptr<Tokenizer> load_run_tokenizer(const ModelLoadConfig& model);
// The runner's part of the config, with engine.num_kv_blocks resolved on the CPU when unset:
// enough blocks for one sequence of the model's max_positions() tokens; logged. Checked with
// check_run_memory().
RunnerConfig make_runner_config(const EngineConfig& config, const CausalLM& model);
// make_runner_config for a server: on the CPU, engine.num_kv_blocks unset means blocks for
// max_num_seqs sequences of max_positions tokens, at most cpu_kv_cache_bytes of them (and at
// least one sequence).
constexpr size_t cpu_kv_cache_bytes = size_t{4} << 30;
RunnerConfig make_serving_runner_config(const EngineConfig& config, const CausalLM& model);
// Throws, naming the setting to lower, when the KV cache of config.cache.num_kv_blocks, a forward
// at the token budget or the logits of max_num_seqs rows cannot fit in the model's device memory
// (sizes computed without overflow), before the runner allocates any of them.
void check_run_memory(const RunnerConfig& config, const CausalLM& model);
// `config` with cache.num_kv_blocks, when unset (0), sized for one sequence of max_positions
// tokens.
RunnerConfig with_kv_blocks_for(RunnerConfig config, int64_t max_positions);

}  // namespace tessera
