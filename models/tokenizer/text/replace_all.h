// replace_all(): every occurrence of a literal in a text replaced, left to right. An empty `from`
// replaces nothing (it would match everywhere and never advance).
#pragma once

#include <string>
#include <string_view>

namespace tessera {

inline void replace_all(std::string& text, std::string_view from, std::string_view to) {
  if (from.empty() || from == to || text.find(from) == std::string::npos) return;
  std::string out;
  out.reserve(text.size());
  size_t position = 0;
  for (size_t found; (found = text.find(from, position)) != std::string::npos;) {
    out.append(text, position, found - position);
    out.append(to);
    position = found + from.size();
  }
  out.append(text, position);
  text.swap(out);
}

}  // namespace tessera
