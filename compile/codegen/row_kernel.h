// The target-neutral body of a fused row kernel: C expressions for its reductions and outputs,
// over a row index `row`, written against a small prelude each target defines (tsr_ld/tsr_st for
// every dtype, tsr_round_bf16, ...) plus the pointwise formulas of kernels/scalar_math.inc
// (tsr_silu, ...). Each node's expression comes from its op's row lowering (OpDef::row_lowering,
// compile/codegen/row_lowering.h). The C++ and CUDA generators wrap these in loops of their own
// (a loop over rows on the CPU, a block per row on the GPU).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compile/compiled_plan.h"

namespace tessera {

struct RowReduction {
  std::string array;    // name of the per-row array holding its results ("r0")
  bool is_max = false;  // max, else sum
  double scale = 1.0;   // 1/K for mean
  int64_t groups = 1;   // results per row (the reduced value's inner size)
  int64_t length = 1;   // elements reduced into each result (K)
  std::string element;  // the element expression, in loop variables `g` (group) and `k`
};

// The vector form of an output (RowOutput::vector), for targets that compute `lanes` consecutive
// elements of a row per thread and store them with one access of kVectorBytes: lanes is
// kVectorBytes / the output's element size and divides the row length, so a row's elements split
// into whole groups i = first .. first + lanes - 1 with `first` a multiple of lanes. Inputs read at
// unit stride in i, from every lane (not under a cat's branch), become `loads`: one access of
// `lanes` consecutive elements per group, starting at an element offset that is a multiple of
// lanes (so aligned to the access when the buffer is). An output without such a load has no
// vector form: a wide store alone does not pay for computing its lanes unrolled.
struct RowVectorLoad {
  int input = -1;      // buffers[input]
  std::string offset;  // element offset of the group's first lane, in `row` and `i` (= first)
  std::string array;   // the float[lanes] array the lanes land in ("tsr_v0")
};

struct RowVectorForm {
  int64_t lanes = 0;  // 0: the output has no vector form
  // The element expression in `i` (this lane's element) and `tsr_lane` (its lane): the same
  // value as RowOutput::element, with the vector loads read as `array[tsr_lane]`.
  std::string element;
  std::vector<RowVectorLoad> loads;
};

// Bytes of one vector access: a 128-bit load or store on NVIDIA GPUs.
inline constexpr int64_t kVectorBytes = 16;

struct RowOutput {
  int value = -1;
  DType dtype = DType::f32;
  int64_t row_elements = 1;  // elements per row
  std::string element;       // the element expression, in loop variable `i`
  RowVectorForm vector;      // used by the CUDA generator; the C++ one loops over `element`
};

struct RowKernelBody {
  std::vector<DType> input_dtypes;       // buffers[0..n): the kernel's inputs, in FusedKernel order
  std::vector<RowReduction> reductions;  // in dependency order
  std::vector<RowOutput> outputs;        // buffers[n..): the kernel's outputs
};

// Builds the body; TESSERA_CHECKs that every node is one the fuser admits.
RowKernelBody build_row_kernel_body(const Graph& graph, const FusedKernel& kernel);

// C type names of the prelude for a buffer of `dtype`.
const char* prelude_type(DType dtype);

}  // namespace tessera
