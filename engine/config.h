// A run's configuration: one YAML file with `engine:` and `compilation:` sections, any key of
// which can be overridden on the command line (-O compilation.mode=eager). Unknown
// keys and bad values are errors naming the key and listing what is valid.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compile/compilation_config.h"
#include "models/embedded_model.h"

namespace tessera {

struct EngineConfig {
  std::string model = std::string(kDefaultModel);  // stories260K, shipped in models/embedded/
  std::string tokenizer;                           // empty: from the model folder/file
  std::string device = "cpu";
  std::string dtype = "auto";  // auto: f32 on the CPU, bf16 on a GPU
  int64_t max_model_len = 0;   // 0: the model's max_position_embeddings
  int64_t max_num_batched_tokens = 2048;
  int64_t max_num_seqs = 64;
  int64_t block_size = 16;
  // 0: from gpu_memory_utilization on a GPU, one sequence of the model's length on the CPU.
  int64_t num_kv_blocks = 0;
  double gpu_memory_utilization = 0.9;  // the share of GPU memory the KV cache may fill up to
  // Ranks the model is sharded over (models/tensor_parallel.h): devices engine.device onwards.
  int64_t tensor_parallel_size = 1;
  bool enable_prefix_caching = true;  // share KV blocks of common prompt prefixes (serve)
  // Launch each decode step before the step before it has reached the host (its draws feed the
  // new step on the device), so the host's work overlaps the device's (engine/llm_engine.h).
  bool async_scheduling = true;
  int64_t seed = 0;                // requests without a seed derive theirs from it
  std::string host = "127.0.0.1";  // tessera serve's address
  int64_t port = 8000;
};

struct RunConfig {
  EngineConfig engine;
  CompilationConfig compilation;
};

// Reads `path` (empty: defaults only), then applies each "section.key=value" override; the value
// is YAML (a scalar or a flow list like [1, 2, 4]). Throws tessera::Error naming the file, the key
// and the valid choices.
RunConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides = {});
// Every key with its type and default, for `--help` and the README.
std::string describe_config_keys();

}  // namespace tessera
