#include "runtime/attributes.h"

#include <algorithm>

#include "runtime/check.h"

namespace tessera {

Attributes::Attributes(std::initializer_list<std::pair<std::string, AttributeValue>> items) {
  for (const auto& [name, value] : items) set(name, value);
}

Attributes& Attributes::set(const std::string& name, AttributeValue value) {
  auto it =
      std::lower_bound(items_.begin(), items_.end(), name,
                       [](const auto& item, const std::string& key) { return item.first < key; });
  if (it != items_.end() && it->first == name) {
    it->second = std::move(value);
  } else {
    items_.insert(it, {name, std::move(value)});
  }
  return *this;
}

const AttributeValue* Attributes::find(const std::string& name) const {
  auto it =
      std::lower_bound(items_.begin(), items_.end(), name,
                       [](const auto& item, const std::string& key) { return item.first < key; });
  if (it != items_.end() && it->first == name) return &it->second;
  return nullptr;
}

bool Attributes::has(const std::string& name) const {
  return find(name) != nullptr;
}

namespace {

const AttributeValue& require(const Attributes& attributes, const std::string& name) {
  const AttributeValue* value = attributes.find(name);
  TESSERA_REQUIRE(value != nullptr, "missing attribute '{}' (have: {})", name, attributes.str());
  return *value;
}

template <typename T>
const T& require_type(const Attributes& attributes, const std::string& name, const char* type) {
  const AttributeValue& value = require(attributes, name);
  const T* typed = std::get_if<T>(&value);
  TESSERA_REQUIRE(typed != nullptr, "attribute '{}' must be {}, got {}", name, type,
                  attribute_value_str(value));
  return *typed;
}

}  // namespace

int64_t Attributes::get_int(const std::string& name) const {
  return require_type<int64_t>(*this, name, "an integer");
}
int64_t Attributes::get_int(const std::string& name, int64_t fallback) const {
  return has(name) ? get_int(name) : fallback;
}
double Attributes::get_float(const std::string& name) const {
  const AttributeValue& value = require(*this, name);
  if (const auto* i = std::get_if<int64_t>(&value)) return static_cast<double>(*i);
  return require_type<double>(*this, name, "a number");
}
double Attributes::get_float(const std::string& name, double fallback) const {
  return has(name) ? get_float(name) : fallback;
}
bool Attributes::get_bool(const std::string& name, bool fallback) const {
  return has(name) ? require_type<bool>(*this, name, "a bool") : fallback;
}
const std::string& Attributes::get_string(const std::string& name) const {
  return require_type<std::string>(*this, name, "a string");
}
std::string Attributes::get_string(const std::string& name, const std::string& fallback) const {
  return has(name) ? get_string(name) : fallback;
}
const std::vector<int64_t>& Attributes::get_ints(const std::string& name) const {
  return require_type<std::vector<int64_t>>(*this, name, "a list of integers");
}
DType Attributes::get_dtype(const std::string& name) const {
  return require_type<DType>(*this, name, "a dtype");
}

std::string attribute_value_str(const AttributeValue& value) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>)
          return v ? "true" : "false";
        else if constexpr (std::is_same_v<T, int64_t>)
          return std::to_string(v);
        else if constexpr (std::is_same_v<T, double>)
          return fmt::format("{}", v);
        else if constexpr (std::is_same_v<T, std::string>)
          return "'" + v + "'";
        else if constexpr (std::is_same_v<T, DType>)
          return dtype_name(v);
        else
          return fmt::format("[{}]", fmt::join(v, ", "));
      },
      value);
}

std::string Attributes::str() const {
  std::string out;
  for (const auto& [name, value] : items_) {
    if (!out.empty()) out += ", ";
    out += name + "=" + attribute_value_str(value);
  }
  return out;
}

}  // namespace tessera
