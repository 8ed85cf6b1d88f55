// What the grammar fuzz targets check on every grammar that compiles: the token masks made from
// decided positions (engine/structured_output/position_tokens.h) against the automaton itself.
#pragma once

#include <string_view>

#include "engine/structured_output/grammar.h"

namespace tessera::fuzz {

// Walks `text` byte by byte (at most a few dozen steps) through `grammar` compiled for a small
// vocabulary of pieces that cross rule boundaries (JSON punctuation, words with a quote, digits
// with a comma, whitespace runs, UTF-8 characters and their halves). At each step the mask must
// hold exactly the tokens the automaton takes, or the target aborts. Errors are left to the
// caller (expect_clean_failure).
void check_masks(const Grammar& grammar, std::string_view text);

}  // namespace tessera::fuzz
