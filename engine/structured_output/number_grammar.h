// JSON numbers as grammar rules, with JSON Schema's bounds: an integer in [minimum, maximum], and
// a number whose bounds are whole numbers (the integer part is bounded by digit ranges, the
// fraction decides the ends: 5 <= x allows 5 and 5.25, x <= 5 allows 5.0 but not 5.5).
#pragma once

#include <cstdint>
#include <optional>

#include "engine/structured_output/grammar.h"

namespace tessera {

struct NumberBound {
  int64_t value = 0;
  bool inclusive = true;
};

// The largest magnitude a bound may have.
inline constexpr int64_t kMaxNumberBound = 1'000'000'000'000'000'000;

// "-"? digits, no leading zeros, within the bounds (either may be absent); an empty range gives
// a rule with no alternatives.
GrammarElement integer_grammar(Grammar& grammar, std::optional<NumberBound> minimum,
                               std::optional<NumberBound> maximum);
// A JSON number: with no bounds "-"? int ("." digits)? ([eE] [+-]? digits)?; with bounds, the
// exponent is left out and the fraction follows the bounds.
GrammarElement number_grammar(Grammar& grammar, std::optional<NumberBound> minimum,
                              std::optional<NumberBound> maximum);

}  // namespace tessera
