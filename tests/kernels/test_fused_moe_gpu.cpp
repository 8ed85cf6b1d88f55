// fused_moe's GPU kernels (kernels/cuda/experts/fused_moe.h): the skinny, the tiled and the
// tensor-core grouped GEMMs, and the automatic choice, each element against the float64 reference,
// over f32/bf16/f16, sizes on and off the packs and tiles, one token and many, experts without
// tokens, a slice of the router's experts (expert parallelism), experts in GGUF block formats,
// and the limits they refuse.
// moe_routing's GPU kernel against the CPU kernel. (The models on the GPU, eager and in captured
// graphs: tests/models/test_mixture_of_experts.cpp.)
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/kernel_registry.h"
#include "support/error_of.h"
#include "support/quantized_blocks.h"
#include "support/reference.h"
#include "support/test_tensors.h"

#include "compile/ops/ops.h"
#include "kernels/cpu/quantized_linear.h"

#ifdef TESSERA_CUDA
#include "kernels/cuda/experts/fused_moe.h"
#endif

using namespace tessera;
using namespace tessera::testing;

#ifdef TESSERA_CUDA

namespace {

using gpu::MoeKernel;

struct MoeShape {
  int64_t tokens, hidden, router_experts, local_experts, first_expert, intermediate, top_k;
};

// Worst error against float64 over the bound the op conformance test allows (at most 1 passes).
double worst_over_bound(const std::vector<Tensor>& inputs, const Attributes& attributes,
                        const Tensor& got) {
  std::vector<test::RefTensor> values;
  for (const Tensor& input : inputs) values.push_back({input.sizes(), input.to(kCPU).to_doubles()});
  return test::fused_moe_error_over_bound(values, attributes, got.to(kCPU).to_doubles(),
                                          got.dtype() == DType::f32 ? 1e-5 : 1e-2);
}

}  // namespace

TEST(GpuFusedMoe, BothKernelsMatchTheReference) {
  Device gpu;
  if (!first_gpu(&gpu) || gpu.type != DeviceType::cuda) GTEST_SKIP() << "no CUDA device";
  // Packed and element-wise rows (hidden and intermediate multiples of 8 or not), one token and
  // many (several tiles per expert for the tiled kernel; every expert chosen or some without a
  // token), a slice of the router's experts.
  const MoeShape shapes[] = {{1, 64, 8, 8, 0, 32, 2},      {5, 100, 6, 6, 0, 36, 3},
                             {37, 128, 16, 16, 0, 96, 4},  {300, 72, 8, 8, 0, 40, 2},
                             {70, 48, 12, 4, 5, 24, 3},    {3, 33, 4, 2, 2, 7, 1},
                             {129, 256, 64, 64, 0, 64, 8}, {200, 40, 128, 128, 0, 16, 6}};
  uint32_t seed = 100;
  for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    for (const MoeShape& s : shapes) {
      const double weight_scale = 1.0 / std::sqrt(static_cast<double>(s.hidden));
      Tensor x = random_tensor({s.tokens, s.hidden}, seed++, dtype, gpu);
      Tensor logits = random_tensor({s.tokens, s.router_experts}, seed++, dtype, gpu);
      Tensor gate_up =
          random_tensor({s.local_experts, 2 * s.intermediate, s.hidden}, seed++, dtype, kCPU);
      Tensor down = random_tensor({s.local_experts, s.hidden, s.intermediate}, seed++, dtype, kCPU);
      // Weights of about 1 / sqrt(width), so that the activations stay of order one.
      gate_up = Tensor::from_floats(
          [&] {
            std::vector<float> v = gate_up.to_floats();
            for (float& value : v) value *= static_cast<float>(weight_scale);
            return v;
          }(),
          gate_up.sizes(), dtype, gpu);
      down = Tensor::from_floats(
          [&] {
            std::vector<float> v = down.to_floats();
            for (float& value : v) value *= static_cast<float>(weight_scale);
            return v;
          }(),
          down.sizes(), dtype, gpu);
      const Attributes attributes{
          {"top_k", s.top_k}, {"renormalize", s.top_k > 1}, {"first_expert", s.first_expert}};
      // The CPU kernel's output, to bound the norm of the difference too: the bound above is
      // loose for 16-bit types, where cancellation makes the magnitude large.
      std::vector<Tensor> host;
      for (const Tensor* input : {&x, &logits, &gate_up, &down}) host.push_back(input->to(kCPU));
      Tensor cpu_out = Tensor::empty({s.tokens, s.hidden}, dtype);
      run_kernel("fused_moe", DeviceType::cpu, KernelArgs{host, attributes, {&cpu_out, 1}});
      for (MoeKernel kernel :
           {MoeKernel::automatic, MoeKernel::skinny, MoeKernel::tiled, MoeKernel::tensor_cores}) {
        if (kernel == MoeKernel::tensor_cores &&
            !gpu::fused_moe_fits_tensor_cores(x, gate_up, down))
          continue;
        SCOPED_TRACE(
            fmt::format("{} tokens {} hidden {} experts {} ({} from {}) intermediate {} "
                        "top_k {} kernel {}",
                        dtype_name(dtype), s.tokens, s.hidden, s.router_experts, s.local_experts,
                        s.first_expert, s.intermediate, s.top_k, static_cast<int>(kernel)));
        Tensor out = Tensor::empty({s.tokens, s.hidden}, dtype, gpu);
        gpu::run_fused_moe(x, logits, gate_up, down, out, s.top_k, s.top_k > 1, s.first_expert,
                           kernel);
        EXPECT_LE(worst_over_bound({x, logits, gate_up, down}, attributes, out), 1.0);
        EXPECT_LT(relative_error(out.to(kCPU), cpu_out), dtype == DType::f32 ? 1e-5 : 1e-2);
      }
    }
  }
}

// Experts in every GGUF block format (gate and up in one, down in another, as llama.cpp's Q4_K_M
// writes them), x in f32 and bf16: the quantized skinny kernels, the dequantized experts under
// the tiled and tensor-core kernels, and the automatic choice, against float64 of the dequantized
// experts (the GPU reads x as it is, so the float bounds hold), and against the CPU kernel where
// it reads x as it is too (more rows per expert than its 8-bit dot products take). One token, a
// few, and more than a skinny tile per expert, with experts that receive none.
TEST(GpuFusedMoe, QuantizedExpertsMatchTheReference) {
  Device gpu;
  if (!first_gpu(&gpu) || gpu.type != DeviceType::cuda) GTEST_SKIP() << "no CUDA device";
  const int64_t hidden = 256, intermediate = 256, experts = 8, top_k = 2;
  uint32_t seed = 500;
  for (DType format : kQuantizedDTypes) {
    const DType down_format = format == DType::q6_k ? DType::q8_0 : DType::q6_k;
    const Tensor gate_up = random_quantized(format, {experts, 2 * intermediate, hidden}, seed++);
    const Tensor down = random_quantized(down_format, {experts, hidden, intermediate}, seed++);
    const Tensor gate_up_gpu = gate_up.to(gpu), down_gpu = down.to(gpu);
    for (DType dtype : {DType::f32, DType::bf16}) {
      for (int64_t tokens : {int64_t{1}, int64_t{6}, int64_t{90}}) {
        const Tensor x = random_tensor({tokens, hidden}, seed++, dtype, gpu);
        const Tensor logits = random_tensor({tokens, experts}, seed++, dtype, gpu);
        const Attributes attributes{{"top_k", top_k}, {"renormalize", true}};
        std::vector<test::RefTensor> reference;
        for (const Tensor& input :
             {x.to(kCPU), logits.to(kCPU), dequantized(gate_up), dequantized(down)})
          reference.push_back({input.sizes(), input.to_doubles()});
        std::vector<Tensor> host{x.to(kCPU), logits.to(kCPU), gate_up, down};
        Tensor cpu_out = Tensor::empty({tokens, hidden}, dtype);
        run_kernel("fused_moe", DeviceType::cpu, KernelArgs{host, attributes, {&cpu_out, 1}});
        // The CPU reads the dequantized experts with x as it is too where every expert with
        // tokens has more than kQuantizedDotMaxRows of them (fewer take its 8-bit dot products).
        const std::vector<float> routing = ops::moe_routing(host[1], top_k, true).to_floats();
        bool cpu_reads_x_as_it_is = true;
        for (int64_t e = 0; e < experts; ++e) {
          int64_t count = 0;
          for (int64_t t = 0; t < tokens; ++t) count += routing[t * experts + e] != 0.0f;
          cpu_reads_x_as_it_is &= count == 0 || count > cpu::kQuantizedDotMaxRows;
        }
        for (MoeKernel kernel :
             {MoeKernel::automatic, MoeKernel::skinny, MoeKernel::tiled, MoeKernel::tensor_cores}) {
          if (kernel == MoeKernel::tensor_cores &&
              !gpu::fused_moe_fits_tensor_cores(x, gate_up_gpu, down_gpu))
            continue;
          SCOPED_TRACE(fmt::format("{} and {} experts, x {}, {} tokens, kernel {}",
                                   dtype_name(format), dtype_name(down_format), dtype_name(dtype),
                                   tokens, static_cast<int>(kernel)));
          Tensor out = Tensor::empty({tokens, hidden}, dtype, gpu);
          gpu::run_fused_moe(x, logits, gate_up_gpu, down_gpu, out, top_k, true, 0, kernel);
          // The tiles read the experts dequantized to x's dtype: bf16 rounds them too.
          EXPECT_LE(
              test::fused_moe_error_over_bound(reference, attributes, out.to(kCPU).to_doubles(),
                                               dtype == DType::f32 ? 1e-5 : 1e-2),
              1.0);
          if (cpu_reads_x_as_it_is) {
            EXPECT_LT(relative_error(out.to(kCPU), cpu_out), dtype == DType::f32 ? 1e-5 : 1e-2);
          }
        }
      }
    }
  }
}

// The registered kernels, as the op runs them: fused_moe (the automatic choice) and moe_routing
// give the CPU kernels' results.
TEST(GpuFusedMoe, RegisteredKernelsGiveTheCpuResults) {
  Device gpu;
  if (!first_gpu(&gpu) || gpu.type != DeviceType::cuda) GTEST_SKIP() << "no CUDA device";
  const Tensor logits = random_tensor({9, 10}, 7, DType::bf16, gpu);
  const Attributes attributes{{"top_k", 3}, {"renormalize", true}};
  Tensor got = Tensor::empty({9, 10}, DType::f32, gpu);
  Tensor want = Tensor::empty({9, 10}, DType::f32);
  run_kernel("moe_routing", gpu.type, KernelArgs{{&logits, 1}, attributes, {&got, 1}});
  const Tensor host_logits = logits.to(kCPU);
  run_kernel("moe_routing", DeviceType::cpu, KernelArgs{{&host_logits, 1}, attributes, {&want, 1}});
  EXPECT_LT(max_abs_difference(got.to(kCPU), want), 1e-6);

  // A NaN logit makes every probability of its token NaN: both choose the lowest experts.
  std::vector<float> with_nan = random_tensor({3, 10}, 11, DType::f32).to_floats();
  with_nan[14] = std::nanf("");
  const Tensor nan_logits = Tensor::from_floats(with_nan, {3, 10}, DType::f32, gpu);
  Tensor nan_got = Tensor::empty({3, 10}, DType::f32, gpu);
  Tensor nan_want = Tensor::empty({3, 10}, DType::f32);
  run_kernel("moe_routing", gpu.type, KernelArgs{{&nan_logits, 1}, attributes, {&nan_got, 1}});
  const Tensor host_nan_logits = nan_logits.to(kCPU);
  run_kernel("moe_routing", DeviceType::cpu,
             KernelArgs{{&host_nan_logits, 1}, attributes, {&nan_want, 1}});
  const std::vector<float> nan_got_values = nan_got.to(kCPU).to_floats();
  const std::vector<float> nan_want_values = nan_want.to_floats();
  for (size_t i = 0; i < nan_want_values.size(); ++i)
    EXPECT_TRUE(std::isnan(nan_got_values[i]) == std::isnan(nan_want_values[i]) &&
                (std::isnan(nan_want_values[i]) ||
                 std::fabs(nan_got_values[i] - nan_want_values[i]) < 1e-6))
        << "element " << i << ": " << nan_got_values[i] << " against " << nan_want_values[i];

  const std::vector<Tensor> inputs = {random_tensor({9, 64}, 8, DType::f32, gpu), logits.to(gpu),
                                      random_tensor({10, 2 * 24, 64}, 9, DType::f32, gpu),
                                      random_tensor({10, 64, 24}, 10, DType::f32, gpu)};
  const std::vector<Tensor> logits_f32 = {inputs[0], logits, inputs[2], inputs[3]};
  Tensor out = Tensor::empty({9, 64}, DType::f32, gpu);
  run_kernel("fused_moe", gpu.type, KernelArgs{logits_f32, attributes, {&out, 1}});
  std::vector<Tensor> host;
  for (const Tensor& input : logits_f32) host.push_back(input.to(kCPU));
  Tensor host_out = Tensor::empty({9, 64}, DType::f32);
  run_kernel("fused_moe", DeviceType::cpu, KernelArgs{host, attributes, {&host_out, 1}});
  EXPECT_LT(relative_error(out.to(kCPU), host_out), 1e-5);
}

TEST(GpuFusedMoe, RefusesWhatItCannotRunNamingTheInput) {
  Device gpu;
  if (!first_gpu(&gpu) || gpu.type != DeviceType::cuda) GTEST_SKIP() << "no CUDA device";
  // More experts on one device than one block groups.
  const Tensor x = random_tensor({2, 4}, 1, DType::f32, gpu);
  const Tensor logits = random_tensor({2, 1025}, 2, DType::f32, gpu);
  const Tensor gate_up = random_tensor({1025, 2, 4}, 3, DType::f32, gpu);
  const Tensor down = random_tensor({1025, 4, 1}, 4, DType::f32, gpu);
  Tensor out = Tensor::empty({2, 4}, DType::f32, gpu);
  const std::string too_many =
      error_of([&] { gpu::run_fused_moe(x, logits, gate_up, down, out, 2, true, 0); });
  EXPECT_THAT(too_many, ::testing::HasSubstr("1025 experts"));
  EXPECT_THAT(too_many, ::testing::HasSubstr("--enable-expert-parallel"));
  // top_k past the router's experts.
  const Tensor small_logits = random_tensor({2, 3}, 5, DType::f32, gpu);
  const Tensor small_gate_up = random_tensor({3, 2, 4}, 6, DType::f32, gpu);
  const Tensor small_down = random_tensor({3, 4, 1}, 7, DType::f32, gpu);
  const std::string past = error_of(
      [&] { gpu::run_fused_moe(x, small_logits, small_gate_up, small_down, out, 4, true, 0); });
  EXPECT_THAT(past, ::testing::HasSubstr("top_k 4 must be between 1 and the 3 experts"));
  // Tensor cores asked for f32.
  const std::string f32 = error_of([&] {
    gpu::run_fused_moe(x, small_logits, small_gate_up, small_down, out, 2, true, 0,
                       MoeKernel::tensor_cores);
  });
  EXPECT_THAT(f32, ::testing::HasSubstr("do not fit its tensor-core kernel"));
  // Float down rows of another dtype than x beside quantized gate and up rows.
  const Tensor quantized_x = random_tensor({2, 32}, 8, DType::f32, gpu);
  const Tensor quantized_gate_up = random_quantized(DType::q8_0, {3, 48, 32}, 9).to(gpu);
  const Tensor float_down = random_tensor({3, 32, 24}, 10, DType::f32, gpu);
  Tensor quantized_out = Tensor::empty({2, 32}, DType::f32, gpu);
  const std::string blocks = error_of([&] {
    gpu::run_fused_moe(quantized_x, small_logits, quantized_gate_up,
                       Tensor::empty({3, 32, 24}, DType::bf16, gpu), quantized_out, 2, true, 0);
  });
  EXPECT_THAT(blocks, ::testing::HasSubstr("down_weights"));
  EXPECT_THAT(blocks, ::testing::HasSubstr("x's dtype (f32)"));
  // A q8_0 gate_up with f32 down rows, on the skinny kernels and on the tiles (only gate_up
  // dequantized), against float64.
  std::vector<test::RefTensor> mixed;
  for (const Tensor& input : {quantized_x.to(kCPU), small_logits.to(kCPU),
                              dequantized(quantized_gate_up), float_down.to(kCPU)})
    mixed.push_back({input.sizes(), input.to_doubles()});
  for (MoeKernel kernel : {MoeKernel::skinny, MoeKernel::tiled}) {
    gpu::run_fused_moe(quantized_x, small_logits, quantized_gate_up, float_down, quantized_out, 2,
                       true, 0, kernel);
    EXPECT_LE(test::fused_moe_error_over_bound(mixed, {{"top_k", 2}, {"renormalize", true}},
                                               quantized_out.to(kCPU).to_doubles(), 1e-5),
              1.0)
        << "kernel " << static_cast<int>(kernel);
  }
}

#endif
