#include "kernels/cuda/gemm/lt_plan.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "runtime/check.h"

namespace tessera::gpu {
namespace {

// The alignment cuBLASLt assumes for its matrices unless told less.
constexpr uint64_t kMaxAlignmentBytes = 256;

// The alignment Lt may assume for a matrix: the largest power of two up to 256 dividing its
// address and, in strided batches, the byte distance to the next matrix.
int64_t lt_alignment(const void* pointer, int64_t batch_stride_bytes) {
  const uint64_t bits = reinterpret_cast<uintptr_t>(pointer) |
                        static_cast<uint64_t>(batch_stride_bytes) | kMaxAlignmentBytes;
  return static_cast<int64_t>(bits & (~bits + 1));  // the lowest set bit
}

}  // namespace

[[noreturn]] void throw_blas_error(const char* call, const char* file, int line,
                                   gpublasStatus_t status) {
  throw Error(fmt::format("{} BLAS error at {}:{}: {} failed: {} (status {})", runtime_name(), file,
                          line, call, gpublasGetStatusString(status), static_cast<int>(status)));
}

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

LtPlanKey lt_plan_key(const char* op, const GemmProblem& problem) {
  LtPlanKey key;
  key.dtype = static_cast<int64_t>(problem.dtype);
  key.b_transposed = problem.b_transposed ? 1 : 0;
  key.m = blas_int(op, "M (output rows)", problem.m);
  key.n = blas_int(op, "N (output columns)", problem.n);
  key.k = blas_int(op, "K", problem.k);
  key.batches = blas_int(op, "the batch count", problem.batches);
  key.ld_a = problem.b_transposed ? key.k : key.n;
  key.ld_b = key.k;
  key.ld_c = key.n;
  if (key.batches > 1) {
    key.stride_a = key.k * key.n;
    key.stride_b = key.m * key.k;
    key.stride_c = key.m * key.n;
  }
  key.epilogue = problem.bias != nullptr ? GPUBLASLT_EPILOGUE_BIAS : GPUBLASLT_EPILOGUE_DEFAULT;
  key.workspace_bytes = static_cast<int64_t>(kWorkspaceBytes);
  const auto element = static_cast<int64_t>(element_size(problem.dtype));
  key.align_a = lt_alignment(problem.b, key.stride_a * element);
  key.align_b = lt_alignment(problem.a, key.stride_b * element);
  key.align_c = lt_alignment(problem.out, key.stride_c * element);
  key.align_bias = problem.bias != nullptr ? lt_alignment(problem.bias, 0) : 0;
  key.follows_splitting_op = problem.follows_splitting_op ? 1 : 0;
  return key;
}

// Builds the descriptors of `key` and asks the heuristic for its best algorithm, once. `bias` is
// the first call's bias pointer: the heuristic reads its alignment from it.
std::unique_ptr<LtPlan> make_lt_plan(const char* op, gpublasLtHandle_t handle, const LtPlanKey& key,
                                     const void* bias) {
  const gpuDataType type = blas_type(op, static_cast<DType>(key.dtype));
  auto plan = std::make_unique<LtPlan>();
  GPUBLAS_CHECK(gpublasLtMatmulDescCreate(plan->matmul.address(), GPUBLAS_COMPUTE_32F, GPU_R_32F));
  gpublasLtMatmulDesc_t matmul = plan->matmul.get();
  const gpublasOperation_t transpose_a = key.b_transposed != 0 ? GPUBLAS_OP_T : GPUBLAS_OP_N;
  const gpublasOperation_t transpose_b = GPUBLAS_OP_N;
  GPUBLAS_CHECK(gpublasLtMatmulDescSetAttribute(matmul, GPUBLASLT_MATMUL_DESC_TRANSA, &transpose_a,
                                                sizeof(transpose_a)));
  GPUBLAS_CHECK(gpublasLtMatmulDescSetAttribute(matmul, GPUBLASLT_MATMUL_DESC_TRANSB, &transpose_b,
                                                sizeof(transpose_b)));
  const auto epilogue = static_cast<gpublasLtEpilogue_t>(key.epilogue);
  GPUBLAS_CHECK(gpublasLtMatmulDescSetAttribute(matmul, GPUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                                sizeof(epilogue)));
  if (epilogue == GPUBLASLT_EPILOGUE_BIAS) {
    // The bias has the output's dtype (Lt's default; stated because hipBLASLt's may differ).
    const auto bias_type = static_cast<int32_t>(type);
    GPUBLAS_CHECK(gpublasLtMatmulDescSetAttribute(matmul, GPUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                  &bias_type, sizeof(bias_type)));
    GPUBLAS_CHECK(gpublasLtMatmulDescSetAttribute(matmul, GPUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                  sizeof(bias)));
  }

  // Column-major: A is [k, n] read transposed (the weight) or [n, k]; B is [k, m]; C is [n, m].
  const auto rows_a = static_cast<uint64_t>(key.b_transposed != 0 ? key.k : key.n);
  const auto cols_a = static_cast<uint64_t>(key.b_transposed != 0 ? key.n : key.k);
  const auto k = static_cast<uint64_t>(key.k);
  const auto m = static_cast<uint64_t>(key.m);
  const auto n = static_cast<uint64_t>(key.n);
  GPUBLAS_CHECK(
      gpublasLtMatrixLayoutCreate(plan->layout_a.address(), type, rows_a, cols_a, key.ld_a));
  GPUBLAS_CHECK(gpublasLtMatrixLayoutCreate(plan->layout_b.address(), type, k, m, key.ld_b));
  GPUBLAS_CHECK(gpublasLtMatrixLayoutCreate(plan->layout_c.address(), type, n, m, key.ld_c));
  if (key.batches > 1) {
    const auto batches = static_cast<int32_t>(key.batches);
    const std::pair<gpublasLtMatrixLayout_t, int64_t> strided[] = {
        {plan->layout_a.get(), key.stride_a},
        {plan->layout_b.get(), key.stride_b},
        {plan->layout_c.get(), key.stride_c}};
    for (const auto& [layout, stride] : strided) {
      GPUBLAS_CHECK(gpublasLtMatrixLayoutSetAttribute(layout, GPUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                      &batches, sizeof(batches)));
      GPUBLAS_CHECK(gpublasLtMatrixLayoutSetAttribute(
          layout, GPUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
    }
  }

  LtPreference preference;
  GPUBLAS_CHECK(gpublasLtMatmulPreferenceCreate(preference.address()));
  const auto workspace_bytes = static_cast<uint64_t>(key.workspace_bytes);
  GPUBLAS_CHECK(gpublasLtMatmulPreferenceSetAttribute(preference.get(),
                                                      GPUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                      &workspace_bytes, sizeof(workspace_bytes)));
#if GPUBLASLT_HAS_PREFERENCE_FILTERS
  // Split-K partial sums stay in f32 (the in-place and output-type schemes would round them to
  // f16/bf16 on the way), and algorithms needing more alignment than the operands have are out.
  const uint32_t reduction_schemes = GPUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  GPUBLAS_CHECK(gpublasLtMatmulPreferenceSetAttribute(
      preference.get(), GPUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reduction_schemes,
      sizeof(reduction_schemes)));
  const auto align_a = static_cast<uint32_t>(key.align_a);
  const auto align_b = static_cast<uint32_t>(key.align_b);
  const auto align_c = static_cast<uint32_t>(key.align_c);
  GPUBLAS_CHECK(gpublasLtMatmulPreferenceSetAttribute(
      preference.get(), GPUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof(align_a)));
  GPUBLAS_CHECK(gpublasLtMatmulPreferenceSetAttribute(
      preference.get(), GPUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof(align_b)));
  GPUBLAS_CHECK(gpublasLtMatmulPreferenceSetAttribute(
      preference.get(), GPUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c, sizeof(align_c)));
  GPUBLAS_CHECK(gpublasLtMatmulPreferenceSetAttribute(
      preference.get(), GPUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c, sizeof(align_c)));
#endif

  gpublasLtMatmulHeuristicResult_t results[kLtCandidates]{};
  int found = 0;
  const gpublasStatus_t status = gpublasLtMatmulAlgoGetHeuristic(
      handle, matmul, plan->layout_a.get(), plan->layout_b.get(), plan->layout_c.get(),
      plan->layout_c.get(), preference.get(), kLtCandidates, results, &found);
  // NOT_SUPPORTED means no algorithm for this configuration; anything else is an error.
  if (status != GPUBLAS_STATUS_SUCCESS && status != GPUBLAS_STATUS_NOT_SUPPORTED)
    throw_blas_error("gpublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__, status);
  if (status == GPUBLAS_STATUS_SUCCESS) {
    for (int i = 0; i < std::min(found, kLtCandidates); ++i)
      if (results[i].state == GPUBLAS_STATUS_SUCCESS) plan->candidates.push_back(results[i].algo);
  }
  plan->has_algorithm = !plan->candidates.empty();
  if (plan->has_algorithm) {
    plan->algorithm = plan->candidates.front();
  } else {
    spdlog::debug(
        "{}: {} BLASLt has no algorithm for {} M={} N={} K={} batches={}{} (alignments {}/{}/{}); "
        "using GemmEx for this shape",
        op, runtime_name(), dtype_name(static_cast<DType>(key.dtype)), key.m, key.n, key.k,
        key.batches, epilogue == GPUBLASLT_EPILOGUE_BIAS ? " with the bias epilogue" : "",
        key.align_a, key.align_b, key.align_c);
  }
  return plan;
}

}  // namespace tessera::gpu
