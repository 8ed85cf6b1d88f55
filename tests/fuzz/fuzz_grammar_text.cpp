// Fuzz target: GBNF grammar text (guided_grammar) and, after a NUL byte in the input, a regular
// expression (guided_regex, and the same as a JSON Schema pattern inside a string); what compiles
// walks the rest of the input through its automaton, and its token masks are checked against the
// automaton (grammar_masks.h). Errors must name the field; the automaton's limits name structured
// output.
#include "engine/structured_output/grammar_automaton.h"
#include "engine/structured_output/grammar_text.h"
#include "engine/structured_output/regex_grammar.h"
#include "fuzz/fuzz_support.h"
#include "fuzz/grammar_masks.h"

using namespace tessera;
using tessera::fuzz::check_masks;

namespace {

void walk(const Grammar& grammar, std::string_view text) {
  GrammarAutomaton(grammar).matches(text);
  check_masks(grammar, text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input = fuzz::as_text(data, size);
  const size_t split = input.find('\0');
  const std::string_view grammar_text = input.substr(0, split);
  fuzz::expect_clean_failure(
      [&] { walk(parse_grammar_text(grammar_text, "guided_grammar"), input); },
      {"guided_grammar", "structured output"});
  if (split == std::string_view::npos) return 0;
  const std::string_view pattern = input.substr(split + 1);
  fuzz::expect_clean_failure([&] { walk(regex_grammar(pattern, "guided_regex"), grammar_text); },
                             {"guided_regex", "structured output"});
  fuzz::expect_clean_failure(
      [&] {
        Grammar grammar;
        const int32_t root = grammar.add_rule("root");
        grammar.add_alternative(
            root, {regex_element(grammar, pattern, RegexText::json_string, "pattern")});
        grammar.set_root(root);
        grammar.validate("pattern");
        walk(grammar, grammar_text);
      },
      {"pattern", "structured output"});
  return 0;
}
