// The target-neutral body of a fused row kernel: C expressions for its reductions and outputs,
// over a row index `row`, written against a small prelude each target defines (tsr_ld/tsr_st for
// every dtype, tsr_silu, tsr_round_bf16, ...). The C++ and CUDA generators wrap these in loops
// of their own (a loop over rows on the CPU, a block per row on the GPU).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compile/compiled_plan.h"

namespace tessera {

struct RowReduction {
  std::string array;      // name of the per-row array holding its results ("r0")
  bool is_max = false;    // max, else sum
  double scale = 1.0;     // 1/K for mean
  int64_t groups = 1;     // results per row (the reduced value's inner size)
  int64_t length = 1;     // elements reduced into each result (K)
  std::string element;    // the element expression, in loop variables `g` (group) and `k`
};

struct RowOutput {
  int value = -1;
  DType dtype = DType::f32;
  int64_t row_elements = 1;  // elements per row
  std::string element;       // the element expression, in loop variable `i`
};

struct RowKernelBody {
  std::vector<DType> input_dtypes;   // buffers[0..n): the kernel's inputs, in FusedKernel order
  std::vector<RowReduction> reductions;  // in dependency order
  std::vector<RowOutput> outputs;        // buffers[n..): the kernel's outputs
};

// Builds the body; TESSERA_CHECKs that every node is one the fuser admits.
RowKernelBody build_row_kernel_body(const Graph& graph, const FusedKernel& kernel);

// C type names of the prelude for a buffer of `dtype`.
const char* prelude_type(DType dtype);

}  // namespace tessera
