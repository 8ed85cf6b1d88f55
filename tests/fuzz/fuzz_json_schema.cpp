// Fuzz target: a JSON schema (response_format's, guided_json's, a tool's parameters) compiled
// into a grammar; when it compiles, the input's own bytes are walked through its automaton and its
// token masks checked against it (grammar_masks.h). Bad schemas must fail with an error naming the
// field; the automaton's limits name structured output.
#include <nlohmann/json.hpp>

#include "engine/server/openai_protocol.h"
#include "engine/structured_output/grammar_automaton.h"
#include "engine/structured_output/json_schema_grammar.h"
#include "fuzz/fuzz_support.h"
#include "fuzz/grammar_masks.h"
#include "models/json_input.h"

using namespace tessera;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input = fuzz::as_text(data, size);
  // The server refuses bodies nested deeper than this before parsing them; so does this target.
  if (json_nesting_depth(input, max_json_depth) > max_json_depth) return 0;
  const auto schema = nlohmann::ordered_json::parse(input, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return 0;
  fuzz::expect_clean_failure(
      [&] {
        const Grammar grammar = json_schema_grammar(schema, "response_format.json_schema");
        grammar.to_text();
        GrammarAutomaton(grammar).matches(input);
        fuzz::check_masks(grammar, input);
      },
      {"response_format.json_schema", "structured output"});
  return 0;
}
