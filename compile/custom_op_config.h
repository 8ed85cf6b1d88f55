// Which custom ops run as themselves and which are replaced by their decomposition, by vLLM's
// rule over a list of "all", "none", "+name", "-name": an op is enabled when ("all" is listed or
// "+name" is) and "-name" is not. With neither "all" nor "none" listed, the mode's default
// applies: all enabled in eager mode, none in compiled mode (so the fuser sees the primitives)
// but those an op marks kept_when_compiled (fused_moe: its decomposition runs every expert).
#pragma once

#include <string>
#include <vector>

namespace tessera {

class CustomOpConfig {
 public:
  CustomOpConfig() = default;  // everything enabled
  // Throws naming an entry that is not "all"/"none"/"+name"/"-name" of a registered custom op.
  static CustomOpConfig parse(const std::vector<std::string>& entries, bool default_enabled);

  bool enabled(const std::string& op_name) const;
  // This config with `op_name` enabled too, unless the list disables it by name ("-name"): a
  // pass that matches a custom op needs it recorded as itself, as vLLM's fusion passes do.
  CustomOpConfig with_enabled(const std::string& op_name) const;
  std::string str() const;

 private:
  bool all_enabled_ = true;
  std::vector<std::string> enabled_;
  std::vector<std::string> disabled_;
};

}  // namespace tessera
