// Non-tensor arguments of an op (dims, scalars, flags, dtypes), kept in a small ordered map so
// that graph printing and hashing are stable.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "runtime/dtype.h"

namespace tessera {

using AttributeValue =
    std::variant<int64_t, double, bool, std::string, std::vector<int64_t>, DType>;

class Attributes {
 public:
  Attributes() = default;
  Attributes(std::initializer_list<std::pair<std::string, AttributeValue>> items);

  Attributes& set(const std::string& name, AttributeValue value);
  bool has(const std::string& name) const;
  const AttributeValue* find(const std::string& name) const;

  // Typed getters; throw naming the attribute when it is missing or of another type.
  int64_t get_int(const std::string& name) const;
  int64_t get_int(const std::string& name, int64_t fallback) const;
  double get_float(const std::string& name) const;  // accepts an int too
  double get_float(const std::string& name, double fallback) const;
  bool get_bool(const std::string& name, bool fallback) const;
  const std::string& get_string(const std::string& name) const;
  std::string get_string(const std::string& name, const std::string& fallback) const;
  const std::vector<int64_t>& get_ints(const std::string& name) const;
  DType get_dtype(const std::string& name) const;

  const std::vector<std::pair<std::string, AttributeValue>>& items() const { return items_; }
  bool empty() const { return items_.empty(); }
  std::string str() const;  // "dim=-1, keepdim=true"
  bool operator==(const Attributes&) const = default;

 private:
  std::vector<std::pair<std::string, AttributeValue>> items_;  // sorted by name
};

std::string attribute_value_str(const AttributeValue& value);

}  // namespace tessera
