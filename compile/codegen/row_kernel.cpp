#include "compile/codegen/row_kernel.h"

#include <cmath>
#include <map>
#include <set>

#include "kernels/check.h"

namespace tessera {

const char* prelude_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return "float";
    case DType::f16: return "tsr_f16";
    case DType::bf16: return "tsr_bf16";
    case DType::i32: return "int32_t";
    case DType::i64: return "int64_t";
  }
  return "?";
}

namespace {

using Index = std::vector<std::string>;

std::string literal(double value) {
  if (std::isinf(value)) return value > 0 ? "INFINITY" : "(-INFINITY)";
  return fmt::format("{:.9g}f", value);
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
Index unflatten(const std::string& flat, const std::vector<int64_t>& shape) {
  Index index(shape.size());
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = stride == 1 ? fmt::format("(({}) % {})", flat, shape[d])
                           : fmt::format("(({}) / {} % {})", flat, stride, shape[d]);
    stride *= shape[d];
  }
  return index;
}

std::string flatten(const Index& index, const std::vector<int64_t>& shape) {
  std::string flat = "0";
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] != 1) flat = fmt::format("{} + ({}) * {}", flat, index[d], stride);
    stride *= shape[d];
  }
  return "(" + flat + ")";
}

class Emitter {
 public:
  Emitter(const Graph& graph, const FusedKernel& kernel) : graph_(graph), kernel_(kernel) {
    for (size_t i = 0; i < kernel.inputs.size(); ++i) input_slot_[kernel.inputs[i]] = static_cast<int>(i);
    for (int n : kernel.nodes) members_.insert(n);
  }

  RowKernelBody build() {
    RowKernelBody body;
    for (int id : kernel_.inputs) body.input_dtypes.push_back(graph_.value(id).meta.dtype);
    for (int id : kernel_.outputs) {
      const TensorMeta& meta = graph_.value(id).meta;
      std::vector<int64_t> inner = inner_shape(meta);
      Index index{"row"};
      for (const std::string& part : unflatten("i", inner)) index.push_back(part);
      RowOutput output;
      output.value = id;
      output.dtype = meta.dtype;
      output.row_elements = product(inner);
      output.element = value_at(id, index);
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

  // Index of input value `id` (rank r) when read at `out_index` of a broadcast result: trailing
  // dims aligned, size-1 dims read at 0.
  Index broadcast_index(int id, const Index& out_index) const {
    const SymShape& shape = graph_.value(id).meta.shape;
    Index index;
    size_t lead = out_index.size() - shape.size();
    for (size_t d = 0; d < shape.size(); ++d) {
      bool one = shape[d].is_constant() && shape[d].constant() == 1;
      index.push_back(one ? "0" : out_index[lead + d]);
    }
    return index;
  }

  // Element offset of `index` in the contiguous input `id`.
  std::string offset_of(int id, const Index& index) const {
    const TensorMeta& meta = graph_.value(id).meta;
    std::string offset = "0";
    int64_t stride = 1;
    for (size_t d = meta.shape.size(); d-- > 0;) {
      if (d == 0) {
        offset = fmt::format("{} + ({}) * {}", offset, index[0], stride);
      } else {
        int64_t size = meta.shape[d].constant();
        if (size != 1) offset = fmt::format("{} + ({}) * {}", offset, index[d], stride);
        stride *= size;
      }
    }
    return offset;
  }

  std::string load(int id, const Index& index) const {
    return fmt::format("tsr_ld(in{}, {})", input_slot_.at(id), offset_of(id, index));
  }

  std::string int_load(int id, const Index& index) const {
    TESSERA_CHECK(input_slot_.count(id), "integer value {} must be a kernel input", id);
    return fmt::format("((int64_t)in{}[{}])", input_slot_.at(id), offset_of(id, index));
  }

  // Registers a reduction of `source` over its last dim; returns the per-row array's name.
  std::string reduction(int source, bool is_max, double scale, const std::function<std::string(const std::string&)>& map) {
    const TensorMeta& meta = graph_.value(source).meta;
    std::vector<int64_t> inner = inner_shape(meta);
    int64_t length = inner.back();
    std::vector<int64_t> groups_shape(inner.begin(), inner.end() - 1);
    Index index{"row"};
    for (const std::string& part : unflatten("g", groups_shape)) index.push_back(part);
    index.push_back("k");
    RowReduction reduction;
    reduction.array = fmt::format("r{}", reductions_.size());
    reduction.is_max = is_max;
    reduction.scale = scale;
    reduction.groups = product(groups_shape);
    reduction.length = length;
    reduction.element = map(value_at(source, index));
    reductions_.push_back(reduction);
    return reduction.array;
  }

  // The reduced value at `index` of a tensor whose last dim was reduced (keepdim or not).
  std::string read_reduction(const std::string& array, int source, const Index& index) const {
    std::vector<int64_t> inner = inner_shape(graph_.value(source).meta);
    std::vector<int64_t> groups_shape(inner.begin(), inner.end() - 1);
    Index groups(index.begin() + 1, index.begin() + 1 + static_cast<long>(groups_shape.size()));
    return fmt::format("{}[{}]", array, flatten(groups, groups_shape));
  }

  std::string value_at(int id, const Index& index) {
    if (!in_kernel(id)) return load(id, index);
    const Node& node = producer(id);
    const std::string& op = node.op->name;
    const Attributes& a = node.attributes;
    auto arg = [&](size_t i) { return value_at(node.inputs[i], broadcast_index(node.inputs[i], index)); };
    if (op == "neg") return fmt::format("(-{})", arg(0));
    if (op == "exp") return fmt::format("expf({})", arg(0));
    if (op == "log") return fmt::format("logf({})", arg(0));
    if (op == "sqrt") return fmt::format("sqrtf({})", arg(0));
    if (op == "rsqrt") return fmt::format("(1.0f / sqrtf({}))", arg(0));
    if (op == "tanh") return fmt::format("tanhf({})", arg(0));
    if (op == "sigmoid") return fmt::format("tsr_sigmoid({})", arg(0));
    if (op == "silu") return fmt::format("tsr_silu({})", arg(0));
    if (op == "gelu")
      return (a.get_string("approximate") == "tanh" ? "tsr_gelu_tanh(" : "tsr_gelu(") + arg(0) + ")";
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
      return fmt::format("({} != 0 ? {} : {})", int_load(node.inputs[0], broadcast_index(node.inputs[0], index)),
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
      std::string row = int_load(node.inputs[1], Index{index[0]});
      return fmt::format("tsr_ld(in{}, {} * {} + ({}))", input_slot_.at(weight), row, width, index[1]);
    }
    if (op == "cat") {
      int64_t dim = a.get_int("dim");
      std::string result;
      int64_t start = 0;
      std::vector<std::string> branches;
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        int64_t size = graph_.value(node.inputs[i]).meta.shape[dim].constant();
        Index shifted = index;
        shifted[dim] = fmt::format("({} - {})", index[dim], start);
        std::string value = value_at(node.inputs[i], shifted);
        branches.push_back(i + 1 == node.inputs.size() ? value
                                                       : fmt::format("({} < {} ? {} : ", index[dim], start + size, value));
        start += size;
      }
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
      for (const std::string& part : unflatten(flatten(inner, out_inner), in_inner)) source_index.push_back(part);
      return value_at(source, source_index);
    }
    if (op == "slice") {
      Index source_index = index;
      int64_t dim = a.get_int("dim");
      int64_t start = a.get_int("start");
      const SymInt& size = graph_.value(node.inputs[0]).meta.shape[dim];
      if (start < 0) start += size.constant();
      source_index[dim] = fmt::format("({} + {} * {})", std::max<int64_t>(start, 0), a.get_int("step"), index[dim]);
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
};

}  // namespace

RowKernelBody build_row_kernel_body(const Graph& graph, const FusedKernel& kernel) {
  return Emitter(graph, kernel).build();
}

}  // namespace tessera
