// What the engine, generate() and the benchmarks drive: the model's forward over a batch of
// sequences, whatever devices it runs on. One device: ModelRunner (engine/runner/model_runner.h);
// several, with tensor parallelism: TensorParallelRunner (engine/runner/tensor_parallel_runner.h).
// make_model_executor (engine/runner/run_setup.h) picks from engine.tensor_parallel_size.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runtime/tensor.h"

namespace tessera {

class CausalLM;
class CompiledFunction;
struct CompiledPlan;
struct RunnerConfig;
struct SequenceInput;

class ModelExecutor {
 public:
  virtual ~ModelExecutor() = default;
  // Logits [rows, vocab] as f32 on the (first) device: for each sequence in order, its
  // logits_rows rows (of its last new tokens; 1 unless proposals are verified), valid until the
  // next call. `sampled_ids` is the previous step's draws on the
  // (first) device (SampledBatch::device_ids), which a sequence's one new token may name by row
  // (SequenceInput::sampled_row) before the host has it; undefined when no sequence does.
  virtual Tensor execute(std::span<const SequenceInput> batch, const Tensor& sampled_ids) = 0;
  Tensor execute(std::span<const SequenceInput> batch) { return execute(batch, Tensor()); }
  // The argmax of each logits row, [rows] i64 on the (first) device: the tokens a
  // plain-greedy sampler draws from execute's logits (the first maximum of a row), valid until
  // the next call. By default argmax(execute(...)); a runner may pick them without the f32
  // logits (ModelRunner: in its compiled LM head and decode graphs).
  virtual Tensor execute_greedy(std::span<const SequenceInput> batch, const Tensor& sampled_ids);
  // The (first rank's) model: its config's vocab_size and max_positions() are the model's.
  virtual const CausalLM& model() const = 0;
  virtual const RunnerConfig& config() const = 0;
  // Blocks of the KV cache every rank holds (the scheduler's block count).
  virtual int64_t num_kv_blocks() const = 0;
  virtual size_t kv_cache_bytes() const = 0;  // of one device
  virtual std::string memory_report() const = 0;
  // The first rank's compiled forward, latest plan and captured sizes (ranks run alike).
  virtual const CompiledFunction* compiled() const = 0;
  virtual std::shared_ptr<const CompiledPlan> latest_plan() const = 0;
  virtual std::vector<int64_t> captured_sizes() const = 0;
};

}  // namespace tessera
