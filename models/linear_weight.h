// A linear projection's weight as a model holds it: dense or ggml-quantized (one tensor, read by
// ops::linear), or FP8 with its scales beside it (ops::fp8_linear; the loader names them
// "<module>.weight_scale" and "<module>.input_scale": models/loaders/fp8_weights.h). Model code
// applies it and never asks which.
#pragma once

#include <string>
#include <vector>

#include "kernels/quant/fp8_scaling.h"
#include "models/model_weights.h"
#include "runtime/tensor.h"

namespace tessera {

struct LinearWeight {
  Tensor weight;        // [N, K]
  Tensor weight_scale;  // FP8: f32 [N], or [ceil(N/128), ceil(K/128)] per 128x128 block
  Tensor input_scale;   // FP8 with fixed activation scales: f32 [1]
  Fp8ActivationScale activation = Fp8ActivationScale::token;

  bool is_fp8() const { return weight.defined() && weight.dtype() == DType::f8_e4m3; }
  // x @ weight^T (+ bias [N]).
  Tensor apply(const Tensor& x, const Tensor& bias = Tensor()) const;
  std::vector<const Tensor*> tensors() const;  // what it holds, for byte counts
};

// "<module>" of a projection's "<module>.weight": where its scales are named.
std::string projection_module(const std::string& weight_name);

// The projection "<module>.weight" of `weights`, with its scales when it is FP8.
LinearWeight linear_weight(const ModelWeights& weights, const std::string& weight_name);

// Projections that read one input, stacked into one weight (one GEMM) where their formats agree:
// dense and ggml formats of one dtype; FP8 with one scale layout (per-block parts whole blocks
// of rows) and equal fixed input scales. Otherwise (Q4_K_M keeps attn_v in Q6_K beside a Q4_K
// attn_q) they stay apart, one GEMM each, their outputs joined along the last dim.
struct StackedLinear {
  LinearWeight stacked;             // the parts' rows stacked, when their formats agree
  std::vector<LinearWeight> parts;  // otherwise the parts
  // x @ weight^T (+ bias over the joined output).
  Tensor apply(const Tensor& x, const Tensor& bias = Tensor()) const;
  std::vector<const Tensor*> tensors() const;
};
StackedLinear stack_linear(std::vector<LinearWeight> parts);

}  // namespace tessera
