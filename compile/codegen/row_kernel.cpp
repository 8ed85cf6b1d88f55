#include "compile/codegen/row_kernel.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <utility>

#include "kernels/check.h"

namespace tessera {

const char* prelude_type(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "float";
    case DType::f16:
      return "tsr_f16";
    case DType::bf16:
      return "tsr_bf16";
    case DType::i32:
      return "int32_t";
    case DType::i64:
      return "int64_t";
  }
  return "?";
}

namespace {

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

IndexExpr constant_index(int64_t value) {
  return {std::to_string(value), {0, std::abs(value)}};
}
// The same for every lane of a group, of unknown value (`row`, an id read from an input).
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

// Whether e takes `lanes` consecutive values from a multiple of lanes: then e / n and e % n for
// n a multiple of lanes stay in one block of n (indices are never negative where they are read).
bool aligned_run(const LaneForm& a, int64_t lanes) {
  return a.step == 1 && a.divisor % lanes == 0;
}

LaneForm remainder(const LaneForm& a, int64_t n, int64_t lanes) {
  if (n == 1) return {0, 0};
  if (a.step == 0) return {0, std::gcd(a.divisor, n)};
  if (aligned_run(a, lanes) && n % lanes == 0) return {1, std::gcd(a.divisor, n)};
  return {std::nullopt, 1};
}

LaneForm quotient(const LaneForm& a, int64_t n, int64_t lanes) {
  if (a.step == 0 || (aligned_run(a, lanes) && n % lanes == 0)) {
    int64_t divisor = a.divisor == 0 ? 0 : a.divisor % n == 0 ? a.divisor / n : 1;
    return {0, divisor};
  }
  return {std::nullopt, 1};
}

std::string literal(double value) {
  if (std::isinf(value)) return value > 0 ? "INFINITY" : "(-INFINITY)";
  if (std::isnan(value)) return "NAN";
  std::string digits = fmt::format("{:.9g}", value);
  // "3f" is not a float literal: a whole number needs its decimal point.
  if (digits.find_first_of(".e") == std::string::npos) digits += ".0";
  return digits + "f";
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

// The multi-index of flat position `flat` in a row-major `shape`.
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

// Appends `index` * `stride` to the linear expression `sum` (in the generated code's format).
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

class Emitter {
 public:
  Emitter(const Graph& graph, const FusedKernel& kernel) : graph_(graph), kernel_(kernel) {
    for (size_t i = 0; i < kernel.inputs.size(); ++i)
      input_slot_[kernel.inputs[i]] = static_cast<int>(i);
    for (int n : kernel.nodes) members_.insert(n);
  }

  RowKernelBody build() {
    RowKernelBody body;
    for (int id : kernel_.inputs) body.input_dtypes.push_back(graph_.value(id).meta.dtype);
    for (int id : kernel_.outputs) {
      const TensorMeta& meta = graph_.value(id).meta;
      std::vector<int64_t> inner = inner_shape(meta);
      RowOutput output;
      output.value = id;
      output.dtype = meta.dtype;
      output.row_elements = product(inner);
      output.element = value_at(id, output_index(inner));
      // The same expression again, for groups of `lanes` elements; reductions it reads were
      // registered by the first pass and are shared.
      int64_t lanes = is_floating(meta.dtype)
                          ? kVectorBytes / static_cast<int64_t>(element_size(meta.dtype))
                          : 0;
      if (lanes > 1 && output.row_elements % lanes == 0) {
        lanes_ = lanes;
        vector_loads_ = &output.vector.loads;
        output.vector.lanes = lanes;
        output.vector.element = value_at(id, output_index(inner));
        lanes_ = 1;
        vector_loads_ = nullptr;
        // A wide store alone does not pay for unrolling the expression over the lanes (NVRTC
        // time and code size; rope's cat branches read nothing as vectors).
        if (output.vector.loads.empty()) output.vector = RowVectorForm{};
      }
      body.outputs.push_back(std::move(output));
    }
    body.reductions = std::move(reductions_);
    return body;
  }

 private:
  const Node& producer(int id) const { return graph_.nodes()[graph_.value(id).producer]; }
  bool in_kernel(int id) const {
    return !input_slot_.count(id) && members_.count(graph_.value(id).producer);
  }

  // The index of an output's element `i` of row `row`.
  Index output_index(const std::vector<int64_t>& inner) const {
    Index index{invariant_index("row")};
    for (IndexExpr& part : unflatten({"i", {1, lanes_}}, inner, lanes_))
      index.push_back(std::move(part));
    return index;
  }

  // Index of input value `id` (rank r) when read at `out_index` of a broadcast result: trailing
  // dims aligned, size-1 dims read at 0.
  Index broadcast_index(int id, const Index& out_index) const {
    const SymShape& shape = graph_.value(id).meta.shape;
    Index index;
    size_t lead = out_index.size() - shape.size();
    for (size_t d = 0; d < shape.size(); ++d) {
      bool one = shape[d].is_constant() && shape[d].constant() == 1;
      index.push_back(one ? constant_index(0) : out_index[lead + d]);
    }
    return index;
  }

  // Element offset of `index` in the contiguous input `id`.
  IndexExpr offset_of(int id, const Index& index) const {
    const TensorMeta& meta = graph_.value(id).meta;
    IndexExpr offset = constant_index(0);
    int64_t stride = 1;
    for (size_t d = meta.shape.size(); d-- > 0;) {
      if (d == 0) {
        add_term(offset, index[0], stride);
      } else {
        int64_t size = meta.shape[d].constant();
        if (size != 1) add_term(offset, index[d], stride);
        stride *= size;
      }
    }
    return offset;
  }

  // A float read of input `slot` at `offset`: in the vector pass, a lane of a vector load when
  // every lane reads it and the lanes read consecutive elements from an aligned offset.
  std::string load_at(int slot, const IndexExpr& offset) {
    if (vector_loads_ != nullptr && conditional_depth_ == 0 && aligned_run(offset.form, lanes_)) {
      for (const RowVectorLoad& load : *vector_loads_) {
        if (load.input == slot && load.offset == offset.text) return load.array + "[tsr_lane]";
      }
      RowVectorLoad load{slot, offset.text, fmt::format("tsr_v{}", vector_loads_->size())};
      vector_loads_->push_back(load);
      return load.array + "[tsr_lane]";
    }
    return fmt::format("tsr_ld(in{}, {})", slot, offset.text);
  }

  std::string load(int id, const Index& index) {
    return load_at(input_slot_.at(id), offset_of(id, index));
  }

  // An integer read (ids, masks): same for every lane when its offset is.
  IndexExpr int_load(int id, const Index& index) const {
    TESSERA_CHECK(input_slot_.count(id), "integer value {} must be a kernel input", id);
    IndexExpr offset = offset_of(id, index);
    std::string text = fmt::format("((int64_t)in{}[{}])", input_slot_.at(id), offset.text);
    return offset.form.step == 0 ? invariant_index(text) : unknown_index(text);
  }

  // Registers a reduction of `source` over its last dim; returns the per-row array's name.
  std::string reduction(int source, bool is_max, double scale,
                        const std::function<std::string(const std::string&)>& map) {
    // Reductions loop over their own index, one element per thread: always scalar.
    int64_t saved_lanes = std::exchange(lanes_, 1);
    std::vector<RowVectorLoad>* saved_loads = std::exchange(vector_loads_, nullptr);
    const TensorMeta& meta = graph_.value(source).meta;
    std::vector<int64_t> inner = inner_shape(meta);
    int64_t length = inner.back();
    std::vector<int64_t> groups_shape(inner.begin(), inner.end() - 1);
    Index index{invariant_index("row")};
    for (IndexExpr& part : unflatten(unknown_index("g"), groups_shape, 1))
      index.push_back(std::move(part));
    index.push_back(unknown_index("k"));
    RowReduction reduction;
    // The element first: it may register the reductions it reads, which take the earlier names.
    reduction.element = map(value_at(source, index));
    reduction.array = fmt::format("r{}", reductions_.size());
    reduction.is_max = is_max;
    reduction.scale = scale;
    reduction.groups = product(groups_shape);
    reduction.length = length;
    reductions_.push_back(reduction);
    lanes_ = saved_lanes;
    vector_loads_ = saved_loads;
    return reduction.array;
  }

  // The reduced value at `index` of a tensor whose last dim was reduced (keepdim or not).
  std::string read_reduction(const std::string& array, int source, const Index& index) const {
    std::vector<int64_t> inner = inner_shape(graph_.value(source).meta);
    std::vector<int64_t> groups_shape(inner.begin(), inner.end() - 1);
    Index groups(index.begin() + 1, index.begin() + 1 + static_cast<long>(groups_shape.size()));
    return fmt::format("{}[{}]", array, flatten(groups, groups_shape).text);
  }

  std::string value_at(int id, const Index& index) {
    if (!in_kernel(id)) return load(id, index);
    const Node& node = producer(id);
    const std::string& op = node.op->name;
    const Attributes& a = node.attributes;
    auto arg = [&](size_t i) {
      return value_at(node.inputs[i], broadcast_index(node.inputs[i], index));
    };
    if (op == "neg") return fmt::format("(-{})", arg(0));
    if (op == "exp") return fmt::format("expf({})", arg(0));
    if (op == "log") return fmt::format("logf({})", arg(0));
    if (op == "sqrt") return fmt::format("sqrtf({})", arg(0));
    if (op == "rsqrt") return fmt::format("(1.0f / sqrtf({}))", arg(0));
    if (op == "tanh") return fmt::format("tanhf({})", arg(0));
    if (op == "sigmoid") return fmt::format("tsr_sigmoid({})", arg(0));
    if (op == "silu") return fmt::format("tsr_silu({})", arg(0));
    if (op == "gelu")
      return (a.get_string("approximate") == "tanh" ? "tsr_gelu_tanh(" : "tsr_gelu(") + arg(0) +
             ")";
    if (op == "pow_scalar") {
      double e = a.get_float("exponent");
      if (e == 2.0) return fmt::format("tsr_square({})", arg(0));
      return fmt::format("powf({}, {})", arg(0), literal(e));
    }
    if (op == "add_scalar") return fmt::format("({} + {})", arg(0), literal(a.get_float("scalar")));
    if (op == "mul_scalar") return fmt::format("({} * {})", arg(0), literal(a.get_float("scalar")));
    if (op == "add") return fmt::format("({} + {})", arg(0), arg(1));
    if (op == "sub") return fmt::format("({} - {})", arg(0), arg(1));
    if (op == "mul") return fmt::format("({} * {})", arg(0), arg(1));
    if (op == "div") return fmt::format("({} / {})", arg(0), arg(1));
    if (op == "maximum") return fmt::format("tsr_max({}, {})", arg(0), arg(1));
    if (op == "where") {
      // Both branches index the broadcast output, so their reads are valid for every lane.
      return fmt::format("({} != 0 ? {} : {})",
                         int_load(node.inputs[0], broadcast_index(node.inputs[0], index)).text,
                         arg(1), arg(2));
    }
    if (op == "cast") {
      DType to = graph_.value(id).meta.dtype;
      if (to == DType::bf16) return fmt::format("tsr_round_bf16({})", arg(0));
      if (to == DType::f16) return fmt::format("tsr_round_f16({})", arg(0));
      return arg(0);
    }
    if (op == "sum" || op == "mean" || op == "max") {
      int source = node.inputs[0];
      auto [it, inserted] = reduction_arrays_.emplace(id, "");
      if (inserted) {
        double length = static_cast<double>(graph_.value(source).meta.shape.back().constant());
        it->second = reduction(source, op == "max", op == "mean" ? 1.0 / length : 1.0,
                               [](const std::string& e) { return e; });
      }
      return read_reduction(it->second, source, index);
    }
    if (op == "softmax") {
      int source = node.inputs[0];
      auto [it, inserted] = softmax_arrays_.emplace(id, std::pair<std::string, std::string>{});
      if (inserted) {
        it->second.first = reduction(source, true, 1.0, [](const std::string& e) { return e; });
        std::string maximum = it->second.first;
        it->second.second = reduction(source, false, 1.0, [&](const std::string& e) {
          return fmt::format("expf({} - {}[g])", e, maximum);
        });
      }
      std::string x = value_at(source, index);
      return fmt::format("(expf({} - {}) / {})", x, read_reduction(it->second.first, source, index),
                         read_reduction(it->second.second, source, index));
    }
    if (op == "embedding") {
      int weight = node.inputs[0];
      int64_t width = graph_.value(weight).meta.shape[1].constant();
      IndexExpr row = int_load(node.inputs[1], Index{index[0]});
      IndexExpr offset{fmt::format("{} * {} + ({})", row.text, width, index[1].text),
                       plus(times(row.form, width), index[1].form)};
      return load_at(input_slot_.at(weight), offset);
    }
    if (op == "cat") {
      int64_t dim = a.get_int("dim");
      // A lane past an input's part of the cat reads it out of range in the branch it does not
      // take: with several inputs, no branch is read by every lane.
      int conditional = node.inputs.size() > 1 ? 1 : 0;
      conditional_depth_ += conditional;
      std::string result;
      int64_t start = 0;
      std::vector<std::string> branches;
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        int64_t size = graph_.value(node.inputs[i]).meta.shape[dim].constant();
        Index shifted = index;
        shifted[dim] = {fmt::format("({} - {})", index[dim].text, start),
                        plus(index[dim].form, constant_index(-start).form)};
        std::string value = value_at(node.inputs[i], shifted);
        branches.push_back(
            i + 1 == node.inputs.size()
                ? value
                : fmt::format("({} < {} ? {} : ", index[dim].text, start + size, value));
        start += size;
      }
      conditional_depth_ -= conditional;
      for (const std::string& b : branches) result += b;
      result += std::string(node.inputs.size() - 1, ')');
      return result;
    }
    if (op == "reshape" || op == "view" || op == "contiguous") {
      int source = node.inputs[0];
      std::vector<int64_t> out_inner = inner_shape(graph_.value(id).meta);
      std::vector<int64_t> in_inner = inner_shape(graph_.value(source).meta);
      Index source_index{index[0]};
      Index inner(index.begin() + 1, index.end());
      for (IndexExpr& part : unflatten(flatten(inner, out_inner), in_inner, lanes_))
        source_index.push_back(std::move(part));
      return value_at(source, source_index);
    }
    if (op == "slice") {
      Index source_index = index;
      int64_t dim = a.get_int("dim");
      int64_t start = a.get_int("start");
      const SymShape& shape = graph_.value(node.inputs[0]).meta.shape;
      if (start < 0) start += shape[dim].constant();
      start = std::max<int64_t>(start, 0);
      int64_t step = a.get_int("step");
      source_index[dim] = {fmt::format("({} + {} * {})", start, step, index[dim].text),
                           plus(constant_index(start).form, times(index[dim].form, step))};
      return value_at(node.inputs[0], source_index);
    }
    if (op == "transpose") {
      Index source_index = index;
      std::swap(source_index[a.get_int("dim0")], source_index[a.get_int("dim1")]);
      return value_at(node.inputs[0], source_index);
    }
    TESSERA_CHECK(false, "op {} cannot be emitted in a row kernel", op);
  }

  const Graph& graph_;
  const FusedKernel& kernel_;
  std::map<int, int> input_slot_;
  std::set<int> members_;
  std::vector<RowReduction> reductions_;
  std::map<int, std::string> reduction_arrays_;
  std::map<int, std::pair<std::string, std::string>> softmax_arrays_;
  // The vector pass (build()): lanes per group, where vector loads go, and how many cat branches
  // enclose the expression being emitted. Outside it, lanes_ is 1 and vector_loads_ null.
  int64_t lanes_ = 1;
  std::vector<RowVectorLoad>* vector_loads_ = nullptr;
  int conditional_depth_ = 0;
};

}  // namespace

RowKernelBody build_row_kernel_body(const Graph& graph, const FusedKernel& kernel) {
  return Emitter(graph, kernel).build();
}

}  // namespace tessera
