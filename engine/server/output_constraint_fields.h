// The request fields that constrain the output (structured output): OpenAI's response_format
// ({"type": "json_object"} or {"type": "json_schema", "json_schema": {"name", "schema",
// "strict", "description"}}), vLLM's structured_outputs ({"json", "regex", "choice", "grammar",
// "json_object"}) and its older guided_json / guided_regex / guided_choice / guided_grammar. At
// most one may be given. The body is read as ordered JSON so a schema keeps its properties'
// order, which is the order the model writes them in.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "engine/structured_output/grammar_compiler.h"

namespace tessera {

// The request fields read here, for the routes' lists of accepted fields.
inline constexpr const char* kOutputConstraintFields[] = {"response_format", "structured_outputs",
                                                          "guided_json",     "guided_regex",
                                                          "guided_choice",   "guided_grammar"};

// Throws ApiError (400) naming the field when one is malformed or two are given.
std::optional<OutputConstraint> parse_output_constraint(const nlohmann::ordered_json& body);

}  // namespace tessera
