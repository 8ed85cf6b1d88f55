// Token masks from compiled grammars on real vocabularies (stories260K's 512 sentencepiece tokens,
// Qwen3's 151k byte-level BPE tokens): at every step of a random constrained walk the mask holds
// exactly the tokens whose bytes the grammar can take next (checked token by token), end tokens
// only where the grammar may end; and the walk's text is a prefix of a valid JSON text.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

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

// Masks made from decided positions (position_tokens.h) on Qwen3's vocabulary, where tokens cross
// the ends of rules often: a document of each constraint, walked as a model would write it, gets at
// every step exactly the tokens the automaton takes (checked token by token), and no state needs a
// walk of the whole vocabulary.
TEST(TokenMask, DecidedPositionsGiveTheWholeMaskOnQwen3) {
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(kModels + "/tokenizers/qwen3");
  struct Case {
    OutputConstraint constraint;
    std::string document;
  };
  auto make = [](OutputConstraint::Kind kind, std::string text, std::string document) {
    OutputConstraint constraint;
    constraint.kind = kind;
    constraint.field = "test";
    constraint.text = std::move(text);
    return Case{constraint, std::move(document)};
  };
  const std::vector<Case> cases = {
      make(OutputConstraint::Kind::json_schema, R"({"type":"object","properties":{
          "name":{"type":"string","maxLength":12},
          "email":{"type":"string","format":"email"},
          "code":{"type":"string","pattern":"^[A-Z]{2}-[0-9]{3}$"},
          "count":{"type":"integer","minimum":1,"maximum":99},
          "price":{"type":"number"},
          "tags":{"type":"array","items":{"type":"string"}}},
        "required":["name","email","code","count","price","tags"],
        "additionalProperties":false})",
           R"({"name": "Zoë Ng", "email": "zoe.ng@mail.example.org", "code": "AB-042", )"
           R"("count": 17, "price": 3.25e2, "tags": ["a \"quoted\" tag", "naïve", "x"]})"),
      make(OutputConstraint::Kind::regex, "[a-z ]{0,40}(\\.|!)", "the cat sat on the mat."),
      make(OutputConstraint::Kind::grammar, R"gbnf(
          root ::= expr
          expr ::= term (("+" | "-") term)*
          term ::= [0-9]+ | "(" expr ")"
        )gbnf",
           "(12+(3-45))-678+(9)"),
      make(OutputConstraint::Kind::json_object, "",
           R"({"a": [1, 2.5, {"b": null}], "c": "text with spaces", "d": true})"),
  };
  GrammarCompiler compiler(*tokenizer, tokenizer->vocab_size());
  const std::vector<int32_t> end_ids = tokenizer->eos_ids();
  for (const Case& c : cases) {
    SCOPED_TRACE(c.document);
    std::shared_ptr<CompiledGrammar> grammar = compiler.compile(c.constraint);
    const TokenVocabulary& vocabulary = grammar->vocabulary();
    std::vector<uint32_t> words(static_cast<size_t>(vocabulary.mask_words()));
    GrammarMatcher matcher(grammar);
    for (int32_t next : tokenizer->encode(c.document, false)) {
      matcher.fill_mask(words, end_ids);
      for (int32_t token = 0; token < static_cast<int32_t>(vocabulary.num_token_ids()); ++token) {
        if (std::find(end_ids.begin(), end_ids.end(), token) != end_ids.end()) continue;
        GrammarMatcher probe = matcher;
        ASSERT_EQ(allowed(words, token), probe.accept(token))
            << "token " << token << " '" << vocabulary.token_bytes(token) << "'";
      }
      ASSERT_TRUE(matcher.accept(next)) << "'" << vocabulary.token_bytes(next) << "'";
    }
    EXPECT_TRUE(matcher.accepts());
    const GrammarStatistics statistics = grammar->statistics();
    EXPECT_GT(statistics.positions_decided, 0);
    EXPECT_GT(statistics.masks_computed, 5);
    EXPECT_EQ(statistics.masks_from_positions, statistics.masks_computed);
  }
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

// Requests that bring the same new schema at once wait for one compile (deciding positions ahead
// takes tens of milliseconds on Qwen3's vocabulary) and share what it made.
TEST(TokenMask, TheSameConstraintSentAtOnceCompilesOnce) {
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(kModels + "/tokenizers/qwen3");
  GrammarCompiler compiler(*tokenizer, tokenizer->vocab_size());
  OutputConstraint constraint = person_schema();
  constexpr int kThreads = 4;
  std::vector<std::shared_ptr<CompiledGrammar>> compiled(kThreads);
  std::atomic<int> ready = 0;
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      ++ready;
      while (ready.load() < kThreads) std::this_thread::yield();
      compiled[static_cast<size_t>(i)] = compiler.compile(constraint);
    });
  for (std::thread& thread : threads) thread.join();
  for (const auto& grammar : compiled) EXPECT_EQ(grammar, compiled[0]);
  EXPECT_EQ(compiler.statistics().compiled, 1);
  EXPECT_EQ(compiler.statistics().reused, kThreads - 1);
  // A constraint that fails fails for each request that sent it, with its own field named.
  OutputConstraint broken;
  broken.kind = OutputConstraint::Kind::regex;
  broken.text = "[a-";
  std::vector<std::string> errors(kThreads);
  threads.clear();
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      OutputConstraint mine = broken;
      mine.field = "field_" + std::to_string(i);
      try {
        compiler.compile(mine);
      } catch (const Error& error) {
        errors[static_cast<size_t>(i)] = error.what();
      }
    });
  for (std::thread& thread : threads) thread.join();
  for (int i = 0; i < kThreads; ++i)
    EXPECT_NE(errors[static_cast<size_t>(i)].find("field_" + std::to_string(i)), std::string::npos)
        << errors[static_cast<size_t>(i)];
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
  // The automaton the walk made, its decided positions, and room for four masks.
  const size_t limit = before.automaton_bytes + before.position_bytes + 4 * mask_bytes;
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
