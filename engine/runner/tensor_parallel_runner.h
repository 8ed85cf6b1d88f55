// Tensor parallelism over the devices of one host (engine.tensor_parallel_size): one ModelRunner
// per rank, each over its shard of the model (models/tensor_parallel.h) on its own device, with
// its own KV cache, compiled plan and graphs. Rank 0 runs on the caller's thread (the engine's,
// so the sampler reads its logits on the same stream with no hand-off); ranks 1.. each run on a
// thread of their own for the runner's life, so a rank's thread-local state (current stream,
// communicator) stays put. The scheduler and the sampler run once, on rank 0's logits, which the
// LM head's all-gather makes whole.
//
// One process with a thread per GPU (ncclCommInitAll), not a process per GPU: no IPC to ship each
// step's batch, one place for errors, and the CPU communicator tests the same code in CI. The
// cost is that every rank shares one process's host threads; at decode the host side per step is
// small next to the GPU's.
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/runner/model_runner.h"

namespace tessera {

class TensorParallelRunner final : public ModelExecutor {
 public:
  // rank_models[r]: rank r's shard, on its own device; communicators from the devices' backend.
  // Builds every rank's runner at once (profiling and capture run collectives); the KV cache
  // block count is the smallest any rank could hold. A rank's failure aborts the group and is
  // rethrown here.
  TensorParallelRunner(std::vector<std::shared_ptr<const CausalLM>> rank_models,
                       const RunnerConfig& config);
  ~TensorParallelRunner() override;

  using ModelExecutor::execute;
  Tensor execute(std::span<const SequenceInput> batch, const Tensor& sampled_ids) override;
  // Every rank picks from its gathered logits (ModelRunner::execute_greedy, so the ranks replay
  // the same graphs and collectives); rank 0's ids.
  Tensor execute_greedy(std::span<const SequenceInput> batch, const Tensor& sampled_ids) override;

  const CausalLM& model() const override { return runners_.front()->model(); }
  const RunnerConfig& config() const override { return runners_.front()->config(); }
  int64_t num_kv_blocks() const override { return num_kv_blocks_; }
  size_t kv_cache_bytes() const override { return runners_.front()->kv_cache_bytes(); }
  std::string memory_report() const override;
  const CompiledFunction* compiled() const override { return runners_.front()->compiled(); }
  std::shared_ptr<const CompiledPlan> latest_plan() const override {
    return runners_.front()->latest_plan();
  }
  std::vector<int64_t> captured_sizes() const override {
    return runners_.front()->captured_sizes();
  }
  int size() const { return static_cast<int>(communicators_.size()); }
  const ModelRunner& rank_runner(int rank) const { return *runners_.at(static_cast<size_t>(rank)); }

 private:
  // execute (greedy false) or execute_greedy (true) on every rank; rank 0's result.
  Tensor run_step(std::span<const SequenceInput> batch, const Tensor& sampled_ids, bool greedy);
  // Runs work(rank) on every rank (rank 0 here) and waits; the first error is rethrown after
  // the group is aborted, so no rank waits forever in a collective for one that failed.
  void on_every_rank(const std::function<void(int)>& work);
  void worker_loop(int rank);
  void stop_workers();
  void abort_group();

  std::vector<std::unique_ptr<Communicator>> communicators_;
  std::vector<std::unique_ptr<ModelRunner>> runners_;
  int64_t num_kv_blocks_ = 0;

  // Ranks 1..: their threads, and the job they run.
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable job_posted_, job_done_;
  const std::function<void(int)>* job_ = nullptr;
  uint64_t generation_ = 0;
  int pending_ = 0;
  std::vector<std::exception_ptr> errors_;  // of the latest job, by rank
  bool stopping_ = false;
  bool broken_ = false;  // a collective was aborted: the group cannot run another step
};

}  // namespace tessera
