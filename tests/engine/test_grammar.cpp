// The grammar engine's front ends and automaton: GBNF text, regular expressions, number ranges,
// choices; what each accepts and rejects, and the errors for what it cannot take.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "engine/structured_output/code_point_set.h"
#include "engine/structured_output/follow_sets.h"
#include "engine/structured_output/grammar_automaton.h"
#include "engine/structured_output/grammar_compiler.h"
#include "engine/structured_output/grammar_text.h"
#include "engine/structured_output/number_grammar.h"
#include "engine/structured_output/regex_grammar.h"
#include "runtime/check.h"

namespace tessera {
namespace {

bool matches(const Grammar& grammar, std::string_view text) {
  return GrammarAutomaton(grammar).matches(text);
}

// Whether `text` is a prefix of some match (the automaton never dies on it).
bool viable(const Grammar& grammar, std::string_view text) {
  GrammarAutomaton automaton(grammar);
  return automaton.advance(automaton.initial(), text) != GrammarAutomaton::kDead;
}

std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

TEST(GrammarText, ParsesRulesAlternativesGroupsAndRepetitions) {
  const Grammar grammar = parse_grammar_text(R"(
    # a list of key-value pairs
    root  ::= "{" pair ("," pair)* "}"
    pair  ::= key ":" value
    key   ::= [a-z]+
    value ::= "true" | "false" | [0-9]{1,3}
  )",
                                             "guided_grammar");
  EXPECT_TRUE(matches(grammar, "{a:true}"));
  EXPECT_TRUE(matches(grammar, "{a:true,bc:12,d:999}"));
  EXPECT_FALSE(matches(grammar, "{a:1234}"));
  EXPECT_FALSE(matches(grammar, "{}"));
  EXPECT_FALSE(matches(grammar, "{A:true}"));
  EXPECT_TRUE(viable(grammar, "{a:tr"));
  EXPECT_FALSE(viable(grammar, "{a:x"));
}

TEST(GrammarText, CharacterClassesEscapesAndUnicode) {
  const Grammar grammar = parse_grammar_text(
      "root ::= [^\"\\\\\\x00-\\x1f]* \"\\n\" \"é\"? [α-ω]{2} .\n", "guided_grammar");
  EXPECT_TRUE(matches(grammar, "hi there\nαβ!"));
  EXPECT_TRUE(matches(grammar, "\néωω€"));
  EXPECT_FALSE(matches(grammar, "quote\"\nαβ!"));
  EXPECT_FALSE(matches(grammar, "\nab!"));
  EXPECT_FALSE(matches(grammar, "\nαβ"));
  // A token may end inside a character: the automaton takes bytes.
  EXPECT_TRUE(viable(grammar, "\n\xce"));
  EXPECT_FALSE(viable(grammar, "\n\xff"));
}

TEST(GrammarText, RepetitionsOfGroupsAndEmptyAlternatives) {
  const Grammar grammar =
      parse_grammar_text("root ::= (\"ab\" | \"c\"){2,3} tail\ntail ::= \"!\" | \"\"", "g");
  EXPECT_TRUE(matches(grammar, "abc"));
  EXPECT_TRUE(matches(grammar, "ccc!"));
  EXPECT_TRUE(matches(grammar, "abab"));
  EXPECT_FALSE(matches(grammar, "c"));
  EXPECT_FALSE(matches(grammar, "cccc"));
}

TEST(GrammarText, RightRecursionKeepsTheStackFlat) {
  const Grammar grammar = parse_grammar_text("root ::= \"a\" root | \"b\"", "g");
  GrammarAutomaton automaton(grammar);
  GrammarStateId state = automaton.initial();
  for (int i = 0; i < 10000; ++i) state = automaton.advance(state, 'a');
  ASSERT_NE(state, GrammarAutomaton::kDead);
  EXPECT_LT(automaton.num_states(), 5u);  // one state for every "a" after the first
  EXPECT_TRUE(automaton.accepts(automaton.advance(state, 'b')));
}

TEST(GrammarText, NestingIsCountedOnTheStack) {
  const Grammar grammar = parse_grammar_text("root ::= \"(\" root \")\" | \"x\"", "g");
  EXPECT_TRUE(matches(grammar, "((x))"));
  EXPECT_FALSE(matches(grammar, "((x)"));
  EXPECT_FALSE(matches(grammar, "(x))"));
}

TEST(GrammarText, ErrorsNameTheFieldAndTheProblem) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "g: the grammar is empty"},
      {"start ::= \"a\"", "no `root ::= ...`"},
      {"root ::= missing", "uses rule 'missing' but never defines it"},
      {"root ::= root \"a\" | \"b\"", "rule 'root' is left-recursive"},
      {"root ::= e root \"a\" | \"b\"\ne ::= \"\"", "left-recursive"},
      {"root ::= \"a", "unterminated string"},
      {"root ::= [a-", "unterminated character class"},
      {"root ::= \"a\"{5000}", "too large"},
      {"root ::= \"a\"\nroot ::= \"b\"", "defined twice"},
      {"root ::= " + std::string(300, '(') + "\"a\"" + std::string(300, ')'), "nested too deeply"},
  };
  for (const auto& [text, expected] : cases)
    EXPECT_THAT(error_of([&] { parse_grammar_text(text, "g"); }), ::testing::HasSubstr(expected))
        << text;
}

TEST(RegexGrammar, WholeTextMatches) {
  const Grammar grammar = regex_grammar(R"(^(\d{3}-)?\d{4}|[A-Z][a-z]*\.?$)", "guided_regex");
  EXPECT_TRUE(matches(grammar, "555-1234"));
  EXPECT_TRUE(matches(grammar, "1234"));
  EXPECT_TRUE(matches(grammar, "Hello."));
  EXPECT_TRUE(matches(grammar, "H"));
  EXPECT_FALSE(matches(grammar, "12345"));
  EXPECT_FALSE(matches(grammar, "hello"));
  EXPECT_FALSE(matches(grammar, "55-1234"));
}

TEST(RegexGrammar, ClassesEscapesAndDot) {
  const Grammar grammar = regex_grammar(R"([^\s,]+,\w+\.\S[\-a]x*?.)", "guided_regex");
  EXPECT_TRUE(matches(grammar, "é€,a_1.!-xxz"));
  EXPECT_TRUE(matches(grammar, "x,y.zaq"));
  EXPECT_FALSE(matches(grammar, "x y,z.!-q"));
  EXPECT_FALSE(matches(grammar, "x,y.!-\n"));  // `.` is not a newline
}

TEST(RegexGrammar, JsonStringTextEscapesQuotesAndControls) {
  Grammar grammar;
  const int32_t root = grammar.add_rule("root");
  grammar.add_alternative(
      root, {regex_element(grammar, "a[\"\\\\\\n]b", RegexText::json_string, "pattern")});
  grammar.set_root(root);
  EXPECT_TRUE(matches(grammar, "a\\\"b"));
  EXPECT_TRUE(matches(grammar, "a\\\\b"));
  EXPECT_TRUE(matches(grammar, "a\\nb"));
  EXPECT_FALSE(matches(grammar, "a\"b"));
  EXPECT_FALSE(matches(grammar, "a\nb"));
}

TEST(RegexGrammar, RefusesWhatAGrammarCannotDo) {
  for (const char* pattern :
       {"(?=a)b", "(a)\\1", "\\bword", "a^b", "(a", "a)", "*a", "a**", "a{5000}"}) {
    const std::string error = error_of([&] { regex_grammar(pattern, "guided_regex"); });
    EXPECT_NE(error.find("guided_regex: "), std::string::npos) << pattern << ": " << error;
  }
}

TEST(NumberGrammar, IntegerRangesMatchExactlyTheirMembers) {
  struct Range {
    std::optional<int64_t> minimum, maximum;
  };
  for (const Range& range : {Range{-5, 123}, Range{0, 0}, Range{7, 7}, Range{-120, -3},
                             Range{95, 1004}, Range{std::nullopt, 17}, Range{-17, std::nullopt},
                             Range{100, std::nullopt}, Range{std::nullopt, -100}}) {
    Grammar grammar;
    const int32_t root = grammar.add_rule("root");
    std::optional<NumberBound> minimum, maximum;
    if (range.minimum) minimum = NumberBound{*range.minimum, true};
    if (range.maximum) maximum = NumberBound{*range.maximum, true};
    grammar.add_alternative(root, {integer_grammar(grammar, minimum, maximum)});
    grammar.set_root(root);
    for (int64_t value = -1100; value <= 1100; ++value) {
      const bool inside = (!range.minimum || value >= *range.minimum) &&
                          (!range.maximum || value <= *range.maximum);
      ASSERT_EQ(matches(grammar, std::to_string(value)), inside)
          << value << " in [" << (range.minimum ? *range.minimum : -9999) << ", "
          << (range.maximum ? *range.maximum : 9999) << "]";
    }
    EXPECT_FALSE(matches(grammar, "007"));
    EXPECT_FALSE(matches(grammar, "1.0"));
  }
}

TEST(NumberGrammar, FractionsFollowWholeNumberBounds) {
  Grammar grammar;
  const int32_t root = grammar.add_rule("root");
  grammar.add_alternative(root,
                          {number_grammar(grammar, NumberBound{-2, false}, NumberBound{3, true})});
  grammar.set_root(root);
  for (const char* inside : {"-1.999", "-1", "-0.5", "0", "2.75", "3", "3.000", "-0"})
    EXPECT_TRUE(matches(grammar, inside)) << inside;
  for (const char* outside : {"-2", "-2.0", "-2.5", "3.01", "4", "1e2", "01"})
    EXPECT_FALSE(matches(grammar, outside)) << outside;
}

TEST(Choices, OneOfTheStrings) {
  OutputConstraint constraint;
  constraint.kind = OutputConstraint::Kind::choice;
  constraint.choices = {"yes", "no", "maybe so"};
  constraint.field = "guided_choice";
  const Grammar grammar = constraint_grammar(constraint);
  EXPECT_TRUE(matches(grammar, "maybe so"));
  EXPECT_FALSE(matches(grammar, "maybe"));
  EXPECT_FALSE(matches(grammar, "yes!"));
  constraint.choices = {};
  EXPECT_NE(error_of([&] {
              constraint_grammar(constraint);
            }).find("guided_choice: the list of choices is empty"),
            std::string::npos);
}

ByteSet bytes_of(std::string_view text) {
  ByteSet bytes;
  for (char c : text) bytes.set(static_cast<unsigned char>(c));
  return bytes;
}

// What may follow each rule: the next element's first bytes, through rules that may be empty,
// and the enclosing rule's own where a reference ends its alternative (the end of the text is no
// byte).
TEST(FollowSets, BytesAfterEachRule) {
  const Grammar grammar = parse_grammar_text(R"(
    root  ::= "[" list "]" | item
    list  ::= item ("," item)*
    item  ::= space word space
    space ::= " "?
    word  ::= [a-c]+
  )",
                                             "guided_grammar");
  const std::vector<ByteSet> follow = bytes_after_rules(grammar);
  auto after = [&](std::string_view rule) {
    return follow[static_cast<size_t>(*grammar.find_rule(rule))];
  };
  EXPECT_EQ(after("root"), ByteSet());
  EXPECT_EQ(after("list"), bytes_of("]"));
  EXPECT_EQ(after("item"), bytes_of("],"));
  EXPECT_EQ(after("space"), bytes_of("abc],"));  // before a word, or where an item ends
  EXPECT_EQ(after("word"), bytes_of(" ],"));
}

// A repetition of a small rule of alternatives writes them out in its own rule, so that a stack
// stays in the repetition between characters; what it matches is unchanged.
TEST(FollowSets, RepeatedAlternativesAreWrittenOut) {
  Grammar grammar;
  const GrammarElement letter =
      grammar.choice("letter", {grammar.literal("a"), grammar.literal("bc")});
  const int32_t root = grammar.add_rule("root");
  grammar.add_alternative(root, {grammar.repeat(letter, 0, std::nullopt, "test")});
  grammar.set_root(root);
  EXPECT_THAT(grammar.to_text(), testing::HasSubstr(R"(::= [a] repeat | [b] [c] repeat | "")"));
  EXPECT_TRUE(matches(grammar, "abcbca"));
  EXPECT_TRUE(matches(grammar, ""));
  EXPECT_FALSE(matches(grammar, "ab"));
  // Too many copies for a bounded repetition: the rule is referenced, not written out.
  Grammar many;
  const GrammarElement item = many.choice("letter", {many.literal("a"), many.literal("bc")});
  const int32_t top = many.add_rule("root");
  many.add_alternative(top, {many.repeat(item, 0, Grammar::kMaxInlinedElements, "test")});
  many.set_root(top);
  EXPECT_THAT(many.to_text(), testing::HasSubstr("::= letter repeat"));
  EXPECT_TRUE(matches(many, "abca"));
}

TEST(CodePoints, Utf8SequencesCoverExactlyTheSet) {
  CodePointSet set;
  set.add(0x41, 0x5A);
  set.add(0x3B1, 0x3C9);
  set.add(0x7FF, 0x801);
  set.add(0xFFF0, 0x10010);
  Grammar grammar;
  const int32_t root = grammar.add_rule("root");
  grammar.add_alternative(root, {set.element(grammar, "class")});
  grammar.set_root(root);
  for (uint32_t c = 0; c < 0x11000; c += (c < 0x1000 ? 1 : 7)) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    ASSERT_EQ(matches(grammar, utf8_encode(c)), set.contains(c)) << std::hex << c;
  }
}

}  // namespace
}  // namespace tessera
