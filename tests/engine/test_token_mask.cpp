// Token masks from compiled grammars on real vocabularies (stories260K's 512 sentencepiece tokens,
// Qwen3's 151k byte-level BPE tokens): at every step of a random constrained walk the mask holds
// exactly the tokens whose bytes the grammar can take next (checked token by token), end tokens
// only where the grammar may end; and the walk's text is a prefix of a valid JSON text.
#include <gtest/gtest.h>

#include <random>

#include "engine/structured_output/compiled_grammar.h"
#include "engine/structured_output/grammar_compiler.h"
#include "support/loader_files.h"

namespace tessera {
namespace {

using testing::kModels;
using testing::kStoriesGguf;

bool allowed(std::span<const uint32_t> words, int32_t token) {
  return (words[static_cast<size_t>(token) / 32] >> (static_cast<uint32_t>(token) % 32)) & 1u;
}

// Walks `steps` tokens: checks each mask against a token-by-token replay, then takes a random
// allowed token. Returns the text made.
std::string checked_walk(const Tokenizer& tokenizer, GrammarCompiler& compiler,
                         const OutputConstraint& constraint, int steps, uint32_t seed) {
  std::shared_ptr<CompiledGrammar> grammar = compiler.compile(constraint);
  const TokenVocabulary& vocabulary = grammar->vocabulary();
  const std::vector<int32_t> end_ids = tokenizer.eos_ids();
  GrammarMatcher matcher(grammar);
  std::mt19937 random(seed);
  std::string text;
  std::vector<uint32_t> words(static_cast<size_t>(vocabulary.mask_words()));
  for (int step = 0; step < steps && !matcher.terminated(); ++step) {
    matcher.fill_mask(words, end_ids);
    std::vector<int32_t> choices;
    for (int32_t token = 0; token < static_cast<int32_t>(vocabulary.logits_width()); ++token) {
      const bool is_end = std::find(end_ids.begin(), end_ids.end(), token) != end_ids.end();
      GrammarMatcher probe = matcher;
      const bool expected = is_end ? matcher.accepts() : probe.accept(token);
      EXPECT_EQ(allowed(words, token), expected)
          << "step " << step << " token " << token << " '" << vocabulary.token_bytes(token)
          << "' after '" << text << "'";
      if (expected && !is_end) choices.push_back(token);
    }
    if (choices.empty()) break;
    const int32_t token = choices[random() % choices.size()];
    EXPECT_TRUE(matcher.accept(token));
    text += vocabulary.token_bytes(token);
  }
  return text;
}

OutputConstraint person_schema() {
  OutputConstraint constraint;
  constraint.kind = OutputConstraint::Kind::json_schema;
  constraint.field = "response_format";
  constraint.text = R"({"type":"object","properties":{
      "name":{"type":"string","maxLength":12},
      "age":{"type":"integer","minimum":0,"maximum":150},
      "tags":{"type":"array","items":{"enum":["a","bc"]},"maxItems":3},
      "home":{"anyOf":[{"type":"null"},{"type":"object","properties":{"city":{"type":"string"}},
                                         "required":["city"],"additionalProperties":false}]}},
    "required":["name","age","tags","home"],"additionalProperties":false})";
  return constraint;
}

TEST(TokenMask, MatchesTheGrammarTokenByTokenOnStories260K) {
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(kStoriesGguf);
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    GrammarCompiler compiler(*tokenizer, tokenizer->vocab_size() + 3);  // wider, as models pad
    const std::string text = checked_walk(*tokenizer, compiler, person_schema(), 60, seed);
    EXPECT_EQ(text.rfind("{", 0), 0u) << text;
    EXPECT_NE(text.find("\"name\""), std::string::npos) << text;
  }
}

TEST(TokenMask, MatchesTheGrammarTokenByTokenOnQwen3) {
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(kModels + "/tokenizers/qwen3");
  GrammarCompiler compiler(*tokenizer, tokenizer->vocab_size());
  const std::string text = checked_walk(*tokenizer, compiler, person_schema(), 12, 7);
  EXPECT_EQ(text.rfind("{", 0), 0u) << text;
}

TEST(TokenMask, EndTokensOnlyWhereTheGrammarMayEnd) {
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(kStoriesGguf);
  OutputConstraint constraint;
  constraint.kind = OutputConstraint::Kind::regex;
  constraint.field = "guided_regex";
  constraint.text = "[0-9]+";
  GrammarCompiler compiler(*tokenizer, tokenizer->vocab_size());
  GrammarMatcher matcher(compiler.compile(constraint));
  const std::vector<int32_t> end_ids = tokenizer->eos_ids();
  ASSERT_FALSE(end_ids.empty());
  std::vector<uint32_t> words(static_cast<size_t>((tokenizer->vocab_size() + 31) / 32));
  matcher.fill_mask(words, end_ids);
  EXPECT_FALSE(allowed(words, end_ids[0]));
  const std::vector<int32_t> seven = tokenizer->encode("7", false);
  ASSERT_FALSE(seven.empty());
  ASSERT_TRUE(matcher.accept(seven.back()));
  matcher.fill_mask(words, end_ids);
  EXPECT_TRUE(allowed(words, end_ids[0]));
  EXPECT_FALSE(matcher.terminated());  // more digits may follow
}

TEST(TokenMask, ACompleteChoiceTerminates) {
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(kStoriesGguf);
  OutputConstraint constraint;
  constraint.kind = OutputConstraint::Kind::choice;
  constraint.field = "guided_choice";
  constraint.choices = {"yes", "no"};
  GrammarCompiler compiler(*tokenizer, tokenizer->vocab_size());
  GrammarMatcher matcher(compiler.compile(constraint));
  // "no" as the output text writes it, in the longest tokens whose pieces spell it.
  for (std::string_view rest = "no"; !rest.empty();) {
    int32_t best = -1;
    for (int32_t token = 0; token < tokenizer->vocab_size(); ++token) {
      const std::string piece = tokenizer->token_to_piece(token);
      if (!piece.empty() && rest.substr(0, piece.size()) == piece &&
          (best < 0 || piece.size() > tokenizer->token_to_piece(best).size()))
        best = token;
    }
    ASSERT_GE(best, 0);
    ASSERT_TRUE(matcher.accept(best)) << best;
    rest.remove_prefix(tokenizer->token_to_piece(best).size());
  }
  EXPECT_TRUE(matcher.terminated());
  // The same constraint compiles once.
  compiler.compile(constraint);
  EXPECT_EQ(compiler.statistics().compiled, 1);
  EXPECT_EQ(compiler.statistics().reused, 1);
}

// The memory all compiled grammars share (grammar_memory.h). A walk whose masks do not all fit
// drops them as it goes: the same masks (checked token by token), the same text, never more memory
// than the limit.
TEST(GrammarMemory, MasksThatDoNotFitAreDropped) {
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(kStoriesGguf);
  GrammarCompiler roomy(*tokenizer, tokenizer->vocab_size());
  const std::string text = checked_walk(*tokenizer, roomy, person_schema(), 40, 5);
  const GrammarStatistics before = roomy.compile(person_schema())->statistics();
  const size_t mask_bytes = static_cast<size_t>((tokenizer->vocab_size() + 31) / 32) * 4;
  ASSERT_GT(before.masks_computed, 8);
  // The automaton the walk made, and room for four masks.
  const size_t limit = before.automaton_bytes + 4 * mask_bytes;
  GrammarCompiler tight(*tokenizer, tokenizer->vocab_size(), GrammarCompiler::kDefaultCapacity,
                        limit);
  EXPECT_EQ(checked_walk(*tokenizer, tight, person_schema(), 40, 5), text);
  const GrammarStatistics after = tight.compile(person_schema())->statistics();
  EXPECT_GT(before.mask_bytes, 4 * mask_bytes);
  EXPECT_LE(after.mask_bytes, 4 * mask_bytes);
  EXPECT_LE(tight.statistics().memory_bytes, limit);
}

// Grammars no request holds are dropped, least recently used first, to make room for new ones;
// what is dropped is given back.
TEST(GrammarMemory, UnusedGrammarsAreDroppedToMakeRoom) {
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(kStoriesGguf);
  const auto digits = [](int i) {
    OutputConstraint constraint;
    constraint.kind = OutputConstraint::Kind::regex;
    constraint.field = "guided_regex";
    constraint.text = "[0-9]{" + std::to_string(i) + "}x";
    return constraint;
  };
  std::vector<uint32_t> words(static_cast<size_t>((tokenizer->vocab_size() + 31) / 32));
  GrammarCompiler roomy(*tokenizer, tokenizer->vocab_size());
  GrammarMatcher(roomy.compile(digits(40))).fill_mask(words, tokenizer->eos_ids());
  const size_t one = roomy.statistics().memory_bytes;  // the largest of them, one mask made
  ASSERT_GT(one, 0u);
  GrammarCompiler tight(*tokenizer, tokenizer->vocab_size(), GrammarCompiler::kDefaultCapacity,
                        8 * one);
  std::shared_ptr<CompiledGrammar> held = tight.compile(digits(1));
  for (int i = 2; i <= 40; ++i) {
    GrammarMatcher matcher(tight.compile(digits(i)));
    matcher.fill_mask(words, tokenizer->eos_ids());
    EXPECT_LE(tight.statistics().memory_bytes, 8 * one) << i;
  }
  EXPECT_GT(tight.statistics().evicted, 0);
  // The grammar a request holds stays cached: compiling it again reuses it.
  const int64_t compiled = tight.statistics().compiled;
  EXPECT_EQ(tight.compile(digits(1)), held);
  EXPECT_EQ(tight.statistics().compiled, compiled);
}

// A grammar that cannot fit even alone is an error naming the limit, and gives back what it took.
TEST(GrammarMemory, AGrammarThatCannotFitIsAnErrorNamingTheLimit) {
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(kStoriesGguf);
  GrammarCompiler tiny(*tokenizer, tokenizer->vocab_size(), GrammarCompiler::kDefaultCapacity, 256);
  try {
    tiny.compile(person_schema());
    FAIL() << "compiled within 256 bytes";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("MiB together"), std::string::npos) << error.what();
  }
  EXPECT_EQ(tiny.statistics().memory_bytes, 0u);
}

}  // namespace
}  // namespace tessera
