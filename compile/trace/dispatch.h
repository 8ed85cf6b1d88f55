// Dispatch: every ops:: call lands in call_op. In eager mode (no handler installed) it checks the
// arguments with the op's meta function, allocates the outputs and runs the device's kernel (or
// the op's eager function, or its decomposition when no kernel exists or the custom op is
// disabled). A DispatchHandler installed for the thread (the tracer) sees every call instead.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "compile/custom_op_config.h"
#include "compile/ir/op_registry.h"

namespace tessera {

class DispatchHandler {
 public:
  virtual ~DispatchHandler() = default;
  virtual std::vector<Tensor> handle(const OpDef& op, std::span<const Tensor> inputs,
                                     const Attributes& attributes) = 0;
};

DispatchHandler* current_dispatch_handler();

// Installs a handler for this thread for the guard's lifetime (nests).
class DispatchHandlerGuard {
 public:
  explicit DispatchHandlerGuard(DispatchHandler* handler);
  ~DispatchHandlerGuard();
  DispatchHandlerGuard(const DispatchHandlerGuard&) = delete;
  DispatchHandlerGuard& operator=(const DispatchHandlerGuard&) = delete;

 private:
  DispatchHandler* previous_;
};

// Whether a custom op runs its own kernel (enabled) or its decomposition in eager mode is a rule of
// the compiled function being run, not of the process: CompiledFunction installs its
// CompileOptions::custom_ops for this thread while it runs eagerly. With no rule installed every
// custom op is enabled. Guards nest; the rule must outlive its guard.
class EagerCustomOpRuleGuard {
 public:
  explicit EagerCustomOpRuleGuard(const CustomOpConfig& rule);
  ~EagerCustomOpRuleGuard();
  EagerCustomOpRuleGuard(const EagerCustomOpRuleGuard&) = delete;
  EagerCustomOpRuleGuard& operator=(const EagerCustomOpRuleGuard&) = delete;

 private:
  const CustomOpConfig* previous_;
};
bool eager_custom_op_enabled(const std::string& op_name);

std::vector<Tensor> call_op(const OpDef& op, std::span<const Tensor> inputs,
                            const Attributes& attributes);
std::vector<Tensor> call_op(const std::string& name, std::span<const Tensor> inputs,
                            const Attributes& attributes);

// Eager execution, bypassing any handler: what the `traced` backend uses to run a node.
std::vector<Tensor> run_eager(const OpDef& op, std::span<const Tensor> inputs,
                              const Attributes& attributes);
// Runs one device kernel of `op` (no decomposition): what the conformance test compares.
std::vector<Tensor> run_kernel_of(const OpDef& op, std::span<const Tensor> inputs,
                                  const Attributes& attributes);

// Checks the input count, fills in attribute defaults and canonicalizes them.
Attributes prepare_attributes(const OpDef& op, std::span<const Tensor> inputs,
                              const Attributes& given);

// Runs the device kernel of `op` writing into `outputs` (contiguous, allocated by the caller, e.g.
// at arena offsets); `attributes` must be prepared. What compiled pieces use for library steps.
void run_kernel_into(const OpDef& op, std::span<const Tensor> inputs, const Attributes& attributes,
                     std::span<Tensor> outputs);

TensorMeta meta_of(const Tensor& tensor);  // concrete tensors; fake ones via compile/fake_tensor
std::vector<TensorMeta> compute_output_metas(const OpDef& op, std::span<const Tensor> inputs,
                                             const Attributes& attributes);

}  // namespace tessera
