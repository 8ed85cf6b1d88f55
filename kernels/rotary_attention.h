// rotary_attention (compile/ops/rotary_attention.cpp) as its two ops apart, on the CPU (the GPU
// kernel, kernels/cuda/attention/attention.cu, reads the qkv slices where they lie instead).
#pragma once

#include "runtime/attributes.h"
#include "runtime/kernel_registry.h"

namespace tessera {

// The columns of the query and of the key (and of the value) within qkv's rows; throws naming
// num_heads, num_kv_heads and head_size when one is not positive or out of range.
struct QkvWidths {
  int64_t query;
  int64_t key;
};
QkvWidths qkv_widths(const Attributes& attributes);

// The attributes rotary_embedding and attention take, out of rotary_attention's.
Attributes rotary_embedding_attributes(const Attributes& attributes);
Attributes attention_attributes(const Attributes& attributes);

// Copies the query, key and value columns of qkv into the contiguous outputs (the CPU kernels take
// contiguous tensors), rotates the query and key with the device's rotary_embedding kernel and
// attends with its attention kernel. Uses outputs 0 and 3 as scratch for the unrotated query and
// key before they take their own results.
void rotate_then_attend(const KernelArgs& args);

}  // namespace tessera
