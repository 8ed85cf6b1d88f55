#include "compile/piecewise_backend.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>

#include "compile/codegen/codegen_target.h"
#include "compile/launch_profile.h"
#include "runtime/check.h"
#include "runtime/profiler/profiler.h"

namespace tessera {

PiecewiseBackend::PiecewiseBackend(std::shared_ptr<const CompiledPlan> plan)
    : plan_(std::move(plan)) {
  device_ = plan_->device;
  size_t words = (plan_->memory.arena_bytes + 3) / 4;
  arena_ = Tensor::empty({static_cast<int64_t>(std::max<size_t>(words, 1))}, DType::i32, device_);
  std::vector<std::vector<ResolvedStep>> pieces(static_cast<size_t>(plan_->num_pieces));
  for (const Step& step : plan_->steps) {
    ResolvedStep resolved = resolve(step);
    if (step.kind == StepKind::splitting)
      splitting_.push_back(resolved);
    else
      pieces.at(static_cast<size_t>(step.piece)).push_back(resolved);
  }
  for (size_t i = 0; i < pieces.size(); ++i)
    pieces_.emplace_back(static_cast<int>(i), std::move(pieces[i]));
  TESSERA_CHECK(splitting_.size() + 1 == pieces_.size(), "{} splitting ops between {} pieces",
                splitting_.size(), pieces_.size());
}

ResolvedStep PiecewiseBackend::resolve(const Step& step) const {
  ResolvedStep resolved;
  resolved.kind = step.kind;
  if (step.kind == StepKind::fused) {
    resolved.kernel = &plan_->kernels.at(static_cast<size_t>(step.kernel));
    TESSERA_CHECK(resolved.kernel->compiled != nullptr, "fused kernel {} was never loaded",
                  resolved.kernel->name);
    return resolved;
  }
  resolved.node = &plan_->graph.nodes().at(static_cast<size_t>(step.node));
  resolved.prefetch = step.prefetch;
  resolved.follows_splitting_op = step.follows_splitting_op;
  if (step.kind == StepKind::view) return resolved;
  const std::string& op = step.kind == StepKind::copy ? "copy" : resolved.node->op->name;
  resolved.library_kernel = find_kernel(op, device_.type);
  TESSERA_REQUIRE(resolved.library_kernel != nullptr,
                  "compiled plan: op {} has no kernel on {}; run it with compilation.mode=traced",
                  op, device_.str());
  return resolved;
}

Tensor PiecewiseBackend::slot(int value, const Bindings& bindings) const {
  const TensorMeta& meta = plan_->graph.value(value).meta;
  Shape sizes;
  for (const SymInt& size : meta.shape) sizes.push_back(size.evaluate(bindings));
  auto found = plan_->memory.slots.find(value);
  TESSERA_CHECK(found != plan_->memory.slots.end(), "value {} has no arena slot", value);
  char* base = static_cast<char*>(arena_.data_ptr()) + found->second.offset;
  return Tensor::from_blob(base, sizes, meta.dtype, device_);
}

BoundStep PiecewiseBackend::bind_step(const ResolvedStep& step, std::vector<Tensor>& values,
                                      const Bindings& bindings) const {
  BoundStep bound;
  bound.step = &step;
  if (step.kind == StepKind::fused) {
    const FusedKernel& kernel = *step.kernel;
    bound.rows = kernel.rows.evaluate(bindings);
    for (int id : kernel.inputs) {
      const Tensor& input = values[id];
      TESSERA_CHECK(input.defined() && input.is_contiguous(),
                    "fused kernel {}: input {} is not a contiguous bound value", kernel.name, id);
      bound.buffers.push_back(input.data_ptr());
      bound.fused_bytes += read_bytes(input, bound.rows);
    }
    for (int id : kernel.outputs) {
      values[id] = slot(id, bindings);
      bound.outputs.push_back(values[id]);
      bound.buffers.push_back(values[id].data_ptr());
      bound.fused_bytes += static_cast<double>(values[id].nbytes());
    }
    TESSERA_CHECK(bound.buffers.size() == kernel.compiled->num_buffers(),
                  "fused kernel {} takes {} buffers, bound {}", kernel.name,
                  kernel.compiled->num_buffers(), bound.buffers.size());
    bound.empty = bound.rows == 0;
    return bound;
  }
  const Node& node = *step.node;
  std::vector<Tensor> arguments;
  for (int id : node.inputs) {
    TESSERA_CHECK(values[id].defined(), "{}: input {} was never computed", node.op->name, id);
    arguments.push_back(values[id]);
  }
  if (step.kind == StepKind::view) {  // an alias, computed once per binding
    values[node.outputs[0]] = node.op->eager(arguments, node.attributes).at(0);
    bound.empty = true;
    return bound;
  }
  for (int id : node.outputs) {
    values[id] = slot(id, bindings);
    bound.outputs.push_back(values[id]);
  }
  bound.empty = std::all_of(bound.outputs.begin(), bound.outputs.end(),
                            [](const Tensor& t) { return t.numel() == 0; });
  if (step.kind == StepKind::copy) {
    // The view's elements, copied into the slot. Its input is contiguous (the materialize pass
    // copies any strided view another view reads), so the view is an alias: nothing is copied or
    // allocated here.
    Tensor view = node.op->eager(arguments, node.attributes).at(0);
    TESSERA_CHECK(view.storage() == arguments[0].storage(),
                  "{}: the view of a copy step is not an alias of its input", node.op->name);
    bound.inputs = {view};
    return bound;
  }
  // Kernels with strided_inputs read broadcast inputs through stride-0 dims; the rest get the
  // contiguous values the materialize pass guaranteed.
  const Shape& output_sizes = bound.outputs[0].sizes();
  for (Tensor& argument : arguments) {
    if (node.op->strided_inputs) {
      if (argument.sizes() != output_sizes) argument = argument.expand(output_sizes);
    } else {
      TESSERA_CHECK(argument.is_contiguous(), "{}: a strided input reached a compiled step",
                    node.op->name);
    }
  }
  bound.inputs = std::move(arguments);
  if (step.prefetch >= 0) {
    bound.prefetch = values[step.prefetch];
    TESSERA_CHECK(bound.prefetch.defined(), "{}: prefetched value {} is not bound", node.op->name,
                  step.prefetch);
  }
  return bound;
}

Bindings PiecewiseBackend::bindings_of(std::span<const Tensor> inputs) const {
  const Graph& graph = plan_->graph;
  Bindings bindings;
  for (int id : graph.placeholders()) {
    const Node& node = graph.nodes()[graph.value(id).producer];
    TESSERA_CHECK(static_cast<size_t>(node.input_index) < inputs.size(),
                  "compiled plan: input {} missing ({} given)", node.input_index, inputs.size());
    const Tensor& input = inputs[node.input_index];
    const SymShape& shape = graph.value(id).meta.shape;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d].is_constant()) continue;
      bindings[shape[d].symbols().front()] = input.sizes()[d];
    }
  }
  for (const auto& [symbol, value] : bindings) {
    auto limit = plan_->max_sizes.find(symbol);
    TESSERA_REQUIRE(limit == plan_->max_sizes.end() || value <= limit->second,
                    "{} = {} exceeds the size the compiled plan was built for ({}); raise "
                    "engine.max_num_batched_tokens",
                    symbol, value, limit->second);
  }
  return bindings;
}

const BoundPlan& PiecewiseBackend::bind(const Bindings& bindings) {
  return bound_plan(bindings);
}

const BoundPlan& PiecewiseBackend::bind_tokens(int64_t tokens) {
  BoundPlan& bound = bound_plan(token_bindings(tokens));
  bound.pinned = true;
  return bound;
}

BoundPlan& PiecewiseBackend::bound_plan(const Bindings& bindings) {
  ++calls_;
  auto found = bound_.find(bindings);
  if (found != bound_.end()) {
    found->second->last_used = calls_;
    return *found->second;
  }
  if (bound_.size() >= kMaxBoundPlans + captured_sizes_.size()) {
    // The least recently used binding without graphs: captured ones stay for the process.
    auto oldest = bound_.end();
    for (auto it = bound_.begin(); it != bound_.end(); ++it) {
      if (it->second->graphs.empty() && !it->second->pinned &&
          (oldest == bound_.end() || it->second->last_used < oldest->second->last_used))
        oldest = it;
    }
    if (oldest != bound_.end()) bound_.erase(oldest);
  }
  const Graph& graph = plan_->graph;
  auto bound = std::make_unique<BoundPlan>();
  bound->bindings = bindings;
  bound->last_used = calls_;
  std::vector<Tensor> values(graph.num_values());
  for (const Node& node : graph.nodes()) {
    if (node.kind == NodeKind::constant) values[node.outputs[0]] = node.constant;
  }
  bound->inputs.resize(graph.placeholders().size());
  for (int id : graph.placeholders()) {
    values[id] = slot(id, bindings);
    const int index = graph.nodes()[graph.value(id).producer].input_index;
    TESSERA_CHECK(index >= 0 && static_cast<size_t>(index) < bound->inputs.size(),
                  "placeholder {} has input index {}", id, index);
    bound->inputs[index] = values[id];
  }
  for (size_t p = 0; p < pieces_.size(); ++p) {
    std::vector<BoundStep> steps;
    for (const ResolvedStep& step : pieces_[p].steps())
      steps.push_back(bind_step(step, values, bindings));
    bound->pieces.push_back(std::move(steps));
    if (p < splitting_.size())
      bound->splitting.push_back(bind_step(splitting_[p], values, bindings));
  }
  for (int id : graph.outputs()) bound->outputs.push_back(values[id]);
  return *bound_.emplace(bindings, std::move(bound)).first->second;
}

void PiecewiseBackend::copy_inputs(const BoundPlan& bound, std::span<const Tensor> inputs) const {
  ProfileRegion region("inputs");
  for (size_t i = 0; i < bound.inputs.size(); ++i) {
    const Tensor& input = inputs[i];
    Tensor slot = bound.inputs[i];
    TESSERA_REQUIRE(input.dtype() == slot.dtype() && input.sizes() == slot.sizes(),
                    "compiled plan: input {} is {}, the plan takes {}", i, input.str(), slot.str());
    slot.copy_from(input);  // nothing to do when the caller wrote into the slot itself
  }
}

void PiecewiseBackend::launch_piece(const BoundPlan& bound, int index, Stream& stream) const {
  pieces_.at(static_cast<size_t>(index))
      .launch(bound.pieces.at(static_cast<size_t>(index)), stream);
}

void PiecewiseBackend::launch_splitting(const BoundPlan& bound, int index, Stream& stream) const {
  StreamGuard on_stream(stream);
  const BoundStep& step = bound.splitting.at(static_cast<size_t>(index));
  ProfileRegion region(step.step->node->op->name.c_str(), index);
  step.launch(stream);
}

void PiecewiseBackend::run_bound(const BoundPlan& bound, Stream& stream) const {
  // A timing profiler launches what the graphs hold, so that each kernel gets its events.
  const KernelProfiler* profiler = active_profiler();
  const bool replay =
      !bound.graphs.empty() && (profiler == nullptr || !profiler->bypasses_graphs());
  for (size_t p = 0; p < pieces_.size(); ++p) {
    if (replay) {
      ProfiledGraphReplay profiled(bound.graphs[p]->num_nodes());
      bound.graphs[p]->replay(stream);
    } else {
      launch_piece(bound, static_cast<int>(p), stream);
    }
    if (p < splitting_.size()) launch_splitting(bound, static_cast<int>(p), stream);
  }
}

std::vector<Tensor> PiecewiseBackend::run(std::span<const Tensor> inputs) {
  const BoundPlan& bound = bind(bindings_of(inputs));
  copy_inputs(bound, inputs);
  run_bound(bound, backend(device_).current_stream(device_.index));
  return bound.outputs;
}

Stream& PiecewiseBackend::capture_stream(int64_t warmups) {
  DeviceBackend& device = backend(device_);
  TESSERA_REQUIRE(device.supports_graphs(),
                  "{} cannot capture graphs; set compilation.cudagraph_mode=none", device_.str());
  TESSERA_REQUIRE(warmups >= 1,
                  "compilation.cudagraph_num_warmups must be >= 1: the first launch of a size "
                  "loads library state that cannot be created inside a capture (got {})",
                  warmups);
  if (!capture_stream_) capture_stream_ = device.create_stream(device_.index);
  return *capture_stream_;
}

Bindings PiecewiseBackend::token_bindings(int64_t tokens) const {
  TESSERA_REQUIRE(plan_->max_sizes.size() == 1,
                  "graph capture needs a plan with one dynamic size (the token count); this one "
                  "has {}",
                  plan_->max_sizes.size());
  const auto& [symbol, largest] = *plan_->max_sizes.begin();
  TESSERA_REQUIRE(tokens >= 1 && tokens <= largest,
                  "capture size {} is outside 1..{}, the sizes the compiled plan was built for; "
                  "lower compilation.cudagraph_capture_sizes or raise "
                  "engine.max_num_batched_tokens",
                  tokens, largest);
  return Bindings{{symbol, tokens}};
}

void PiecewiseBackend::zero_inputs(const BoundPlan& bound) const {
  // Warm-up runs read ids and positions that index tables: zeros, not the arena's old bytes.
  for (const Tensor& slot : bound.inputs) {
    Tensor zeros = Tensor::empty(slot.sizes(), slot.dtype(), kCPU);
    std::memset(zeros.data_ptr(), 0, zeros.nbytes());
    Tensor(slot).copy_from(zeros);
  }
}

CapturedGraph capture_graph(Device device, Stream& stream,
                            const std::function<void(Stream&)>& launches) {
  DeviceBackend& gpu = backend(device);
  gpu.synchronize(device.index);
  const size_t free_before = gpu.memory_info(device.index).second;
  gpu.begin_capture(stream);
  try {
    StreamGuard on_stream(stream);
    launches(stream);
  } catch (...) {
    try {
      (void)gpu.end_capture(stream);  // leave the stream usable, then report the launch
    } catch (const Error&) {
    }
    throw;
  }
  CapturedGraph captured{gpu.end_capture(stream), 0};
  gpu.synchronize(device.index);
  const size_t free_after = gpu.memory_info(device.index).second;
  captured.device_bytes = free_before > free_after ? free_before - free_after : 0;
  return captured;
}

void PiecewiseBackend::launch_all(const BoundPlan& bound, Stream& stream) const {
  for (size_t p = 0; p < pieces_.size(); ++p) {
    launch_piece(bound, static_cast<int>(p), stream);
    if (p < splitting_.size()) launch_splitting(bound, static_cast<int>(p), stream);
  }
}

CaptureSummary PiecewiseBackend::capture(const std::vector<int64_t>& sizes, int64_t warmups,
                                         const std::function<void(size_t, size_t)>& on_progress) {
  using Clock = std::chrono::steady_clock;
  DeviceBackend& device = backend(device_);
  std::vector<int64_t> ordered = sizes;
  std::sort(ordered.begin(), ordered.end(), std::greater<>());
  ordered.erase(std::unique(ordered.begin(), ordered.end()), ordered.end());
  for (int64_t size : ordered) token_bindings(size);  // all in range before any capture
  Stream& stream = capture_stream(warmups);
  CaptureSummary summary;
  const auto start = Clock::now();
  device.synchronize(device_.index);
  const size_t free_before = device.memory_info(device_.index).second;
  size_t done = 0;
  for (int64_t size : ordered) {  // largest first, as vLLM does
    BoundPlan& bound = bound_plan(token_bindings(size));
    if (!bound.graphs.empty()) {
      ++done;
      continue;
    }
    // Warm-up launches load whatever loads lazily (library handles, algorithm choices) outside
    // the capture; what the pieces compute does not matter here.
    zero_inputs(bound);
    for (int64_t w = 0; w < warmups; ++w)
      for (size_t p = 0; p < pieces_.size(); ++p) launch_piece(bound, static_cast<int>(p), stream);
    stream.synchronize();
    // All of a size's pieces or none: a failed capture leaves the size running without graphs.
    std::vector<std::unique_ptr<GraphExec>> graphs;
    for (size_t p = 0; p < pieces_.size(); ++p) {
      graphs.push_back(capture_graph(device_, stream, [&](Stream& on) {
                         launch_piece(bound, static_cast<int>(p), on);
                       }).graph);
    }
    bound.graphs = std::move(graphs);
    summary.graphs += bound.graphs.size();
    captured_sizes_.push_back(size);
    ++done;
    if (on_progress) on_progress(done, ordered.size());
  }
  std::sort(captured_sizes_.begin(), captured_sizes_.end());
  device.synchronize(device_.index);
  const size_t free_after = device.memory_info(device_.index).second;
  summary.sizes = captured_sizes_;
  summary.device_bytes = free_before > free_after ? free_before - free_after : 0;
  summary.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return summary;
}

}  // namespace tessera
