#include "engine/runner/tensor_parallel_runner.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "runtime/backend/backend.h"
#include "runtime/check.h"

namespace tessera {

TensorParallelRunner::TensorParallelRunner(std::vector<std::shared_ptr<const CausalLM>> rank_models,
                                           const RunnerConfig& config) {
  const int ranks = static_cast<int>(rank_models.size());
  TESSERA_CHECK(ranks >= 2, "tensor parallelism over {} ranks", ranks);
  std::vector<int> devices;
  for (int r = 0; r < ranks; ++r) {
    const CausalLM& model = *rank_models[static_cast<size_t>(r)];
    TESSERA_CHECK(model.parallel().rank == r && model.parallel().size == ranks,
                  "rank {}'s model is shard {} of {}", r, model.parallel().rank,
                  model.parallel().size);
    TESSERA_CHECK(model.device().type == rank_models.front()->device().type,
                  "ranks on different device types");
    devices.push_back(model.device().index);
  }
  communicators_ = create_communicators(rank_models.front()->device().type, devices);
  runners_.resize(static_cast<size_t>(ranks));
  for (int r = 1; r < ranks; ++r) workers_.emplace_back([this, r] { worker_loop(r); });
  try {
    on_every_rank([&](int r) {
      runners_[static_cast<size_t>(r)] =
          std::make_unique<ModelRunner>(rank_models[static_cast<size_t>(r)], config,
                                        communicators_[static_cast<size_t>(r)].get());
    });
  } catch (...) {
    stop_workers();
    throw;
  }
  num_kv_blocks_ = runners_.front()->num_kv_blocks();
  for (const auto& runner : runners_)
    num_kv_blocks_ = std::min(num_kv_blocks_, runner->num_kv_blocks());
  spdlog::info(
      "tensor parallel: {} ranks on {}, {} KV blocks on each", ranks,
      [&] {
        std::string names;
        for (const auto& model : rank_models)
          names += (names.empty() ? "" : ", ") + model->device().str();
        return names;
      }(),
      num_kv_blocks_);
}

TensorParallelRunner::~TensorParallelRunner() {
  stop_workers();
}

void TensorParallelRunner::stop_workers() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  job_posted_.notify_all();
  for (std::thread& worker : workers_)
    if (worker.joinable()) worker.join();
}

void TensorParallelRunner::worker_loop(int rank) {
  uint64_t seen = 0;
  std::unique_lock lock(mutex_);
  while (true) {
    job_posted_.wait(lock, [&] { return stopping_ || generation_ != seen; });
    if (stopping_) return;
    seen = generation_;
    const std::function<void(int)>* job = job_;
    lock.unlock();
    std::exception_ptr failure;
    try {
      (*job)(rank);
    } catch (...) {
      failure = std::current_exception();
      abort_group();
    }
    lock.lock();
    errors_[static_cast<size_t>(rank)] = failure;
    if (--pending_ == 0) job_done_.notify_all();
  }
}

// Every rank's communicator, not only the failing one's: an NCCL abort reaches only its own
// communicator, and the other ranks would wait for the failed one forever.
void TensorParallelRunner::abort_group() {
  for (const auto& communicator : communicators_) communicator->abort();
}

void TensorParallelRunner::on_every_rank(const std::function<void(int)>& work) {
  TESSERA_REQUIRE(!broken_,
                  "tensor parallel: an earlier step failed on a rank and aborted the group's "
                  "collectives; restart the engine");
  {
    std::lock_guard lock(mutex_);
    job_ = &work;
    errors_.assign(static_cast<size_t>(size()), nullptr);
    pending_ = size() - 1;
    ++generation_;
  }
  job_posted_.notify_all();
  std::exception_ptr failure;
  try {
    work(0);
  } catch (...) {
    failure = std::current_exception();
    abort_group();
  }
  std::unique_lock lock(mutex_);
  job_done_.wait(lock, [&] { return pending_ == 0; });
  errors_[0] = failure;
  // A rank's own error, not the CollectiveAborted of the ranks it left waiting.
  std::exception_ptr reported;
  for (const std::exception_ptr& error : errors_) {
    if (!error) continue;
    if (!reported) reported = error;
    try {
      std::rethrow_exception(error);
    } catch (const CollectiveAborted&) {
    } catch (...) {
      reported = error;
      break;
    }
  }
  if (reported) {
    broken_ = true;
    std::rethrow_exception(reported);
  }
}

Tensor TensorParallelRunner::execute(std::span<const SequenceInput> batch,
                                     const Tensor& sampled_ids) {
  return run_step(batch, sampled_ids, false);
}

Tensor TensorParallelRunner::execute_greedy(std::span<const SequenceInput> batch,
                                            const Tensor& sampled_ids) {
  return run_step(batch, sampled_ids, true);
}

Tensor TensorParallelRunner::run_step(std::span<const SequenceInput> batch,
                                      const Tensor& sampled_ids, bool greedy) {
  // A bad batch is refused here, before any rank starts a collective, so the group stays usable.
  check_batch(batch, model(), config(), sampled_ids);
  // Draws named by row are read to the host here, the ranks then run on host ids: every rank
  // needs them, and they live on the first device only. (So the ranks wait for the step before.)
  std::vector<SequenceInput> resolved(batch.begin(), batch.end());
  std::vector<int32_t> taken(batch.size());
  if (std::any_of(batch.begin(), batch.end(),
                  [](const SequenceInput& s) { return s.sampled_row >= 0; })) {
    const std::vector<int64_t> draws = sampled_ids.to_ints();
    for (size_t s = 0; s < resolved.size(); ++s) {
      if (resolved[s].sampled_row < 0) continue;
      taken[s] = static_cast<int32_t>(draws[static_cast<size_t>(resolved[s].sampled_row)]);
      resolved[s].token_ids = std::span<const int32_t>(&taken[s], 1);
      resolved[s].sampled_row = -1;
    }
  }
  Tensor result;
  on_every_rank([&](int rank) {
    ModelRunner& runner = *runners_[static_cast<size_t>(rank)];
    Tensor rank_result =
        greedy ? runner.execute_greedy(resolved, Tensor()) : runner.execute(resolved);
    if (rank == 0) result = rank_result;
  });
  return result;
}

std::string TensorParallelRunner::memory_report() const {
  std::string report;
  for (size_t r = 0; r < runners_.size(); ++r)
    report += fmt::format("{}rank {}: {}", r == 0 ? "" : "; ", r, runners_[r]->memory_report());
  return report;
}

}  // namespace tessera
