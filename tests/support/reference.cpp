#include "support/reference.h"
#include "support/reference_detail.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numbers>
#include <stdexcept>

namespace tessera::test {

namespace reference_detail {

void require(bool condition, const std::string& message) {
  if (!condition) throw std::invalid_argument("reference: " + message);
}

int64_t count_elements(std::span<const int64_t> sizes) {
  int64_t count = 1;
  for (int64_t size : sizes) count *= size;
  return count;
}

}  // namespace reference_detail

namespace {

using namespace reference_detail;

Sizes row_major_strides(std::span<const int64_t> sizes) {
  Sizes strides(sizes.size(), 1);
  for (size_t i = sizes.size(); i-- > 1;) strides[i - 1] = strides[i] * sizes[i];
  return strides;
}

}  // namespace

namespace reference_detail {

RefTensor make_tensor(Sizes sizes) {
  RefTensor out;
  out.values.assign(static_cast<size_t>(count_elements(sizes)), 0.0);
  out.sizes = std::move(sizes);
  return out;
}

int64_t rank_of(const RefTensor& tensor) {
  return static_cast<int64_t>(tensor.sizes.size());
}

}  // namespace reference_detail

namespace {

int64_t normalize_dim(int64_t dim, int64_t rank) {
  int64_t normalized = dim < 0 ? dim + rank : dim;
  require(normalized >= 0 && normalized < std::max<int64_t>(rank, 1),
          fmt::format("dim {} out of range for rank {}", dim, rank));
  return normalized;
}

void require_inputs(std::span<const RefTensor> inputs, size_t count, const std::string& op) {
  require(inputs.size() == count,
          fmt::format("{} takes {} inputs, got {}", op, count, inputs.size()));
}

// ---------------------------------------------------------------------------------------------
// Broadcasting (numpy rules): sizes are aligned at the right; a size 1 stretches.

Sizes broadcast_sizes(std::span<const RefTensor> inputs) {
  size_t rank = 0;
  for (const RefTensor& input : inputs) rank = std::max(rank, input.sizes.size());
  Sizes out(rank, 1);
  for (const RefTensor& input : inputs) {
    size_t lead = rank - input.sizes.size();
    for (size_t i = 0; i < input.sizes.size(); ++i) {
      int64_t size = input.sizes[i];
      int64_t& target = out[lead + i];
      if (size == target || size == 1) continue;
      require(target == 1, fmt::format("sizes {} do not broadcast against {}",
                                       fmt::join(input.sizes, ","), fmt::join(out, ",")));
      target = size;
    }
  }
  return out;
}

// Flat index into `input` of the output element at multi-index `index` (rank of the output).
int64_t broadcast_source_index(const RefTensor& input, std::span<const int64_t> index) {
  size_t lead = index.size() - input.sizes.size();
  int64_t flat = 0;
  for (size_t i = 0; i < input.sizes.size(); ++i) {
    int64_t coordinate = input.sizes[i] == 1 ? 0 : index[lead + i];
    flat = flat * input.sizes[i] + coordinate;
  }
  return flat;
}

RefTensor broadcast_map(std::span<const RefTensor> inputs,
                        const std::function<double(std::span<const double>)>& fn) {
  RefTensor out = make_tensor(broadcast_sizes(inputs));
  std::vector<double> arguments(inputs.size());
  for (int64_t flat = 0; flat < out.numel(); ++flat) {
    Sizes index = unravel_index(flat, out.sizes);
    for (size_t i = 0; i < inputs.size(); ++i)
      arguments[i] = inputs[i].values[broadcast_source_index(inputs[i], index)];
    out.values[flat] = fn(arguments);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Pointwise

double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

double gelu(double x, const std::string& approximate) {
  if (approximate == "none") return 0.5 * x * (1.0 + std::erf(x / std::numbers::sqrt2));
  require(approximate == "tanh", "gelu approximate must be 'none' or 'tanh', got " + approximate);
  double inner = std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x);
  return 0.5 * x * (1.0 + std::tanh(inner));
}

using UnaryFn = std::function<double(double, const Attributes&)>;

const std::map<std::string, UnaryFn>& unary_ops() {
  static const std::map<std::string, UnaryFn> ops = {
      {"neg", [](double x, const Attributes&) { return -x; }},
      {"exp", [](double x, const Attributes&) { return std::exp(x); }},
      {"log", [](double x, const Attributes&) { return std::log(x); }},
      {"sqrt", [](double x, const Attributes&) { return std::sqrt(x); }},
      {"rsqrt", [](double x, const Attributes&) { return 1.0 / std::sqrt(x); }},
      {"tanh", [](double x, const Attributes&) { return std::tanh(x); }},
      {"sigmoid", [](double x, const Attributes&) { return sigmoid(x); }},
      {"silu", [](double x, const Attributes&) { return x * sigmoid(x); }},
      {"gelu",
       [](double x, const Attributes& a) { return gelu(x, a.get_string("approximate", "none")); }},
      {"pow_scalar",
       [](double x, const Attributes& a) { return std::pow(x, a.get_float("exponent")); }},
      {"add_scalar", [](double x, const Attributes& a) { return x + a.get_float("scalar"); }},
      {"mul_scalar", [](double x, const Attributes& a) { return x * a.get_float("scalar"); }},
      {"softcap",
       [](double x, const Attributes& a) {
         double cap = a.get_float("cap");
         return cap * std::tanh(x / cap);
       }},
  };
  return ops;
}

using BinaryFn = std::function<double(double, double)>;

const std::map<std::string, BinaryFn>& binary_ops() {
  static const std::map<std::string, BinaryFn> ops = {
      {"add", [](double a, double b) { return a + b; }},
      {"sub", [](double a, double b) { return a - b; }},
      {"mul", [](double a, double b) { return a * b; }},
      {"div", [](double a, double b) { return a / b; }},
      {"maximum", [](double a, double b) { return std::max(a, b); }},
  };
  return ops;
}

RefTensor cast(const RefTensor& x, DType dtype) {
  RefTensor out = x;
  for (double& value : out.values) {
    if (!is_floating(dtype)) {
      double low = dtype == DType::i32 ? -2147483648.0 : -9223372036854775808.0;
      double high = dtype == DType::i32 ? 2147483647.0 : 9223372036854775807.0;
      require(std::isfinite(value) && std::trunc(value) >= low && std::trunc(value) <= high,
              fmt::format("cast of {} to {} is out of range", value, dtype_name(dtype)));
    }
    value = round_to_dtype(value, dtype);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Last-dim reductions: the input is viewed as [rows, row_length].

struct Rows {
  int64_t count = 0;
  int64_t length = 0;
};

Rows rows_of(const RefTensor& x, const std::string& op) {
  require(rank_of(x) >= 1, op + " needs a tensor of rank >= 1");
  Rows rows;
  rows.length = x.sizes.back();
  rows.count = rows.length == 0 ? 0 : x.numel() / rows.length;
  return rows;
}

Sizes reduced_sizes(const RefTensor& x, bool keepdim) {
  Sizes sizes = x.sizes;
  if (keepdim)
    sizes.back() = 1;
  else
    sizes.pop_back();
  return sizes;
}

RefTensor reduce_last_dim(const RefTensor& x, const std::string& op, bool keepdim) {
  Rows rows = rows_of(x, op);
  require(rows.length > 0, op + " of an empty row");
  RefTensor out = make_tensor(reduced_sizes(x, keepdim));
  for (int64_t row = 0; row < rows.count; ++row) {
    const double* values = x.values.data() + row * rows.length;
    double result = 0;
    if (op == "sum" || op == "mean") {
      for (int64_t i = 0; i < rows.length; ++i) result += values[i];
      if (op == "mean") result /= static_cast<double>(rows.length);
    } else {
      int64_t best = 0;
      for (int64_t i = 1; i < rows.length; ++i)
        if (values[i] > values[best]) best = i;  // strictly greater: the first index wins ties
      result = op == "argmax" ? static_cast<double>(best) : values[best];
    }
    out.values[row] = result;
  }
  return out;
}

RefTensor softmax(const RefTensor& x) {
  Rows rows = rows_of(x, "softmax");
  RefTensor out = make_tensor(x.sizes);
  for (int64_t row = 0; row < rows.count; ++row) {
    const double* values = x.values.data() + row * rows.length;
    double* result = out.values.data() + row * rows.length;
    double largest = *std::max_element(values, values + rows.length);
    double total = 0;
    for (int64_t i = 0; i < rows.length; ++i) total += std::exp(values[i] - largest);
    for (int64_t i = 0; i < rows.length; ++i) result[i] = std::exp(values[i] - largest) / total;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Matrix products

// vocab_start >= 0: the weight holds rows [vocab_start, vocab_start + V) of a larger table.
RefTensor embedding(const RefTensor& weight, const RefTensor& ids, int64_t vocab_start) {
  require(rank_of(weight) == 2, "embedding weight must be [V, D]");
  int64_t vocabulary = weight.sizes[0];
  int64_t width = weight.sizes[1];
  Sizes out_sizes = ids.sizes;
  out_sizes.push_back(width);
  RefTensor out = make_tensor(out_sizes);  // zeros: a shard's rows for ids outside it
  for (int64_t i = 0; i < ids.numel(); ++i) {
    double id = ids.values[i];
    if (vocab_start >= 0) {
      id -= static_cast<double>(vocab_start);
      if (id < 0 || id >= static_cast<double>(vocabulary)) continue;
    }
    require(id >= 0 && id < static_cast<double>(vocabulary) && id == std::trunc(id),
            fmt::format("embedding id {} outside [0, {})", id, vocabulary));
    int64_t row = static_cast<int64_t>(id);
    std::copy_n(weight.values.begin() + row * width, width, out.values.begin() + i * width);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Shape ops

Sizes resolve_shape(Sizes shape, int64_t numel) {
  int64_t inferred = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      require(inferred < 0, "only one size may be -1");
      inferred = static_cast<int64_t>(i);
    } else {
      require(shape[i] >= 0, "sizes must be >= 0 or -1");
      known *= shape[i];
    }
  }
  if (inferred >= 0) {
    require(known > 0 && numel % known == 0, "cannot infer the -1 size");
    shape[inferred] = numel / known;
  }
  require(count_elements(shape) == numel, "the new shape has a different element count");
  return shape;
}

RefTensor slice(const RefTensor& x, const Attributes& attributes) {
  int64_t dim = normalize_dim(attributes.get_int("dim", 0), rank_of(x));
  int64_t step = attributes.get_int("step", 1);
  require(step > 0, "slice step must be positive");
  int64_t size = x.sizes[dim];
  int64_t start = attributes.get_int("start", 0);
  int64_t end = attributes.get_int("end", std::numeric_limits<int64_t>::max());
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  std::vector<int64_t> kept;
  for (int64_t i = start; i < end; i += step) kept.push_back(i);
  Sizes out_sizes = x.sizes;
  out_sizes[dim] = static_cast<int64_t>(kept.size());
  RefTensor out = make_tensor(out_sizes);
  Sizes in_strides = row_major_strides(x.sizes);
  for (int64_t flat = 0; flat < out.numel(); ++flat) {
    Sizes index = unravel_index(flat, out_sizes);
    index[dim] = kept[index[dim]];
    int64_t source = 0;
    for (size_t i = 0; i < index.size(); ++i) source += index[i] * in_strides[i];
    out.values[flat] = x.values[source];
  }
  return out;
}

RefTensor transpose(const RefTensor& x, const Attributes& attributes) {
  int64_t dim0 = normalize_dim(attributes.get_int("dim0"), rank_of(x));
  int64_t dim1 = normalize_dim(attributes.get_int("dim1"), rank_of(x));
  Sizes out_sizes = x.sizes;
  std::swap(out_sizes[dim0], out_sizes[dim1]);
  RefTensor out = make_tensor(out_sizes);
  Sizes in_strides = row_major_strides(x.sizes);
  for (int64_t flat = 0; flat < out.numel(); ++flat) {
    Sizes index = unravel_index(flat, out_sizes);
    std::swap(index[dim0], index[dim1]);
    int64_t source = 0;
    for (size_t i = 0; i < index.size(); ++i) source += index[i] * in_strides[i];
    out.values[flat] = x.values[source];
  }
  return out;
}

RefTensor cat(std::span<const RefTensor> inputs, const Attributes& attributes) {
  require(!inputs.empty(), "cat needs at least one tensor");
  int64_t rank = rank_of(inputs[0]);
  int64_t dim = normalize_dim(attributes.get_int("dim", 0), rank);
  Sizes out_sizes = inputs[0].sizes;
  out_sizes[dim] = 0;
  for (const RefTensor& input : inputs) {
    require(rank_of(input) == rank, "cat inputs differ in rank");
    for (int64_t i = 0; i < rank; ++i)
      if (i != dim) require(input.sizes[i] == out_sizes[i], "cat inputs differ off the cat dim");
    out_sizes[dim] += input.sizes[dim];
  }
  RefTensor out = make_tensor(out_sizes);
  // Each input contributes a block of (its size along dim) * inner elements per outer index.
  int64_t outer = count_elements(std::span(out_sizes).first(dim));
  int64_t inner = count_elements(std::span(out_sizes).subspan(dim + 1));
  int64_t written = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (const RefTensor& input : inputs) {
      int64_t block = input.sizes[dim] * inner;
      std::copy_n(input.values.begin() + o * block, block, out.values.begin() + written);
      written += block;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Custom ops (compile/ops/custom)

// x / sqrt(mean(x^2) + eps) * weight over the last dim.
RefTensor rms_norm(const RefTensor& x, const RefTensor& weight, double eps) {
  Rows rows = rows_of(x, "rms_norm");
  require(weight.sizes == Sizes{rows.length}, "rms_norm weight must be [hidden]");
  RefTensor out = make_tensor(x.sizes);
  for (int64_t row = 0; row < rows.count; ++row) {
    const double* values = x.values.data() + row * rows.length;
    double squares = 0;
    for (int64_t i = 0; i < rows.length; ++i) squares += values[i] * values[i];
    double scale = 1.0 / std::sqrt(squares / static_cast<double>(rows.length) + eps);
    for (int64_t i = 0; i < rows.length; ++i)
      out.values[row * rows.length + i] = values[i] * scale * weight.values[i];
  }
  return out;
}

// act(x[..., :d]) * x[..., d:] for x [..., 2d].
RefTensor activation_and_mul(const RefTensor& x, const std::function<double(double)>& act) {
  Rows rows = rows_of(x, "activation_and_mul");
  require(rows.length % 2 == 0, "gated input needs an even last size");
  int64_t half = rows.length / 2;
  Sizes out_sizes = x.sizes;
  out_sizes.back() = half;
  RefTensor out = make_tensor(out_sizes);
  for (int64_t row = 0; row < rows.count; ++row) {
    const double* values = x.values.data() + row * rows.length;
    for (int64_t i = 0; i < half; ++i)
      out.values[row * half + i] = act(values[i]) * values[half + i];
  }
  return out;
}

// RoPE on each head of `x` [T, heads * head_size] at `positions`; cache rows hold
// [cos(0..half), sin(0..half)] for rot_dim = 2 * half rotated dims; the rest pass through.
RefTensor rotate(const RefTensor& x, const RefTensor& positions, const RefTensor& cache,
                 int64_t head_size, bool is_neox) {
  require(rank_of(x) == 2 && x.sizes[1] % head_size == 0,
          "rotary_embedding query/key must be [T, heads * head_size]");
  require(rank_of(cache) == 2, "cos_sin_cache must be [max_position, rot_dim]");
  int64_t tokens = x.sizes[0];
  int64_t heads = x.sizes[1] / head_size;
  int64_t rot_dim = cache.sizes[1];
  int64_t half = rot_dim / 2;
  require(rot_dim % 2 == 0 && rot_dim <= head_size, "rot_dim must be even and <= head_size");
  require(positions.sizes == Sizes{tokens}, "positions must be [T]");
  RefTensor out = x;
  for (int64_t t = 0; t < tokens; ++t) {
    double position = positions.values[t];
    require(position >= 0 && position < static_cast<double>(cache.sizes[0]),
            fmt::format("position {} outside the cache", position));
    const double* cos = cache.values.data() + static_cast<int64_t>(position) * rot_dim;
    const double* sin = cos + half;
    for (int64_t h = 0; h < heads; ++h) {
      const double* in = x.values.data() + t * x.sizes[1] + h * head_size;
      double* result = out.values.data() + t * x.sizes[1] + h * head_size;
      for (int64_t i = 0; i < half; ++i) {
        // neox: pairs (i, i + half); gptj: pairs (2i, 2i + 1).
        int64_t first = is_neox ? i : 2 * i;
        int64_t second = is_neox ? i + half : 2 * i + 1;
        result[first] = in[first] * cos[i] - in[second] * sin[i];
        result[second] = in[second] * cos[i] + in[first] * sin[i];
      }
    }
  }
  return out;
}

}  // namespace

RefTensor reference_causal_attention(const RefTensor& query, const RefTensor& keys,
                                     const RefTensor& values, int64_t num_heads,
                                     int64_t num_kv_heads, double scale) {
  require(rank_of(query) == 2 && rank_of(keys) == 2 && keys.sizes == values.sizes,
          "attention: query must be [new_tokens, heads * head_size], keys and values alike "
          "[seq_len, kv_heads * head_size]");
  require(num_heads > 0 && num_kv_heads > 0 && num_heads % num_kv_heads == 0 &&
              query.sizes[1] % num_heads == 0,
          "attention: num_heads must be a multiple of num_kv_heads and divide the query row");
  const int64_t head_size = query.sizes[1] / num_heads;
  const int64_t new_tokens = query.sizes[0], seq_len = keys.sizes[0];
  const int64_t kv_row = keys.sizes[1];
  require(kv_row == num_kv_heads * head_size && new_tokens <= seq_len,
          "attention: keys must be [seq_len >= new_tokens, kv_heads * head_size]");
  RefTensor out = make_tensor(query.sizes);
  for (int64_t i = 0; i < new_tokens; ++i) {
    const int64_t position = seq_len - new_tokens + i;  // sees keys 0..position
    for (int64_t h = 0; h < num_heads; ++h) {
      const int64_t kv_head = h / (num_heads / num_kv_heads);
      const double* q = query.values.data() + i * query.sizes[1] + h * head_size;
      std::vector<double> scores(static_cast<size_t>(position + 1));
      double top = -std::numeric_limits<double>::infinity();
      for (int64_t p = 0; p <= position; ++p) {
        const double* k = keys.values.data() + p * kv_row + kv_head * head_size;
        double dot = 0;
        for (int64_t d = 0; d < head_size; ++d) dot += q[d] * k[d];
        scores[p] = dot * scale;
        top = std::max(top, scores[p]);
      }
      double total = 0;
      for (double& score : scores) total += (score = std::exp(score - top));
      double* result = out.values.data() + i * query.sizes[1] + h * head_size;
      for (int64_t p = 0; p <= position; ++p) {
        const double* v = values.values.data() + p * kv_row + kv_head * head_size;
        for (int64_t d = 0; d < head_size; ++d) result[d] += scores[p] / total * v[d];
      }
    }
  }
  return out;
}

int64_t RefTensor::numel() const {
  return count_elements(sizes);
}

std::vector<int64_t> unravel_index(int64_t flat_index, std::span<const int64_t> sizes) {
  std::vector<int64_t> index(sizes.size(), 0);
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 0) continue;
    index[i] = flat_index % sizes[i];
    flat_index /= sizes[i];
  }
  return index;
}

double round_to_dtype(double value, DType dtype) {
  if (!is_floating(dtype) && dtype != DType::f8_e4m3) return std::trunc(value);
  if (!std::isfinite(value) || value == 0.0) return value;
  // Precision (stored mantissa bits), smallest normal exponent and largest finite value.
  int mantissa_bits = 23;
  int min_exponent = -126;
  double max_finite = std::ldexp(2.0 - std::ldexp(1.0, -23), 127);
  if (dtype == DType::f16) {
    mantissa_bits = 10;
    min_exponent = -14;
    max_finite = 65504.0;
  } else if (dtype == DType::bf16) {
    mantissa_bits = 7;
    max_finite = std::ldexp(2.0 - std::ldexp(1.0, -7), 127);
  } else if (dtype == DType::f8_e4m3) {  // no infinities: Tessera saturates at +-448
    mantissa_bits = 3;
    min_exponent = -6;
    max_finite = 448.0;
    value = std::clamp(value, -max_finite, max_finite);
  }
  int exponent = 0;
  std::frexp(value, &exponent);  // value = m * 2^exponent with |m| in [0.5, 1)
  int leading_bit = std::max(exponent - 1, min_exponent);  // subnormals share the min exponent
  double quantum = std::ldexp(1.0, leading_bit - mantissa_bits);
  double rounded = std::nearbyint(value / quantum) * quantum;  // ties to even (default mode)
  if (std::fabs(rounded) > max_finite) return std::copysign(INFINITY, value);
  return rounded;
}

std::vector<RefTensor> reference_op(const std::string& op, std::span<const RefTensor> inputs,
                                    const Attributes& attributes) {
  for (const RefTensor& input : inputs)
    require(static_cast<int64_t>(input.values.size()) == input.numel(),
            op + ": an input's values do not match its sizes");

  if (auto unary = unary_ops().find(op); unary != unary_ops().end()) {
    require_inputs(inputs, 1, op);
    RefTensor out = inputs[0];
    for (double& value : out.values) value = unary->second(value, attributes);
    return {out};
  }
  if (auto binary = binary_ops().find(op); binary != binary_ops().end()) {
    require_inputs(inputs, 2, op);
    const BinaryFn& fn = binary->second;
    return {broadcast_map(inputs, [&](std::span<const double> v) { return fn(v[0], v[1]); })};
  }
  if (op == "where") {
    require_inputs(inputs, 3, op);
    return {
        broadcast_map(inputs, [](std::span<const double> v) { return v[0] != 0.0 ? v[1] : v[2]; })};
  }
  if (op == "cast") {
    require_inputs(inputs, 1, op);
    return {cast(inputs[0], attributes.get_dtype("dtype"))};
  }
  if (op == "sum" || op == "mean" || op == "max" || op == "argmax") {
    require_inputs(inputs, 1, op);
    return {reduce_last_dim(inputs[0], op, attributes.get_bool("keepdim", false))};
  }
  if (op == "softmax") {
    require_inputs(inputs, 1, op);
    return {softmax(inputs[0])};
  }
  if (op == "matmul") {
    require_inputs(inputs, 2, op);
    return {reference_matmul(inputs[0], inputs[1])};
  }
  if (op == "linear") return {reference_linear(inputs)};
  if (op == "fp8_linear") {
    return {reference_fp8_linear(inputs, attributes.get_string("activation"))};
  }
  if (op == "moe_routing") {
    require_inputs(inputs, 1, op);
    return {reference_moe_routing(inputs[0], attributes.get_int("top_k"),
                                  attributes.get_bool("renormalize", false))};
  }
  if (op == "fused_moe") {
    require_inputs(inputs, 4, op);
    return {reference_fused_moe(inputs, attributes.get_int("top_k"),
                                attributes.get_bool("renormalize", false),
                                attributes.get_int("first_expert", 0))};
  }
  if (op == "embedding") {
    require_inputs(inputs, 2, op);
    return {embedding(inputs[0], inputs[1], attributes.get_int("vocab_start", -1))};
  }
  if (op == "view" || op == "reshape") {
    require_inputs(inputs, 1, op);
    RefTensor out = inputs[0];
    out.sizes = resolve_shape(attributes.get_ints("shape"), inputs[0].numel());
    return {out};
  }
  if (op == "contiguous") {
    require_inputs(inputs, 1, op);
    return {inputs[0]};
  }
  if (op == "slice") {
    require_inputs(inputs, 1, op);
    return {slice(inputs[0], attributes)};
  }
  if (op == "transpose") {
    require_inputs(inputs, 1, op);
    return {transpose(inputs[0], attributes)};
  }
  if (op == "cat") return {cat(inputs, attributes)};
  if (op == "rms_norm") {
    require_inputs(inputs, 2, op);
    return {rms_norm(inputs[0], inputs[1], attributes.get_float("eps", 1e-6))};
  }
  if (op == "fused_add_rms_norm") {
    require_inputs(inputs, 3, op);
    std::array<RefTensor, 2> operands = {inputs[0], inputs[1]};
    RefTensor residual_out =
        broadcast_map(operands, [](std::span<const double> v) { return v[0] + v[1]; });
    require(residual_out.sizes == inputs[0].sizes, "residual must have the shape of x");
    return {rms_norm(residual_out, inputs[2], attributes.get_float("eps", 1e-6)), residual_out};
  }
  if (op == "silu_and_mul") {
    require_inputs(inputs, 1, op);
    return {activation_and_mul(inputs[0], [](double x) { return x * sigmoid(x); })};
  }
  if (op == "gelu_and_mul") {
    require_inputs(inputs, 1, op);
    std::string approximate = attributes.get_string("approximate", "none");
    return {activation_and_mul(inputs[0], [&](double x) { return gelu(x, approximate); })};
  }
  if (op == "silu_and_mul_linear" || op == "gelu_and_mul_linear") {
    require(inputs.size() == 2 || inputs.size() == 3, op + " takes x, weight and optional bias");
    std::vector<RefTensor> linear_inputs(inputs.begin(), inputs.end());
    if (op == "silu_and_mul_linear") {
      linear_inputs[0] = activation_and_mul(inputs[0], [](double x) { return x * sigmoid(x); });
    } else {
      std::string approximate = attributes.get_string("approximate", "none");
      linear_inputs[0] =
          activation_and_mul(inputs[0], [&](double x) { return gelu(x, approximate); });
    }
    return {reference_linear(linear_inputs), linear_inputs[0]};
  }
  if (op == "rotary_embedding") {
    require_inputs(inputs, 4, op);
    int64_t head_size = attributes.get_int("head_size");
    bool is_neox = attributes.get_bool("is_neox", true);
    require(head_size > 0, "head_size must be positive");
    return {rotate(inputs[1], inputs[0], inputs[3], head_size, is_neox),
            rotate(inputs[2], inputs[0], inputs[3], head_size, is_neox)};
  }
  throw std::invalid_argument("reference: no float64 reference for op '" + op + "'");
}

}  // namespace tessera::test
