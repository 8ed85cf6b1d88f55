#include "engine/server/json_error_field.h"

namespace tessera {

std::string json_field_at(std::string_view body, size_t position) {
  std::string key;        // the last key seen at depth 1
  std::string last_text;  // the last string that ended at depth 1
  bool string_ended = false;
  int depth = 0;
  for (size_t i = 0; i < body.size() && i < position; ++i) {
    const char c = body[i];
    if (c == '"') {
      const size_t start = i + 1;
      for (++i; i < body.size() && i < position && body[i] != '"'; ++i)
        if (body[i] == '\\') ++i;
      if (i >= body.size() || i >= position) break;  // the position is inside this string
      if (depth == 1) {
        last_text = std::string(body.substr(start, i - start));
        string_ended = true;
      }
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
    if (c == ':' && depth == 1 && string_ended) key = last_text;
    if (c == '{' || c == '[') ++depth;
    if (c == '}' || c == ']') --depth;
    if (c == ',' && depth == 1) key.clear();
    string_ended = false;
  }
  return depth >= 1 ? key : "";
}

}  // namespace tessera
