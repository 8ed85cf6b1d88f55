// The tracer (the counterpart of make_fx with FakeTensorMode): runs a function on fake inputs
// with itself installed as the dispatch handler, so each ops:: call records a graph node and
// returns fake outputs computed by the op's meta function. Dynamic input dims get symbols;
// decisions on them become guards.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "compile/custom_op_config.h"
#include "compile/ir/graph.h"
#include "compile/ir/guards.h"

namespace tessera {

using TensorFunction = std::function<std::vector<Tensor>(std::span<const Tensor>)>;

struct DynamicDim {
  size_t input = 0;
  int64_t dim = 0;
  // Duck shaping: dynamic sizes equal at trace time share one symbol unless marked distinct.
  bool distinct = false;
};

struct TraceOptions {
  std::vector<DynamicDim> dynamic_dims;
  CustomOpConfig custom_ops;             // disabled custom ops are recorded as their decompositions
  std::vector<std::string> input_names;  // placeholder names; default x0, x1, ...
};

// What a trace produced and what it assumed.
struct TraceResult {
  Graph graph;
  std::vector<TensorMeta> input_metas;  // symbolic where dynamic
  std::vector<Guard> guards;            // decisions on symbols made while tracing
  Bindings hints;                       // trace-time values of the symbols
  std::string str() const;              // graph + guards
};

TraceResult trace(const TensorFunction& function, std::span<const Tensor> example_inputs,
                  const TraceOptions& options = {});

// Binds the trace's symbols to the inputs' sizes; returns a reason the inputs do not fit the
// trace (rank, dtype, device, a static size, two duck-shaped sizes now unequal, a failing guard),
// or the empty string when they fit.
std::string check_trace_fits(const TraceResult& trace, std::span<const Tensor> inputs,
                             Bindings* bindings);

}  // namespace tessera
