// The `compiled` backend: runs the passes of compile/passes on a traced graph (cleanup, split at
// splitting ops, fuse, memory plan), generates and compiles a kernel per fused group (cached on
// disk), and returns a callable that runs the pieces in order over one arena.
#pragma once

#include <memory>

#include "compile/backends.h"
#include "compile/codegen/kernel_cache.h"
#include "compile/compiled_plan.h"

namespace tessera {

struct CompilerOptions {
  CompilationConfig config;
  // The largest value any symbol takes (the token count: max_num_batched_tokens); the arena is
  // sized for it and a larger input is an error.
  int64_t max_dynamic_size = 8192;
};

std::shared_ptr<CompiledPlan> compile_graph(const Graph& graph, const CompilerOptions& options);

// A backend for CompiledFunction. Each compiled plan is also handed to `on_plan`, when given
// (`tessera explain`, tests and logs read it).
CompileBackend make_compiled_backend(
    CompilerOptions options, std::function<void(std::shared_ptr<const CompiledPlan>)> on_plan = {});

}  // namespace tessera
