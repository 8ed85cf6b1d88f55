// From a run config to a model and runner options: what `tessera generate`, `tessera explain`
// and the bench programs all need, in one place.
#pragma once

#include <memory>

#include "engine/config.h"
#include "engine/model_runner.h"

namespace tessera {

Device run_device(const EngineConfig& engine);
// engine.dtype, with "auto" meaning f32 on the CPU and bf16 on a GPU.
DType run_dtype(const EngineConfig& engine, Device device);
// Loads engine.model on the run device in the run dtype. The positions it serves: `max_positions`
// when given, else engine.max_model_len when set, else the model's max_position_embeddings; more
// than the model's own is an error.
std::shared_ptr<const CausalLM> load_run_model(const EngineConfig& engine,
                                               int64_t max_positions = 0);
// The runner's mode, compilation settings, custom ops (the mode's default when the list is
// empty), token budget, block size and KV blocks from the config: engine.num_kv_blocks, or when
// unset enough blocks for one sequence of `max_positions` tokens (the model's length); logged.
RunnerOptions make_runner_options(const RunConfig& config, int64_t max_positions);
// `options` with num_kv_blocks, when unset (0), sized for one sequence of max_positions tokens.
RunnerOptions with_kv_blocks_for(RunnerOptions options, int64_t max_positions);

}  // namespace tessera
