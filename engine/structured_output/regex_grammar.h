// Regular expressions to grammar rules: vLLM's guided_regex and JSON Schema's `pattern`. The
// dialect is the ECMAScript subset both use: literals, `.`, classes [a-z] [^...] and the escapes
// \d \w \s \D \W \S, groups ( ) and (?: ), alternation |, quantifiers * + ? {n} {n,} {n,m} (a lazy
// `?` after one changes nothing: a grammar has no preference). The expression must match the
// whole text, as llama.cpp and xgrammar read it; ^ and $ may mark its ends. Lookaround,
// backreferences and word boundaries are refused with an error naming the field.
#pragma once

#include <string_view>

#include "engine/structured_output/grammar.h"

namespace tessera {

enum class RegexText {
  raw,          // the text itself
  json_string,  // the inside of a JSON string: `"`, `\` and control characters come escaped
};

// A rule matching what `pattern` matches, added to `grammar`. Throws Error naming `field`.
GrammarElement regex_element(Grammar& grammar, std::string_view pattern, RegexText text,
                             std::string_view field);
// A whole grammar (root: the pattern) for guided_regex.
Grammar regex_grammar(std::string_view pattern, std::string_view field);

}  // namespace tessera
