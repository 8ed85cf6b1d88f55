// A ModelExecutor that hands every call to another one: tests derive from it to watch or change
// one call (execute) and keep the rest.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/runner/model_executor.h"

namespace tessera::testing {

class ForwardingExecutor : public ModelExecutor {
 public:
  explicit ForwardingExecutor(ModelExecutor& inner) : inner_(inner) {}
  using ModelExecutor::execute;
  Tensor execute(std::span<const SequenceInput> batch, const Tensor& sampled_ids) override {
    return inner_.execute(batch, sampled_ids);
  }
  const CausalLM& model() const override { return inner_.model(); }
  const RunnerConfig& config() const override { return inner_.config(); }
  int64_t num_kv_blocks() const override { return inner_.num_kv_blocks(); }
  size_t kv_cache_bytes() const override { return inner_.kv_cache_bytes(); }
  std::string memory_report() const override { return inner_.memory_report(); }
  const CompiledFunction* compiled() const override { return inner_.compiled(); }
  std::shared_ptr<const CompiledPlan> latest_plan() const override { return inner_.latest_plan(); }
  std::vector<int64_t> captured_sizes() const override { return inner_.captured_sizes(); }

 protected:
  ModelExecutor& inner_;
};

}  // namespace tessera::testing
