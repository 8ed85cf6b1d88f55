// The float64 references of the mixture-of-experts ops: moe_routing and fused_moe.
#include <algorithm>
#include <cmath>

#include "support/reference.h"
#include "support/reference_detail.h"

namespace tessera::test::reference_detail {

RefTensor reference_moe_routing(const RefTensor& logits, int64_t top_k, bool renormalize) {
  require(rank_of(logits) == 2, "moe_routing needs router_logits [tokens, experts]");
  const int64_t tokens = logits.sizes[0], experts = logits.sizes[1];
  require(top_k >= 1 && top_k <= experts, "moe_routing needs 1 <= top_k <= experts");
  RefTensor out = make_tensor(logits.sizes);
  for (int64_t t = 0; t < tokens; ++t) {
    const double* row = logits.values.data() + t * experts;
    double largest = row[0];
    for (int64_t e = 1; e < experts; ++e) largest = std::max(largest, row[e]);
    std::vector<double> probabilities(static_cast<size_t>(experts));
    double total = 0;
    for (int64_t e = 0; e < experts; ++e) total += probabilities[e] = std::exp(row[e] - largest);
    std::vector<bool> chosen(static_cast<size_t>(experts), false);
    double chosen_total = 0;
    for (int64_t k = 0; k < top_k; ++k) {
      int64_t best = -1;  // the largest not chosen yet; the lowest index among equals
      for (int64_t e = 0; e < experts; ++e)
        if (!chosen[e] && (best < 0 || probabilities[e] > probabilities[best])) best = e;
      chosen[best] = true;
      chosen_total += probabilities[best] / total;
    }
    for (int64_t e = 0; e < experts; ++e)
      if (chosen[e])
        out.values[t * experts + e] = probabilities[e] / total / (renormalize ? chosen_total : 1.0);
  }
  return out;
}

RefTensor reference_fused_moe(std::span<const RefTensor> inputs, int64_t top_k, bool renormalize,
                              int64_t first_expert) {
  const RefTensor& x = inputs[0];
  const RefTensor& gate_up = inputs[2];
  const RefTensor& down = inputs[3];
  require(rank_of(x) == 2 && rank_of(gate_up) == 3 && rank_of(down) == 3,
          "fused_moe needs x [T, H], gate_up_weights [E, 2I, H], down_weights [E, H, I]");
  const int64_t tokens = x.sizes[0], hidden = x.sizes[1], experts = gate_up.sizes[0];
  const int64_t intermediate = gate_up.sizes[1] / 2;
  require(gate_up.sizes[2] == hidden && down.sizes == Sizes{experts, hidden, intermediate},
          "fused_moe weight shapes disagree");
  const int64_t router_experts = inputs[1].sizes.at(1);
  require(first_expert >= 0 && first_expert + experts <= router_experts,
          "fused_moe's experts lie outside the router's");
  const RefTensor routing = reference_moe_routing(inputs[1], top_k, renormalize);
  RefTensor out = make_tensor(x.sizes);
  std::vector<double> activated(static_cast<size_t>(intermediate));
  for (int64_t t = 0; t < tokens; ++t) {
    const double* row = x.values.data() + t * hidden;
    for (int64_t e = 0; e < experts; ++e) {
      const double weight = routing.values[t * router_experts + first_expert + e];
      if (weight == 0) continue;
      const double* gate_up_e = gate_up.values.data() + e * 2 * intermediate * hidden;
      for (int64_t j = 0; j < intermediate; ++j) {
        double gate = 0, up = 0;
        for (int64_t h = 0; h < hidden; ++h) {
          gate += gate_up_e[j * hidden + h] * row[h];
          up += gate_up_e[(intermediate + j) * hidden + h] * row[h];
        }
        activated[j] = gate / (1.0 + std::exp(-gate)) * up;
      }
      const double* down_e = down.values.data() + e * hidden * intermediate;
      for (int64_t h = 0; h < hidden; ++h) {
        double total = 0;
        for (int64_t j = 0; j < intermediate; ++j)
          total += down_e[h * intermediate + j] * activated[j];
        out.values[t * hidden + h] += weight * total;
      }
    }
  }
  return out;
}

}  // namespace tessera::test::reference_detail

namespace tessera::test {

double fused_moe_error_over_bound(std::span<const RefTensor> inputs, const Attributes& attributes,
                                  std::span<const double> got, double rounding) {
  std::vector<RefTensor> absolute(inputs.begin(), inputs.end());
  for (size_t i = 0; i < absolute.size(); ++i)
    if (i != 1)  // the router logits keep their signs: they choose the experts
      for (double& value : absolute[i].values) value = std::fabs(value);
  const std::vector<double> want = reference_op("fused_moe", inputs, attributes).at(0).values;
  const std::vector<double> magnitude =
      reference_op("fused_moe", absolute, attributes).at(0).values;
  reference_detail::require(got.size() == want.size(), "fused_moe's output has the wrong size");
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::fabs(got[i] - want[i]) /
                                (rounding * (magnitude[i] + std::fabs(want[i])) + 1e-30));
  return worst;
}

}  // namespace tessera::test
