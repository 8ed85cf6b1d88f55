// GBNF text (llama.cpp's grammar format, also what vLLM's guided_grammar takes as EBNF) to a
// Grammar:
//   root   ::= "{" ws pair ("," ws pair)* "}"     # a comment
//   pair   ::= [a-z]+ ":" ws ( "true" | "false" )
//   ws     ::= [ \t\n]*
// Rules are `name ::= alternatives`, and a rule runs until the next `name ::=`. Items: "literal"
// and [class] (escapes \n \r \t \\ \" \] \- \xHH \uHHHH \UHHHHHHHH; [^...] negates), `.` (any
// character), a rule name, ( group ); postfix * + ? {m} {m,} {m,n}. Text is UTF-8; a character
// matches its UTF-8 bytes. The grammar starts at `root`.
#pragma once

#include <string_view>

#include "engine/structured_output/grammar.h"

namespace tessera {

// Throws Error naming `field`, the line and what was expected where the text is not GBNF, or
// where the grammar is invalid (Grammar::validate).
Grammar parse_grammar_text(std::string_view text, std::string_view field);

}  // namespace tessera
