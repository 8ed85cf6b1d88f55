// The one interface of a compile pass: its name, whether it applies to a compile (the device and
// the config), and what it does to the plan. One pass per file in compile/passes/, registered by
// name with TESSERA_REGISTER_PASS; compile/passes/pass_manager.cpp orders and runs them (vLLM's
// compilation/ passes and PostGradPassManager).
//
// No pass applies the custom-op config: as with vLLM's CustomOp dispatch, a disabled custom op is
// traced as its decomposition (compile/trace/tracer.cpp). Composite primitives (softmax) need no
// decomposition pass either: their row lowering writes them as reductions plus pointwise math.
// Passes ask the OpDef what an op is (kind, is_identity, row_lowering), never a list of names.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "compile/compiled_plan.h"

namespace tessera {

// What passes need besides the plan, the same for every pass of one compile (the config must
// outlive it). Every field but the config has a default: a test names what it needs.
struct PassContext {
  const CompilationConfig& config;
  Device device = kCPU;  // where the plan's inputs live and its kernels run
  // The largest value any symbol takes (CompilerOptions::max_dynamic_size): the plan's size.
  int64_t max_dynamic_size = 8192;
  std::string cache_dir{};              // resolved: where generated kernels are cached
  std::filesystem::path dump_folder{};  // empty: no dumps

  // Writes `text` to dump_folder/relative, creating folders, when dumps are on.
  void dump(const std::string& relative, const std::string& text) const;
};

class Pass {
 public:
  virtual ~Pass() = default;
  virtual std::string_view name() const = 0;
  // False when its switch in pass_config is off or the device has no use for it: the manager
  // leaves it out of the list.
  virtual bool applies(const PassContext&) const { return true; }
  virtual void run(CompiledPlan& plan, const PassContext& context) const = 0;
  // The custom ops it matches while `config` switches it on: they must be traced as themselves
  // rather than as their decomposition (custom_ops_for_passes).
  virtual std::vector<std::string> matched_custom_ops(const PassConfig&) const { return {}; }
  // What it dumps after it ran: the steps, by default.
  virtual std::string result_text(const CompiledPlan& plan) const;
};

// A pass that rewrites the graph before it is split into steps: it dumps the graph.
class GraphPass : public Pass {
 public:
  std::string result_text(const CompiledPlan& plan) const override { return plan.graph.str(); }
};

// One line per step: its piece, kind, op (or fused kernel) and output.
std::string steps_text(const CompiledPlan& plan);

// Every pass linked in, by name; the manager, not the registry, orders them.
class PassRegistry {
 public:
  static PassRegistry& global();
  bool add(std::unique_ptr<Pass> pass);
  // Throws naming the unknown pass and listing the registered ones.
  const Pass& get(std::string_view name) const;
  size_t size() const { return passes_.size(); }

 private:
  std::vector<std::unique_ptr<Pass>> passes_;
};

}  // namespace tessera

#define TESSERA_PASS_CONCAT_INNER(a, b) a##b
#define TESSERA_PASS_CONCAT(a, b) TESSERA_PASS_CONCAT_INNER(a, b)
// Registers a pass at load time: TESSERA_REGISTER_PASS(CleanupPass); its name must also be in
// the manager's order (compile/passes/pass_manager.cpp).
#define TESSERA_REGISTER_PASS(pass_class)                                                 \
  [[maybe_unused]] static const bool TESSERA_PASS_CONCAT(pass_registered_, __COUNTER__) = \
      ::tessera::PassRegistry::global().add(std::make_unique<pass_class>())
