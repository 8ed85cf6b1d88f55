#include "models/json_input.h"

#include "models/input_file.h"
#include "runtime/check.h"

namespace tessera {

// On malformed text the count may be off, but the parser then fails anyway.
int json_nesting_depth(std::string_view text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

namespace {

// Appends `value` to `out` until `out` reaches `limit` characters; nested values deeper than a
// few levels become "...".
void append_excerpt(const nlohmann::json& value, std::string& out, size_t limit, int depth) {
  if (out.size() >= limit) return;
  if (depth > 8) {
    out += "...";
    return;
  }
  if (value.is_object() || value.is_array()) {
    const bool object = value.is_object();
    out += object ? '{' : '[';
    bool first = true;
    for (auto it = value.begin(); it != value.end() && out.size() < limit; ++it) {
      if (!first) out += ", ";
      first = false;
      if (object) {
        append_excerpt(nlohmann::json(it.key()), out, limit, depth + 1);
        out += ": ";
      }
      append_excerpt(it.value(), out, limit, depth + 1);
    }
    out += object ? '}' : ']';
    return;
  }
  if (value.is_string()) {
    // Bytes that are not valid UTF-8 would make dump() throw; replace them.
    const std::string& text = value.get_ref<const std::string&>();
    out += nlohmann::json(text.substr(0, limit))
               .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return;
  }
  out += value.dump();
}

}  // namespace

nlohmann::json parse_json(std::string_view text, const std::string& source) {
  const int depth = json_nesting_depth(text, kMaxJsonDepth);
  TESSERA_REQUIRE(depth <= kMaxJsonDepth,
                  "{}: the JSON nests deeper than {} levels; this is not a file Tessera reads",
                  source, kMaxJsonDepth);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& error) {
    throw Error(fmt::format("{}: not valid JSON: {}", source, error.what()));
  }
}

nlohmann::json read_json_file(const std::string& path, const char* what) {
  return parse_json(read_input_file(path, what), path);
}

int64_t json_integer(const nlohmann::json& value, int64_t min, int64_t max,
                     const std::string& what) {
  const bool fits = value.is_number_integer() &&
                    (value.is_number_unsigned()
                         ? value.get<uint64_t>() <= static_cast<uint64_t>(std::max<int64_t>(max, 0))
                         : value.get<int64_t>() >= min && value.get<int64_t>() <= max);
  TESSERA_REQUIRE(fits && value.get<int64_t>() >= min, "{} must be an integer in {}..{}, got {}",
                  what, min, max, json_excerpt(value));
  return value.get<int64_t>();
}

std::string json_excerpt(const nlohmann::json& value, size_t max_chars) {
  std::string out;
  append_excerpt(value, out, max_chars, 0);
  if (out.size() > max_chars) {
    size_t cut = max_chars;
    while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;
    out.resize(cut);
    out += "...";
  }
  return out;
}

}  // namespace tessera
