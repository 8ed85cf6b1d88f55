#include "kernels/linear_path.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <utility>

#include "runtime/check.h"

namespace tessera {

namespace {

thread_local const std::string* forced = nullptr;

struct VariantTable {
  std::mutex mutex;
  std::map<DeviceType, std::vector<std::string>> names;
};

VariantTable& variant_table() {
  static VariantTable table;
  return table;
}

bool known_variant(const std::string& name) {
  VariantTable& table = variant_table();
  std::lock_guard lock(table.mutex);
  for (const auto& [type, names] : table.names)
    if (std::find(names.begin(), names.end(), name) != names.end()) return true;
  return false;
}

// N for "library:N" with N in 1..kLibraryAlgorithms, otherwise 0.
static_assert(kLibraryAlgorithms <= 9, "library:N is parsed as one digit");
int library_algorithm_of(const std::string& path) {
  const std::string prefix = std::string(kLinearPathLibrary) + ":";
  if (!path.starts_with(prefix) || path.size() != prefix.size() + 1) return 0;
  const int n = path.back() - '0';
  return n >= 1 && n <= kLibraryAlgorithms ? n : 0;
}

// The paths every device has: measured, library and library:N.
bool builtin_path(const std::string& path) {
  return path == kLinearPathMeasured || path == kLinearPathLibrary ||
         library_algorithm_of(path) > 0;
}

// The builtin paths as an error lists them (library:N as one range), then `variants`.
std::vector<std::string> path_names_with(const std::vector<std::string>& variants) {
  std::vector<std::string> names{
      kLinearPathMeasured, kLinearPathLibrary,
      fmt::format("{}:1 .. {}:{}", kLinearPathLibrary, kLinearPathLibrary, kLibraryAlgorithms)};
  names.insert(names.end(), variants.begin(), variants.end());
  return names;
}

std::vector<std::string> all_variants() {
  VariantTable& table = variant_table();
  std::lock_guard lock(table.mutex);
  std::vector<std::string> names;
  for (const auto& [type, variants] : table.names)
    names.insert(names.end(), variants.begin(), variants.end());
  return names;
}

}  // namespace

ForceLinearPath::ForceLinearPath(const std::string& path) : previous_(forced), path_(path) {
  TESSERA_REQUIRE(builtin_path(path_) || known_variant(path_),
                  "linear path '{}' is not known; valid choices: {}", path_,
                  fmt::join(path_names_with(all_variants()), ", "));
  forced = path_ == kLinearPathMeasured ? nullptr : &path_;
}

ForceLinearPath::~ForceLinearPath() {
  forced = previous_;
}

const std::string* forced_linear_path() {
  return forced;
}

bool library_path_forced() {
  return forced != nullptr && (*forced == kLinearPathLibrary || library_algorithm_of(*forced) > 0);
}

int forced_library_algorithm() {
  return forced != nullptr ? library_algorithm_of(*forced) : 0;
}

bool is_linear_path(const std::string& path, DeviceType type) {
  const std::vector<std::string> variants = linear_variants(type);
  return builtin_path(path) || std::find(variants.begin(), variants.end(), path) != variants.end();
}

std::vector<std::string> linear_path_names(DeviceType type) {
  return path_names_with(linear_variants(type));
}

std::vector<std::string> linear_variants(DeviceType type) {
  VariantTable& table = variant_table();
  std::lock_guard lock(table.mutex);
  auto found = table.names.find(type);
  return found == table.names.end() ? std::vector<std::string>{} : found->second;
}

bool register_linear_variant(DeviceType type, const std::string& name) {
  VariantTable& table = variant_table();
  std::lock_guard lock(table.mutex);
  std::vector<std::string>& names = table.names[type];
  TESSERA_CHECK(std::find(names.begin(), names.end(), name) == names.end(),
                "linear variant {} registered twice", name);
  names.push_back(name);
  return true;
}

}  // namespace tessera
