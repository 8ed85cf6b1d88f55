// A function compiled on first call, like torch.compile(fn): traces with the given dynamic dims,
// hands the graph to a backend, and on later calls checks the inputs against each compiled
// entry's guards. A miss re-traces and compiles again, up to recompile_limit entries; past that
// the function runs eagerly and a warning names the guard that failed. Its custom_ops rule is its
// own: tracing records disabled custom ops as their decompositions, and eager runs (backend
// "eager", or past the recompile limit) install the rule for the thread during the call.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compile/backends.h"
#include "compile/trace/tracer.h"

namespace tessera {

struct CompileOptions {
  std::string backend = "traced";   // or "eager", or a registered backend's name
  CompileBackend backend_function;  // when set, used instead of looking `backend` up
  std::vector<DynamicDim> dynamic_dims;
  CustomOpConfig custom_ops;
  int recompile_limit = 8;
  std::vector<std::string> input_names;
};

class CompiledFunction {
 public:
  CompiledFunction(TensorFunction function, CompileOptions options);

  std::vector<Tensor> operator()(std::span<const Tensor> inputs);

  struct Entry {
    TraceResult trace;
    CompiledCallable callable;
  };
  const std::vector<Entry>& entries() const { return entries_; }
  size_t num_compiles() const { return entries_.size(); }
  bool fell_back_to_eager() const { return fell_back_to_eager_; }
  // Why the last call could not reuse an entry ("" when it did).
  const std::string& last_miss_reason() const { return last_miss_reason_; }

 private:
  std::vector<Tensor> run_eagerly(std::span<const Tensor> inputs) const;

  TensorFunction function_;
  CompileOptions options_;
  std::vector<Entry> entries_;
  bool fell_back_to_eager_ = false;
  std::string last_miss_reason_;
};

}  // namespace tessera
