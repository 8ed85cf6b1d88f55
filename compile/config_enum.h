// Config enums spelled as users write them (compilation.mode: eager, traced, compiled): each enum
// lists its names once, in an EnumNames specialization, and is parsed and printed through it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/check.h"

namespace tessera {

// Specialize with `static constexpr std::array<std::pair<E, std::string_view>, N> values`.
template <typename E>
struct EnumNames;

// The valid spellings, in declaration order.
template <typename E>
std::vector<std::string> enum_names() {
  std::vector<std::string> names;
  for (const auto& [value, name] : EnumNames<E>::values) names.emplace_back(name);
  return names;
}

// "a, b, c": enum_names() for messages.
template <typename E>
std::string enum_choices() {
  return fmt::format("{}", fmt::join(enum_names<E>(), ", "));
}

template <typename E>
std::string_view enum_name(E value) {
  for (const auto& [candidate, name] : EnumNames<E>::values)
    if (candidate == value) return name;
  TESSERA_CHECK(false, "enum value {} has no name", static_cast<int>(value));
  return {};
}

// What a key's value must be one of: one message for every choice key, enum or string.
[[noreturn]] inline void throw_invalid_choice(std::string_view key, std::string_view value,
                                              std::string_view choices) {
  throw Error(fmt::format("{}: '{}' is not valid; valid choices: {}", key, value, choices));
}

// Throws tessera::Error naming `key` and the valid choices when `text` spells no value.
template <typename E>
E parse_enum(std::string_view text, std::string_view key) {
  for (const auto& [value, name] : EnumNames<E>::values)
    if (name == text) return value;
  throw_invalid_choice(key, text, enum_choices<E>());
}

}  // namespace tessera
