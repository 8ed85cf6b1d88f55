// The op registry: every op is registered once with its schema, a meta (fake) function that
// computes output dtypes and symbolic shapes (and rejects bad arguments with a message naming the
// op, the argument and the shapes), optional decomposition into other ops, optional device-free
// eager implementation (views), and flags. Kernels per device live in kernels/ and are found by
// op name through kernels/kernel_registry.h.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "compile/symbolic.h"
#include "kernels/attributes.h"
#include "kernels/tensor.h"

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
  MetaFn meta;
  TensorFn decompose;  // empty when the op is primitive
  TensorFn eager;      // device-independent implementation (views); bypasses kernels
  // Rewrites attributes to one canonical form (negative dims wrapped), so kernels see and graphs
  // hash one spelling.
  std::function<void(std::span<const TensorMeta>, Attributes&)> canonicalize;
  bool custom = false;     // enabled/disabled by the compilation config's custom_ops
  bool splitting = false;  // the compiled graph is split around it
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
