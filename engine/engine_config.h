// A run's configuration as one typed tree, as vLLM's VllmConfig: built and validated once by
// load_run_config (engine/config.h) from the YAML file, -O overrides and flags, then handed out by
// part (the scheduler takes SchedulerConfig, the runner RunnerConfig, the server ServerConfig).
// Every setting and its default is declared once: here, or in CompilationConfig
// (compile/compilation_config.h), the part the compiler reads. The YAML's `engine:` section maps
// onto the parts below (configs/default.yaml; describe_config_keys() lists where each key goes).
#pragma once

#include <cstdint>
#include <string>

#include "compile/compilation_config.h"
#include "models/embedded_model.h"
#include "runtime/dtype.h"

namespace tessera {

// Which model to load and how (engine.model, tokenizer, device, dtype, max_model_len). Not
// vLLM's name: ModelConfig is the architecture read from the checkpoint (models/model_config.h).
struct ModelLoadConfig {
  std::string model = std::string(kDefaultModel);  // stories260K, shipped in models/embedded/
  std::string tokenizer;                           // empty: from the model folder/file
  std::string device = "cpu";
  std::string dtype = "auto";  // auto: f32 on the CPU, bf16 on a GPU
  // none (as stored) or fp8: a float model's projections quantized to FP8 at load time
  // (vLLM's --quantization fp8; models/loaders/fp8_weights.h).
  std::string quantization = "none";
  int64_t max_model_len = 0;  // 0: the model's max_position_embeddings
};

// The paged KV cache.
struct CacheConfig {
  int64_t block_size = 16;
  // 0: from gpu_memory_utilization on a GPU, one sequence of the model's length on the CPU
  // (make_runner_config resolves it there).
  int64_t num_kv_blocks = 0;
  double gpu_memory_utilization = 0.9;  // the share of GPU memory the KV cache may fill up to
  bool enable_prefix_caching = true;    // share KV blocks of common prompt prefixes (serve)
  // auto: the model's dtype; fp8 (or fp8_e4m3): e4m3 codes with one scale per layer for K and
  // one for V, the checkpoint's k_scale / v_scale or else 1 (vLLM's --kv-cache-dtype). Half the
  // bytes of bf16: twice the tokens in the same memory.
  std::string kv_cache_dtype = "auto";
  DType dtype(DType model_dtype) const {
    return kv_cache_dtype == "auto" ? model_dtype : DType::f8_e4m3;
  }
};

// Each step's budget (engine/scheduler.h); the runner sizes its compiled plans and profiled
// logits rows for the same numbers.
// Which waiting request runs next, and which running one gives way when blocks run out (vLLM's
// --scheduling-policy): first come, first served; or by the request's `priority` (lower first,
// then arrival), a waiting request preempting running ones of a lower priority.
enum class SchedulingPolicy { fcfs, priority };
template <>
struct EnumNames<SchedulingPolicy> {
  static constexpr std::array values{
      std::pair{SchedulingPolicy::fcfs, std::string_view("fcfs")},
      std::pair{SchedulingPolicy::priority, std::string_view("priority")}};
};

struct SchedulerConfig {
  int64_t max_num_batched_tokens = 2048;
  int64_t max_num_seqs = 64;
  SchedulingPolicy policy = SchedulingPolicy::fcfs;
  // Launch each decode step before the step before it has reached the host (its draws feed the
  // new step on the device), so the host's work overlaps the device's (engine/llm_engine.h).
  bool async_scheduling = true;
};

struct ParallelConfig {
  // Ranks the model is sharded over (models/tensor_parallel.h): devices engine.device onwards.
  int64_t tensor_parallel_size = 1;
  // Mixtures of experts: whole experts on each rank (num_experts / ranks each) instead of every
  // expert's intermediate size split over the ranks (vLLM's enable_expert_parallel).
  bool enable_expert_parallel = false;
};

// Speculative decoding (vLLM's speculative_config; engine/speculative/): a proposer guesses a
// decoding request's next tokens and one forward of the model checks them all. Off when method is
// empty. Steps that verify proposals are collected before the next is scheduled.
struct SpeculativeConfig {
  std::string method;                  // "" (off) or ngram (prompt lookup)
  int64_t num_speculative_tokens = 0;  // proposed per step (k); the forward scores k + 1
  // ngram: the suffix lengths looked up, longest first (vLLM's defaults: 5 and 5; one given
  // sets the other when it is not).
  int64_t prompt_lookup_min = 0;
  int64_t prompt_lookup_max = 0;
  // No proposals while more requests than this are running (0: always propose): in a large batch
  // a step reads the weights for many tokens anyway, and verifying costs compute.
  int64_t disable_by_batch_size = 0;
  bool enabled() const { return !method.empty(); }
};

// tessera serve's address (engine.host, engine.port).
struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: any free port
};

struct EngineConfig {
  ModelLoadConfig model;
  CacheConfig cache;
  SchedulerConfig scheduler;
  ParallelConfig parallel;
  SpeculativeConfig speculative;
  CompilationConfig compilation;
  ServerConfig server;
  int64_t seed = 0;  // requests without a seed derive theirs from it
};

}  // namespace tessera
