// The op registry: every op is registered once with its schema, its kind, a meta (fake) function
// that computes output dtypes and symbolic shapes (and rejects bad arguments with a message naming
// the op, the argument and the shapes), optional decomposition into other ops, the device-free
// implementation of a view, how it lowers into a fused row kernel, and flags. The compile passes
// ask these questions of the OpDef, never a list of names. Kernels per device live in kernels/
// and are found by op name through runtime/kernel_registry.h.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "compile/ir/symbolic.h"
#include "runtime/attributes.h"
#include "runtime/tensor.h"

namespace tessera {

// What an op's meta function sees of a tensor: no data, a possibly symbolic shape.
struct TensorMeta {
  DType dtype = DType::f32;
  Device device;
  SymShape shape;

  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  std::string str() const;  // "f32[s0, 64]"
};

struct OpDef;

struct MetaArgs {
  const OpDef& op;
  std::span<const TensorMeta> inputs;
  const Attributes& attributes;

  const TensorMeta& input(size_t index) const { return inputs[index]; }
  // The schema's name of input `index` ("x", "weight", "tensors[2]") for error messages.
  std::string input_name(size_t index) const;
};

using MetaFn = std::function<std::vector<TensorMeta>(const MetaArgs&)>;
// Runs an op's computation in terms of other ops (decomposition) or of Tensor views (eager).
using TensorFn = std::function<std::vector<Tensor>(std::span<const Tensor>, const Attributes&)>;

// What an op is, as the compile passes see it.
enum class OpKind {
  pointwise,  // elementwise over broadcast inputs; its kernels read any strides
  reduction,  // over the last dim (softmax included)
  view,       // the same storage seen another way: `eager` implements it on any device
  gather,     // reads input elements chosen by index or position (embedding, cat)
  library,    // runs its own kernel (GEMM, custom ops), opaque to the compiler
  splitting,  // the compiled graph is split around it (attention)
};
const char* op_kind_name(OpKind kind);  // "pointwise", ...

// What cleanup knows of a node when it asks whether the node returns its input 0 unchanged.
struct IdentityQuery {
  const TensorMeta& input;
  const TensorMeta& output;
  const Attributes& attributes;
  bool input_is_view = false;  // input 0 is a view op's output, so it may be strided
};
using IdentityTest = std::function<bool(const IdentityQuery&)>;

// How an op places itself in a fused row kernel; the types are in compile/codegen/row_lowering.h.
struct RowCandidate;
class RowEmitter;
struct RowLowering {
  // Whether a node of this op can be computed inside a row kernel of the candidate's rows.
  std::function<bool(const RowCandidate&)> accepts;
  // The C expression of the node's output element at the emitter's index.
  std::function<std::string(RowEmitter&)> emit;
};

struct AttributeSpec {
  std::string name;
  std::optional<AttributeValue> default_value;  // nullopt: required
};

struct OpDef {
  std::string name;
  std::vector<std::string> input_names;  // with `variadic`, the last name takes 0..n tensors
  bool variadic = false;
  size_t min_inputs = 0;                     // with variadic: the fewest tensors accepted in all
  std::vector<std::string> optional_inputs;  // trailing inputs that may be left out ("bias")
  std::vector<AttributeSpec> attributes;
  OpKind kind = OpKind::library;
  MetaFn meta;
  TensorFn decompose;  // empty when the op is primitive
  // The device-independent implementation of a view op (kind view, and only then): it runs
  // instead of a kernel.
  TensorFn eager;
  // Whether a node returns its input unchanged, so cleanup can drop it; empty: never.
  IdentityTest is_identity;
  // Empty: the op is never fused (it runs as its own step).
  RowLowering row_lowering;
  // Rewrites attributes to one canonical form (negative dims wrapped), so kernels see and graphs
  // hash one spelling.
  std::function<void(std::span<const TensorMeta>, Attributes&)> canonicalize;
  // The input a GEMM streams from memory once per call (linear's weight), or -1: the
  // weight-prefetch pass has the step before pull it into the device's cache.
  int streamed_weight = -1;
  bool custom = false;  // enabled/disabled by the compilation config's custom_ops
  // A custom op that compiled mode's default keeps as itself, where its decomposition costs far
  // more than the op (fused_moe's runs every expert); "none" or "-name" still turn it off.
  bool kept_when_compiled = false;
  // A splitting op that a pass makes out of another (rotary_attention out of attention) splits
  // the graph wherever compilation.splitting_ops lists that other op.
  std::string splits_as;
  bool strided_inputs =
      false;  // its kernels read any strides; otherwise inputs are made contiguous
  std::string doc;
};

class OpRegistry {
 public:
  static OpRegistry& global();
  bool add(OpDef op);
  const OpDef* find(const std::string& name) const;
  // Throws an error naming the unknown op and listing the registered names.
  const OpDef& get(const std::string& name) const;
  std::vector<const OpDef*> all() const;  // sorted by name

 private:
  std::vector<std::unique_ptr<OpDef>> ops_;
  std::map<std::string, const OpDef*, std::less<>> by_name_;
};

// Fills in attribute defaults and rejects unknown or missing attributes, naming them.
Attributes complete_attributes(const OpDef& op, const Attributes& given);
// Checks the number of inputs against the schema.
void check_input_count(const OpDef& op, size_t count);

}  // namespace tessera

#define TESSERA_OP_CONCAT_INNER(a, b) a##b
#define TESSERA_OP_CONCAT(a, b) TESSERA_OP_CONCAT_INNER(a, b)
// Registers an op at load time: TESSERA_REGISTER_OP(make_add_op());
#define TESSERA_REGISTER_OP(op_def)                                                   \
  [[maybe_unused]] static const bool TESSERA_OP_CONCAT(op_registered_, __COUNTER__) = \
      ::tessera::OpRegistry::global().add(op_def)
