// The `compiled` backend: runs the pass pipeline of compile/passes on a traced graph (cleanup,
// pattern rewrites, split at splitting ops, fuse, materialize, memory plan; pass_manager.h), which
// ends by generating and compiling a kernel per fused group through the device's codegen target
// (cached on disk), and returns a callable that runs the pieces in order over one static arena
// (compile/piecewise_backend.h). Its results are views of the arena: valid until the next call
// and while the compiled function lives.
#pragma once

#include <memory>
#include <string>

#include "compile/backends.h"
#include "compile/codegen/kernel_cache.h"
#include "compile/compiled_function.h"
#include "compile/compiled_plan.h"

namespace tessera {

class PiecewiseBackend;  // compile/piecewise_backend.h

// Called with each plan compiled (`tessera explain`, tests and logs read it) and with the backend
// that runs it (the model runner captures its pieces into graphs).
using PlanCallback = std::function<void(std::shared_ptr<const CompiledPlan>)>;
using PiecewiseBackendCallback = std::function<void(std::shared_ptr<PiecewiseBackend>)>;

struct CompilerOptions {
  CompilationConfig config;
  // The largest value any symbol takes (the token count: max_num_batched_tokens); the arena is
  // sized for it and a larger input is an error.
  int64_t max_dynamic_size = 8192;
  // The compiled function's name ("forward", "logits_head", "greedy_head"): its dumps go to
  // compilation.dump_dir/<name>/, emptied first, so the functions a model runner compiles do not
  // overwrite each other's (empty: dump_dir itself, nothing emptied).
  std::string name;
};

std::shared_ptr<CompiledPlan> compile_graph(const Graph& graph, const CompilerOptions& options);

// A backend for CompiledFunction; the callbacks, when given, see each plan and its backend.
CompileBackend make_compiled_backend(CompilerOptions options, PlanCallback on_plan = {},
                                     PiecewiseBackendCallback on_backend = {});

// Options for a CompiledFunction in `compiled` mode: this backend, the given dynamic dims and
// custom ops, and the config's recompile limit. What the model runner and the tests build.
CompileOptions compiled_mode_options(const CompilerOptions& compiler,
                                     std::vector<DynamicDim> dynamic_dims,
                                     CustomOpConfig custom_ops, PlanCallback on_plan = {},
                                     PiecewiseBackendCallback on_backend = {});

}  // namespace tessera
