// What the float64 reference files share (tests/support/reference.cpp, reference_products.cpp,
// reference_experts.cpp):
// argument checks, tensor construction, and the matrix products reference_op dispatches to.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "support/reference.h"

namespace tessera::test::reference_detail {

using Sizes = std::vector<int64_t>;

// Throws std::invalid_argument("reference: " + message) unless `condition`.
void require(bool condition, const std::string& message);
int64_t count_elements(std::span<const int64_t> sizes);
RefTensor make_tensor(Sizes sizes);  // zeros
int64_t rank_of(const RefTensor& tensor);

// a [..., M, K] @ b [K, N] or [..., K, N].
RefTensor reference_matmul(const RefTensor& a, const RefTensor& b);
// x, weight[, bias]: x @ weight^T + bias.
RefTensor reference_linear(std::span<const RefTensor> inputs);
// x, weight, weight_scale[, input_scale] by `activation` (kernels/quant/fp8_scaling.h).
RefTensor reference_fp8_linear(std::span<const RefTensor> inputs, const std::string& activation);
// router_logits [T, E] -> [T, E]: softmax, the top_k kept (renormalized when asked), zero
// elsewhere.
RefTensor reference_moe_routing(const RefTensor& logits, int64_t top_k, bool renormalize);
// x, router_logits [T, E], gate_up_weights [L, 2I, H], down_weights [L, H, I] of experts
// first_expert on (fused_moe).
RefTensor reference_fused_moe(std::span<const RefTensor> inputs, int64_t top_k, bool renormalize,
                              int64_t first_expert);

}  // namespace tessera::test::reference_detail
