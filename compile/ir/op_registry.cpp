#include "compile/ir/op_registry.h"

#include <algorithm>

#include "runtime/check.h"

namespace tessera {

std::string TensorMeta::str() const {
  return fmt::format("{}{}", dtype_name(dtype), sym_shape_str(shape));
}

std::string MetaArgs::input_name(size_t index) const {
  const auto& names = op.input_names;
  if (op.variadic && index + 1 >= names.size()) {
    return fmt::format("{}[{}]", names.back(), index - (names.size() - 1));
  }
  return index < names.size() ? names[index] : fmt::format("input{}", index);
}

const char* op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::pointwise:
      return "pointwise";
    case OpKind::reduction:
      return "reduction";
    case OpKind::view:
      return "view";
    case OpKind::gather:
      return "gather";
    case OpKind::library:
      return "library";
    case OpKind::splitting:
      return "splitting";
  }
  return "?";
}

OpRegistry& OpRegistry::global() {
  static OpRegistry registry;
  return registry;
}

bool OpRegistry::add(OpDef op) {
  TESSERA_CHECK(find(op.name) == nullptr, "op '{}' registered twice", op.name);
  TESSERA_CHECK(static_cast<bool>(op.meta), "op '{}' registered without a meta function", op.name);
  // Dispatch runs `eager` instead of a kernel, so only views may have one, and every view must.
  TESSERA_CHECK((op.kind == OpKind::view) == static_cast<bool>(op.eager),
                "op '{}' of kind {} {} a device-free eager implementation", op.name,
                op_kind_name(op.kind), op.eager ? "has" : "lacks");
  TESSERA_CHECK(
      static_cast<bool>(op.row_lowering.accepts) == static_cast<bool>(op.row_lowering.emit),
      "op '{}' has half a row lowering", op.name);
  ops_.push_back(std::make_unique<OpDef>(std::move(op)));
  by_name_[ops_.back()->name] = ops_.back().get();
  return true;
}

const OpDef* OpRegistry::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

const OpDef& OpRegistry::get(const std::string& name) const {
  const OpDef* op = find(name);
  if (op == nullptr) {
    std::vector<std::string> names;
    for (const OpDef* known : all()) names.push_back(known->name);
    throw Error(fmt::format("unknown op '{}'; registered ops: {}", name, fmt::join(names, ", ")));
  }
  return *op;
}

std::vector<const OpDef*> OpRegistry::all() const {
  std::vector<const OpDef*> out;
  for (const auto& op : ops_) out.push_back(op.get());
  std::sort(out.begin(), out.end(),
            [](const OpDef* a, const OpDef* b) { return a->name < b->name; });
  return out;
}

Attributes complete_attributes(const OpDef& op, const Attributes& given) {
  for (const auto& [name, value] : given.items()) {
    bool known = std::any_of(op.attributes.begin(), op.attributes.end(),
                             [&](const AttributeSpec& spec) { return spec.name == name; });
    if (!known) {
      std::vector<std::string> names;
      for (const auto& spec : op.attributes) names.push_back(spec.name);
      throw Error(fmt::format("{}: unknown attribute '{}'; valid attributes: {}", op.name, name,
                              names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "))));
    }
  }
  Attributes complete = given;
  for (const auto& spec : op.attributes) {
    if (complete.has(spec.name)) continue;
    TESSERA_REQUIRE(spec.default_value.has_value(), "{}: missing required attribute '{}'", op.name,
                    spec.name);
    complete.set(spec.name, *spec.default_value);
  }
  return complete;
}

void check_input_count(const OpDef& op, size_t count) {
  size_t required = op.input_names.size() - op.optional_inputs.size();
  if (op.variadic) {
    size_t fixed = op.input_names.size() - 1;
    TESSERA_REQUIRE(count >= std::max(fixed, op.min_inputs),
                    "{}: expected at least {} tensor inputs ({}), got {}", op.name,
                    std::max(fixed, op.min_inputs), fmt::join(op.input_names, ", "), count);
    return;
  }
  TESSERA_REQUIRE(count >= required && count <= op.input_names.size(),
                  "{}: expected {} tensor inputs ({}), got {}", op.name,
                  required == op.input_names.size()
                      ? std::to_string(required)
                      : fmt::format("{} to {}", required, op.input_names.size()),
                  fmt::join(op.input_names, ", "), count);
}

}  // namespace tessera
