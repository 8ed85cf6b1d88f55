#include "engine/cli/flag_parser.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <sstream>

namespace tessera::cli {
namespace {

// --help's layout: flags in the first column, help text from this column on, lines this wide.
constexpr size_t help_column = 28;
constexpr size_t help_width = 100;
// An unknown flag within this many edits of a declared one suggests it.
constexpr size_t suggestion_distance = 2;

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// `text` wrapped at help_width, starting at help_column, continuation lines indented to it.
std::string wrap(const std::string& text) {
  std::istringstream words(text);
  std::string result, word;
  size_t at = help_column;
  while (words >> word) {
    if (!result.empty() && at + 1 + word.size() > help_width) {
      result += "\n" + std::string(help_column, ' ');
      at = help_column;
    } else if (!result.empty()) {
      result += ' ';
      ++at;
    }
    result += word;
    at += word.size();
  }
  return result;
}

std::string spelled(const FlagInfo& info) {
  auto with_value = [&](const std::string& name) {
    return info.value_name.empty() ? name : name + " " + info.value_name;
  };
  return info.alias.empty() ? with_value(info.name)
                            : with_value(info.name) + ", " + with_value(info.alias);
}

// The whole of `text` as a finite number; nothing otherwise (inf, nan, trailing characters).
std::optional<double> finite_number(const std::string& text) {
  double value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || !std::isfinite(value))
    return std::nullopt;
  return value;
}

}  // namespace

double parse_number(const std::string& flag, const std::string& text, double low, double high) {
  std::optional<double> value = finite_number(text);
  if (!value || *value < low || *value > high)
    throw UsageError(
        fmt::format("{} expects a number in [{}, {}], got '{}'", flag, low, high, text));
  return *value;
}

double parse_positive_number(const std::string& flag, const std::string& text) {
  std::optional<double> value = finite_number(text);
  if (!value || *value <= 0)
    throw UsageError(fmt::format("{} expects a positive number, got '{}'", flag, text));
  return *value;
}

std::vector<std::string> split_list(const std::string& flag, const std::string& text) {
  std::vector<std::string> parts;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t comma = std::min(text.find(',', begin), text.size());
    parts.push_back(text.substr(begin, comma - begin));
    if (parts.back().empty())
      throw UsageError(
          fmt::format("{} expects a comma-separated list, got an empty item in '{}'", flag, text));
    begin = comma + 1;
  }
  return parts;
}

FlagSet::FlagSet(std::string command) : command_(std::move(command)) {}

FlagSet& FlagSet::section(std::string title) {
  section_ = std::move(title);
  return *this;
}

FlagSet& FlagSet::text(FlagInfo info, std::string* target) {
  if (!info.default_text && !target->empty()) info.default_text = *target;
  return add(std::move(info), "a value",
             [target](const std::string&, const std::string& value) { *target = value; });
}

FlagSet& FlagSet::flag(FlagInfo info, bool* target) {
  info.value_name.clear();
  info.default_text = info.default_text.value_or("");
  return add(std::move(info), "",
             [target](const std::string&, const std::string&) { *target = true; });
}

FlagSet& FlagSet::number(FlagInfo info, double* target, double low, double high) {
  if (!info.default_text) info.default_text = fmt::format("{}", *target);
  return add(std::move(info), fmt::format("a number in [{}, {}]", low, high),
             [target, low, high](const std::string& flag, const std::string& value) {
               *target = parse_number(flag, value, low, high);
             });
}

FlagSet& FlagSet::positive_number(FlagInfo info, double* target) {
  if (!info.default_text) info.default_text = fmt::format("{}", *target);
  return add(std::move(info), "a positive number",
             [target](const std::string& flag, const std::string& value) {
               *target = parse_positive_number(flag, value);
             });
}

FlagSet& FlagSet::text_list(FlagInfo info, std::vector<std::string>* target) {
  if (!info.default_text && !target->empty())
    info.default_text = fmt::format("{}", fmt::join(*target, ","));
  return add(std::move(info), "a comma-separated list",
             [target](const std::string& flag, const std::string& value) {
               *target = split_list(flag, value);
             });
}

FlagSet& FlagSet::integer_list(FlagInfo info, std::vector<int64_t>* target, int64_t low,
                               int64_t high) {
  if (!info.default_text && !target->empty())
    info.default_text = fmt::format("{}", fmt::join(*target, ","));
  return add(std::move(info),
             fmt::format("a comma-separated list of integers in {}..{}", low, high),
             [target, low, high](const std::string& flag, const std::string& value) {
               target->clear();
               for (const std::string& item : split_list(flag, value))
                 target->push_back(parse_integer<int64_t>(flag, item, low, high));
             });
}

FlagSet& FlagSet::config_key(FlagInfo info, std::string key, std::vector<std::string>* overrides) {
  info.help += fmt::format(" ({})", key);
  return add(std::move(info), "a value",
             [key, overrides](const std::string&, const std::string& value) {
               overrides->push_back(key + "=" + value);
             });
}

FlagSet& FlagSet::config_switch(FlagInfo info, std::string key,
                                std::vector<std::string>* overrides) {
  info.help += fmt::format(" ({})", key);
  info.value_name.clear();
  info.default_text = info.default_text.value_or("");
  return add(std::move(info), "", [key, overrides](const std::string&, const std::string&) {
    overrides->push_back(key + "=true");
  });
}

FlagSet& FlagSet::add(FlagInfo info, std::string expected, Setter set) {
  remove(info.name);
  flags_.push_back({std::move(info), std::move(expected), std::move(set), section_});
  return *this;
}

FlagSet& FlagSet::remove(const std::string& name) {
  std::erase_if(flags_, [&](const Flag& flag) { return flag.info.name == name; });
  return *this;
}

const FlagSet::Flag* FlagSet::find(const std::string& argument) const {
  for (const Flag& flag : flags_)
    if (argument == flag.info.name || (!flag.info.alias.empty() && argument == flag.info.alias))
      return &flag;
  return nullptr;
}

void FlagSet::unknown(const std::string& argument) const {
  if (!argument.starts_with("-"))
    throw UsageError(
        fmt::format("'tessera {}' takes no positional arguments, got '{}'", command_, argument));
  std::string nearest;
  size_t distance = suggestion_distance + 1;
  for (const Flag& flag : flags_) {
    const size_t d = edit_distance(argument, flag.info.name);
    if (d < distance) distance = d, nearest = flag.info.name;
  }
  throw UsageError(fmt::format("unknown option '{}' for 'tessera {}'{}", argument, command_,
                               nearest.empty() ? "" : fmt::format("; did you mean {}?", nearest)));
}

bool FlagSet::parse_one(const std::vector<std::string>& args, size_t& i) {
  const Flag* flag = find(args[i]);
  if (flag == nullptr) return false;
  const std::string& name = flag->info.name;
  if (flag->expected.empty()) {
    flag->set(name, "");
  } else {
    if (i + 1 >= args.size())
      throw UsageError(
          fmt::format("{} needs a value: {}, {}", args[i], flag->info.value_name, flag->expected));
    const std::string& spelled_as = args[i];  // the name or the alias, for the error
    flag->set(spelled_as, args[i + 1]);
    ++i;
  }
  given_.insert(name);
  return true;
}

void FlagSet::parse(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i)
    if (!parse_one(args, i)) unknown(args[i]);
}

std::string FlagSet::help() const {
  std::vector<std::string> sections;
  for (const Flag& flag : flags_)
    if (std::find(sections.begin(), sections.end(), flag.section) == sections.end())
      sections.push_back(flag.section);
  std::string text;
  for (const std::string& section : sections) {
    text += (text.empty() ? "" : "\n") + section + ":\n";
    for (const Flag& flag : flags_) {
      if (flag.section != section) continue;
      std::string line = "  " + spelled(flag.info);
      line += line.size() + 1 < help_column ? std::string(help_column - line.size(), ' ')
                                            : "\n" + std::string(help_column, ' ');
      std::string help = flag.info.help;
      if (flag.info.default_text && !flag.info.default_text->empty())
        help += fmt::format(" (default {})", *flag.info.default_text);
      text += line + wrap(help) + "\n";
    }
  }
  return text;
}

}  // namespace tessera::cli
