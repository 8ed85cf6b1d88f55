#include "compile/trace/tracer.h"

#include <map>
#include <tuple>

#include "compile/trace/dispatch.h"
#include "compile/trace/fake_tensor.h"
#include "runtime/check.h"

namespace tessera {
namespace {

class Tracer final : public DispatchHandler {
 public:
  Tracer(Graph& graph, ShapeEnv& env, const CustomOpConfig& custom_ops)
      : graph_(graph), env_(env), custom_ops_(custom_ops) {}

  std::vector<Tensor> handle(const OpDef& op, std::span<const Tensor> inputs,
                             const Attributes& given) override {
    for (size_t i = 0; i < inputs.size(); ++i)
      TESSERA_REQUIRE(inputs[i].defined(), "{}: argument {} is an undefined tensor", op.name, i);
    Attributes attributes = prepare_attributes(op, inputs, given);
    if (op.custom && op.kind != OpKind::splitting && op.decompose &&
        !custom_ops_.enabled(op.name)) {
      return op.decompose(inputs, attributes);  // records the decomposition's own ops
    }
    std::vector<int> ids;
    ids.reserve(inputs.size());
    for (const Tensor& input : inputs) ids.push_back(value_of(input));
    env_.set_current_op(op.name);
    std::vector<TensorMeta> metas = compute_output_metas(op, inputs, attributes);
    env_.set_current_op("");
    std::vector<int> outputs = graph_.add_call(op, std::move(ids), std::move(attributes), metas);
    std::vector<Tensor> fakes;
    for (size_t i = 0; i < outputs.size(); ++i)
      fakes.push_back(make_fake_tensor(metas[i], outputs[i]));
    return fakes;
  }

 private:
  // A fake tensor is a value of this graph; a real one (a weight the function closed over)
  // becomes a constant, once per distinct tensor.
  int value_of(const Tensor& tensor) {
    if (const FakeTensorInfo* fake = fake_tensor_info(tensor)) return fake->value_id;
    auto key = std::make_tuple(tensor.storage().get(), tensor.offset(), tensor.sizes(),
                               tensor.strides(), tensor.dtype());
    auto it = constants_.find(key);
    if (it != constants_.end()) return it->second;
    int id = graph_.add_constant(tensor);
    constants_.emplace(key, id);
    return id;
  }

  Graph& graph_;
  ShapeEnv& env_;
  const CustomOpConfig& custom_ops_;
  std::map<std::tuple<const Storage*, int64_t, Shape, Shape, DType>, int> constants_;
};

}  // namespace

TraceResult trace(const TensorFunction& function, std::span<const Tensor> example_inputs,
                  const TraceOptions& options) {
  TraceResult result;
  ShapeEnv env;
  // Symbols for dynamic dims, shared between equal sizes unless marked distinct.
  std::map<int64_t, SymInt> duck_symbols;
  for (const Tensor& input : example_inputs) {
    TESSERA_REQUIRE(input.defined() && !input.is_fake(),
                    "trace: example inputs must be real tensors");
    result.input_metas.push_back(meta_of(input));
  }
  for (const DynamicDim& dynamic : options.dynamic_dims) {
    TESSERA_REQUIRE(dynamic.input < example_inputs.size(),
                    "trace: dynamic dim names input {} but there are {} inputs", dynamic.input,
                    example_inputs.size());
    const Tensor& input = example_inputs[dynamic.input];
    int64_t dim = wrap_dim(dynamic.dim, input.dim(), "trace dynamic dim");
    int64_t hint = input.size(dim);
    SymInt symbol;
    auto shared = duck_symbols.find(hint);
    if (!dynamic.distinct && shared != duck_symbols.end()) {
      symbol = shared->second;
    } else {
      symbol = env.create_symbol(hint);
      if (!dynamic.distinct) duck_symbols.emplace(hint, symbol);
    }
    result.input_metas[dynamic.input].shape[dim] = symbol;
  }

  std::vector<Tensor> fake_inputs;
  for (size_t i = 0; i < example_inputs.size(); ++i) {
    std::string name =
        i < options.input_names.size() ? options.input_names[i] : fmt::format("x{}", i);
    int id = result.graph.add_placeholder(name, result.input_metas[i], static_cast<int>(i));
    fake_inputs.push_back(make_fake_tensor(result.input_metas[i], id));
  }

  Tracer tracer(result.graph, env, options.custom_ops);
  std::vector<Tensor> outputs;
  {
    ShapeEnvScope env_scope(env);
    DispatchHandlerGuard handler_scope(&tracer);
    outputs = function(fake_inputs);
  }
  std::vector<int> output_ids;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const FakeTensorInfo* fake = fake_tensor_info(outputs[i]);
    TESSERA_REQUIRE(fake != nullptr,
                    "trace: output {} is not computed from the inputs by ops (it is a real "
                    "tensor); return values computed with ops:: calls",
                    i);
    output_ids.push_back(fake->value_id);
  }
  result.graph.set_outputs(std::move(output_ids));
  result.guards = env.guards();
  result.hints = env.hints();
  return result;
}

std::string TraceResult::str() const {
  std::string out = graph.str();
  out += guards.empty() ? "guards: none\n" : "guards:\n";
  for (const Guard& guard : guards) out += "  " + guard.str() + "\n";
  return out;
}

std::string check_trace_fits(const TraceResult& trace, std::span<const Tensor> inputs,
                             Bindings* bindings) {
  if (inputs.size() != trace.input_metas.size())
    return fmt::format("{} inputs instead of {}", inputs.size(), trace.input_metas.size());
  bindings->clear();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorMeta& expected = trace.input_metas[i];
    const Tensor& input = inputs[i];
    if (input.dtype() != expected.dtype || input.device() != expected.device ||
        input.dim() != expected.rank()) {
      return fmt::format("input {} is {} but the trace has {} on {}", i, input.str(),
                         expected.str(), expected.device.str());
    }
    for (size_t d = 0; d < expected.shape.size(); ++d) {
      const SymInt& size = expected.shape[d];
      int64_t actual = input.sizes()[d];
      if (size.is_constant()) {
        if (size.constant() != actual)
          return fmt::format("input {} dim {} is {} but the trace has the static size {}", i, d,
                             actual, size.constant());
        continue;
      }
      std::string symbol = size.symbols().front();
      auto [it, inserted] = bindings->emplace(symbol, actual);
      if (!inserted && it->second != actual)
        return fmt::format(
            "input {} dim {} is {} but {} = {} from an earlier input (duck-shaped "
            "sizes were equal when traced)",
            i, d, actual, symbol, it->second);
    }
  }
  if (const Guard* failed = first_failing_guard(trace.guards, *bindings))
    return fmt::format("guard failed: {}", failed->str());
  return "";
}

}  // namespace tessera
