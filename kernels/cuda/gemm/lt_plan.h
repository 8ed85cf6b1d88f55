// cuBLASLt plans (gemm.cpp's per-problem cache entries): a GEMM problem, the key the heuristic's
// answer depends on, and the plan made once per key: its matmul descriptor, matrix layouts and the
// heuristic's first algorithms. CUDA only (the HIP module has no BLAS, kernels/hip/CMakeLists.txt).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <type_traits>
#include <vector>

#include "kernels/cuda/gemm/skinny_gemm.h"
#include "kernels/cuda/gpu_runtime.h"
#include "kernels/cuda/gpu_vendor.h"
#include "kernels/linear_path.h"
#include "runtime/device.h"
#include "runtime/dtype.h"

namespace tessera::gpu {

[[noreturn]] void throw_blas_error(const char* call, const char* file, int line,
                                   gpublasStatus_t status);

#define GPUBLAS_CHECK(call)                                                               \
  do {                                                                                    \
    gpublasStatus_t gpublas_check_status_ = (call);                                       \
    if (gpublas_check_status_ != GPUBLAS_STATUS_SUCCESS)                                  \
      ::tessera::gpu::throw_blas_error(#call, __FILE__, __LINE__, gpublas_check_status_); \
  } while (0)

// cuBLAS recommends 32 MiB of workspace on Hopper; giving it one ourselves also keeps it from
// allocating during graph capture.
constexpr size_t kWorkspaceBytes = size_t{32} << 20;
// Lt algorithms a linear at skinny sizes times (the heuristic's first ones).
constexpr int kLtCandidates = kLibraryAlgorithms;

// Runs fn(handle, workspace) with the device's cuBLASLt handle and `stream`'s workspace
// (kWorkspaceBytes), under the lock every GEMM of the device takes (gemm.cpp): GEMM files with
// plans of their own (fp8_linear.cu) share the handle and workspaces.
void with_blas_lt(Device device, gpuStream_t stream,
                  const std::function<void(gpublasLtHandle_t, void*)>& fn);

// Owns one BLASLt descriptor. Destroying cannot report a failure (destructors must not throw).
template <typename Handle, auto destroy>
class LtDescriptor {
 public:
  LtDescriptor() = default;
  LtDescriptor(const LtDescriptor&) = delete;
  LtDescriptor& operator=(const LtDescriptor&) = delete;
  ~LtDescriptor() {
    if (handle_ != nullptr) (void)destroy(handle_);
  }
  Handle* address() { return &handle_; }  // for the Create call
  Handle get() const { return handle_; }

 private:
  Handle handle_ = nullptr;
};

using LtMatmulDesc = LtDescriptor<gpublasLtMatmulDesc_t, &gpublasLtMatmulDescDestroy>;
using LtLayout = LtDescriptor<gpublasLtMatrixLayout_t, &gpublasLtMatrixLayoutDestroy>;
using LtPreference = LtDescriptor<gpublasLtMatmulPreference_t, &gpublasLtMatmulPreferenceDestroy>;

// Everything the heuristic's answer depends on (the device is implied: each device has its own
// cache). Sizes are those of the row-major problem; Lt's A is b (or linear's weight), its B is a,
// C = D is the output. Alignments are in bytes, 0 for an absent bias.
struct LtPlanKey {
  int64_t dtype = 0;
  int64_t b_transposed = 0;
  int64_t m = 0, n = 0, k = 0;
  int64_t batches = 1;
  int64_t ld_a = 0, ld_b = 0, ld_c = 0;              // Lt's column-major leading dims
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;  // elements between batches, 0 when one
  int64_t epilogue = 0;
  int64_t workspace_bytes = 0;
  int64_t align_a = 0, align_b = 0, align_c = 0, align_bias = 0;
  int64_t follows_splitting_op = 0;
  bool operator==(const LtPlanKey&) const = default;
};

// The key is all int64 fields, so its bytes are its value.
static_assert(std::has_unique_object_representations_v<LtPlanKey>);
struct LtPlanKeyHash {
  size_t operator()(const LtPlanKey& key) const {
    return std::hash<std::string_view>{}(
        std::string_view(reinterpret_cast<const char*>(&key), sizeof(key)));
  }
};

// A cached plan. The descriptors are only read by later calls, except the bias pointer, which
// each call sets under the context's mutex.
struct LtPlan {
  LtMatmulDesc matmul;
  LtLayout layout_a;
  LtLayout layout_b;
  LtLayout layout_c;  // C and D: the GEMM runs in place on the output
  bool has_algorithm = false;
  gpublasLtMatmulAlgo_t algorithm{};  // the heuristic's first, or the fastest of `candidates`
  size_t algorithm_index = 0;         // its index in `candidates`
  // The heuristic's first kLtCandidates algorithms, best guess first. linear at skinny sizes
  // times them all (their order is a model's guess: at decode shapes it is often not the
  // fastest), other GEMMs run the first.
  std::vector<gpublasLtMatmulAlgo_t> candidates;
  // linear at skinny sizes: whether the paths were timed, and the skinny variant that won
  // (nullptr: the library).
  bool paths_measured = false;
  const SkinnyVariant* skinny = nullptr;
};

// Row-major out[m, n] (+)= a[m, k] @ op(b) (+ bias), in `batches` strided batches. b is [k, n]
// row-major (b_transposed = false) or [n, k] row-major read transposed (linear's weight). With
// accumulate, out already holds the bias rows and beta = 1 adds the product to them, so the sum
// is rounded once, as on the CPU. A bias pointer instead asks Lt's BIAS epilogue to add bias[n] to
// every row (run_lt_gemm only; never together with accumulate).
struct GemmProblem {
  int64_t m = 0, n = 0, k = 0;
  int64_t batches = 1;
  const void* a = nullptr;
  const void* b = nullptr;
  void* out = nullptr;
  const void* bias = nullptr;
  bool b_transposed = false;
  bool accumulate = false;
  DType dtype = DType::f32;
  // linear at skinny sizes: the step follows a splitting op's kernels (KernelArgs), which decides
  // how its paths are timed (gemm.cpp), so it is part of the plan's key.
  bool follows_splitting_op = false;
};

// The BLAS data type of `dtype` (f32, f16, bf16); others throw naming `op`.
gpuDataType blas_type(const char* op, DType dtype);
// BLAS takes int sizes and leading dimensions: `value` as an int, or a throw naming `op`/`what`.
int blas_int(const char* op, const char* what, int64_t value);
// The plan key of `problem` (its pointers give the alignments).
LtPlanKey lt_plan_key(const char* op, const GemmProblem& problem);
// Builds the descriptors of `key` and asks the heuristic for its first algorithms, once. `bias` is
// the first call's bias pointer: the heuristic reads its alignment from it.
std::unique_ptr<LtPlan> make_lt_plan(const char* op, gpublasLtHandle_t handle, const LtPlanKey& key,
                                     const void* bias);

}  // namespace tessera::gpu
