#include "compile/codegen/row_lowering.h"

#include <cmath>
#include <cstdlib>
#include <numeric>
#include <utility>

#include "runtime/check.h"

namespace tessera {
namespace {

LaneForm remainder(const LaneForm& a, int64_t n, int64_t lanes) {
  if (n == 1) return {0, 0};
  if (a.step == 0) return {0, std::gcd(a.divisor, n)};
  if (aligned_run(a, lanes) && n % lanes == 0) return {1, std::gcd(a.divisor, n)};
  return {std::nullopt, 1};
}

// e / n and e % n for n a multiple of lanes stay in one block of n when e is an aligned run
// (indices are never negative where they are read).
LaneForm quotient(const LaneForm& a, int64_t n, int64_t lanes) {
  if (a.step == 0 || (aligned_run(a, lanes) && n % lanes == 0)) {
    int64_t divisor = a.divisor == 0 ? 0 : a.divisor % n == 0 ? a.divisor / n : 1;
    return {0, divisor};
  }
  return {std::nullopt, 1};
}

}  // namespace

IndexExpr constant_index(int64_t value) {
  return {std::to_string(value), {0, std::abs(value)}};
}
IndexExpr invariant_index(std::string text) {
  return {std::move(text), {0, 1}};
}
IndexExpr unknown_index(std::string text) {
  return {std::move(text), {std::nullopt, 1}};
}

LaneForm plus(const LaneForm& a, const LaneForm& b) {
  std::optional<int64_t> step;
  if (a.step && b.step) step = *a.step + *b.step;
  return {step, std::gcd(a.divisor, b.divisor)};
}

LaneForm times(const LaneForm& a, int64_t factor) {
  std::optional<int64_t> step;
  if (a.step) step = *a.step * factor;
  return {step, a.divisor * std::abs(factor)};
}

bool aligned_run(const LaneForm& a, int64_t lanes) {
  return a.step == 1 && a.divisor % lanes == 0;
}

IndexExpr shifted_index(const IndexExpr& index, int64_t offset) {
  return {fmt::format("({} - {})", index.text, -offset),
          plus(index.form, constant_index(offset).form)};
}

IndexExpr strided_index(int64_t start, int64_t step, const IndexExpr& index) {
  return {fmt::format("({} + {} * {})", start, step, index.text),
          plus(constant_index(start).form, times(index.form, step))};
}

Index unflatten(const IndexExpr& flat, const std::vector<int64_t>& shape, int64_t lanes) {
  Index index(shape.size());
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (stride == 1) {
      index[d] = {fmt::format("(({}) % {})", flat.text, shape[d]),
                  remainder(flat.form, shape[d], lanes)};
    } else {
      index[d] = {fmt::format("(({}) / {} % {})", flat.text, stride, shape[d]),
                  remainder(quotient(flat.form, stride, lanes), shape[d], lanes)};
    }
    stride *= shape[d];
  }
  return index;
}

void add_term(IndexExpr& sum, const IndexExpr& index, int64_t stride) {
  sum.text = fmt::format("{} + ({}) * {}", sum.text, index.text, stride);
  sum.form = plus(sum.form, times(index.form, stride));
}

IndexExpr flatten(const Index& index, const std::vector<int64_t>& shape) {
  IndexExpr flat = constant_index(0);
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] != 1) add_term(flat, index[d], stride);
    stride *= shape[d];
  }
  flat.text = "(" + flat.text + ")";
  return flat;
}

std::vector<int64_t> inner_shape(const TensorMeta& meta) {
  std::vector<int64_t> inner;
  for (size_t d = 1; d < meta.shape.size(); ++d) inner.push_back(meta.shape[d].constant());
  return inner;
}

int64_t product(const std::vector<int64_t>& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

std::string float_literal(float value) {
  if (std::isinf(value)) return value > 0 ? "INFINITY" : "(-INFINITY)";
  if (std::isnan(value)) return "NAN";
  // Nine significant digits name every float exactly.
  std::string digits = fmt::format("{:.9g}", value);
  // "3f" is not a float literal: a whole number needs its decimal point.
  if (digits.find_first_of(".e") == std::string::npos) digits += ".0";
  return digits + "f";
}

bool RowCandidate::float_inputs() const {
  for (const TensorMeta& input : inputs)
    if (!is_floating(input.dtype)) return false;
  return true;
}

bool RowCandidate::input_has_rows(size_t i) const {
  return inputs[i].rank() >= 1 && inputs[i].shape[0].same_as(rows);
}

std::string RowEmitter::broadcast_value(size_t input) {
  return value(input, broadcast_index(input));
}

Index RowEmitter::broadcast_index(size_t input) const {
  const SymShape& shape = input_meta(input).shape;
  const Index& out_index = index();
  Index result;
  size_t lead = out_index.size() - shape.size();
  for (size_t d = 0; d < shape.size(); ++d) {
    bool one = shape[d].is_constant() && shape[d].constant() == 1;
    result.push_back(one ? constant_index(0) : out_index[lead + d]);
  }
  return result;
}

}  // namespace tessera
