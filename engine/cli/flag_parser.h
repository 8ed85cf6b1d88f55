// One flag parser for every subcommand. A subcommand declares its flags in a FlagSet, each bound
// to the option it sets: name, short alias, value type (with its range), default and help. The
// set parses the arguments, generates the command's `--help` and gives every command the same
// errors: an unknown flag names itself and the command, a missing or bad value names the flag and
// what it expects; numbers are range-checked and parsed without overflow.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "engine/cli/command.h"

namespace tessera::cli {

// What --help says about one flag.
struct FlagInfo {
  std::string name;        // "--max-tokens"
  std::string alias;       // "-n", or empty
  std::string value_name;  // the value's placeholder ("N", "PATH"); empty for a switch
  std::string help;        // what it does
  // Shown as "(default X)"; when not given, the bound option's value at declaration (nothing
  // for an empty text or list). Empty: no default is shown.
  std::optional<std::string> default_text = std::nullopt;
};

// `text` as an integer of type I in [low, high]; a UsageError naming `flag` otherwise (overflow
// included: from_chars reports it rather than wrapping).
template <typename I>
I parse_integer(const std::string& flag, const std::string& text, I low, I high) {
  I value{};
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < low || value > high)
    throw UsageError(
        fmt::format("{} expects an integer in {}..{}, got '{}'", flag, low, high, text));
  return value;
}

// `text` as a finite number in [low, high]; a UsageError naming `flag` otherwise.
double parse_number(const std::string& flag, const std::string& text, double low, double high);
// `text` as a finite number above 0.
double parse_positive_number(const std::string& flag, const std::string& text);
// "a,b,c" as its items; an empty item is a UsageError naming `flag`.
std::vector<std::string> split_list(const std::string& flag, const std::string& text);

namespace detail {
// The integer an option holds, optional or not.
template <typename T>
struct integer_of {
  using type = T;
  static bool has_value(const T&) { return true; }
  static T value(const T& target) { return target; }
};
template <typename T>
struct integer_of<std::optional<T>> {
  using type = T;
  static bool has_value(const std::optional<T>& target) { return target.has_value(); }
  static T value(const std::optional<T>& target) { return *target; }
};
}  // namespace detail

class FlagSet {
 public:
  // `command`: the words after `tessera`, e.g. "generate" or "bench sweep".
  explicit FlagSet(std::string command);

  // Flags declared from here on are listed under `title` in --help (first: "options").
  FlagSet& section(std::string title);

  FlagSet& text(FlagInfo info, std::string* target);
  FlagSet& flag(FlagInfo info, bool* target);  // a switch: present sets true, takes no value
  FlagSet& number(FlagInfo info, double* target, double low, double high);
  FlagSet& positive_number(FlagInfo info, double* target);
  FlagSet& text_list(FlagInfo info, std::vector<std::string>* target);
  FlagSet& integer_list(FlagInfo info, std::vector<int64_t>* target, int64_t low, int64_t high);
  // An integer of the target's type (or an optional one), in [low, high].
  template <typename Target, typename Integer = typename detail::integer_of<Target>::type>
  FlagSet& integer(FlagInfo info, Target* target, std::type_identity_t<Integer> low,
                   std::type_identity_t<Integer> high) {
    using Traits = detail::integer_of<Target>;
    if (!info.default_text && Traits::has_value(*target))
      info.default_text = fmt::format("{}", Traits::value(*target));
    return add(std::move(info), fmt::format("an integer in {}..{}", low, high),
               [target, low, high](const std::string& flag, const std::string& value) {
                 *target = parse_integer<Integer>(flag, value, low, high);
               });
  }
  // A flag that sets config key `key` to its value: appended to `overrides` as key=value, in
  // command-line order (they apply after the config file). --help names the key.
  FlagSet& config_key(FlagInfo info, std::string key, std::vector<std::string>* overrides);
  // A switch that sets config key `key` to true (as vLLM's store_true flags do).
  FlagSet& config_switch(FlagInfo info, std::string key, std::vector<std::string>* overrides);
  // Any other value: `expected` says what it must be (for errors), `set` parses and stores it.
  using Setter = std::function<void(const std::string& flag, const std::string& value)>;
  FlagSet& add(FlagInfo info, std::string expected, Setter set);
  // Drops a declared flag (a command that sets that option itself).
  FlagSet& remove(const std::string& name);

  // Parses every argument; a positional argument or an undeclared flag is a UsageError.
  void parse(const std::vector<std::string>& args);
  // When args[i] is a declared flag: consumes it and its value (advancing i), returns true.
  bool parse_one(const std::vector<std::string>& args, size_t& i);
  // Whether the flag (by name) was on the command line.
  bool given(const std::string& name) const { return given_.count(name) > 0; }

  // The options part of --help: each section's flags, their values, help and defaults.
  std::string help() const;
  const std::string& command() const { return command_; }

 private:
  struct Flag {
    FlagInfo info;
    std::string expected;  // "an integer in 1..64"; empty for a switch
    Setter set;
    std::string section;
  };
  const Flag* find(const std::string& argument) const;
  [[noreturn]] void unknown(const std::string& argument) const;

  std::string command_;
  std::string section_ = "options";
  std::vector<Flag> flags_;
  std::set<std::string> given_;
};

}  // namespace tessera::cli
