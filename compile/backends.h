// Compile backends by name, as with torch.compile's: a backend turns a traced graph and example
// inputs into a callable. Built in: `traced` (run the graph node by node). `eager` is not a
// backend of a graph: CompiledFunction runs the function itself, untraced. Users register their
// own with register_compile_backend.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "compile/ir/graph.h"

namespace tessera {

using CompiledCallable = std::function<std::vector<Tensor>(std::span<const Tensor>)>;
using CompileBackend =
    std::function<CompiledCallable(const Graph& graph, std::span<const Tensor> example_inputs)>;

void register_compile_backend(const std::string& name, CompileBackend backend);
// Throws naming the unknown backend and listing the registered ones.
const CompileBackend& compile_backend(const std::string& name);
std::vector<std::string> compile_backend_names();  // "eager" included

}  // namespace tessera
