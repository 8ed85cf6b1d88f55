// GPU kernels of matmul and linear through cuBLASLt (hipBLASLt on ROCm) with f32 accumulation
// (CUBLAS_COMPUTE_32F) for f32, f16 and bf16 operands. f32 runs as plain f32 (never TF32), so f32
// results stay within ~1e-6 of a float64 reference; f16/bf16 accumulate in f32 and round once.
//
// Row-major tensors are column-major matrices transposed, so row-major C = A @ B is computed as
// column-major C^T = B^T @ A^T: the operands swap places and nothing is copied.
//
// Each problem (shape, strides, pointer alignments, epilogue) gets a plan once per device: its
// matmul descriptor, matrix layouts and the best algorithm of cublasLtMatmulAlgoGetHeuristic, so
// later calls skip the heuristic. linear's bias rides in the BIAS epilogue, added in f32 before
// the one rounding, as on the CPU. For a problem Lt has no algorithm for, cublasGemmEx (or its
// strided-batched form) runs instead; the bias then fills the output and beta = 1 adds onto it.
//
// linear with few rows (decode: up to kSkinnyMaxRows) may run a skinny kernel instead
// (skinny_gemm.h). On a problem's first call outside a graph capture, its plan times the Lt
// algorithm and every skinny variant that fits on the problem's own operands, each after an L2
// flush (in a decode step the weight comes from memory, not from L2) and replayed from a graph
// behind a short kernel, as a step runs them (cold_timer.h; alone when the linear follows a
// splitting op, KernelArgs::follows_splitting_op), and keeps the fastest algorithm, and a skinny
// kernel where skinny_choice.h's rule lets it replace the library (its credit behind the short
// kernel, its margin after a splitting op); kernels/linear_path.h can force a path. The choice is
// also stored (kernels/measured_choices.h), so a later process on the same device and build takes
// it without timing.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kernels/cuda/gemm/cold_timer.h"
#include "kernels/cuda/gemm/l2_prefetch.h"
#include "kernels/cuda/gemm/lt_plan.h"
#include "kernels/cuda/gemm/measured_device.h"
#include "kernels/cuda/gemm/quantized_linear.h"
#include "kernels/cuda/gemm/skinny_gemm.h"
#include "kernels/cuda/gpu_runtime.h"
#include "kernels/cuda/gpu_vendor.h"
#include "kernels/kernel_checks.h"
#include "kernels/linear_path.h"
#include "kernels/measured_choices.h"
#include "runtime/check.h"
#include "runtime/kernel_registry.h"
#include "runtime/profiler/profiler.h"

namespace tessera::gpu {
namespace {

// One cuBLAS and one cuBLASLt handle per device, shared by all threads under a mutex (binding the
// stream, looking up the plan and enqueueing a GEMM take microseconds). Each stream gets its own
// workspace: GEMMs running concurrently on two streams must not share scratch memory; the two
// libraries share it, their calls on one stream being ordered. Contexts live until the process
// exits.
struct BlasContext {
  std::mutex mutex;
  gpublasHandle_t handle = nullptr;
  gpublasLtHandle_t lt_handle = nullptr;
  std::unordered_map<gpuStream_t, void*> workspaces;
  std::unordered_map<LtPlanKey, std::unique_ptr<LtPlan>, LtPlanKeyHash> lt_plans;
};

BlasContext& blas_context(int device_index) {
  const size_t slot = device_slot(device_index);
  static std::once_flag once[kMaxGpuDevices];
  static BlasContext* contexts[kMaxGpuDevices] = {};
  std::call_once(once[slot], [slot, device_index] {
    auto context = std::make_unique<BlasContext>();
    DeviceGuard device(device_index);
    GPUBLAS_CHECK(gpublasCreate(&context->handle));
    GPUBLAS_CHECK(gpublasSetMathMode(context->handle, GPUBLAS_DEFAULT_MATH));
    GPUBLAS_CHECK(gpublasLtCreate(&context->lt_handle));
    contexts[slot] = context.release();  // never destroyed: see above
  });
  return *contexts[slot];
}

// Locks the device's BLAS context for one GEMM on `stream`, with that stream's workspace.
class BlasCall {
 public:
  BlasCall(Device device, gpuStream_t stream)
      : context_(blas_context(device.index)), lock_(context_.mutex), stream_(stream) {
    workspace_ = workspace_for(device, stream);
  }

  // The same handles on `stream` with that stream's workspace, under this call's lock (which the
  // returned call does not take again): a path timed on a measuring stream.
  BlasCall on_stream(Device device, gpuStream_t stream) const {
    return BlasCall(context_, device, stream);
  }

  // The cuBLAS handle, bound to this call's stream and workspace.
  gpublasHandle_t blas_handle() const {
    GPUBLAS_CHECK(gpublasSetStream(context_.handle, stream_));
    GPUBLAS_CHECK(gpublasSetWorkspace(context_.handle, workspace_, kWorkspaceBytes));
    return context_.handle;
  }
  gpublasLtHandle_t lt_handle() const { return context_.lt_handle; }
  gpuStream_t stream() const { return stream_; }
  void* workspace() const { return workspace_; }

  // The plan cached for `key`, made by `make` (returning std::unique_ptr<LtPlan>) the first time.
  template <typename MakePlan>
  LtPlan& lt_plan(const LtPlanKey& key, MakePlan&& make) {
    auto found = context_.lt_plans.find(key);
    if (found == context_.lt_plans.end()) found = context_.lt_plans.emplace(key, make()).first;
    return *found->second;
  }

 private:
  BlasCall(BlasContext& context, Device device, gpuStream_t stream)
      : context_(context), stream_(stream) {
    workspace_ = workspace_for(device, stream);
  }

  void* workspace_for(Device device, gpuStream_t stream) {
    void*& workspace = context_.workspaces[stream];
    if (workspace == nullptr)
      workspace = backend(device).allocator(device.index).allocate(kWorkspaceBytes);
    return workspace;
  }

  BlasContext& context_;
  std::unique_lock<std::mutex> lock_;  // not held by a call made by on_stream
  gpuStream_t stream_;
  void* workspace_ = nullptr;
};

}  // namespace

void with_blas_lt(Device device, gpuStream_t stream,
                  const std::function<void(gpublasLtHandle_t, void*)>& fn) {
  BlasCall call(device, stream);
  fn(call.lt_handle(), call.workspace());
}

namespace {

// Enqueues the GEMM through BLASLt with `plan` and one of its algorithms (by default the one it
// runs).
void enqueue_lt(const LtPlan& plan, const GemmProblem& problem, const BlasCall& call,
                const gpublasLtMatmulAlgo_t* algorithm = nullptr) {
  if (problem.bias != nullptr) {
    GPUBLAS_CHECK(gpublasLtMatmulDescSetAttribute(plan.matmul.get(),
                                                  GPUBLASLT_MATMUL_DESC_BIAS_POINTER, &problem.bias,
                                                  sizeof(problem.bias)));
  }
  const float alpha = 1.0f;
  const float beta = problem.accumulate ? 1.0f : 0.0f;
  GPUBLAS_CHECK(gpublasLtMatmul(call.lt_handle(), plan.matmul.get(), &alpha, problem.b,
                                plan.layout_a.get(), problem.a, plan.layout_b.get(), &beta,
                                problem.out, plan.layout_c.get(), problem.out, plan.layout_c.get(),
                                algorithm != nullptr ? algorithm : &plan.algorithm,
                                call.workspace(), kWorkspaceBytes, call.stream()));
}

// Enqueues the GEMM through BLASLt with the shape's cached plan. Returns false, having enqueued
// nothing, when Lt has no algorithm for the problem.
bool run_lt_gemm(const char* op, Device device, const GemmProblem& problem) {
  TESSERA_CHECK(problem.bias == nullptr || !problem.accumulate,
                "{}: a GEMM takes its bias from the epilogue or from the output, not both", op);
  const LtPlanKey key = lt_plan_key(op, problem);
  LaunchScope scope(device);
  BlasCall call(device, scope.stream());
  const LtPlan& plan =
      call.lt_plan(key, [&] { return make_lt_plan(op, call.lt_handle(), key, problem.bias); });
  if (!plan.has_algorithm) return false;
  if (const int forced = forced_library_algorithm(); forced > 0) {  // library:N
    const size_t index = std::min(static_cast<size_t>(forced), plan.candidates.size()) - 1;
    enqueue_lt(plan, problem, call, &plan.candidates[index]);
    annotate_launch(fmt::format("cublaslt:{}", index + 1));
    return true;
  }
  enqueue_lt(plan, problem, call);
  annotate_launch("cublaslt");
  return true;
}

// ---- linear at skinny sizes.

// Times the plan's Lt algorithms and every skinny variant fitting `skinny`, and keeps the fastest
// of each in the plan: the algorithm the library path runs, and the skinny variant when it beats
// that.
void measure_linear_paths(LtPlan& plan, const GemmProblem& problem, const SkinnyProblem& skinny,
                          const BlasCall& call, Device device) {
  plan.paths_measured = true;
  ColdTimer timer(device);
  float library_ms = INFINITY;
  std::vector<std::string> timings;
  // Timed as a decode step runs them: replayed from a graph, behind a short kernel that the
  // skinny kernels (launched programmatically) overlap and the library's does not; or, after a
  // splitting op, alone: the attention's kernels before it spread over the SMs, and a skinny
  // kernel's blocks, whose registers take most of an SM, find little room beside them
  // (docs/performance.md "Linear paths after a splitting op"). Behind the lead a skinny kernel
  // gets skinny_choice.h's credit, for what it overlaps in a step; after a splitting op it must
  // win by skinny_choice.h's margin. An algorithm other than the heuristic's first must beat it by
  // kSkinnyMargin: single cold runs vary by a few percent.
  const TimedAfter after =
      problem.follows_splitting_op ? TimedAfter::nothing : TimedAfter::lead_kernel;
  float first_ms = INFINITY;
  size_t fastest = 0;
  for (size_t i = 0; i < plan.candidates.size(); ++i) {
    const float ms = timer.median_graph_ms(
        [&] {
          enqueue_lt(plan, problem, call.on_stream(device, current_stream(device)),
                     &plan.candidates[i]);
        },
        after);
    if (i == 0) first_ms = ms;
    if (i == 0 || (ms < library_ms && ms < kSkinnyMargin * first_ms)) {
      library_ms = ms;
      fastest = i;
    }
  }
  if (plan.has_algorithm) {
    plan.algorithm = plan.candidates[fastest];
    plan.algorithm_index = fastest;
    timings.push_back(
        fmt::format("cublaslt {:.1f} us (algorithm {} of {}; the heuristic's first "
                    "{:.1f} us)",
                    1e3 * library_ms, fastest + 1, plan.candidates.size(), 1e3 * first_ms));
  }
  plan.skinny = fastest_skinny_variant(timer, skinny, after,
                                       rule_against_library(library_ms, after), timings);
  spdlog::debug("linear {} M={} N={} K={}{}{}: {}; takes {}", dtype_name(skinny.dtype), skinny.m,
                skinny.n, skinny.k, skinny.bias != nullptr ? " with bias" : "",
                problem.follows_splitting_op ? " after a splitting op (timed alone)" : "",
                fmt::join(timings, ", "), plan.skinny != nullptr ? plan.skinny->name : "cublaslt");
}

// ---- Measured choices kept across processes (kernels/measured_choices.h).

// The problem as the store keys it: every field of the plan's key (which the heuristic's answer
// and the skinny kernels' fit depend on) and the library's version (its algorithm list).
std::string stored_problem(const LtPlanKey& key) {
  return fmt::format(
      "linear {} b_transposed {} m {} n {} k {} batches {} ld {} {} {} stride {} {} {} epilogue {} "
      "workspace {} align {} {} {} {} follows_splitting_op {} cublasLt {}",
      dtype_name(static_cast<DType>(key.dtype)), key.b_transposed, key.m, key.n, key.k, key.batches,
      key.ld_a, key.ld_b, key.ld_c, key.stride_a, key.stride_b, key.stride_c, key.epilogue,
      key.workspace_bytes, key.align_a, key.align_b, key.align_c, key.align_bias,
      key.follows_splitting_op, gpublasLtGetVersion());
}

// "<path> algorithm <N>": the skinny variant or "cublaslt", and the library algorithm (from 1;
// 0 when the library offers none) that the library path runs.
std::string stored_choice(const LtPlan& plan) {
  return fmt::format("{} algorithm {}", plan.skinny != nullptr ? plan.skinny->name : "cublaslt",
                     plan.has_algorithm ? plan.algorithm_index + 1 : 0);
}

// Takes the stored choice of `key` into `plan` when there is a usable one (then the paths count
// as measured); otherwise leaves the plan to be measured.
void take_stored_choice(LtPlan& plan, const LtPlanKey& key, const SkinnyProblem& skinny) {
  const std::optional<std::string> stored =
      find_measured_choice(measured_device(skinny.device), stored_problem(key));
  if (!stored) return;
  char path[64] = {};
  char word[16] = {};
  size_t algorithm = 0;
  int end = 0;
  const SkinnyVariant* variant = nullptr;
  const bool parsed =
      std::sscanf(stored->c_str(), "%63s %15s %zu%n", path, word, &algorithm, &end) == 3 &&
      static_cast<size_t>(end) == stored->size() && std::string_view(word) == "algorithm";
  const bool library = std::string_view(path) == "cublaslt";
  if (parsed && !library) variant = find_skinny_variant(path);
  const bool usable = parsed && (library || (variant != nullptr && variant->fits(skinny))) &&
                      (plan.has_algorithm ? algorithm >= 1 && algorithm <= plan.candidates.size()
                                          : algorithm == 0 && library);
  if (!usable) {
    spdlog::warn(
        "measured choices: '{}' is not a choice for linear {} M={} N={} K={}; measuring "
        "again",
        *stored, dtype_name(skinny.dtype), skinny.m, skinny.n, skinny.k);
    return;
  }
  if (plan.has_algorithm) {
    plan.algorithm_index = algorithm - 1;
    plan.algorithm = plan.candidates[plan.algorithm_index];
  }
  plan.skinny = variant;
  plan.paths_measured = true;
}

// The skinny problem of linear `problem` (bias in problem.bias, never accumulated).
SkinnyProblem skinny_problem(Device device, const GemmProblem& problem) {
  SkinnyProblem skinny;
  skinny.m = problem.m;
  skinny.n = problem.n;
  skinny.k = problem.k;
  skinny.x = problem.a;
  skinny.weight = problem.b;
  skinny.bias = problem.bias;
  skinny.out = problem.out;
  skinny.dtype = problem.dtype;
  skinny.device = device.index;
  return skinny;
}

// Runs linear `problem` (bias in problem.bias, never accumulated) on a skinny kernel when its
// path is one: forced, or measured on its first call; the kernel ends by asking for `prefetch`.
// Returns false when the library should run it.
bool run_skinny_linear(Device device, const GemmProblem& problem, const L2Prefetch& prefetch) {
  const std::string* forced = forced_linear_path();
  if (library_path_forced()) return false;
  SkinnyProblem skinny = skinny_problem(device, problem);
  if (forced != nullptr) {
    const SkinnyVariant* variant = find_skinny_variant(forced->c_str());
    if (variant == nullptr || !variant->fits(skinny)) return false;
    LaunchScope scope(device);
    skinny.prefetch = prefetch;
    variant->launch(skinny, scope.stream());
    annotate_launch(variant->name);
    return true;
  }
  if (std::none_of(skinny_variants().begin(), skinny_variants().end(),
                   [&](const SkinnyVariant& variant) { return variant.fits(skinny); }))
    return false;
  const LtPlanKey key = lt_plan_key("linear", problem);
  LaunchScope scope(device);
  auto plan_of = [&](BlasCall& call) -> LtPlan& {
    return call.lt_plan(
        key, [&] { return make_lt_plan("linear", call.lt_handle(), key, problem.bias); });
  };
  bool measured = false;
  const SkinnyVariant* chosen = nullptr;
  {
    BlasCall call(device, scope.stream());
    LtPlan& plan = plan_of(call);
    // A choice an earlier process measured needs no timing: a capture may take it too.
    if (!plan.paths_measured) take_stored_choice(plan, key, skinny);
    measured = plan.paths_measured;
    chosen = plan.skinny;
  }
  if (!measured) {
    // Timing synchronizes, which a capture cannot hold: a shape first seen while capturing runs
    // the library until a call outside a capture measures it.
    if (stream_capturing(scope.stream())) return false;
    // The measuring lock before the BLAS context's: a gated kernel's timing holds the first while
    // it runs linear, which takes the second.
    std::lock_guard<std::recursive_mutex> measuring(ColdTimer::measuring_mutex(device.index));
    BlasCall call(device, scope.stream());
    LtPlan& plan = plan_of(call);
    if (!plan.paths_measured) {
      measure_linear_paths(plan, problem, skinny, call, device);
      record_measured_choice(measured_device(device.index), stored_problem(key),
                             stored_choice(plan));
    }
    chosen = plan.skinny;
  }
  if (chosen == nullptr) return false;
  skinny.prefetch = prefetch;  // measured without: the paths' own times
  chosen->launch(skinny, scope.stream());
  annotate_launch(chosen->name);
  return true;
}

// The fallback: cublasGemmEx / cublasGemmStridedBatchedEx with the library's default heuristic.
void run_blas_gemm(const char* op, Device device, const GemmProblem& problem) {
  TESSERA_CHECK(problem.bias == nullptr, "{}: GemmEx has no bias epilogue", op);
  const gpuDataType type = blas_type(op, problem.dtype);
  // Column-major view: C^T [n, m] = op(B)^T [n, k] @ A^T [k, m].
  const int m = blas_int(op, "N (output columns)", problem.n);
  const int n = blas_int(op, "M (output rows)", problem.m);
  const int k = blas_int(op, "K", problem.k);
  const int ld_b = problem.b_transposed ? k : m;
  const int ld_a = k;
  const int ld_c = m;
  const float alpha = 1.0f;
  const float beta = problem.accumulate ? 1.0f : 0.0f;
  LaunchScope scope(device);
  BlasCall call(device, scope.stream());
  gpublasHandle_t handle = call.blas_handle();
  const auto op_b = problem.b_transposed ? GPUBLAS_OP_T : GPUBLAS_OP_N;
  if (problem.batches == 1) {
    GPUBLAS_CHECK(gpublasGemmEx(handle, op_b, GPUBLAS_OP_N, m, n, k, &alpha, problem.b, type, ld_b,
                                problem.a, type, ld_a, &beta, problem.out, type, ld_c,
                                GPUBLAS_COMPUTE_32F, GPUBLAS_GEMM_DEFAULT));
  } else {
    GPUBLAS_CHECK(gpublasGemmStridedBatchedEx(
        handle, op_b, GPUBLAS_OP_N, m, n, k, &alpha, problem.b, type, ld_b, problem.k * problem.n,
        problem.a, type, ld_a, problem.m * problem.k, &beta, problem.out, type, ld_c,
        problem.m * problem.n, blas_int(op, "the batch count", problem.batches),
        GPUBLAS_COMPUTE_32F, GPUBLAS_GEMM_DEFAULT));
  }
  annotate_launch("cublas");
}

void run_gemm(const char* op, Device device, const GemmProblem& problem) {
  if (!run_lt_gemm(op, device, problem)) run_blas_gemm(op, device, problem);
}

// Whether Lt's BIAS epilogue can add this bias to this output: our descriptors give the bias the
// output's dtype, which Lt allows for f32, f16 and bf16 outputs.
bool lt_bias_epilogue_allowed(DType bias_dtype, DType out_dtype) {
  return bias_dtype == out_dtype;
}

// A product with K = 0 is all zeros (or just the bias); BLAS is not asked to decide that.
void fill_zeros(const Tensor& out) {
  LaunchScope scope(out.device());
  GPU_CHECK(gpuMemsetAsync(out.data_ptr(), 0, out.nbytes(), scope.stream()));
}

// Every row of out [rows, n] becomes the bias (a stride-0 broadcast copy).
void fill_bias_rows(const Tensor& bias, const Tensor& out, int64_t rows, int64_t n) {
  const Tensor bias_rows = bias.view({1, n}).expand({rows, n});
  Tensor out_rows = out.view({rows, n});
  run_kernel("copy", kGpuDeviceType,
             KernelArgs{std::span(&bias_rows, 1), Attributes{}, std::span(&out_rows, 1)});
}

void matmul_entry(const KernelArgs& args) {
  const Tensor& a = args.inputs[0];
  const Tensor& b = args.inputs[1];
  const Tensor& out = args.outputs[0];
  const MatmulShape shape = check_matmul(a, b, out);
  const int64_t n = shape.n, k = shape.k;
  if (out.numel() == 0) return;
  if (k == 0) return fill_zeros(out);
  GemmProblem problem;
  problem.n = n;
  problem.k = k;
  problem.a = a.data_ptr();
  problem.b = b.data_ptr();
  problem.out = out.data_ptr();
  problem.dtype = a.dtype();
  problem.m = shape.m;
  problem.batches = shape.batches;
  run_gemm("matmul", out.device(), problem);
}

void linear_entry(const KernelArgs& args) {
  const LinearArgs linear = check_linear(args);
  const Tensor &x = linear.x, &weight = linear.weight, &out = linear.out;
  const Tensor* bias = linear.bias;
  const MatmulShape& shape = linear.shape;
  const int64_t n = shape.n, k = shape.k;
  if (out.numel() == 0) return;
  if (is_quantized(weight.dtype())) return quantized_linear(x, weight, bias, out);
  const int64_t rows = shape.m;
  if (k == 0) {
    if (bias != nullptr) return fill_bias_rows(*bias, out, rows, n);
    return fill_zeros(out);
  }
  GemmProblem problem;
  problem.m = rows;
  problem.n = n;
  problem.k = k;
  problem.a = x.data_ptr();
  problem.b = weight.data_ptr();
  problem.out = out.data_ptr();
  problem.b_transposed = true;
  problem.dtype = x.dtype();
  problem.follows_splitting_op = args.follows_splitting_op;
  const L2Prefetch prefetch = l2_prefetch_of(args.prefetch, out.device().index);
  if (rows <= kSkinnyMaxRows && (bias == nullptr || bias->dtype() == out.dtype())) {
    GemmProblem skinny = problem;
    skinny.bias = bias != nullptr ? bias->data_ptr() : nullptr;
    if (run_skinny_linear(out.device(), skinny, prefetch)) return;
  }
  // The library's path runs without the prefetch (l2_prefetch.h says why).
  if (bias != nullptr && lt_bias_epilogue_allowed(bias->dtype(), out.dtype())) {
    problem.bias = bias->data_ptr();
    if (run_lt_gemm("linear", out.device(), problem)) return;
    problem.bias = nullptr;  // no algorithm with the epilogue: the bias goes through beta below
  }
  if (bias != nullptr) {
    fill_bias_rows(*bias, out, rows, n);
    problem.accumulate = true;
  }
  run_gemm("linear", out.device(), problem);
}

TESSERA_REGISTER_KERNEL("matmul", kGpuDeviceType, matmul_entry);
TESSERA_REGISTER_KERNEL("linear", kGpuDeviceType, linear_entry);

}  // namespace
}  // namespace tessera::gpu
