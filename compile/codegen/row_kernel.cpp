#include "compile/codegen/row_kernel.h"

#include <functional>
#include <map>
#include <set>
#include <utility>

#include "compile/codegen/row_lowering.h"
#include "runtime/check.h"

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
    default:
      break;  // quantized: never a row kernel's operand (the lowerings refuse them)
  }
  return "?";
}

namespace {

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

  // The element of value `id` at `index`: a load of a kernel input, or the expression its
  // producer's row lowering emits.
  std::string value_at(int id, const Index& index) {
    if (!in_kernel(id)) return load(id, index);
    const Node& node = producer(id);
    const RowLowering& lowering = node.op->row_lowering;
    TESSERA_CHECK(static_cast<bool>(lowering.emit), "op {} cannot be emitted in a row kernel",
                  node.op->name);
    NodeEmitter emitter(*this, node, id, index);
    return lowering.emit(emitter);
  }

  // RowEmitter for one node's output at one index.
  class NodeEmitter final : public RowEmitter {
   public:
    NodeEmitter(Emitter& emitter, const Node& node, int output, const Index& index)
        : emitter_(emitter), node_(node), output_(output), index_(index) {}

    size_t num_inputs() const override { return node_.inputs.size(); }
    const TensorMeta& input_meta(size_t input) const override {
      return emitter_.graph_.value(node_.inputs[input]).meta;
    }
    const TensorMeta& output_meta() const override { return emitter_.graph_.value(output_).meta; }
    const Attributes& attributes() const override { return node_.attributes; }
    const Index& index() const override { return index_; }
    int64_t lanes() const override { return emitter_.lanes_; }
    std::string value(size_t input, const Index& index) override {
      return emitter_.value_at(node_.inputs[input], index);
    }
    IndexExpr integer(size_t input, const Index& index) override {
      return emitter_.int_load(node_.inputs[input], index);
    }
    std::string load(size_t input, const IndexExpr& offset) override {
      return emitter_.load_at(emitter_.input_slot_.at(node_.inputs[input]), offset);
    }
    std::string reduction(int tag, size_t input, bool is_max, double scale,
                          const std::function<std::string(const std::string&)>& map) override {
      auto [it, inserted] = emitter_.reduction_arrays_.emplace(std::pair{output_, tag}, "");
      if (inserted) it->second = emitter_.reduction(node_.inputs[input], is_max, scale, map);
      return it->second;
    }
    std::string read_reduction(const std::string& array, size_t input,
                               const Index& index) override {
      return emitter_.read_reduction(array, node_.inputs[input], index);
    }
    void begin_branches() override { ++emitter_.conditional_depth_; }
    void end_branches() override { --emitter_.conditional_depth_; }

   private:
    Emitter& emitter_;
    const Node& node_;
    int output_;
    const Index& index_;
  };

  const Graph& graph_;
  const FusedKernel& kernel_;
  std::map<int, int> input_slot_;
  std::set<int> members_;
  std::vector<RowReduction> reductions_;
  // Per (node output, tag): the reductions its lowering registered, shared by both passes.
  std::map<std::pair<int, int>, std::string> reduction_arrays_;
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
