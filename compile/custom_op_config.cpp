#include "compile/custom_op_config.h"

#include <algorithm>

#include "compile/ir/op_registry.h"
#include "runtime/check.h"

namespace tessera {

namespace {

std::vector<std::string> custom_op_names() {
  std::vector<std::string> names;
  for (const OpDef* op : OpRegistry::global().all())
    if (op->custom) names.push_back(op->name);
  return names;
}

bool contains(const std::vector<std::string>& list, const std::string& name) {
  return std::find(list.begin(), list.end(), name) != list.end();
}

}  // namespace

CustomOpConfig CustomOpConfig::parse(const std::vector<std::string>& entries,
                                     bool default_enabled) {
  CustomOpConfig config;
  config.all_enabled_ = default_enabled;
  bool saw_all = false, saw_none = false;
  for (const std::string& entry : entries) {
    if (entry == "all") {
      saw_all = true;
      config.all_enabled_ = true;
      continue;
    }
    if (entry == "none") {
      saw_none = true;
      config.all_enabled_ = false;
      continue;
    }
    TESSERA_REQUIRE(entry.size() > 1 && (entry[0] == '+' || entry[0] == '-'),
                    "custom_ops: bad entry '{}'; use \"all\", \"none\", \"+name\" or \"-name\" "
                    "with a custom op name ({})",
                    entry, fmt::join(custom_op_names(), ", "));
    std::string name = entry.substr(1);
    const OpDef* op = OpRegistry::global().find(name);
    TESSERA_REQUIRE(op != nullptr && op->custom,
                    "custom_ops: '{}' names no custom op; custom ops are: {}", entry,
                    fmt::join(custom_op_names(), ", "));
    if (entry[0] == '+') {
      TESSERA_REQUIRE(!contains(config.disabled_, name),
                      "custom_ops: '{}' is both enabled and disabled", name);
      config.enabled_.push_back(name);
    } else {
      TESSERA_REQUIRE(!contains(config.enabled_, name),
                      "custom_ops: '{}' is both enabled and disabled", name);
      config.disabled_.push_back(name);
    }
  }
  TESSERA_REQUIRE(!(saw_all && saw_none), "custom_ops: \"all\" and \"none\" cannot both be listed");
  if (!saw_all && !saw_none && !default_enabled) {
    for (const OpDef* op : OpRegistry::global().all())
      if (op->custom && op->kept_when_compiled && !contains(config.disabled_, op->name) &&
          !contains(config.enabled_, op->name))
        config.enabled_.push_back(op->name);
  }
  return config;
}

bool CustomOpConfig::enabled(const std::string& op_name) const {
  if (contains(disabled_, op_name)) return false;
  return all_enabled_ || contains(enabled_, op_name);
}

CustomOpConfig CustomOpConfig::with_enabled(const std::string& op_name) const {
  CustomOpConfig config = *this;
  if (!config.enabled(op_name) && !contains(disabled_, op_name)) config.enabled_.push_back(op_name);
  return config;
}

std::string CustomOpConfig::str() const {
  std::vector<std::string> parts{all_enabled_ ? "all" : "none"};
  for (const auto& name : enabled_) parts.push_back("+" + name);
  for (const auto& name : disabled_) parts.push_back("-" + name);
  return fmt::format("[{}]", fmt::join(parts, ", "));
}

}  // namespace tessera
