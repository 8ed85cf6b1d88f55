// What an op's row lowering (OpDef::row_lowering) is written against: the index expressions of a
// fused row kernel and the emitter that asks a node for its output element. Ops define their
// lowerings next to their definitions (compile/ops/*.cpp); the emitter (row_kernel.cpp) walks the
// kernel's nodes through them, so it knows no op by name.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "compile/ir/op_registry.h"

namespace tessera {

// What the vectorizer knows about an integer index expression e(i) of an output's element. A
// vector group computes i = first + lane for lane < lanes, with `first` a multiple of lanes.
struct LaneForm {
  std::optional<int64_t> step;  // e(first + lane) == e(first) + step * lane, when known
  int64_t divisor = 1;          // e(first) is a multiple of this (0: e(first) is 0)
};

struct IndexExpr {
  std::string text;
  LaneForm form;
};

using Index = std::vector<IndexExpr>;

IndexExpr constant_index(int64_t value);
// The same for every lane of a group, of unknown value (`row`, an id read from an input).
IndexExpr invariant_index(std::string text);
IndexExpr unknown_index(std::string text);
LaneForm plus(const LaneForm& a, const LaneForm& b);
LaneForm times(const LaneForm& a, int64_t factor);
// Whether e takes `lanes` consecutive values from a multiple of lanes.
bool aligned_run(const LaneForm& a, int64_t lanes);
// `index` + `offset`, and `start` + `step` * `index`.
IndexExpr shifted_index(const IndexExpr& index, int64_t offset);
IndexExpr strided_index(int64_t start, int64_t step, const IndexExpr& index);
// The multi-index of flat position `flat` in a row-major `shape`.
Index unflatten(const IndexExpr& flat, const std::vector<int64_t>& shape, int64_t lanes);
IndexExpr flatten(const Index& index, const std::vector<int64_t>& shape);
// Appends `index` * `stride` to the linear expression `sum` (in the generated code's format).
void add_term(IndexExpr& sum, const IndexExpr& index, int64_t stride);
// The sizes of every dim but the row dim (all constant inside a row kernel).
std::vector<int64_t> inner_shape(const TensorMeta& meta);
int64_t product(const std::vector<int64_t>& sizes);
// An f32 literal of the generated code for `value` ("2.0f", "INFINITY").
std::string float_literal(float value);

// A node the fuser considers for a row kernel whose rows (dim 0 of every value) are `rows`. The
// fuser has checked the generic part: one output, of a float dtype, with `rows` rows.
struct RowCandidate {
  std::span<const TensorMeta> inputs;
  const TensorMeta& output;
  const Attributes& attributes;
  const SymInt& rows;
  std::vector<bool> constant_inputs;  // input i is a graph constant (a weight)

  bool float_inputs() const;            // every input has a float dtype
  bool input_has_rows(size_t i) const;  // input i has rank >= 1 and `rows` rows
};

// The emitter as one node's lowering sees it: the node's inputs and output, and the index of the
// output element being emitted (index()[0] is the row).
class RowEmitter {
 public:
  virtual ~RowEmitter() = default;

  virtual size_t num_inputs() const = 0;
  virtual const TensorMeta& input_meta(size_t input) const = 0;
  virtual const TensorMeta& output_meta() const = 0;
  virtual const Attributes& attributes() const = 0;
  virtual const Index& index() const = 0;
  // Lanes of the vector pass (a group of consecutive elements per thread), 1 outside it.
  virtual int64_t lanes() const = 0;

  // The f32 expression of input `input` at `index` (of the input's own shape).
  virtual std::string value(size_t input, const Index& index) = 0;
  // Input `input` at the output's index, broadcast (trailing dims aligned, size-1 dims at 0).
  std::string broadcast_value(size_t input);
  Index broadcast_index(size_t input) const;
  // An integer input (ids, conditions) at `index`, as an index expression. It must be a kernel
  // input, not computed in the kernel.
  virtual IndexExpr integer(size_t input, const Index& index) = 0;
  // The f32 element of kernel input `input` at the element offset `offset` (embedding's rows).
  virtual std::string load(size_t input, const IndexExpr& offset) = 0;

  // Registers (once per node and `tag`) a reduction over the last dim of input `input`: per row
  // and group, max or sum of map(element), times `scale`. Returns the per-row array's name.
  virtual std::string reduction(int tag, size_t input, bool is_max, double scale,
                                const std::function<std::string(const std::string&)>& map) = 0;
  // The reduced value of `array` (a reduction of input `input`) for the groups of `index`.
  virtual std::string read_reduction(const std::string& array, size_t input,
                                     const Index& index) = 0;
  // Expressions emitted between these calls are under a branch not every lane takes (cat's
  // inputs), so they are never read as vector loads.
  virtual void begin_branches() = 0;
  virtual void end_branches() = 0;
};

}  // namespace tessera
