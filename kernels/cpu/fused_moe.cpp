// CPU kernels of moe_routing and fused_moe (compile/ops/custom/fused_moe.cpp). fused_moe routes
// each token, gathers the tokens of each chosen expert, runs that expert's gate/up and down
// projections as GEMMs over its tokens only (gemm_accumulate, itself threaded; the quantized
// linear's kernels for weights in a GGUF block format), and adds the weighted rows into an f32
// sum that is rounded once. Experts with no token are not read.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <tuple>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/quantized_linear.h"
#include "kernels/pointwise_table.h"
#include "runtime/cpu/parallel.h"
#include "runtime/kernel_registry.h"

namespace tessera::cpu {
namespace {

// The routing of one token: the top_k experts (largest probability first, the lowest index first
// among equals) and their weights.
struct TokenRoute {
  std::vector<int64_t> experts;
  std::vector<float> weights;
};

// Softmax of `logits` (E values, f32) over all experts, the top_k kept, renormalized over them
// when asked: as transformers' Mixtral and Qwen3-MoE blocks compute it, in f32.
void route_token(const float* logits, int64_t experts, int64_t top_k, bool renormalize,
                 std::vector<float>& probabilities, TokenRoute& route) {
  const float largest = *std::max_element(logits, logits + experts);
  float total = 0.0f;
  probabilities.resize(static_cast<size_t>(experts));
  for (int64_t e = 0; e < experts; ++e) total += probabilities[e] = std::exp(logits[e] - largest);
  for (float& p : probabilities) p /= total;
  route.experts.clear();
  route.weights.clear();
  float chosen_total = 0.0f;
  for (int64_t k = 0; k < top_k; ++k) {
    int64_t best = -1;
    for (int64_t e = 0; e < experts; ++e) {
      if (std::find(route.experts.begin(), route.experts.end(), e) != route.experts.end()) continue;
      if (best < 0 || probabilities[e] > probabilities[best]) best = e;
    }
    route.experts.push_back(best);
    route.weights.push_back(probabilities[best]);
    chosen_total += probabilities[best];
  }
  if (renormalize)
    for (float& weight : route.weights) weight /= chosen_total;
}

// Every token's route, from router_logits [T, E] of any float dtype.
std::vector<TokenRoute> route_tokens(const char* op, const Tensor& logits, int64_t top_k,
                                     bool renormalize) {
  require_contiguous(op, "router_logits", logits);
  TESSERA_REQUIRE(logits.dim() == 2, "{}: router_logits {} must be [tokens, experts]", op,
                  logits.str());
  const int64_t tokens = logits.size(0), experts = logits.size(1);
  TESSERA_REQUIRE(top_k >= 1 && top_k <= experts,
                  "{}: top_k {} must be between 1 and the {} experts", op, top_k, experts);
  std::vector<TokenRoute> routes(static_cast<size_t>(tokens));
  visit_float_dtype(op, logits.dtype(), [&]<typename T>() {
    const T* data = logits.data<T>();
    std::vector<float> row(static_cast<size_t>(experts)), probabilities;
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t e = 0; e < experts; ++e) row[e] = static_cast<float>(data[t * experts + e]);
      route_token(row.data(), experts, top_k, renormalize, probabilities, routes[t]);
    }
  });
  return routes;
}

void moe_routing_kernel(const KernelArgs& args) {
  const Tensor& logits = args.inputs[0];
  const Tensor& out = args.outputs[0];
  const std::vector<TokenRoute> routes =
      route_tokens("moe_routing", logits, args.attributes.get_int("top_k"),
                   args.attributes.get_bool("renormalize", false));
  require_dtype("moe_routing", "output", out, DType::f32);
  require_sizes("moe_routing", "output", out, logits.sizes());
  require_contiguous("moe_routing", "output", out);
  float* result = out.data<float>();
  const int64_t experts = logits.size(1);
  std::fill(result, result + out.numel(), 0.0f);
  for (size_t t = 0; t < routes.size(); ++t)
    for (size_t k = 0; k < routes[t].experts.size(); ++k)
      result[static_cast<int64_t>(t) * experts + routes[t].experts[k]] = routes[t].weights[k];
}

// Expert e's matrix of a stack [E, rows, columns] (a view, in the stack's dtype).
Tensor expert_matrix(const Tensor& stack, int64_t e) {
  return stack.slice(0, e, e + 1).view({stack.size(1), stack.size(2)});
}

// out [count, N] = rows [count, K] (f32) @ weight [N, K]^T: the GEMM for a float weight; a
// quantized one through the quantized linear's kernels (dot products from the blocks against the
// rows quantized to 8 bits for a few rows, dequantized tiles past that).
void project(const float* rows, int64_t count, const Tensor& weight, float* out) {
  const int64_t n = weight.size(0), k = weight.size(1);
  if (is_quantized(weight.dtype())) {
    quantized_linear(Tensor::from_blob(const_cast<float*>(rows), {count, k}, DType::f32, kCPU),
                     weight, nullptr, Tensor::from_blob(out, {count, n}, DType::f32, kCPU));
    return;
  }
  std::fill(out, out + count * n, 0.0f);
  // b(k, n) = W[n, k].
  gemm_accumulate(count, n, k, {rows, DType::f32, k, 1}, {weight.data_ptr(), weight.dtype(), 1, k},
                  out, n);
}

void fused_moe_kernel(const KernelArgs& args) {
  const char* op = "fused_moe";
  const Tensor& x = args.inputs[0];
  const Tensor& gate_up = args.inputs[2];
  const Tensor& down = args.inputs[3];
  const Tensor& out = args.outputs[0];
  for (const auto& [name, tensor] : {std::pair{"x", &x},
                                     {"gate_up_weights", &gate_up},
                                     {"down_weights", &down},
                                     {"output", &out}})
    require_contiguous(op, name, *tensor);
  TESSERA_REQUIRE(x.dim() == 2 && gate_up.dim() == 3 && down.dim() == 3,
                  "{}: x {}, gate_up_weights {} and down_weights {} must be [T, H], [E, 2I, H] "
                  "and [E, H, I]",
                  op, x.str(), gate_up.str(), down.str());
  // The weights hold experts [first, first + experts) of the router's.
  const int64_t tokens = x.size(0), hidden = x.size(1), experts = gate_up.size(0);
  const int64_t intermediate = gate_up.size(1) / 2;
  const int64_t first = args.attributes.get_int("first_expert", 0);
  const Tensor& logits = args.inputs[1];
  TESSERA_REQUIRE(gate_up.size(2) == hidden && gate_up.size(1) % 2 == 0 &&
                      down.sizes() == Shape({experts, hidden, intermediate}) && logits.dim() == 2 &&
                      logits.size(0) == tokens && experts >= 1 && first >= 0 &&
                      first <= logits.size(1) - experts,
                  "{}: shapes do not agree: x {}, router_logits {}, gate_up_weights {}, "
                  "down_weights {}, first_expert {}",
                  op, x.str(), logits.str(), gate_up.str(), down.str(), first);
  for (const auto& [name, weights, width] :
       {std::tuple{"gate_up_weights", &gate_up, hidden}, {"down_weights", &down, intermediate}}) {
    if (!is_quantized(weights->dtype())) {
      require_dtype(op, name, *weights, x.dtype());
      continue;
    }
    TESSERA_REQUIRE(width % block_elements(weights->dtype()) == 0,
                    "{}: {} {} must hold whole blocks of {} along its rows", op, name,
                    weights->str(), block_elements(weights->dtype()));
  }
  require_dtype(op, "output", out, x.dtype());
  require_sizes(op, "output", out, x.sizes());
  const std::vector<TokenRoute> routes =
      route_tokens(op, args.inputs[1], args.attributes.get_int("top_k"),
                   args.attributes.get_bool("renormalize", false));

  // Each of the weights' experts' tokens and their weights, in token order.
  std::vector<std::vector<std::pair<int64_t, float>>> assigned(static_cast<size_t>(experts));
  for (int64_t t = 0; t < tokens; ++t)
    for (size_t k = 0; k < routes[t].experts.size(); ++k) {
      const int64_t local = routes[t].experts[k] - first;
      if (local >= 0 && local < experts) assigned[local].push_back({t, routes[t].weights[k]});
    }

  std::vector<float> sum(static_cast<size_t>(tokens * hidden), 0.0f);
  visit_float_dtype(op, x.dtype(), [&]<typename T>() {
    const T* x_data = x.data<T>();
    std::vector<float> rows, gate_up_out, activated, expert_out;
    for (int64_t e = 0; e < experts; ++e) {
      const auto& chosen = assigned[e];
      const int64_t count = static_cast<int64_t>(chosen.size());
      if (count == 0) continue;
      rows.resize(static_cast<size_t>(count * hidden));
      for (int64_t i = 0; i < count; ++i)
        for (int64_t h = 0; h < hidden; ++h)
          rows[i * hidden + h] = static_cast<float>(x_data[chosen[i].first * hidden + h]);
      // gate_up [count, 2I] = rows @ gate_up_weights[e]^T.
      gate_up_out.resize(static_cast<size_t>(count * 2 * intermediate));
      project(rows.data(), count, expert_matrix(gate_up, e), gate_up_out.data());
      activated.resize(static_cast<size_t>(count * intermediate));
      for (int64_t i = 0; i < count; ++i)
        for (int64_t j = 0; j < intermediate; ++j) {
          const float* row = gate_up_out.data() + i * 2 * intermediate;
          // Rounded to T as silu_and_mul's output is, before the down projection reads it.
          activated[i * intermediate + j] =
              static_cast<float>(T(scalar::tsr_silu(row[j]) * row[intermediate + j]));
        }
      expert_out.resize(static_cast<size_t>(count * hidden));
      project(activated.data(), count, expert_matrix(down, e), expert_out.data());
      for (int64_t i = 0; i < count; ++i) {
        float* target = sum.data() + chosen[i].first * hidden;
        const float weight = chosen[i].second;
        for (int64_t h = 0; h < hidden; ++h) target[h] += weight * expert_out[i * hidden + h];
      }
    }
    T* result = out.data<T>();
    for (int64_t i = 0; i < tokens * hidden; ++i) result[i] = T(sum[i]);
  });
}

TESSERA_REGISTER_KERNEL("moe_routing", DeviceType::cpu, moe_routing_kernel);
TESSERA_REGISTER_KERNEL("fused_moe", DeviceType::cpu, fused_moe_kernel);

}  // namespace
}  // namespace tessera::cpu
