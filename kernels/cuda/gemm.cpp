// GPU kernels of matmul and linear through cuBLAS (hipBLAS on ROCm): cublasGemmEx and
// cublasGemmStridedBatchedEx with f32 accumulation (CUBLAS_COMPUTE_32F) for f32, f16 and bf16
// operands. f32 runs as plain f32 (the default math mode never picks TF32), so f32 results stay
// within ~1e-6 of a float64 reference; f16/bf16 accumulate in f32 and round once.
//
// Row-major tensors are column-major matrices transposed, so row-major C = A @ B is computed as
// column-major C^T = B^T @ A^T: the operands swap places and nothing is copied.
//
// Later: cublasLt with a per-shape algorithm choice (cached heuristics) and its bias epilogue.
#include <memory>
#include <mutex>
#include <unordered_map>

#include "kernels/check.h"
#include "kernels/cuda/gpu_runtime.h"
#include "kernels/cuda/gpu_vendor.h"
#include "kernels/kernel_registry.h"

namespace tessera::gpu {
namespace {

// cuBLAS recommends 32 MiB of workspace on Hopper; giving it one ourselves also keeps it from
// allocating during graph capture.
constexpr size_t kWorkspaceBytes = size_t{32} << 20;
constexpr int kMaxDevices = 64;

// One handle per device, shared by all threads under a mutex (setting the stream and enqueueing a
// GEMM take microseconds). Each stream gets its own workspace: GEMMs running concurrently on two
// streams must not share scratch memory. Contexts live until the process exits.
struct BlasContext {
  std::mutex mutex;
  gpublasHandle_t handle = nullptr;
  std::unordered_map<gpuStream_t, void*> workspaces;
};

BlasContext& blas_context(int device_index) {
  TESSERA_CHECK(device_index >= 0 && device_index < kMaxDevices, "device index {}", device_index);
  static std::once_flag once[kMaxDevices];
  static BlasContext* contexts[kMaxDevices] = {};
  std::call_once(once[device_index], [device_index] {
    auto context = std::make_unique<BlasContext>();
    DeviceGuard device(device_index);
    GPUBLAS_CHECK(gpublasCreate(&context->handle));
    GPUBLAS_CHECK(gpublasSetMathMode(context->handle, GPUBLAS_DEFAULT_MATH));
    contexts[device_index] = context.release();  // never destroyed: see above
  });
  return *contexts[device_index];
}

// Locks the device's handle, bound to the current stream and that stream's workspace.
class BlasCall {
 public:
  BlasCall(Device device, gpuStream_t stream)
      : context_(blas_context(device.index)), lock_(context_.mutex) {
    GPUBLAS_CHECK(gpublasSetStream(context_.handle, stream));
    void*& workspace = context_.workspaces[stream];
    if (workspace == nullptr)
      workspace = backend(device).allocator(device.index).allocate(kWorkspaceBytes);
    GPUBLAS_CHECK(gpublasSetWorkspace(context_.handle, workspace, kWorkspaceBytes));
  }
  gpublasHandle_t handle() const { return context_.handle; }

 private:
  BlasContext& context_;
  std::lock_guard<std::mutex> lock_;
};

gpuDataType blas_type(const char* op, DType dtype) {
  switch (dtype) {
    case DType::f32:
      return GPU_R_32F;
    case DType::f16:
      return GPU_R_16F;
    case DType::bf16:
      return GPU_R_16BF;
    default:
      break;
  }
  throw Error(fmt::format("{}: dtype {} is not supported on {}; use f32, f16 or bf16", op,
                          dtype_name(dtype), device_type_name(kGpuDeviceType)));
}

// BLAS takes int sizes and leading dimensions.
int blas_int(const char* op, const char* what, int64_t value) {
  TESSERA_REQUIRE(value >= 0 && value <= INT32_MAX,
                  "{}: {} = {} exceeds the BLAS limit of {}; split the operation", op, what, value,
                  INT32_MAX);
  return static_cast<int>(value);
}

void require_float_contiguous(const char* op, const char* what, const Tensor& tensor) {
  TESSERA_REQUIRE(is_floating(tensor.dtype()), "{}: {} has dtype {}; use f32, f16 or bf16", op,
                  what, dtype_name(tensor.dtype()));
  TESSERA_CHECK(tensor.is_contiguous(), "{}: {} must arrive contiguous", op, what);
}

void require_sizes(const char* op, const char* what, const Tensor& tensor, const Shape& expected) {
  TESSERA_REQUIRE(tensor.sizes() == expected, "{}: {} has shape {} but {} was expected", op, what,
                  shape_str(tensor.sizes()), shape_str(expected));
}

int64_t leading_numel(const Tensor& tensor) {
  int64_t count = 1;
  for (int64_t dim = 0; dim + 1 < tensor.dim(); ++dim) count *= tensor.size(dim);
  return count;
}

// Row-major out[m, n] (+)= a[m, k] @ op(b), in `batches` strided batches. b is [k, n] row-major
// (b_transposed = false) or [n, k] row-major read transposed (linear's weight). With
// accumulate, out already holds the bias rows and beta = 1 adds the product to them, so the sum
// is rounded once, as on the CPU.
struct GemmProblem {
  int64_t m = 0, n = 0, k = 0;
  int64_t batches = 1;
  const void* a = nullptr;
  const void* b = nullptr;
  void* out = nullptr;
  bool b_transposed = false;
  bool accumulate = false;
  DType dtype = DType::f32;
};

void run_gemm(const char* op, Device device, const GemmProblem& problem) {
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
  const auto op_b = problem.b_transposed ? GPUBLAS_OP_T : GPUBLAS_OP_N;
  if (problem.batches == 1) {
    GPUBLAS_CHECK(gpublasGemmEx(call.handle(), op_b, GPUBLAS_OP_N, m, n, k, &alpha, problem.b, type,
                                ld_b, problem.a, type, ld_a, &beta, problem.out, type, ld_c,
                                GPUBLAS_COMPUTE_32F, GPUBLAS_GEMM_DEFAULT));
  } else {
    GPUBLAS_CHECK(gpublasGemmStridedBatchedEx(
        call.handle(), op_b, GPUBLAS_OP_N, m, n, k, &alpha, problem.b, type, ld_b,
        problem.k * problem.n, problem.a, type, ld_a, problem.m * problem.k, &beta, problem.out,
        type, ld_c, problem.m * problem.n, blas_int(op, "the batch count", problem.batches),
        GPUBLAS_COMPUTE_32F, GPUBLAS_GEMM_DEFAULT));
  }
}

// A product with K = 0 is all zeros (or just the bias); BLAS is not asked to decide that.
void fill_zeros(const Tensor& out) {
  LaunchScope scope(out.device());
  GPU_CHECK(gpuMemsetAsync(out.data_ptr(), 0, out.nbytes(), scope.stream()));
}

void matmul_entry(const KernelArgs& args) {
  const Tensor& a = args.inputs[0];
  const Tensor& b = args.inputs[1];
  const Tensor& out = args.outputs[0];
  require_float_contiguous("matmul", "a", a);
  require_float_contiguous("matmul", "b", b);
  TESSERA_REQUIRE(b.dtype() == a.dtype() && out.dtype() == a.dtype(),
                  "matmul: a, b and the output must have one dtype, got {}, {} and {}",
                  dtype_name(a.dtype()), dtype_name(b.dtype()), dtype_name(out.dtype()));
  TESSERA_REQUIRE(a.dim() >= 2 && (b.dim() == 2 || b.dim() == a.dim()),
                  "matmul: expected a [..., M, K] with b [K, N] or [..., K, N], got a {} and b {}",
                  shape_str(a.sizes()), shape_str(b.sizes()));
  TESSERA_CHECK(out.is_contiguous(), "matmul: the output must be contiguous");
  const int64_t m = a.size(-2);
  const int64_t k = a.size(-1);
  const int64_t n = b.size(-1);
  TESSERA_REQUIRE(b.size(-2) == k, "matmul: a {} has K = {} but b {} has {} rows",
                  shape_str(a.sizes()), k, shape_str(b.sizes()), b.size(-2));
  Shape expected = a.sizes();
  expected.back() = n;
  require_sizes("matmul", "output", out, expected);
  if (out.numel() == 0) return;
  if (k == 0) return fill_zeros(out);
  GemmProblem problem;
  problem.n = n;
  problem.k = k;
  problem.a = a.data_ptr();
  problem.b = b.data_ptr();
  problem.out = out.data_ptr();
  problem.dtype = a.dtype();
  if (b.dim() == 2) {
    problem.m = leading_numel(a);  // one GEMM over all rows of a
  } else {
    const Shape batch_sizes(a.sizes().begin(), a.sizes().end() - 2);
    TESSERA_REQUIRE(Shape(b.sizes().begin(), b.sizes().end() - 2) == batch_sizes,
                    "matmul: the batch dims of a {} and b {} differ", shape_str(a.sizes()),
                    shape_str(b.sizes()));
    problem.m = m;
    problem.batches = shape_numel(batch_sizes);
  }
  run_gemm("matmul", out.device(), problem);
}

void linear_entry(const KernelArgs& args) {
  const Tensor& x = args.inputs[0];
  const Tensor& weight = args.inputs[1];
  const Tensor* bias = args.inputs.size() == 3 ? &args.inputs[2] : nullptr;
  const Tensor& out = args.outputs[0];
  require_float_contiguous("linear", "x", x);
  require_float_contiguous("linear", "weight", weight);
  TESSERA_REQUIRE(weight.dtype() == x.dtype() && out.dtype() == x.dtype(),
                  "linear: x, weight and the output must have one dtype, got {}, {} and {}",
                  dtype_name(x.dtype()), dtype_name(weight.dtype()), dtype_name(out.dtype()));
  TESSERA_REQUIRE(x.dim() >= 1 && weight.dim() == 2 && weight.size(1) == x.size(-1),
                  "linear: expected x [..., K] and weight [N, K], got x {} and weight {}",
                  shape_str(x.sizes()), shape_str(weight.sizes()));
  TESSERA_CHECK(out.is_contiguous(), "linear: the output must be contiguous");
  const int64_t n = weight.size(0);
  const int64_t k = weight.size(1);
  if (bias != nullptr) {
    require_float_contiguous("linear", "bias", *bias);
    TESSERA_REQUIRE(bias->dtype() == x.dtype(), "linear: bias has dtype {} but {} was expected",
                    dtype_name(bias->dtype()), dtype_name(x.dtype()));
    require_sizes("linear", "bias", *bias, Shape{n});
  }
  Shape expected = x.sizes();
  expected.back() = n;
  require_sizes("linear", "output", out, expected);
  if (out.numel() == 0) return;
  const int64_t rows = leading_numel(x);
  if (bias != nullptr) {
    // Every output row starts as the bias (a stride-0 broadcast copy); the GEMM adds onto it.
    const Tensor bias_rows = bias->view({1, n}).expand({rows, n});
    Tensor out_rows = out.view({rows, n});
    run_kernel("copy", kGpuDeviceType,
               KernelArgs{std::span(&bias_rows, 1), Attributes{}, std::span(&out_rows, 1)});
  }
  if (k == 0) {
    if (bias == nullptr) fill_zeros(out);
    return;
  }
  GemmProblem problem;
  problem.m = rows;
  problem.n = n;
  problem.k = k;
  problem.a = x.data_ptr();
  problem.b = weight.data_ptr();
  problem.out = out.data_ptr();
  problem.b_transposed = true;
  problem.accumulate = bias != nullptr;
  problem.dtype = x.dtype();
  run_gemm("linear", out.device(), problem);
}

TESSERA_REGISTER_KERNEL("matmul", kGpuDeviceType, matmul_entry);
TESSERA_REGISTER_KERNEL("linear", kGpuDeviceType, linear_entry);

}  // namespace
}  // namespace tessera::gpu
