#include "fuzz/grammar_masks.h"

#include <memory>
#include <string>
#include <vector>

#include "engine/structured_output/compiled_grammar.h"
#include "fuzz/fuzz_support.h"
#include "models/tokenizer.h"

namespace tessera::fuzz {

namespace {

constexpr size_t kMaxSteps = 48;

// Token 0 ends the text; tokens 1..256 are the bytes; the rest are pieces.
class PieceTokenizer final : public Tokenizer {
 public:
  PieceTokenizer() {
    pieces_.push_back("");
    for (int byte = 0; byte < 256; ++byte)
      pieces_.push_back(std::string(1, static_cast<char>(byte)));
    for (const char* piece :
         {"\", \"", "\": ",  "\":",  "\"}",  "\"]",   "{\"",  "[\"",  " \"", "\",",   "ab", "abc\"",
          "a\"",    "ab\",", "the",  " the", "The",   "12",   "1,",   "0.5", "-1",    "e+", "1}",
          "true",   "false", "null", "\n  ", "\n",    "  ",   "\\\"", "\\n", "\\u00", "é",  "\xc3",
          "\xa9x",  "日本",  "AB-",  "-0",   "@mail", ".com", "+(",   "))",  "x\"}"})
      pieces_.push_back(piece);
  }
  std::vector<int32_t> encode(const std::string&, bool) const override { return {}; }
  std::string decode(const std::vector<int32_t>& ids, bool skip_special) const override {
    std::string text;
    for (int32_t id : ids)
      text += id == 0 ? (skip_special ? "" : "</s>") : pieces_[static_cast<size_t>(id)];
    return text;
  }
  int64_t vocab_size() const override { return static_cast<int64_t>(pieces_.size()); }
  std::optional<int32_t> bos_id() const override { return std::nullopt; }
  std::vector<int32_t> eos_ids() const override { return {0}; }
  std::string name() const override { return "fuzz-pieces"; }

 private:
  std::vector<std::string> pieces_;
};

const std::shared_ptr<const TokenVocabulary>& vocabulary() {
  static const PieceTokenizer tokenizer;
  static const auto built =
      std::make_shared<const TokenVocabulary>(tokenizer, tokenizer.vocab_size());
  return built;
}

}  // namespace

void check_masks(const Grammar& grammar, std::string_view text) {
  auto compiled = std::make_shared<CompiledGrammar>(grammar, vocabulary());
  const TokenVocabulary& tokens = compiled->vocabulary();
  std::vector<uint32_t> words(static_cast<size_t>(tokens.mask_words()));
  GrammarMatcher matcher(compiled);
  const std::vector<int32_t> end_ids = {0};
  for (size_t step = 0; step <= std::min(text.size(), kMaxSteps); ++step) {
    matcher.fill_mask(words, end_ids);
    for (int32_t token = 1; token < static_cast<int32_t>(tokens.num_token_ids()); ++token) {
      GrammarMatcher probe = matcher;
      const bool allowed = (words[static_cast<size_t>(token) / 32] >> (token % 32)) & 1u;
      require(allowed == probe.accept(token), "a token mask differs from the automaton");
    }
    require(((words[0] & 1u) != 0) == matcher.accepts(), "the end token's bit is wrong");
    if (step == text.size() || !matcher.accept(1 + static_cast<uint8_t>(text[step]))) break;
  }
}

}  // namespace tessera::fuzz
