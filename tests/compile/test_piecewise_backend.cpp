// PiecewiseBackend: pieces with resolved steps over one static arena. Strided views that feed a
// kernel needing contiguous memory become copy steps; each piece can be launched (and, on a GPU,
// captured into a graph and replayed) on its own; a token count seen before reuses its binding
// and its addresses.
#include <gtest/gtest.h>

#include <algorithm>

#include "compile/compiler.h"
#include "compile/ops/ops.h"
#include "compile/piecewise_backend.h"
#include "compile/trace/tracer.h"
#include "runtime/backend/backend.h"
#include "runtime/check.h"
#include "support/compile_options.h"
#include "support/test_tensors.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

// Two GEMMs reading strided views of their inputs (a column slice, a transpose), with a row
// kernel between them.
std::vector<Tensor> strided_views(std::span<const Tensor> in, const Tensor& weight) {
  Tensor columns = ops::slice(in[0], -1, 8, 40);    // [T, 32] of [T, 48]: strided
  Tensor projected = ops::linear(columns, weight);  // [T, 16]
  Tensor activated = ops::silu(ops::mul_scalar(projected, 0.5));
  Tensor flipped = ops::transpose(in[1], 0, 1);  // [16, T] of [T, 16]: strided
  return {activated, ops::matmul(flipped, activated)};
}

struct Compiled {
  std::shared_ptr<CompiledPlan> plan;
  std::unique_ptr<PiecewiseBackend> backend;
};

Compiled compile_for(const std::function<std::vector<Tensor>(std::span<const Tensor>)>& function,
                     const std::vector<Tensor>& example, const std::string& cache,
                     std::vector<std::string> splitting_ops = {"attention"}) {
  TraceOptions trace_options;
  for (size_t i = 0; i < example.size(); ++i) trace_options.dynamic_dims.push_back({i, 0});
  trace_options.custom_ops = CustomOpConfig::parse({"none"}, false);
  Graph graph = trace(function, example, trace_options).graph;
  CompilerOptions options = test_compiler_options(cache);
  options.config.splitting_ops = std::move(splitting_ops);
  Compiled compiled;
  compiled.plan = compile_graph(graph, options);
  compiled.backend = std::make_unique<PiecewiseBackend>(compiled.plan);
  return compiled;
}

size_t count_steps(const CompiledPlan& plan, StepKind kind) {
  return static_cast<size_t>(std::count_if(plan.steps.begin(), plan.steps.end(),
                                           [&](const Step& step) { return step.kind == kind; }));
}

}  // namespace

TEST(PiecewiseBackend, StridedViewsFeedingGemmsAreCopiedIntoTheArena) {
  Tensor weight = random_tensor({16, 32}, 7);
  auto function = [&](std::span<const Tensor> in) { return strided_views(in, weight); };
  std::vector<Tensor> example{random_tensor({4, 48}, 1), random_tensor({4, 16}, 2)};
  Compiled compiled = compile_for(function, example, fresh_temp_dir("piecewise_copies"));
  // The slice and the transpose each feed a GEMM, which reads contiguous memory.
  EXPECT_EQ(count_steps(*compiled.plan, StepKind::copy), 2u) << compiled.plan->explain();
  for (int64_t rows : {1, 3, 17, 64}) {
    std::vector<Tensor> inputs{random_tensor({rows, 48}, static_cast<uint32_t>(rows)),
                               random_tensor({rows, 16}, static_cast<uint32_t>(rows + 100))};
    std::vector<Tensor> want = function(inputs);
    std::vector<Tensor> got = compiled.backend->run(inputs);
    ASSERT_EQ(got.size(), want.size());
    for (size_t o = 0; o < want.size(); ++o)
      EXPECT_LT(relative_error(got[o], want[o]), 1e-5) << "rows " << rows << " output " << o;
  }
}

TEST(PiecewiseBackend, OutputsStayAtTheirArenaAddressesAcrossCalls) {
  auto function = [](std::span<const Tensor> in) {
    return std::vector<Tensor>{ops::softmax(ops::add_scalar(ops::mul(in[0], in[0]), 0.25))};
  };
  Compiled compiled =
      compile_for(function, {random_tensor({4, 8}, 1)}, fresh_temp_dir("piecewise_addresses"));
  std::vector<Tensor> first{random_tensor({5, 8}, 2)}, second{random_tensor({5, 8}, 3)};
  void* address = compiled.backend->run(first)[0].data_ptr();
  Tensor again = compiled.backend->run(second)[0];
  EXPECT_EQ(again.data_ptr(), address);  // a size seen before reuses its binding
  EXPECT_LT(relative_error(again, function(second)[0]), 1e-6);
  std::vector<Tensor> too_many{random_tensor({65, 8}, 4)};
  EXPECT_THROW(compiled.backend->run(too_many), Error);
}

TEST(PiecewiseBackend, PiecesLaunchOnTheirOwn) {
  Tensor weight = random_tensor({16, 32}, 7);
  auto function = [&](std::span<const Tensor> in) { return strided_views(in, weight); };
  std::vector<Tensor> inputs{random_tensor({6, 48}, 1), random_tensor({6, 16}, 2)};
  // Splitting at linear: piece 0 (the slice's copy), linear, piece 1 (the rest).
  Compiled compiled =
      compile_for(function, inputs, fresh_temp_dir("piecewise_pieces"), {"attention", "linear"});
  PiecewiseBackend& backend = *compiled.backend;
  ASSERT_EQ(backend.pieces().size(), 2u);
  const BoundPlan& bound = backend.bind(backend.bindings_of(inputs));
  backend.copy_inputs(bound, inputs);
  Stream& stream = tessera::backend(kCPU).current_stream(0);
  backend.launch_piece(bound, 0, stream);
  backend.launch_splitting(bound, 0, stream);
  backend.launch_piece(bound, 1, stream);
  std::vector<Tensor> want = function(inputs);
  for (size_t o = 0; o < want.size(); ++o)
    EXPECT_LT(relative_error(bound.outputs[o], want[o]), 1e-5) << "output " << o;
}

TEST(GpuPiecewiseBackend, PieceCapturedIntoAGraphReplaysWithNewInputs) {
  Device gpu;
  if (!first_gpu(&gpu) || gpu.type != DeviceType::cuda) GTEST_SKIP() << "no CUDA device";
  Tensor weight = random_tensor({16, 32}, 7).to(gpu);
  auto function = [&](std::span<const Tensor> in) { return strided_views(in, weight); };
  auto on_gpu = [&](uint32_t seed) {
    return std::vector<Tensor>{random_tensor({8, 48}, seed).to(gpu),
                               random_tensor({8, 16}, seed + 1).to(gpu)};
  };
  std::vector<Tensor> first = on_gpu(1);
  Compiled compiled =
      compile_for(function, first, fresh_temp_dir("piecewise_graphs"), {"attention", "linear"});
  PiecewiseBackend& backend = *compiled.backend;
  DeviceBackend& device = tessera::backend(gpu);
  std::unique_ptr<Stream> stream = device.create_stream(gpu.index);
  const BoundPlan& bound = backend.bind(backend.bindings_of(first));
  backend.copy_inputs(bound, first);
  backend.launch_piece(bound, 1, *stream);  // warm-up: nothing loads lazily during capture
  stream->synchronize();
  std::vector<std::unique_ptr<GraphExec>> graphs;
  for (int piece = 0; piece < 2; ++piece) {
    device.begin_capture(*stream);
    backend.launch_piece(bound, piece, *stream);
    graphs.push_back(device.end_capture(*stream));
    EXPECT_GE(graphs.back()->num_nodes(), 1u);
  }
  for (uint32_t seed : {10u, 20u}) {
    std::vector<Tensor> inputs = on_gpu(seed);
    {
      StreamGuard on_stream(*stream);
      backend.copy_inputs(bound, inputs);
    }
    graphs[0]->replay(*stream);
    backend.launch_splitting(bound, 0, *stream);
    graphs[1]->replay(*stream);
    stream->synchronize();
    std::vector<Tensor> want = function(inputs);
    for (size_t o = 0; o < want.size(); ++o)
      EXPECT_LT(relative_error(bound.outputs[o].to(kCPU), want[o].to(kCPU)), 1e-5)
          << "seed " << seed << " output " << o;
  }
}
