// Which request field a JSON syntax error lies in, so that a 400 for an unparseable body still
// names it (`temperature: 1e309`, invalid UTF-8 or a lone surrogate inside "prompt").
#pragma once

#include <string>
#include <string_view>

namespace tessera {

// The top-level key of `body` (a JSON object's text) whose value holds byte `position`; empty
// when the position is outside any value (or the text is not an object).
std::string json_field_at(std::string_view body, size_t position);

}  // namespace tessera
