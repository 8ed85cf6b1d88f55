#include "support/op_samples.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <limits>

namespace tessera::test {
namespace {

using Shape = std::vector<int64_t>;
using Inputs = std::vector<InputSpec>;

constexpr DType f32 = DType::f32;
constexpr DType f16 = DType::f16;
constexpr DType bf16 = DType::bf16;
constexpr DType i32 = DType::i32;
constexpr DType i64 = DType::i64;

// Sizes that exercise scalar-like tensors, odd lengths, vector tails (4097 = 4096 + 1) and
// several rows of a long last dim.
const std::vector<Shape>& pointwise_shapes() {
  static const std::vector<Shape> shapes = {{1}, {7}, {3, 5}, {4097}, {2, 3, 4097}};
  return shapes;
}
const std::vector<Shape>& row_shapes() {
  static const std::vector<Shape> shapes = {{1},    {7},          {3, 5},     {5, 1},
                                            {4097}, {2, 3, 4097}, {1031, 67}, {2, 32000}};
  return shapes;
}

InputSpec spec(Shape shape, DType dtype, ValueKind kind = ValueKind::general,
               Layout layout = Layout::contiguous) {
  InputSpec input;
  input.shape = std::move(shape);
  input.dtype = dtype;
  input.kind = kind;
  input.layout = layout;
  return input;
}

InputSpec ids(Shape shape, DType dtype, int64_t limit) {
  InputSpec input = spec(std::move(shape), dtype, ValueKind::ids);
  input.id_limit = limit;
  return input;
}

// Rounding error of a long accumulation grows with its length.
double accumulation_scale(int64_t length) {
  return length >= 1024 ? 4.0 : 1.0;
}

class SampleTable {
 public:
  SampleTable() {
    add_unary_ops();
    add_binary_ops();
    add_where();
    add_casts();
    add_reductions();
    add_softmax();
    add_matmul();
    add_linear();
    add_fp8_linear();
    add_embedding();
    add_view_and_reshape();
    add_slice();
    add_transpose();
    add_contiguous();
    add_cat();
    add_norms();
    add_gated_activations();
    add_gated_linear();
    add_rotary_embedding();
    add_mixture_of_experts();
  }

  const std::map<std::string, std::vector<OpSample>>& samples() const { return samples_; }

 private:
  void add(const std::string& op, Inputs inputs, Attributes attributes = {},
           double tolerance_scale = 1.0) {
    OpSample sample;
    sample.op = op;
    sample.inputs = std::move(inputs);
    sample.attributes = std::move(attributes);
    sample.tolerance_scale = tolerance_scale;
    samples_[op].push_back(std::move(sample));
  }

  struct UnaryVariant {
    std::string op;
    ValueKind kind;
    Attributes attributes;
  };

  void add_unary_ops() {
    const std::vector<UnaryVariant> variants = {
        {"neg", ValueKind::general, {}},
        {"exp", ValueKind::general, {}},
        {"log", ValueKind::positive, {}},
        {"sqrt", ValueKind::positive, {}},
        {"rsqrt", ValueKind::positive, {}},
        {"tanh", ValueKind::general, {}},
        {"sigmoid", ValueKind::general, {}},
        {"silu", ValueKind::general, {}},
        {"gelu", ValueKind::general, {{"approximate", std::string("none")}}},
        {"gelu", ValueKind::general, {{"approximate", std::string("tanh")}}},
        {"pow_scalar", ValueKind::general, {{"exponent", 2.0}}},
        {"pow_scalar", ValueKind::general, {{"exponent", 3.0}}},
        {"pow_scalar", ValueKind::positive, {{"exponent", 0.5}}},
        {"pow_scalar", ValueKind::positive, {{"exponent", -1.5}}},
        {"add_scalar", ValueKind::general, {{"scalar", 0.75}}},
        {"mul_scalar", ValueKind::general, {{"scalar", -1.25}}},
        {"softcap", ValueKind::general, {{"cap", 1.5}}},
        {"softcap", ValueKind::large, {{"cap", 30.0}}},
    };
    for (const UnaryVariant& variant : variants) {
      for (DType dtype : kFloatDTypes)
        for (const Shape& shape : pointwise_shapes())
          add(variant.op, {spec(shape, dtype, variant.kind)}, variant.attributes);
      // Pointwise kernels read any strides: a transposed, a stepped and a stride-0 input.
      add(variant.op, {spec({3, 5}, f32, variant.kind, Layout::transposed)}, variant.attributes);
      add(variant.op, {spec({3, 7}, f16, variant.kind, Layout::step_slice)}, variant.attributes);
      add(variant.op, {spec({4, 5}, bf16, variant.kind, Layout::broadcast_rows)},
          variant.attributes);
    }
    // About a million elements: many blocks on a GPU.
    add("exp", {spec({517, 2053}, f32)});
    add("silu", {spec({517, 2053}, bf16)});
    // Saturating activations far out in their tails (a naive exp(x)/(1+exp(x)) gives NaN).
    for (const std::string op : {"tanh", "sigmoid", "silu"})
      for (DType dtype : kFloatDTypes) add(op, {spec({3, 33}, dtype, ValueKind::large)});
    for (const std::string approximate : {"none", "tanh"})
      for (DType dtype : kFloatDTypes)
        add("gelu", {spec({3, 33}, dtype, ValueKind::large)}, {{"approximate", approximate}});
    // Default attribute: gelu without "approximate" is the erf form.
    add("gelu", {spec({3, 5}, f32)});
    for (DType dtype : {i32, i64}) {
      for (const Shape& shape : pointwise_shapes()) add("neg", {spec(shape, dtype)});
      add("neg", {spec({3, 5}, dtype, ValueKind::general, Layout::transposed)});
    }
  }

  void add_binary_ops() {
    const std::vector<std::pair<Shape, Shape>> shape_pairs = {
        {{1}, {1}},          {{7}, {7}},       {{3, 5}, {3, 5}},
        {{3, 1}, {1, 4}},    {{5, 4}, {4}},    {{2, 3, 4}, {3, 1}},
        {{1}, {3, 5}},       {{4097}, {4097}}, {{2, 3, 4097}, {4097}},
        {{2, 1, 7}, {3, 1}},
    };
    const std::vector<std::pair<Shape, Shape>> int_shape_pairs = {
        {{7}, {7}}, {{3, 1}, {1, 4}}, {{5, 4}, {4}}, {{4097}, {4097}}};
    for (const std::string op : {"add", "sub", "mul", "div", "maximum"}) {
      ValueKind b_kind = op == "div" ? ValueKind::away_from_zero : ValueKind::general;
      for (DType dtype : kFloatDTypes) {
        for (const auto& [a_shape, b_shape] : shape_pairs)
          add(op, {spec(a_shape, dtype), spec(b_shape, dtype, b_kind)});
        // Strided operands: transposed with stepped, stride-0 rows with contiguous.
        add(op, {spec({3, 5}, dtype, ValueKind::general, Layout::transposed),
                 spec({3, 5}, dtype, b_kind, Layout::step_slice)});
        add(op, {spec({4, 6}, dtype, ValueKind::general, Layout::broadcast_rows),
                 spec({4, 6}, dtype, b_kind)});
      }
      if (op == "div") continue;
      for (DType dtype : {i32, i64}) {
        for (const auto& [a_shape, b_shape] : int_shape_pairs)
          add(op, {spec(a_shape, dtype), spec(b_shape, dtype)});
        add(op, {spec({3, 5}, dtype, ValueKind::general, Layout::transposed),
                 spec({3, 5}, dtype, ValueKind::general, Layout::step_slice)});
      }
    }
    // About a million elements, one operand broadcast along rows.
    add("add", {spec({517, 2053}, f32), spec({2053}, f32)});
    add("mul", {spec({517, 2053}, bf16), spec({517, 1}, bf16)});
    // Equal operands in many places: maximum must return that value exactly.
    for (DType dtype : kFloatDTypes)
      add("maximum",
          {spec({5, 33}, dtype, ValueKind::ties), spec({5, 33}, dtype, ValueKind::ties)});
  }

  void add_where() {
    // Selecting moves values of any dtype.
    for (DType dtype : {i32, i64}) {
      add("where",
          {spec({3, 5}, i64, ValueKind::condition), spec({3, 5}, dtype), spec({1, 5}, dtype)});
    }
    for (DType dtype : kFloatDTypes) {
      for (DType condition_dtype : {i32, i64}) {
        add("where", {spec({3, 5}, condition_dtype, ValueKind::condition), spec({3, 5}, dtype),
                      spec({3, 5}, dtype)});
        add("where", {spec({4097}, condition_dtype, ValueKind::condition), spec({4097}, dtype),
                      spec({4097}, dtype)});
      }
      add("where",
          {spec({3, 1}, i32, ValueKind::condition), spec({1, 4}, dtype), spec({3, 4}, dtype)});
      add("where",
          {spec({4}, i64, ValueKind::condition), spec({2, 3, 4}, dtype), spec({1}, dtype)});
      add("where", {spec({2, 3, 4097}, i32, ValueKind::condition), spec({4097}, dtype),
                    spec({2, 3, 4097}, dtype)});
      add("where", {spec({1}, i64, ValueKind::condition), spec({7}, dtype), spec({7}, dtype)});
      add("where", {spec({3, 5}, i32, ValueKind::condition, Layout::transposed),
                    spec({3, 5}, dtype, ValueKind::general, Layout::step_slice),
                    spec({3, 5}, dtype, ValueKind::general, Layout::broadcast_rows)});
    }
  }

  void add_casts() {
    for (DType from : kAllDTypes) {
      for (DType to : kAllDTypes) {
        Attributes attributes{{"dtype", to}};
        add("cast", {spec({7}, from, ValueKind::wide)}, attributes);
        add("cast", {spec({4097}, from, ValueKind::wide)}, attributes);
        add("cast", {spec({3, 5}, from, ValueKind::wide, Layout::transposed)}, attributes);
      }
      // Truncation toward zero of small negative and positive fractions.
      add("cast", {spec({3, 33}, from, ValueKind::general)}, {{"dtype", i32}});
      add("cast", {spec({3, 7}, from, ValueKind::general, Layout::step_slice)}, {{"dtype", i64}});
    }
  }

  void add_reductions() {
    for (const std::string op : {"sum", "mean", "max", "argmax"}) {
      for (DType dtype : kFloatDTypes) {
        for (const Shape& shape : row_shapes())
          add(op, {spec(shape, dtype)}, {}, accumulation_scale(shape.back()));
        for (bool keepdim : {false, true}) {
          add(op, {spec({3, 5}, dtype)}, {{"keepdim", keepdim}});
          add(op, {spec({2, 3, 4097}, dtype)}, {{"keepdim", keepdim}}, accumulation_scale(4097));
        }
        // Not a strided-input op: the dispatcher must hand the kernel a contiguous copy.
        add(op, {spec({4, 9}, dtype, ValueKind::general, Layout::transposed)});
      }
    }
    // Ties: max returns the value, argmax the first index holding it.
    for (const std::string op : {"max", "argmax"}) {
      for (DType dtype : kFloatDTypes) {
        add(op, {spec({6, 33}, dtype, ValueKind::ties)});
        add(op, {spec({2, 4097}, dtype, ValueKind::ties)});
        // Few vocabulary-sized rows, which a GPU splits into chunks
        // (kernels/cuda/pointwise/reduce.cu): the maximum's ties fall in different chunks; odd
        // widths leave rows unaligned; on 132 SMs 1 row takes 32 chunks, 40 rows 3 of 3008 columns
        // (the last one short), 130 rows none.
        add(op, {spec({1, 128256}, dtype, ValueKind::ties)});
        add(op, {spec({1, 128256}, dtype)});
        add(op, {spec({3, 50001}, dtype, ValueKind::ties)});
        add(op, {spec({40, 9000}, dtype)});
        add(op, {spec({130, 9000}, dtype)});
      }
    }
  }

  void add_softmax() {
    for (DType dtype : kFloatDTypes) {
      for (const Shape& shape : pointwise_shapes())
        add("softmax", {spec(shape, dtype)}, {}, accumulation_scale(shape.back()));
      // exp(100) overflows f32 without the max subtraction.
      add("softmax", {spec({3, 33}, dtype, ValueKind::large)});
      add("softmax", {spec({5, 9}, dtype, ValueKind::general, Layout::transposed)});
      // Many short rows (many blocks) and vocabulary-sized rows.
      add("softmax", {spec({1031, 67}, dtype)});
      add("softmax", {spec({2, 32000}, dtype)}, {}, accumulation_scale(32000));
    }
  }

  void add_matmul() {
    struct Case {
      Shape a;
      Shape b;
      Layout a_layout = Layout::contiguous;
    };
    const std::vector<Case> cases = {
        {{1, 1}, {1, 1}},
        {{1, 7}, {7, 5}},
        {{3, 7}, {7, 4}},
        {{17, 33}, {33, 65}},
        {{2, 4097}, {4097, 3}},
        {{1, 4097}, {4097, 1}},
        {{2, 3, 7}, {7, 5}},
        {{2, 3, 7}, {2, 7, 5}},
        {{2, 2, 3, 5}, {2, 2, 5, 4}},
        {{33, 257}, {257, 129}},
        {{3, 7}, {7, 4}, Layout::transposed},
    };
    for (DType dtype : kFloatDTypes)
      for (const Case& c : cases)
        add("matmul", {spec(c.a, dtype, ValueKind::general, c.a_layout), spec(c.b, dtype)}, {},
            accumulation_scale(c.a.back()));
  }

  void add_linear() {
    struct Case {
      Shape x;
      Shape weight;
      bool bias;
    };
    const std::vector<Case> cases = {
        {{7}, {5, 7}, true},
        {{3, 7}, {5, 7}, true},
        {{3, 7}, {5, 7}, false},
        {{1, 1}, {1, 1}, true},
        {{2, 3, 16}, {33, 16}, true},
        {{2, 3, 4097}, {3, 4097}, true},
        {{1, 4097}, {65, 4097}, false},
        {{9, 512}, {1000, 512}, true},
    };
    for (DType dtype : kFloatDTypes) {
      for (const Case& c : cases) {
        Inputs inputs = {spec(c.x, dtype), spec(c.weight, dtype)};
        if (c.bias) inputs.push_back(spec({c.weight[0]}, dtype));
        add("linear", inputs, {}, accumulation_scale(c.x.back()));
      }
      add("linear",
          {spec({4, 6}, dtype, ValueKind::general, Layout::transposed),
           spec({5, 6}, dtype, ValueKind::general, Layout::step_slice), spec({5}, dtype)});
    }
  }

  // x in every float dtype; e4m3 weights with scales per channel and per 128x128 block (partial
  // blocks at the edges; sizes multiples of 16, as GPUs need); x scaled per token, per token and
  // 128 columns, or by a fixed scale; rows for a GPU's gemv (up to 16) and for its library GEMM
  // (33 and 40: padded to multiples of 4).
  void add_fp8_linear() {
    struct Case {
      Shape x;
      Shape weight;
      bool block_scaled;
      std::string activation;
    };
    const std::vector<Case> cases = {
        {{3, 208}, {304, 208}, true, "group"},  {{1, 256}, {384, 256}, true, "group"},
        {{9, 384}, {272, 384}, true, "group"},  {{2, 3, 256}, {64, 256}, true, "token"},
        {{33, 512}, {128, 512}, true, "token"}, {{33, 384}, {256, 384}, true, "group"},
        {{5, 96}, {48, 96}, false, "token"},    {{1, 4096}, {64, 4096}, false, "token"},
        {{12, 160}, {80, 160}, false, "token"}, {{4, 144}, {128, 144}, false, "fixed"},
        {{40, 256}, {256, 256}, true, "fixed"}};
    for (DType dtype : kFloatDTypes) {
      for (const Case& c : cases) {
        const Shape scale = c.block_scaled
                                ? Shape{(c.weight[0] + 127) / 128, (c.weight[1] + 127) / 128}
                                : Shape{c.weight[0]};
        Inputs inputs = {spec(c.x, dtype), spec(c.weight, DType::f8_e4m3),
                         spec(scale, f32, ValueKind::positive)};
        if (c.activation == "fixed") inputs.push_back(spec({1}, f32, ValueKind::positive));
        add("fp8_linear", inputs, {{"activation", c.activation}}, accumulation_scale(c.x.back()));
      }
    }
  }

  void add_embedding() {
    for (DType dtype : kFloatDTypes) {
      for (DType id_dtype : {i32, i64}) {
        add("embedding", {spec({11, 7}, dtype), ids({5}, id_dtype, 11)});
        add("embedding", {spec({11, 7}, dtype), ids({2, 3}, id_dtype, 11)});
      }
      add("embedding", {spec({1, 1}, dtype), ids({1}, i64, 1)});
      add("embedding", {spec({3, 4097}, dtype), ids({4}, i32, 3)});
      add("embedding", {spec({300, 33}, dtype), ids({2, 65}, i64, 300)});
      // A shard of rows [4, 11) of an 11-row table: ids below and above it give zero rows.
      add("embedding", {spec({7, 5}, dtype), ids({9}, i32, 11)}, {{"vocab_start", int64_t{4}}});
    }
  }

  void add_view_and_reshape() {
    for (const std::string op : {"view", "reshape"}) {
      add(op, {spec({3, 5}, f32)}, {{"shape", Shape{5, 3}}});
      add(op, {spec({3, 5}, f16)}, {{"shape", Shape{15}}});
      add(op, {spec({3, 5}, bf16)}, {{"shape", Shape{-1, 5}}});
      add(op, {spec({2, 3, 4097}, f32)}, {{"shape", Shape{6, -1}}});
      add(op, {spec({1}, f32)}, {{"shape", Shape{1, 1}}});
      add(op, {spec({7}, i32)}, {{"shape", Shape{7, 1}}});
      add(op, {spec({2, 6}, i64)}, {{"shape", Shape{3, 2, 2}}});
    }
    // Inputs a view cannot express: reshape copies.
    add("reshape", {spec({3, 5}, f32, ValueKind::general, Layout::transposed)},
        {{"shape", Shape{15}}});
    add("reshape", {spec({3, 7}, bf16, ValueKind::general, Layout::step_slice)},
        {{"shape", Shape{-1}}});
    add("reshape", {spec({4, 5}, f16, ValueKind::general, Layout::broadcast_rows)},
        {{"shape", Shape{2, 10}}});
  }

  void add_slice() {
    auto slice_attributes = [](int64_t dim, int64_t start, int64_t end, int64_t step) {
      return Attributes{{"dim", dim}, {"start", start}, {"end", end}, {"step", step}};
    };
    constexpr int64_t kLast = std::numeric_limits<int64_t>::max();
    add("slice", {spec({7}, f32)}, slice_attributes(0, 1, 6, 2));
    add("slice", {spec({3, 9}, f32)}, slice_attributes(1, -5, -1, 1));
    add("slice", {spec({3, 9}, f16)}, slice_attributes(-1, 2, 100, 3));   // end clamps
    add("slice", {spec({3, 9}, bf16)}, slice_attributes(1, -100, 4, 1));  // start clamps
    add("slice", {spec({4, 5}, i32)}, slice_attributes(0, 1, 3, 1));
    add("slice", {spec({4, 5}, i64)}, slice_attributes(-2, 1, kLast, 2));
    add("slice", {spec({2, 3, 4097}, f32)}, slice_attributes(2, 4000, 4097, 1));
    add("slice", {spec({2, 3, 4097}, f32)}, slice_attributes(2, 0, 4097, 4096));
    add("slice", {spec({3, 9}, f32)}, slice_attributes(1, 5, 2, 1));  // empty
    add("slice", {spec({3, 9}, f32, ValueKind::general, Layout::transposed)},
        slice_attributes(0, 1, 3, 1));
    // Default step: 1.
    add("slice", {spec({3, 9}, f32)},
        {{"dim", int64_t{1}}, {"start", int64_t{4}}, {"end", int64_t{9}}});
  }

  void add_transpose() {
    auto dims = [](int64_t dim0, int64_t dim1) {
      return Attributes{{"dim0", dim0}, {"dim1", dim1}};
    };
    add("transpose", {spec({3, 5}, f32)}, dims(0, 1));
    add("transpose", {spec({2, 3, 4}, f16)}, dims(0, 2));
    add("transpose", {spec({2, 3, 4}, bf16)}, dims(-1, -2));
    add("transpose", {spec({7}, i32)}, dims(0, 0));
    add("transpose", {spec({2, 3, 4097}, f32)}, dims(1, 2));
    add("transpose", {spec({3, 5}, i64, ValueKind::general, Layout::step_slice)}, dims(0, 1));
  }

  void add_contiguous() {
    for (DType dtype : kAllDTypes) {
      add("contiguous", {spec({3, 5}, dtype)});
      add("contiguous", {spec({3, 5}, dtype, ValueKind::general, Layout::transposed)});
      add("contiguous", {spec({3, 7}, dtype, ValueKind::general, Layout::step_slice)});
      add("contiguous", {spec({4, 5}, dtype, ValueKind::general, Layout::broadcast_rows)});
    }
    add("contiguous", {spec({2, 3, 4097}, f32, ValueKind::general, Layout::transposed)});
    add("contiguous", {spec({1}, f32)});
  }

  void add_cat() {
    auto at = [](int64_t dim) { return Attributes{{"dim", dim}}; };
    for (DType dtype : kAllDTypes) {
      add("cat", {spec({3, 5}, dtype), spec({2, 5}, dtype)}, at(0));
      add("cat", {spec({3, 2}, dtype), spec({3, 7}, dtype), spec({3, 1}, dtype)}, at(1));
    }
    add("cat", {spec({2, 3, 4}, f32), spec({2, 3, 4097}, f32)}, at(-1));
    add("cat", {spec({2, 3, 4}, bf16), spec({2, 1, 4}, bf16)}, at(1));
    add("cat", {spec({7}, f16)}, at(0));
    add("cat", {spec({1}, f32), spec({1}, f32)}, at(0));
    add("cat",
        {spec({3, 5}, f32, ValueKind::general, Layout::transposed),
         spec({2, 5}, f32, ValueKind::general, Layout::step_slice)},
        at(0));
  }

  void add_norms() {
    const std::vector<Shape> shapes = {{1},          {7},       {1, 1},    {3, 5},
                                       {2, 3, 4097}, {4, 1024}, {1031, 67}};
    for (DType dtype : kFloatDTypes) {
      for (const Shape& shape : shapes) {
        Shape weight = {shape.back()};
        add("rms_norm", {spec(shape, dtype), spec(weight, dtype)}, {{"eps", 1e-6}});
        add("fused_add_rms_norm", {spec(shape, dtype), spec(shape, dtype), spec(weight, dtype)},
            {{"eps", 1e-6}});
      }
      // A large eps must show in the result; the default eps must be used when none is given.
      add("rms_norm", {spec({3, 33}, dtype), spec({33}, dtype)}, {{"eps", 0.5}});
      add("fused_add_rms_norm", {spec({3, 33}, dtype), spec({3, 33}, dtype), spec({33}, dtype)},
          {{"eps", 0.5}});
      add("rms_norm", {spec({3, 33}, dtype), spec({33}, dtype)});
      add("rms_norm", {spec({5, 9}, dtype, ValueKind::general, Layout::transposed),
                       spec({9}, dtype, ValueKind::general, Layout::step_slice)});
      add("fused_add_rms_norm",
          {spec({5, 9}, dtype, ValueKind::general, Layout::transposed),
           spec({5, 9}, dtype, ValueKind::general, Layout::broadcast_rows), spec({9}, dtype)});
    }
  }

  void add_gated_activations() {
    const std::vector<Shape> shapes = {{2}, {1, 2}, {14}, {3, 14}, {2, 3, 8194}};
    for (DType dtype : kFloatDTypes) {
      for (const Shape& shape : shapes) {
        add("silu_and_mul", {spec(shape, dtype)});
        add("gelu_and_mul", {spec(shape, dtype)}, {{"approximate", std::string("none")}});
        add("gelu_and_mul", {spec(shape, dtype)}, {{"approximate", std::string("tanh")}});
      }
      add("silu_and_mul", {spec({4, 6}, dtype, ValueKind::general, Layout::transposed)});
      add("gelu_and_mul", {spec({4, 6}, dtype, ValueKind::general, Layout::step_slice)});
      add("silu_and_mul", {spec({3, 66}, dtype, ValueKind::large)});
    }
    add("gelu_and_mul", {spec({3, 14}, f32)});  // default: erf form
  }

  // Routing (top 1 to all experts, renormalized and not) and the experts' MLPs over it: one
  // token (decode), experts that get no token, hidden sizes past a 16-byte pack.
  void add_mixture_of_experts() {
    struct Routing {
      Shape logits;
      int64_t top_k;
      bool renormalize;
    };
    const std::vector<Routing> routings = {{{5, 8}, 2, true},
                                           {{5, 8}, 2, false},
                                           {{1, 4}, 1, false},
                                           {{7, 16}, 4, true},
                                           {{3, 3}, 3, false}};
    // local_experts > 0: one rank's under expert parallelism, from first_expert on.
    struct Experts {
      int64_t tokens, hidden, experts, intermediate, top_k;
      bool renormalize;
      int64_t local_experts = 0, first_expert = 0;
    };
    const std::vector<Experts> experts = {
        {5, 16, 4, 6, 2, true},   {1, 8, 8, 4, 2, false},       {9, 40, 6, 24, 3, true},
        {2, 12, 16, 8, 1, false}, {7, 16, 8, 6, 2, true, 2, 2}, {4, 8, 8, 4, 3, false, 4, 4}};
    for (DType dtype : kFloatDTypes) {
      for (const Routing& r : routings)
        add("moe_routing", {spec(r.logits, dtype)},
            {{"top_k", r.top_k}, {"renormalize", r.renormalize}});
      for (const Experts& e : experts) {
        const int64_t local = e.local_experts > 0 ? e.local_experts : e.experts;
        add("fused_moe",
            {spec({e.tokens, e.hidden}, dtype), spec({e.tokens, e.experts}, dtype),
             spec({local, 2 * e.intermediate, e.hidden}, dtype),
             spec({local, e.hidden, e.intermediate}, dtype)},
            {{"top_k", e.top_k}, {"renormalize", e.renormalize}, {"first_expert", e.first_expert}});
      }
    }
  }

  // The fused gated MLP down projection (what the linear-prologue pass makes): k a multiple of
  // the GPU's 16-byte pack, and not; one row (decode), a few, and more than a skinny kernel takes.
  void add_gated_linear() {
    struct Case {
      Shape x;
      Shape weight;
      bool bias;
    };
    const std::vector<Case> cases = {
        {{3, 14}, {5, 7}, true},      {{1, 16}, {33, 8}, false},
        {{2, 3, 64}, {9, 32}, true},  {{5, 2048}, {40, 1024}, false},
        {{300, 64}, {17, 32}, false}, {{1, 8192}, {24, 4096}, false},
    };
    for (DType dtype : kFloatDTypes) {
      for (const Case& c : cases) {
        Inputs inputs = {spec(c.x, dtype), spec(c.weight, dtype)};
        if (c.bias) inputs.push_back(spec({c.weight[0]}, dtype));
        add("silu_and_mul_linear", inputs, {}, accumulation_scale(c.weight[1]));
        add("gelu_and_mul_linear", inputs, {{"approximate", std::string("tanh")}},
            accumulation_scale(c.weight[1]));
      }
    }
  }

  void add_rotary_embedding() {
    struct Case {
      int64_t tokens;
      int64_t query_heads;
      int64_t key_heads;
      int64_t head_size;
      int64_t rot_dim;
      int64_t max_position;
    };
    const std::vector<Case> cases = {
        {1, 2, 1, 8, 8, 16},   // one token
        {7, 4, 2, 16, 8, 32},  // partial rotary: dims past rot_dim pass through
        {5, 3, 3, 64, 64, 4097},
        {33, 8, 2, 32, 32, 64},
    };
    for (DType dtype : kFloatDTypes) {
      for (const Case& c : cases) {
        for (bool is_neox : {true, false}) {
          DType id_dtype = is_neox ? i64 : i32;
          add("rotary_embedding",
              {ids({c.tokens}, id_dtype, c.max_position),
               spec({c.tokens, c.query_heads * c.head_size}, dtype),
               spec({c.tokens, c.key_heads * c.head_size}, dtype),
               spec({c.max_position, c.rot_dim}, dtype, ValueKind::unit)},
              {{"head_size", c.head_size}, {"is_neox", is_neox}});
        }
      }
    }
    // A float32 cache with reduced-precision query and key.
    for (DType dtype : {f16, bf16})
      add("rotary_embedding",
          {ids({6}, i64, 20), spec({6, 32}, dtype), spec({6, 16}, dtype),
           spec({20, 16}, f32, ValueKind::unit)},
          {{"head_size", int64_t{16}}, {"is_neox", true}});
    // Default style: neox.
    add("rotary_embedding",
        {ids({4}, i64, 8), spec({4, 16}, f32), spec({4, 8}, f32),
         spec({8, 8}, f32, ValueKind::unit)},
        {{"head_size", int64_t{8}}});
  }

  std::map<std::string, std::vector<OpSample>> samples_;
};

const SampleTable& table() {
  static const SampleTable instance;
  return instance;
}

}  // namespace

const char* value_kind_name(ValueKind kind) {
  switch (kind) {
    case ValueKind::general:
      return "general";
    case ValueKind::positive:
      return "positive";
    case ValueKind::away_from_zero:
      return "away_from_zero";
    case ValueKind::wide:
      return "wide";
    case ValueKind::large:
      return "large";
    case ValueKind::unit:
      return "unit";
    case ValueKind::ties:
      return "ties";
    case ValueKind::ids:
      return "ids";
    case ValueKind::condition:
      return "condition";
  }
  return "?";
}

const char* layout_name(Layout layout) {
  switch (layout) {
    case Layout::contiguous:
      return "contiguous";
    case Layout::transposed:
      return "transposed";
    case Layout::step_slice:
      return "step_slice";
    case Layout::broadcast_rows:
      return "broadcast_rows";
  }
  return "?";
}

std::string InputSpec::str() const {
  std::vector<std::string> notes;
  if (layout != Layout::contiguous) notes.push_back(layout_name(layout));
  if (kind == ValueKind::ids)
    notes.push_back(fmt::format("ids<{}", id_limit));
  else if (kind != ValueKind::general)
    notes.push_back(value_kind_name(kind));
  std::string text = fmt::format("{}[{}]", dtype_name(dtype), fmt::join(shape, ", "));
  if (!notes.empty()) text += fmt::format(" ({})", fmt::join(notes, ", "));
  return text;
}

std::string OpSample::name() const {
  std::vector<std::string> specs;
  for (const InputSpec& input : inputs) specs.push_back(input.str());
  std::string text = fmt::format("{}({})", op, fmt::join(specs, ", "));
  if (!attributes.empty()) text += " {" + attributes.str() + "}";
  return text;
}

std::vector<OpSample> op_samples(const std::string& op) {
  auto found = table().samples().find(op);
  return found == table().samples().end() ? std::vector<OpSample>{} : found->second;
}

std::vector<OpSample> all_op_samples() {
  std::vector<OpSample> all;
  for (const auto& [op, samples] : table().samples())
    all.insert(all.end(), samples.begin(), samples.end());
  return all;
}

std::vector<std::string> ops_with_samples() {
  std::vector<std::string> names;
  for (const auto& [op, samples] : table().samples()) names.push_back(op);
  return names;
}

const std::map<std::string, std::string>& ops_tested_elsewhere() {
  static const std::map<std::string, std::string> ops = {
      {"attention",
       "reads its paged KV caches and metadata from the forward context; "
       "tests/kernels/test_attention.cpp "
       "compares it with a float64 reference over mixed prefill/decode batches"},
      {"rotary_attention",
       "attention's forward context too; tests/compile/test_rotary_attention.cpp compares compiled "
       "models "
       "(its CPU kernel) with eager ones (rotary_embedding, then attention), and its GPU kernel, "
       "the fused decode included, with the CPU's"},
      {"all_reduce",
       "needs the ranks of a tensor-parallel group; tests/engine/test_tensor_parallel.cpp checks "
       "it on "
       "CPU communicators, against the sum of the ranks' inputs"},
      {"all_gather",
       "needs the ranks of a tensor-parallel group; tests/engine/test_tensor_parallel.cpp checks "
       "it on "
       "CPU communicators, against the ranks' inputs stacked"},
  };
  return ops;
}

bool is_test_only_op(const std::string& name) {
  return name.starts_with(kTestOnlyOpPrefix);
}

}  // namespace tessera::test
