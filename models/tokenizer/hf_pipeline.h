// The stages of a Hugging Face tokenizer around its model: normalizer, pre-tokenizer, decoder and
// post-processor, parsed from tokenizer.json (or built directly, for GGUF and GPT-2 vocab files).
// Supported: normalizers NFC, NFD, Prepend, Replace, Strip, Sequence; pre-tokenizers Split,
// ByteLevel, Metaspace, Digits, Sequence; decoders ByteLevel, Metaspace, Replace, ByteFallback,
// Fuse, Strip, Sequence; post-processors TemplateProcessing, ByteLevel, RobertaProcessing,
// BertProcessing, Sequence. Anything else is rejected with the file and the type named.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "models/tokenizer/text/regex.h"

namespace tessera::hf {

// GPT-2's pre-tokenizer regex, used by ByteLevel(use_regex = true).
extern const char* const kGpt2Pattern;
// Llama-3's and Qwen2's (Qwen3 uses Qwen2's: digits one at a time).
extern const char* const kLlama3Pattern;
extern const char* const kQwen2Pattern;

class Normalizer {
 public:
  enum class Kind { kNfc, kNfd, kPrepend, kReplace, kStrip };
  struct Step {
    Kind kind;
    std::string text{};                // Prepend: the prefix; Replace: the literal pattern
    std::string content{};             // Replace: the replacement
    std::shared_ptr<Regex> pattern{};  // Replace with a regex pattern
    bool strip_left = false, strip_right = false;
  };

  std::vector<Step> steps;

  bool empty() const { return steps.empty(); }
  std::string apply(std::string text) const;
};

class PreTokenizer {
 public:
  enum class Kind { kSplit, kByteLevel, kMetaspace, kDigits };
  enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };
  enum class PrependScheme { kAlways, kFirst, kNever };
  struct Step {
    Kind kind;
    std::shared_ptr<Regex> pattern{};  // Split, Digits, ByteLevel(use_regex)
    Behavior behavior = Behavior::kIsolated;
    bool invert = false;
    bool add_prefix_space = false;  // ByteLevel
    std::string replacement{};      // Metaspace
    PrependScheme prepend_scheme = PrependScheme::kAlways;
    bool split = true;  // Metaspace
  };

  std::vector<Step> steps;

  // Whether the model sees bytes (a ByteLevel step is present): BPE then starts from GPT-2's byte
  // characters instead of Unicode characters.
  bool byte_level() const;
  // Splits one normalized segment into the pieces the model encodes, handing each (non-empty)
  // piece to `emit` in order, as soon as it is known: no list of pieces is built, so a long text
  // costs no large allocations. `at_text_start`: the segment starts the whole text (Metaspace's
  // "first" prepend scheme).
  using PieceSink = std::function<void(std::string_view piece)>;
  void apply(std::string_view segment, bool at_text_start, const PieceSink& emit) const;

 private:
  // Runs steps[step...] on one piece; `first`: the piece starts the text.
  void run(size_t step, std::string_view piece, bool first, const PieceSink& emit) const;
};

class Decoder {
 public:
  enum class Kind { kByteLevel, kMetaspace, kReplace, kByteFallback, kFuse, kStrip };
  struct Step {
    Kind kind;
    std::string text{};                // Replace: the literal pattern; Metaspace: the replacement
    std::string content{};             // Replace: the replacement; Strip: the character
    std::shared_ptr<Regex> pattern{};  // Replace with a regex pattern
    size_t strip_start = 0, strip_stop = 0;
    bool metaspace_strips_first = true;  // Metaspace: prepend scheme is not "never"
  };
  struct Token {
    std::string text;
    bool added = false;  // an added token: ByteLevel passes its text through unmapped
  };

  std::vector<Step> steps;

  // Joins the tokens' strings into the output bytes. Unlike HF's ByteFallback and ByteLevel,
  // bytes that are not valid UTF-8 are returned as they are, never replaced by U+FFFD: the
  // streaming decoder needs the raw bytes to complete characters split across tokens.
  // sequence_start = false decodes tokens as they read mid-text: Strip and Metaspace leave the
  // first token's leading space alone.
  std::string apply(std::vector<Token> tokens, bool sequence_start = true) const;
};

// Special token ids a single sequence gets around it when add_special is set.
struct PostProcessor {
  std::vector<int32_t> prefix_ids;
  std::vector<int32_t> suffix_ids;
};

// Parsing from tokenizer.json values; `source` (the file) names errors. `token_ids` resolves
// token strings in post-processor templates.
Normalizer parse_normalizer(const nlohmann::json& value, const std::string& source);
PreTokenizer parse_pre_tokenizer(const nlohmann::json& value, const std::string& source);
Decoder parse_decoder(const nlohmann::json& value, const std::string& source);
PostProcessor parse_post_processor(const nlohmann::json& value, const std::string& source,
                                   const std::map<std::string, int32_t>& token_ids);

}  // namespace tessera::hf
