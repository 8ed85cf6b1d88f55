// Fuzz target: a JSON schema (response_format's, guided_json's, a tool's parameters) compiled
// into a grammar; when it compiles, the input's own bytes are walked through its automaton. Bad
// schemas must fail with an error naming the field; the automaton's limits name structured
// output.
#include <nlohmann/json.hpp>

#include "engine/structured_output/grammar_automaton.h"
#include "engine/structured_output/json_schema_grammar.h"
#include "fuzz/fuzz_support.h"

using namespace tessera;

namespace {

// The deepest nesting of brackets outside strings; the server refuses bodies past 32 levels
// before parsing them, and so does this target.
int nesting(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input = fuzz::as_text(data, size);
  if (nesting(input) > 32) return 0;
  const auto schema = nlohmann::ordered_json::parse(input, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return 0;
  fuzz::expect_clean_failure(
      [&] {
        const Grammar grammar = json_schema_grammar(schema, "response_format.json_schema");
        grammar.to_text();
        GrammarAutomaton automaton(grammar);
        GrammarStateId state = automaton.initial();
        for (char byte : input) {
          state = automaton.advance(state, static_cast<uint8_t>(byte));
          if (state == GrammarAutomaton::kDead) break;
        }
      },
      {"response_format.json_schema", "structured output"});
  return 0;
}
