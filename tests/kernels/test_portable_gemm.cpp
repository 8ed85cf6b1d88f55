// Tessera's own GEMM kernels (kernels/cuda/gemm/portable_gemm.h): the HIP module's matmul and
// linear. No AMD GPU runs this project's tests, so the same source is checked on an NVIDIA GPU
// through the CUDA module, which builds it too: the tiled and the skinny kernel, f32/bf16/f16, edge
// shapes (sizes off the tiles, K = 0, one row), bias, unaligned inputs, batched matmul, each
// element against the float64 reference.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/check.h"
#include "support/reference.h"
#include "support/test_tensors.h"

#ifdef TESSERA_CUDA
#include "kernels/cuda/gemm/portable_gemm.h"
#endif

using namespace tessera;
using namespace tessera::testing;

#ifdef TESSERA_CUDA

namespace {

using gpu::PortableGemmKernel;

bool cuda_device(Device* device) {
  return first_gpu(device) && device->type == DeviceType::cuda;
}

test::RefTensor reference_of(const Tensor& tensor, bool absolute) {
  test::RefTensor ref;
  ref.sizes.assign(tensor.sizes().begin(), tensor.sizes().end());
  ref.values = tensor.to(kCPU).to_doubles();
  if (absolute)
    for (double& value : ref.values) value = std::fabs(value);
  return ref;
}

// Every element within the output dtype's rounding of the float64 result, plus f32 accumulation
// error, which scales with the sum of |products| (the same op on |inputs|).
void expect_matches_reference(const std::string& op, const std::vector<Tensor>& inputs,
                              const Tensor& got) {
  std::vector<test::RefTensor> plain, absolute;
  for (const Tensor& input : inputs) {
    plain.push_back(reference_of(input, false));
    absolute.push_back(reference_of(input, true));
  }
  const std::vector<double> want = test::reference_op(op, plain, Attributes{})[0].values;
  const std::vector<double> magnitude = test::reference_op(op, absolute, Attributes{})[0].values;
  const std::vector<double> values = got.to(kCPU).to_doubles();
  ASSERT_EQ(values.size(), want.size());
  const double rtol = got.dtype() == DType::f32 ? 1e-6 : got.dtype() == DType::f16 ? 1e-3 : 8e-3;
  int64_t failing = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double bound = rtol * std::fabs(want[i]) + 1e-6 * magnitude[i] + 1e-30;
    if (!(std::fabs(values[i] - want[i]) <= bound)) {
      if (failing++ < 5)
        ADD_FAILURE() << "element " << i << ": got " << values[i] << ", want " << want[i]
                      << " (bound " << bound << ")";
    }
  }
  EXPECT_EQ(failing, 0) << "of " << want.size() << " elements";
}

struct LinearShape {
  int64_t m, n, k;
};

}  // namespace

TEST(GpuPortableGemm, LinearMatchesTheReferenceOnBothKernels) {
  Device gpu;
  if (!cuda_device(&gpu)) GTEST_SKIP() << "no CUDA device";
  // Skinny shapes (at most 8 rows) with K a multiple of the 16-byte pack and not; tiled shapes
  // on and off the 64 x 64 x 16 tiles.
  const LinearShape shapes[] = {{1, 1, 1},      {1, 96, 200},   {3, 130, 64},
                                {8, 257, 1024}, {2, 5, 0},      {9, 70, 33},
                                {64, 64, 64},   {130, 200, 77}, {1, 4096, 512}};
  uint32_t seed = 1;
  for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    for (const LinearShape& shape : shapes) {
      for (PortableGemmKernel kernel :
           {PortableGemmKernel::automatic, PortableGemmKernel::tiled, PortableGemmKernel::skinny}) {
        if (kernel == PortableGemmKernel::skinny && shape.m > gpu::kSkinnyMaxRows) continue;
        for (bool with_bias : {false, true}) {
          SCOPED_TRACE(fmt::format("{} m={} n={} k={} kernel {} bias {}", dtype_name(dtype),
                                   shape.m, shape.n, shape.k, static_cast<int>(kernel), with_bias));
          Tensor x = random_tensor({shape.m, shape.k}, seed++, dtype, gpu);
          Tensor weight = random_tensor({shape.n, shape.k}, seed++, dtype, gpu);
          Tensor bias = random_tensor({shape.n}, seed++, dtype, gpu);
          Tensor out = Tensor::empty({shape.m, shape.n}, dtype, gpu);
          gpu::portable_linear(x, weight, with_bias ? &bias : nullptr, out, kernel);
          std::vector<Tensor> inputs{x, weight};
          if (with_bias) inputs.push_back(bias);
          expect_matches_reference("linear", inputs, out);
        }
      }
    }
  }
}

// Inputs one element into their buffers: not 16-byte aligned, so the skinny kernel reads element
// by element.
TEST(GpuPortableGemm, UnalignedInputsTakeTheElementPath) {
  Device gpu;
  if (!cuda_device(&gpu)) GTEST_SKIP() << "no CUDA device";
  for (DType dtype : {DType::f32, DType::bf16}) {
    const int64_t m = 4, n = 33, k = 256;
    Tensor buffer = random_tensor({m * k + 1}, 7, dtype, gpu);
    Tensor x = buffer.slice(0, 1, m * k + 1).view({m, k});
    Tensor weight = random_tensor({n, k}, 8, dtype, gpu);
    Tensor out = Tensor::empty({m, n}, dtype, gpu);
    gpu::portable_linear(x, weight, nullptr, out, PortableGemmKernel::skinny);
    expect_matches_reference("linear", {x, weight}, out);
  }
}

TEST(GpuPortableGemm, MatmulMatchesTheReferenceBatchedAndNot) {
  Device gpu;
  if (!cuda_device(&gpu)) GTEST_SKIP() << "no CUDA device";
  for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    SCOPED_TRACE(dtype_name(dtype));
    // Batched: each batch its own b.
    Tensor a = random_tensor({3, 37, 50}, 11, dtype, gpu);
    Tensor b = random_tensor({3, 50, 29}, 12, dtype, gpu);
    Tensor out = Tensor::empty({3, 37, 29}, dtype, gpu);
    gpu::portable_matmul(a, b, out);
    expect_matches_reference("matmul", {a, b}, out);
    // One b for every row of a [2, 65, 40].
    Tensor rows = random_tensor({2, 65, 40}, 13, dtype, gpu);
    Tensor shared = random_tensor({40, 130}, 14, dtype, gpu);
    Tensor product = Tensor::empty({2, 65, 130}, dtype, gpu);
    gpu::portable_matmul(rows, shared, product);
    expect_matches_reference("matmul", {rows, shared}, product);
  }
}

TEST(GpuPortableGemm, SkinnyRefusesMoreRowsThanItTakes) {
  Device gpu;
  if (!cuda_device(&gpu)) GTEST_SKIP() << "no CUDA device";
  Tensor x = random_tensor({gpu::kSkinnyMaxRows + 1, 16}, 1, DType::f32, gpu);
  Tensor weight = random_tensor({8, 16}, 2, DType::f32, gpu);
  Tensor out = Tensor::empty({gpu::kSkinnyMaxRows + 1, 8}, DType::f32, gpu);
  try {
    gpu::portable_linear(x, weight, nullptr, out, PortableGemmKernel::skinny);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), ::testing::HasSubstr("at most 8 rows"));
  }
}

#else

TEST(GpuPortableGemm, NeedsTheCudaModule) {
  GTEST_SKIP() << "built without the CUDA module (TESSERA_CUDA=OFF)";
}

#endif
