#include "support/row_cases.h"

#include "compile/compilation_config.h"
#include "compile/ops/ops.h"
#include "compile/passes/pass_manager.h"
#include "support/test_tensors.h"

namespace tessera::testing {

Tensor token_ids(int64_t tokens, int64_t limit, Device device) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < tokens; ++i) ids.push_back((i * 37 + tokens * 11 + 5) % limit);
  return Tensor::from_ints(ids, {tokens}).to(device);
}

std::vector<RowCase> row_cases(DType dtype, Device device) {
  std::vector<RowCase> cases;
  auto x_of = [dtype, device](int64_t width, uint32_t seed) {
    return [=](int64_t tokens) {
      return std::vector<Tensor>{
          random_tensor({tokens, width}, seed + static_cast<uint32_t>(tokens), dtype, device)};
    };
  };
  Tensor norm_weight = random_tensor({256}, 1, dtype, device);
  cases.push_back({"rms_norm",
                   [=](std::span<const Tensor> in) {
                     return std::vector<Tensor>{ops::rms_norm(in[0], norm_weight, 1e-6)};
                   },
                   x_of(256, 10)});
  Tensor wide_weight = random_tensor({2048}, 2, dtype, device);
  cases.push_back({"rms_norm_wide",  // 256 threads, one block-wide reduction
                   [=](std::span<const Tensor> in) {
                     return std::vector<Tensor>{ops::rms_norm(in[0], wide_weight, 1e-6)};
                   },
                   x_of(2048, 20)});
  cases.push_back(
      {"fused_add_rms_norm",
       [=](std::span<const Tensor> in) {
         auto [out, residual] = ops::fused_add_rms_norm(in[0], in[1], norm_weight, 1e-6);
         return std::vector<Tensor>{out, residual};
       },
       [=](int64_t tokens) {
         uint32_t seed = static_cast<uint32_t>(tokens);
         return std::vector<Tensor>{random_tensor({tokens, 256}, 30 + seed, dtype, device),
                                    random_tensor({tokens, 256}, 40 + seed, dtype, device)};
       }});
  Tensor head_weight = random_tensor({64}, 3, dtype, device);
  cases.push_back({"per_head_rms_norm",  // Qwen3's q/k norm: a warp per head
                   [=](std::span<const Tensor> in) {
                     Tensor heads = ops::reshape(in[0], {-1, 8, 64});
                     return std::vector<Tensor>{
                         ops::reshape(ops::rms_norm(heads, head_weight, 1e-6), {-1, 512})};
                   },
                   x_of(512, 50)});
  cases.push_back({"grouped_softmax",  // two long groups per row: block reductions per group
                   [=](std::span<const Tensor> in) {
                     Tensor groups = ops::reshape(in[0], {-1, 2, 1024});
                     return std::vector<Tensor>{ops::reshape(ops::softmax(groups), {-1, 2048})};
                   },
                   x_of(2048, 60)});
  cases.push_back(
      {"silu_and_mul",
       [](std::span<const Tensor> in) { return std::vector<Tensor>{ops::silu_and_mul(in[0])}; },
       x_of(2 * 192, 70)});
  cases.push_back({"gelu_tanh_and_mul",
                   [](std::span<const Tensor> in) {
                     return std::vector<Tensor>{ops::gelu_and_mul(in[0], "tanh")};
                   },
                   x_of(2 * 96, 80)});
  cases.push_back({"softmax_and_max",
                   [](std::span<const Tensor> in) {
                     Tensor scaled = ops::mul_scalar(in[0], 0.5);
                     return std::vector<Tensor>{ops::softmax(scaled), ops::max(in[0], true),
                                                ops::mean(ops::exp(scaled), false)};
                   },
                   x_of(96, 90)});
  Tensor cos_sin = random_tensor({128, 32}, 4, dtype, device);
  for (bool neox : {true, false}) {
    cases.push_back({neox ? "rope_neox" : "rope_gptj",
                     [=](std::span<const Tensor> in) {
                       auto [q, k] = ops::rotary_embedding(in[0], in[1], in[2], cos_sin, 32, neox);
                       return std::vector<Tensor>{q, k};
                     },
                     [=](int64_t tokens) {
                       uint32_t seed = static_cast<uint32_t>(tokens);
                       return std::vector<Tensor>{
                           token_ids(tokens, 128, device),
                           random_tensor({tokens, 4 * 32}, 100 + seed, dtype, device),
                           random_tensor({tokens, 2 * 32}, 110 + seed, dtype, device)};
                     }});
  }
  Tensor table = random_tensor({64, 48}, 5, dtype, device);
  cases.push_back(
      {"embedding_add",
       [=](std::span<const Tensor> in) {
         return std::vector<Tensor>{ops::add(ops::embedding(table, in[0]), in[1])};
       },
       [=](int64_t tokens) {
         return std::vector<Tensor>{
             token_ids(tokens, 64, device),
             random_tensor({tokens, 48}, 120 + static_cast<uint32_t>(tokens), dtype, device)};
       }});
  return cases;
}

std::vector<DynamicDim> token_dims(size_t num_inputs) {
  std::vector<DynamicDim> dims;
  for (size_t i = 0; i < num_inputs; ++i) dims.push_back({i, 0});
  return dims;
}

CustomOpConfig custom_ops_off() {
  return CustomOpConfig::parse({"none"}, false);
}

CompiledPlan fused_plan(const RowCase& row_case) {
  std::vector<Tensor> inputs = row_case.inputs(8);
  TraceOptions options;
  options.dynamic_dims = token_dims(inputs.size());
  options.custom_ops = custom_ops_off();
  CompiledPlan plan;
  plan.graph = trace(row_case.function, inputs, options).graph;
  const CompilationConfig config;
  PassManager({.config = config, .device = kCPU}, {"cleanup", "split", "fuse"}).run(plan);
  return plan;
}

}  // namespace tessera::testing
