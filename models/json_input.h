// JSON from files a user gives (config.json, safetensors headers, tokenizer configs): nesting
// depth is bounded before parsing, since code that walks a parsed document recursively (nlohmann's
// dump(), error messages) would exhaust the stack on a deep one; excerpts of values for error
// messages are bounded in length and depth too.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tessera {

// Deeper than any real config or header (they nest 3 or 4 levels), shallow enough for recursion.
inline constexpr int kMaxJsonDepth = 64;

// The deepest nesting of arrays and objects in `text` (brackets inside strings not counted),
// counting stops past `limit`: a linear scan, to refuse deep text before any parser walks it.
int json_nesting_depth(std::string_view text, int limit);

// Parses `text`; throws tessera::Error naming `source` when it is not valid JSON or nests deeper
// than kMaxJsonDepth.
nlohmann::json parse_json(std::string_view text, const std::string& source);
// read_input_file() then parse_json(); `what` names the file's role in errors ("config").
nlohmann::json read_json_file(const std::string& path, const char* what = "JSON file");

// `value` as an integer in [min, max]; throws naming `what` when it is not one (a float, a
// string, out of range).
int64_t json_integer(const nlohmann::json& value, int64_t min, int64_t max,
                     const std::string& what);

// At most `max_chars` characters of `value` as JSON text ("..." marks a cut), for messages.
std::string json_excerpt(const nlohmann::json& value, size_t max_chars = 200);

}  // namespace tessera
