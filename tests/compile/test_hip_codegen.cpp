// HIP code generation, the HIP module's codegen target: the generated source in HIP's dialect
// (64-lane wavefronts, the compiler's own 16-bit types, no headers), and hipRTC compiling the
// fused kernels of real traced graphs for gfx90a on any machine (hipRTC needs no GPU), with the
// on-disk cache of code objects. No AMD GPU runs this project's tests: these kernels are
// compiled, never run.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "compile/codegen/cpp_codegen.h"
#include "compile/codegen/cuda_codegen.h"
#include "compile/codegen/gpu_kernel_cache.h"
#include "compile/codegen/kernel_cache.h"
#include "compile/codegen/row_kernel.h"
#include "runtime/check.h"
#include "support/broken_kernel.h"
#include "support/row_cases.h"
#include "support/test_tensors.h"

using namespace tessera;
using namespace tessera::testing;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

[[maybe_unused]] bool is_elf(const std::string& image) {  // used where hipcc is installed
  return image.compare(0, 4,
                       "\x7f"
                       "ELF") == 0;
}

}  // namespace

TEST(HipCodegen, TheHipDialectUsesWavefrontsOf64AndNoVendorHeaders) {
  std::vector<RowCase> cases = row_cases(DType::bf16, kCPU);
  CompiledPlan heads = fused_plan(cases[3]);  // per-head rms_norm: 8 heads of 64
  ASSERT_EQ(heads.kernels.size(), 1u) << heads.explain();
  RowKernelBody body = build_row_kernel_body(heads.graph, heads.kernels[0]);
  std::string hip = generate_cuda_kernel(body, GpuDialect::hip);
  std::string cuda = generate_cuda_kernel(body, GpuDialect::cuda);
  EXPECT_THAT(hip, HasSubstr("#define TSR_WARP 64"));
  EXPECT_THAT(hip, HasSubstr("__shfl_xor((v), (mask))"));
  EXPECT_THAT(hip, HasSubstr("typedef _Float16 tsr_f16;"));
  EXPECT_THAT(hip, Not(HasSubstr("#include")));
  EXPECT_THAT(hip, Not(HasSubstr("__shfl_xor_sync")));
  EXPECT_THAT(cuda, HasSubstr("#define TSR_WARP 32"));
  EXPECT_THAT(cuda, HasSubstr("#include <cuda_bf16.h>"));
  // The kernel body is the same; only the dialect's part of the prelude differs.
  const std::string body_start = "extern \"C\" __global__";
  ASSERT_NE(hip.find(body_start), std::string::npos);
  EXPECT_EQ(hip.substr(hip.find(body_start)), cuda.substr(cuda.find(body_start)));
}

// hipRTC has no bf16 type, so the HIP dialect rounds floats to bf16 itself. Its conversions,
// compiled for the host (with the two bit-cast intrinsics they use defined), must give the CPU
// kernels' bits: round to nearest even, infinities kept, NaN a NaN.
TEST(HipCodegen, TheHipDialectRoundsTo16BitFloatsAsTheCpuDoes) {
  std::vector<RowCase> cases = row_cases(DType::f32, kCPU);
  CompiledPlan plan = fused_plan(cases[5]);
  std::string hip =
      generate_cuda_kernel(build_row_kernel_body(plan.graph, plan.kernels[0]), GpuDialect::hip);
  const size_t dialect_end = hip.find("\ntypedef long long int64_t;");
  ASSERT_NE(dialect_end, std::string::npos);
  const std::string source = R"(#include <cstdint>
#include <cstring>
#define __device__
#define __forceinline__ inline
static inline unsigned int __float_as_uint(float f) {
  unsigned int u;
  std::memcpy(&u, &f, 4);
  return u;
}
static inline float __uint_as_float(unsigned int u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
)" + hip.substr(0, dialect_end) +
                             R"(
extern "C" void tessera_kernel(int64_t begin, int64_t end, void* const* buffers) {
  const float* in = (const float*)buffers[0];
  for (int64_t i = begin; i < end; ++i) {
    const tsr_bf16 b = tsr_float_to_bf16(in[i]);
    const tsr_f16 h = tsr_float_to_f16(in[i]);
    std::memcpy((unsigned short*)buffers[1] + i, &b, 2);
    std::memcpy((unsigned short*)buffers[2] + i, &h, 2);
    ((float*)buffers[3])[i] = tsr_bf16_to_float(b);
  }
}
)";
  CpuKernelCache cache(fresh_temp_dir("hip_dialect_conversions"));
  auto convert = reinterpret_cast<CpuKernelFunction>(cache.load(source, "hip_dialect"));

  std::vector<float> values = {0.0f,
                               -0.0f,
                               1.0f,
                               -1.5f,
                               65504.0f,
                               65520.0f,
                               1e-8f,
                               3e38f,
                               std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN(),
                               std::numeric_limits<float>::denorm_min()};
  std::mt19937 rng(5);
  for (int i = 0; i < 200000; ++i) {
    uint32_t bits = rng();
    if (i % 2 == 0) bits = (bits & 0xffff0000u) | 0x8000u;  // exactly halfway between two bf16s
    float value;
    std::memcpy(&value, &bits, 4);
    values.push_back(value);
  }
  const auto count = static_cast<int64_t>(values.size());
  std::vector<uint16_t> bf16(values.size()), f16(values.size());
  std::vector<float> widened(values.size());
  void* buffers[] = {values.data(), bf16.data(), f16.data(), widened.data()};
  convert(0, count, buffers);

  const Tensor want_bf16 = Tensor::from_floats(values, {count}, DType::bf16);
  const Tensor want_f16 = Tensor::from_floats(values, {count}, DType::f16);
  const auto* cpu_bf16 = static_cast<const uint16_t*>(want_bf16.data_ptr());
  const auto* cpu_f16 = static_cast<const uint16_t*>(want_f16.data_ptr());
  int64_t mismatches = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (std::isnan(values[i])) {
      mismatches += (bf16[i] & 0x7fff) <= 0x7f80 || (f16[i] & 0x7fff) <= 0x7c00;
      continue;
    }
    // Widening back is exact: the bf16 bits become a float's top half.
    const uint32_t widened_bits = static_cast<uint32_t>(cpu_bf16[i]) << 16;
    const bool same = bf16[i] == cpu_bf16[i] && f16[i] == cpu_f16[i] &&
                      std::memcmp(&widened[i], &widened_bits, 4) == 0;
    if (!same && mismatches++ < 5) {
      ADD_FAILURE() << "value " << values[i] << ": HIP dialect bf16 " << bf16[i] << " f16 "
                    << f16[i] << ", CPU bf16 " << cpu_bf16[i] << " f16 " << cpu_f16[i];
    }
  }
  EXPECT_EQ(mismatches, 0);
}

#ifdef TESSERA_HIP

TEST(HipCodegen, HiprtcCompilesTheFusedKernelsOfTracedGraphsForGfx90a) {
  GpuKernelCache cache(fresh_temp_dir("hip_cache_gfx90a"), DeviceType::hip, "gfx90a");
  std::printf("%s\n", cache.compiler_identity().c_str());
  EXPECT_THAT(cache.compiler_identity(), HasSubstr("hipRTC"));
  size_t kernels = 0;
  for (DType dtype : {DType::f32, DType::bf16}) {  // f16 takes the same paths as bf16
    for (const RowCase& row_case : row_cases(dtype, kCPU)) {
      CompiledPlan plan = fused_plan(row_case);
      EXPECT_FALSE(plan.kernels.empty()) << row_case.name << " fused nothing:\n" << plan.explain();
      for (const FusedKernel& kernel : plan.kernels) {
        std::string source =
            generate_cuda_kernel(build_row_kernel_body(plan.graph, kernel), GpuDialect::hip);
        std::string image = cache.image(source, kernel.name);
        EXPECT_TRUE(is_elf(image)) << row_case.name << ": not a code object";
        EXPECT_NE(image.find("tessera_kernel"), std::string::npos) << row_case.name;
        ++kernels;
      }
    }
  }
  EXPECT_GE(kernels, 20u);
  EXPECT_GE(cache.stats().compiled, 20u);
}

TEST(HipCodegen, HiprtcCacheReusesEntriesAndErrorsNameTheKernelAndTheLog) {
  std::string dir = fresh_temp_dir("hip_cache_entries");
  CompiledPlan plan = fused_plan(row_cases(DType::f32, kCPU)[5]);  // silu_and_mul
  ASSERT_EQ(plan.kernels.size(), 1u) << plan.explain();
  std::string source =
      generate_cuda_kernel(build_row_kernel_body(plan.graph, plan.kernels[0]), GpuDialect::hip) +
      "// hip cache entries test\n";
  GpuKernelCache cache(dir, DeviceType::hip, "gfx90a");
  EXPECT_EQ(cache.directory(), dir + "/hip");
  std::string image = cache.image(source, "silu");
  EXPECT_EQ(cache.stats().compiled, 1u);
  EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(cache.directory()) /
                                      (cache.key(source) + ".hip")));
  EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(cache.directory()) /
                                      (cache.key(source) + ".hsaco")));
  GpuKernelCache warm(dir, DeviceType::hip, "gfx90a");
  EXPECT_EQ(warm.image(source, "silu"), image);
  // Another target is another entry.
  GpuKernelCache mi300(dir, DeviceType::hip, "gfx940");
  EXPECT_NE(mi300.key(source), cache.key(source));

  tessera::testing::expect_broken_kernel_error(cache, ".hip", "--offload-arch=gfx90a");
  EXPECT_THROW(GpuKernelCache(fresh_temp_dir("hip_cache_bad_arch"), DeviceType::hip, "sm_90"),
               Error);
}

#endif
