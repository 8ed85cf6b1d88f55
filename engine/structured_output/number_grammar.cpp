#include "engine/structured_output/number_grammar.h"

#include <algorithm>
#include <string>
#include <vector>

#include "runtime/check.h"

namespace tessera {
namespace {

ByteSet digit_set(char first, char last) {
  ByteSet bytes;
  for (char c = first; c <= last; ++c) bytes.set(static_cast<unsigned char>(c));
  return bytes;
}

// Digit strings of one length from `low` to `high` (leading zeros allowed inside).
void same_length(Grammar& grammar, const std::string& low, const std::string& high,
                 GrammarSequence prefix, std::vector<GrammarSequence>& out) {
  size_t i = 0;
  while (i < low.size() && low[i] == high[i]) ++i;
  grammar.append_literal(prefix, low.substr(0, i));
  if (i == low.size()) {
    out.push_back(std::move(prefix));
    return;
  }
  const std::string low_tail = low.substr(i + 1), high_tail = high.substr(i + 1);
  const bool low_tail_zero = low_tail.find_first_not_of('0') == std::string::npos;
  const bool high_tail_nine = high_tail.find_first_not_of('9') == std::string::npos;
  auto any_digits = [&](GrammarSequence sequence, char first, char last) {
    sequence.push_back(grammar.byte_set(digit_set(first, last)));
    for (size_t k = 0; k < low_tail.size(); ++k)
      sequence.push_back(grammar.byte_set(digit_set('0', '9')));
    out.push_back(std::move(sequence));
  };
  char middle_first = static_cast<char>(low[i] + 1), middle_last = static_cast<char>(high[i] - 1);
  if (low_tail_zero) {
    middle_first = low[i];
  } else {
    GrammarSequence sequence = prefix;
    grammar.append_literal(sequence, std::string(1, low[i]));
    same_length(grammar, low_tail, std::string(low_tail.size(), '9'), std::move(sequence), out);
  }
  if (high_tail_nine) middle_last = high[i];
  if (middle_first <= middle_last) any_digits(prefix, middle_first, middle_last);
  if (!high_tail_nine) {
    GrammarSequence sequence = prefix;
    grammar.append_literal(sequence, std::string(1, high[i]));
    same_length(grammar, std::string(high_tail.size(), '0'), high_tail, std::move(sequence), out);
  }
}

int64_t power_of_ten(size_t digits) {
  int64_t value = 1;
  for (size_t i = 0; i < digits; ++i) value *= 10;
  return value;
}

// Magnitudes (no sign, no leading zeros) from `low` to `high` (unbounded when absent).
std::vector<GrammarSequence> magnitudes(Grammar& grammar, int64_t low,
                                        std::optional<int64_t> high) {
  std::vector<GrammarSequence> out;
  if (high && *high < low) return out;
  const size_t low_digits = std::to_string(low).size();
  const size_t high_digits = high ? std::to_string(*high).size() : low_digits;
  for (size_t digits = low_digits; digits <= high_digits; ++digits) {
    const int64_t first = digits == low_digits ? low : power_of_ten(digits - 1);
    const int64_t last = high && digits == high_digits ? *high : power_of_ten(digits) - 1;
    same_length(grammar, std::to_string(first), std::to_string(last), {}, out);
  }
  if (!high) {  // every magnitude with more digits than low
    GrammarSequence longer{grammar.byte_set(digit_set('1', '9'))};
    longer.push_back(grammar.repeat(grammar.byte_set(digit_set('0', '9')),
                                    static_cast<int64_t>(low_digits), std::nullopt, "number"));
    out.push_back(std::move(longer));
  }
  return out;
}

enum class Fraction { none, any, zero, nonzero };

// The integer part of a magnitude in [first, last] (last: unbounded when absent) and what its
// fraction may be.
struct Piece {
  int64_t first = 0;
  std::optional<int64_t> last;
  Fraction fraction = Fraction::any;
};

// Magnitudes m = I + F (F the fraction) with lower <= m and m <= upper (either absent).
std::vector<Piece> magnitude_pieces(std::optional<NumberBound> lower,
                                    std::optional<NumberBound> upper) {
  std::vector<Piece> from_lower{{0, std::nullopt, Fraction::any}};
  if (lower) {
    if (lower->inclusive)
      from_lower = {{lower->value, std::nullopt, Fraction::any}};
    else
      from_lower = {{lower->value + 1, std::nullopt, Fraction::any},
                    {lower->value, lower->value, Fraction::nonzero}};
  }
  std::vector<Piece> from_upper{{0, std::nullopt, Fraction::any}};
  if (upper) {
    from_upper.clear();
    if (upper->value >= 1) from_upper.push_back({0, upper->value - 1, Fraction::any});
    if (upper->inclusive) from_upper.push_back({upper->value, upper->value, Fraction::zero});
  }
  auto meet = [](Fraction a, Fraction b) {
    if (a == Fraction::any) return b;
    if (b == Fraction::any) return a;
    return a == b ? a : Fraction::none;
  };
  std::vector<Piece> pieces;
  for (const Piece& a : from_lower)
    for (const Piece& b : from_upper) {
      const int64_t first = std::max(a.first, b.first);
      std::optional<int64_t> last = a.last;
      if (b.last) last = last ? std::min(*last, *b.last) : *b.last;
      const Fraction fraction = meet(a.fraction, b.fraction);
      if ((last && *last < first) || fraction == Fraction::none) continue;
      pieces.push_back({first, last, fraction});
    }
  return pieces;
}

void check_bound(const std::optional<NumberBound>& bound) {
  TESSERA_CHECK(!bound || (bound->value >= -kMaxNumberBound && bound->value <= kMaxNumberBound),
                "number bound {} out of range", bound->value);
}

GrammarElement fraction_element(Grammar& grammar, Fraction fraction) {
  const GrammarElement digit = grammar.byte_set(digit_set('0', '9'));
  const GrammarElement dot = grammar.literal(".").front();
  switch (fraction) {
    case Fraction::any:
      return grammar.choice("fraction",
                            {{}, {dot, grammar.repeat(digit, 1, std::nullopt, "number")}});
    case Fraction::zero:
      return grammar.choice(
          "fraction",
          {{}, {dot, grammar.repeat(grammar.literal("0").front(), 1, std::nullopt, "number")}});
    case Fraction::nonzero:
      return grammar.choice("fraction", {{dot, grammar.repeat(digit, 0, std::nullopt, "number"),
                                          grammar.byte_set(digit_set('1', '9')),
                                          grammar.repeat(digit, 0, std::nullopt, "number")}});
    case Fraction::none:
      break;
  }
  return grammar.choice("fraction", {{}});
}

// Alternatives for a sign branch: `sign` then each piece's magnitudes and fraction.
void add_branch(Grammar& grammar, std::string_view sign, const std::vector<Piece>& pieces,
                bool integer, std::vector<GrammarSequence>& alternatives) {
  for (const Piece& piece : pieces) {
    if (integer && piece.fraction == Fraction::nonzero) continue;
    std::vector<GrammarSequence> digits = magnitudes(grammar, piece.first, piece.last);
    if (digits.empty()) continue;
    GrammarSequence sequence = grammar.literal(sign);
    sequence.push_back(grammar.choice("digits", std::move(digits)));
    if (!integer) sequence.push_back(fraction_element(grammar, piece.fraction));
    alternatives.push_back(std::move(sequence));
  }
}

GrammarElement bounded(Grammar& grammar, std::optional<NumberBound> minimum,
                       std::optional<NumberBound> maximum, bool integer) {
  check_bound(minimum);
  check_bound(maximum);
  if (integer) {  // whole numbers: exclusive bounds move by one
    if (minimum && !minimum->inclusive) minimum = NumberBound{minimum->value + 1, true};
    if (maximum && !maximum->inclusive) maximum = NumberBound{maximum->value - 1, true};
  }
  std::vector<GrammarSequence> alternatives;
  // x >= 0: x itself is the magnitude.
  if (!maximum || maximum->value > 0 || (maximum->value == 0 && maximum->inclusive)) {
    std::optional<NumberBound> lower;
    if (minimum && minimum->value >= 0) lower = minimum;
    add_branch(grammar, "", magnitude_pieces(lower, maximum), integer, alternatives);
  }
  // x < 0: the magnitude -x lies in [-maximum, -minimum].
  if (!minimum || minimum->value < 0) {
    // "-0" is zero, allowed where zero is.
    std::optional<NumberBound> lower = NumberBound{0, true};
    if (maximum && (maximum->value < 0 || !maximum->inclusive))
      lower = NumberBound{-maximum->value, maximum->inclusive};
    std::optional<NumberBound> upper;
    if (minimum) upper = NumberBound{-minimum->value, minimum->inclusive};
    add_branch(grammar, "-", magnitude_pieces(lower, upper), integer, alternatives);
  }
  return grammar.choice(integer ? "integer" : "number", std::move(alternatives));
}

}  // namespace

GrammarElement integer_grammar(Grammar& grammar, std::optional<NumberBound> minimum,
                               std::optional<NumberBound> maximum) {
  return bounded(grammar, minimum, maximum, true);
}

GrammarElement number_grammar(Grammar& grammar, std::optional<NumberBound> minimum,
                              std::optional<NumberBound> maximum) {
  if (minimum || maximum) return bounded(grammar, minimum, maximum, false);
  const GrammarElement digit = grammar.byte_set(digit_set('0', '9'));
  GrammarSequence exponent{grammar.byte_set(digit_set('E', 'E') | digit_set('e', 'e')),
                           grammar.choice("sign", {{}, grammar.literal("-"), grammar.literal("+")}),
                           grammar.repeat(digit, 1, std::nullopt, "number")};
  return grammar.choice("number", {{grammar.choice("sign", {{}, grammar.literal("-")}),
                                    integer_grammar(grammar, NumberBound{0, true}, std::nullopt),
                                    fraction_element(grammar, Fraction::any),
                                    grammar.choice("exponent", {{}, std::move(exponent)})}});
}

}  // namespace tessera
