#include "compile/piecewise_runner.h"

#include <spdlog/spdlog.h>

#include "compile/codegen/cpp_codegen.h"
#include "compile/codegen/cuda_codegen.h"
#include "compile/codegen/nvrtc_cache.h"
#include "compile/ops/dispatch.h"
#include "kernels/check.h"
#include "kernels/cpu/parallel.h"

namespace tessera {

PiecewiseRunner::PiecewiseRunner(std::shared_ptr<const CompiledPlan> plan)
    : plan_(std::move(plan)) {
  std::vector<int> placeholders = plan_->graph.placeholders();
  device_ = placeholders.empty() ? kCPU : plan_->graph.value(placeholders[0]).meta.device;
  size_t words = (plan_->memory.arena_bytes + 3) / 4;
  arena_ = Tensor::empty({static_cast<int64_t>(std::max<size_t>(words, 1))}, DType::i32, device_);
  for (const FusedKernel& kernel : plan_->kernels) {
    if (!kernel.compiled) {
      spdlog::warn("no code generator for {}: fused kernels run their ops one by one",
                   device_.str());
      break;
    }
  }
}

size_t PiecewiseRunner::launches_per_call() const {
  size_t launches = 0;
  for (const Step& step : plan_->steps) launches += step.kind != StepKind::view;
  return launches;
}

Tensor PiecewiseRunner::slot_tensor(int value, const Bindings& bindings) {
  const TensorMeta& meta = plan_->graph.value(value).meta;
  Shape sizes;
  for (const SymInt& size : meta.shape) sizes.push_back(size.evaluate(bindings));
  const MemoryPlan::Slot& slot = plan_->memory.slots.at(value);
  char* base = static_cast<char*>(arena_.data_ptr()) + slot.offset;
  return Tensor::from_blob(base, sizes, meta.dtype, device_);
}

void PiecewiseRunner::run_fused(const FusedKernel& kernel, std::vector<Tensor>& values,
                                const Bindings& bindings) {
  const Graph& graph = plan_->graph;
  if (!kernel.compiled) {  // op by op, into the planned outputs
    for (int n : kernel.nodes) {
      const Node& node = graph.nodes()[n];
      std::vector<Tensor> inputs;
      for (int id : node.inputs) inputs.push_back(values[id]);
      std::vector<Tensor> results = run_eager(*node.op, inputs, node.attributes);
      for (size_t o = 0; o < results.size(); ++o) values[node.outputs[o]] = results[o];
    }
    for (int id : kernel.outputs) {
      Tensor planned = slot_tensor(id, bindings);
      planned.copy_from(values[id]);
      values[id] = planned;
    }
    return;
  }
  std::vector<Tensor> keep_alive;
  std::vector<void*> buffers;
  for (int id : kernel.inputs) {
    TESSERA_CHECK(values[id].defined(), "fused kernel {} input {} was never computed", kernel.name,
                  id);
    keep_alive.push_back(values[id].contiguous());
    buffers.push_back(keep_alive.back().data_ptr());
  }
  for (int id : kernel.outputs) {
    values[id] = slot_tensor(id, bindings);
    buffers.push_back(values[id].data_ptr());
  }
  int64_t rows = kernel.rows.evaluate(bindings);
#ifdef TESSERA_CUDA
  if (device_.type == DeviceType::cuda) {
    const auto* cuda_kernel = static_cast<const CudaRowKernel*>(kernel.compiled.get());
    TESSERA_CHECK(cuda_kernel->num_buffers == buffers.size(),
                  "fused kernel {} takes {} buffers, got {}", kernel.name, cuda_kernel->num_buffers,
                  buffers.size());
    launch_cuda_row_kernel(*cuda_kernel, rows, buffers.data(), device_);
    return;
  }
#endif
  auto function = reinterpret_cast<CpuKernelFunction>(kernel.compiled.get());
  void* const* pointers = buffers.data();
  cpu::parallel_for(rows, 1, [&](int64_t begin, int64_t end) { function(begin, end, pointers); });
}

std::vector<Tensor> PiecewiseRunner::run(std::span<const Tensor> inputs) {
  const Graph& graph = plan_->graph;
  std::vector<Tensor> values(graph.num_values());
  Bindings bindings;
  for (const Node& node : graph.nodes()) {
    if (node.kind == NodeKind::placeholder) {
      const Tensor& input = inputs[node.input_index];
      values[node.outputs[0]] = input;
      const SymShape& shape = graph.value(node.outputs[0]).meta.shape;
      for (size_t d = 0; d < shape.size(); ++d) {
        if (shape[d].is_constant()) continue;
        std::string symbol = shape[d].symbols().front();
        bindings[symbol] = input.sizes()[d];
      }
    } else if (node.kind == NodeKind::constant) {
      values[node.outputs[0]] = node.constant;
    }
  }
  for (const auto& [symbol, value] : bindings) {
    auto limit = plan_->max_sizes.find(symbol);
    TESSERA_REQUIRE(limit == plan_->max_sizes.end() || value <= limit->second,
                    "{} = {} exceeds the size the compiled plan was built for ({}); raise "
                    "engine.max_num_batched_tokens",
                    symbol, value, limit->second);
  }
  for (const Step& step : plan_->steps) {
    if (step.kind == StepKind::fused) {
      run_fused(plan_->kernels[step.kernel], values, bindings);
      continue;
    }
    const Node& node = graph.nodes()[step.node];
    std::vector<Tensor> arguments;
    for (int id : node.inputs) arguments.push_back(values[id]);
    if (step.kind == StepKind::view) {
      values[node.outputs[0]] = run_eager(*node.op, arguments, node.attributes).at(0);
      continue;
    }
    std::vector<Tensor> outputs;
    for (int id : node.outputs) outputs.push_back(slot_tensor(id, bindings));
    if (node.op->eager) {  // a view-like op the fuser kept as a library step: copy into place
      std::vector<Tensor> results = run_eager(*node.op, arguments, node.attributes);
      for (size_t o = 0; o < results.size(); ++o) outputs[o].copy_from(results[o]);
    } else {
      run_kernel_into(*node.op, arguments, node.attributes, outputs);
    }
    for (size_t o = 0; o < outputs.size(); ++o) values[node.outputs[o]] = outputs[o];
  }
  // Results leave the arena: the next call reuses its bytes.
  std::vector<Tensor> results;
  for (int id : graph.outputs()) results.push_back(values[id].clone());
  return results;
}

}  // namespace tessera
