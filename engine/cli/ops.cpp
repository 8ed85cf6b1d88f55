// `tessera ops`: the registered ops (compile/ir/op_registry.h) with their inputs, attributes and
// defaults, flags, and the device types that have a hand-written kernel for them.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <variant>
#include <vector>

#include "compile/ir/op_registry.h"
#include "engine/cli/command.h"
#include "engine/cli/flag_parser.h"
#include "runtime/kernel_registry.h"

namespace tessera::cli {
namespace {

constexpr std::array kDeviceTypes = {DeviceType::cpu, DeviceType::cuda, DeviceType::hip};

// "x, weight, bias?" (optional inputs end in ?, a variadic last input in ...).
std::string inputs_text(const OpDef& op) {
  std::vector<std::string> names;
  for (size_t i = 0; i < op.input_names.size(); ++i) {
    std::string name = op.input_names[i];
    if (op.variadic && i + 1 == op.input_names.size()) name += "...";
    if (std::find(op.optional_inputs.begin(), op.optional_inputs.end(), op.input_names[i]) !=
        op.optional_inputs.end()) {
      name += "?";
    }
    names.push_back(name);
  }
  return names.empty() ? "-" : fmt::format("{}", fmt::join(names, ", "));
}

// An int64 default of "until the end" (slice's end) reads better as max than as 19 digits.
std::string default_text(const AttributeValue& value) {
  const int64_t* number = std::get_if<int64_t>(&value);
  if (number != nullptr && *number == std::numeric_limits<int64_t>::max()) return "max";
  return attribute_value_str(value);
}

// "dim, keepdim=false": required attributes by name, the others with their default.
std::string attributes_text(const OpDef& op) {
  std::vector<std::string> parts;
  for (const AttributeSpec& spec : op.attributes) {
    parts.push_back(spec.default_value
                        ? fmt::format("{}={}", spec.name, default_text(*spec.default_value))
                        : spec.name);
  }
  return parts.empty() ? "-" : fmt::format("{}", fmt::join(parts, ", "));
}

std::string flags_text(const OpDef& op) {
  std::vector<std::string> flags;
  if (op.custom) flags.push_back("custom");
  if (op.kind == OpKind::splitting) flags.push_back("splitting");
  if (op.decompose) flags.push_back("decomposes");
  return flags.empty() ? "-" : fmt::format("{}", fmt::join(flags, ","));
}

// Device types with a registered kernel; ops implemented as views run on any device instead.
std::string kernels_text(const OpDef& op) {
  if (op.kind == OpKind::view) return "any device (view)";
  std::vector<std::string> types;
  for (DeviceType type : kDeviceTypes) {
    if (find_kernel(op.name, type) != nullptr) types.push_back(device_type_name(type));
  }
  return types.empty() ? "none" : fmt::format("{}", fmt::join(types, ", "));
}

int run_ops(const std::vector<std::string>& args) {
  FlagSet("ops").parse(args);  // it takes none: anything given is a usage error
  std::vector<std::array<std::string, 5>> rows = {
      {"op", "inputs", "attributes", "flags", "kernels"}};
  for (const OpDef* op : OpRegistry::global().all()) {
    rows.push_back(
        {op->name, inputs_text(*op), attributes_text(*op), flags_text(*op), kernels_text(*op)});
  }
  std::array<size_t, 5> widths{};
  for (const auto& row : rows) {
    for (size_t column = 0; column < row.size(); ++column) {
      widths[column] = std::max(widths[column], row[column].size());
    }
  }
  fmt::print("{} ops registered\n\n", rows.size() - 1);
  for (const auto& row : rows) {
    fmt::print("{:<{}}  {:<{}}  {:<{}}  {:<{}}  {}\n", row[0], widths[0], row[1], widths[1], row[2],
               widths[2], row[3], widths[3], row[4]);
  }
  return 0;
}

Command make_ops_command() {
  Command command;
  command.name = "ops";
  command.summary = "list the registered ops, their attributes and kernels";
  command.usage = [] {
    return "usage: tessera ops\n"
           "\n"
           "One row per registered op:\n"
           "  inputs      tensor inputs; name? is optional, name... takes any number\n"
           "  attributes  name=default, or the bare name when the attribute is required\n"
           "  flags       custom (switched by the compilation config's custom_ops), splitting "
           "(the\n"
           "              compiled graph is cut around it), decomposes (has a native "
           "decomposition)\n"
           "  kernels     device types with a hand-written kernel; views run on any device";
  };
  command.run = run_ops;
  return command;
}

}  // namespace

TESSERA_REGISTER_COMMAND(make_ops_command());

}  // namespace tessera::cli
