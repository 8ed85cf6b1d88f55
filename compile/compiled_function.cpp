#include "compile/compiled_function.h"

#include <spdlog/spdlog.h>

#include "compile/trace/dispatch.h"
#include "runtime/check.h"

namespace tessera {

CompiledFunction::CompiledFunction(TensorFunction function, CompileOptions options)
    : function_(std::move(function)), options_(std::move(options)) {
  if (options_.backend != "eager" && !options_.backend_function)
    compile_backend(options_.backend);  // fail early on a bad name
  TESSERA_REQUIRE(options_.recompile_limit >= 1, "recompile_limit must be >= 1, got {}",
                  options_.recompile_limit);
}

std::vector<Tensor> CompiledFunction::run_eagerly(std::span<const Tensor> inputs) const {
  EagerCustomOpRuleGuard rule(options_.custom_ops);  // this function's rule, for this call only
  return function_(inputs);
}

std::vector<Tensor> CompiledFunction::operator()(std::span<const Tensor> inputs) {
  if (options_.backend == "eager") return run_eagerly(inputs);
  last_miss_reason_.clear();
  Bindings bindings;
  for (Entry& entry : entries_) {
    std::string reason = check_trace_fits(entry.trace, inputs, &bindings);
    if (reason.empty()) return entry.callable(inputs);
    last_miss_reason_ = reason;
  }
  if (fell_back_to_eager_) return run_eagerly(inputs);
  if (static_cast<int>(entries_.size()) >= options_.recompile_limit) {
    spdlog::warn("recompile_limit ({}) reached; running eagerly from now on. Last miss: {}",
                 options_.recompile_limit, last_miss_reason_);
    fell_back_to_eager_ = true;
    return run_eagerly(inputs);
  }
  if (!entries_.empty())
    spdlog::info("recompiling (entry {}): {}", entries_.size() + 1, last_miss_reason_);
  TraceOptions trace_options{options_.dynamic_dims, options_.custom_ops, options_.input_names};
  Entry entry;
  entry.trace = trace(function_, inputs, trace_options);
  const CompileBackend& backend =
      options_.backend_function ? options_.backend_function : compile_backend(options_.backend);
  entry.callable = backend(entry.trace.graph, inputs);
  entries_.push_back(std::move(entry));
  return entries_.back().callable(inputs);
}

}  // namespace tessera
