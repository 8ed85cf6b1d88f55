// JSON Schema to a grammar of the JSON texts it allows (OpenAI's response_format json_schema,
// vLLM's guided_json, tool parameters). Covered, as OpenAI's strict mode and xgrammar cover it:
// type (one or a list), properties / required / additionalProperties, enum, const, items /
// prefixItems / minItems / maxItems, $defs / definitions / $ref (local, recursion included),
// anyOf / oneOf, allOf of one schema, minLength / maxLength / pattern / format (date, time,
// date-time, uuid, email, ipv4) on strings, minimum / maximum / exclusiveMinimum /
// exclusiveMaximum on integers and (whole-number bounds) numbers. Annotations (title,
// description, default, examples, ...) are read past; any other keyword is refused with an
// error naming it and where it is.
//
// The text is the one a model writes: properties in the schema's order (all required ones, any
// optional ones), at most one space or a newline and indentation between tokens, no whitespace
// before or after the value. An object allows properties beyond those listed only when
// additionalProperties says so (true or a schema), as in strict mode; `pattern` must match the
// whole string.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "engine/structured_output/grammar.h"

namespace tessera {

// Indentation a newline between JSON tokens may carry: enough for pretty-printed nesting, and a
// bound on the whitespace a constrained model can loop on.
inline constexpr int64_t kMaxJsonIndent = 20;

// Throws Error naming `field`, the schema location and the keyword.
Grammar json_schema_grammar(const nlohmann::ordered_json& schema, std::string_view field);
// Any JSON object: response_format {"type": "json_object"}.
Grammar json_object_grammar();

}  // namespace tessera
