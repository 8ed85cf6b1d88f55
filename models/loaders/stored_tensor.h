// Tensors as a checkpoint stores them (bytes inside a mapped file, any dtype and alignment) and
// their conversion into run tensors: cast to the run dtype on the host, optionally reordering the
// rows of q/k projections, then moved to the run device. One tensor is staged at a time, so peak
// host memory is the largest tensor, not the model.
#pragma once

#include <cstddef>

#include "models/model_weights.h"
#include "runtime/tensor.h"

namespace tessera::loaders {

struct StoredTensor {
  const std::byte* data = nullptr;  // first byte; no alignment assumed
  DType dtype = DType::f32;
  Shape shape;  // row-major
};

// How the rows of a q/k projection are ordered in the checkpoint.
enum class RowOrder {
  as_stored,             // already Hugging Face's rotate_half order
  rope_pairs_to_halves,  // llama2.c / GGUF adjacent pairs: reorder within each head
};

// The stored row that becomes row `row` in rotate_half order: within a head of `head_dim` rows,
// HF row p * head_dim/2 + j comes from adjacent-pair row 2j + p (the inverse of HF's
// convert_llama_weights_to_hf permute).
int64_t rope_pairs_source_row(int64_t row, int64_t head_dim);

// Converts `stored` into a tensor of options.dtype on options.device. With
// RowOrder::rope_pairs_to_halves, dim 0 must be a multiple of head_dim.
Tensor materialize(const StoredTensor& stored, const LoadOptions& options,
                   RowOrder order = RowOrder::as_stored, int64_t head_dim = 0);

}  // namespace tessera::loaders
