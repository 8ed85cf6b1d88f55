#include "models/tokenizer/hf_pipeline.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>

#include "models/json_input.h"
#include "models/tokenizer/text/replace_all.h"
#include "models/tokenizer/text/unicode.h"
#include "runtime/check.h"

namespace tessera::hf {

using json = nlohmann::json;

const char* const kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const char* const kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

namespace {

bool is_unicode_whitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

void replace_regex(std::string& text, const Regex& pattern, std::string_view to) {
  const auto matches = pattern.find_all(text);
  if (matches.empty()) return;
  std::string out;
  size_t position = 0;
  for (const auto& [begin, end] : matches) {
    out.append(text, position, begin - position);
    out.append(to);
    position = end;
  }
  out.append(text, position);
  text.swap(out);
}

// Applies one of HF's split behaviors to a text given its pattern matches (HF's
// NormalizedString::split) and returns the [begin, end) ranges of the non-empty pieces.
std::vector<std::pair<size_t, size_t>> split_by_matches(
    size_t text_size, const std::vector<std::pair<size_t, size_t>>& matches,
    PreTokenizer::Behavior behavior, bool invert) {
  using Behavior = PreTokenizer::Behavior;
  struct Part {
    size_t begin, end;
    bool is_match;
  };
  std::vector<Part> parts;
  parts.reserve(matches.size() * 2 + 1);
  size_t previous_end = 0;
  for (const auto& [begin, end] : matches) {
    if (begin > previous_end) parts.push_back({previous_end, begin, invert});
    parts.push_back({begin, end, !invert});
    previous_end = end;
  }
  if (previous_end < text_size) parts.push_back({previous_end, text_size, invert});

  std::vector<Part> pieces;  // is_match marks pieces to drop (Removed only)
  pieces.reserve(parts.size());
  switch (behavior) {
    case Behavior::kIsolated:
      for (const Part& part : parts) pieces.push_back({part.begin, part.end, false});
      break;
    case Behavior::kRemoved:
      pieces = parts;
      break;
    case Behavior::kContiguous: {
      bool previous_match = false;
      for (const Part& part : parts) {
        if (part.is_match == previous_match && !pieces.empty()) {
          pieces.back().end = part.end;
        } else {
          pieces.push_back({part.begin, part.end, false});
        }
        previous_match = part.is_match;
      }
      break;
    }
    case Behavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (const Part& part : parts) {
        if (part.is_match && !previous_match && !pieces.empty()) {
          pieces.back().end = part.end;
        } else {
          pieces.push_back({part.begin, part.end, false});
        }
        previous_match = part.is_match;
      }
      break;
    }
    case Behavior::kMergedWithNext: {
      bool previous_match = false;
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
        if (it->is_match && !previous_match && !pieces.empty()) {
          pieces.back().begin = it->begin;
        } else {
          pieces.push_back({it->begin, it->end, false});
        }
        previous_match = it->is_match;
      }
      std::reverse(pieces.begin(), pieces.end());
      break;
    }
  }
  std::vector<std::pair<size_t, size_t>> ranges;
  ranges.reserve(pieces.size());
  for (const Part& piece : pieces) {
    if (!piece.is_match && piece.end > piece.begin) ranges.emplace_back(piece.begin, piece.end);
  }
  return ranges;
}

std::string type_of(const json& value, const std::string& source, const char* what) {
  TESSERA_REQUIRE(value.is_object() && value.contains("type") && value["type"].is_string(),
                  "{}: the {} is not an object with a \"type\": {}", source, what,
                  json_excerpt(value));
  return value["type"].get<std::string>();
}

// A Replace/Split "pattern": {"String": "..."} or {"Regex": "..."}. Returns the literal string
// (for String) and sets `regex` for Regex patterns.
std::string parse_pattern(const json& value, const std::string& source,
                          std::shared_ptr<Regex>& regex) {
  TESSERA_REQUIRE(value.is_object(), "{}: a pattern is not an object: {}", source,
                  json_excerpt(value));
  if (value.contains("Regex")) {
    regex = std::make_shared<Regex>(value["Regex"].get<std::string>(), source);
    return {};
  }
  TESSERA_REQUIRE(value.contains("String"),
                  "{}: a pattern has neither \"String\" nor \"Regex\": {}", source,
                  json_excerpt(value));
  return value["String"].get<std::string>();
}

template <typename T>
T get_or(const json& object, const char* key, T fallback) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  return it->get<T>();
}

void parse_normalizer_into(const json& value, const std::string& source, Normalizer& out) {
  if (value.is_null()) return;
  const std::string type = type_of(value, source, "normalizer");
  using Kind = Normalizer::Kind;
  if (type == "Sequence") {
    for (const json& child : value.at("normalizers")) parse_normalizer_into(child, source, out);
  } else if (type == "NFC") {
    out.steps.push_back({Kind::kNfc});
  } else if (type == "NFD") {
    out.steps.push_back({Kind::kNfd});
  } else if (type == "Prepend") {
    out.steps.push_back({Kind::kPrepend, value.at("prepend").get<std::string>()});
  } else if (type == "Replace") {
    Normalizer::Step step{Kind::kReplace};
    step.text = parse_pattern(value.at("pattern"), source, step.pattern);
    step.content = value.at("content").get<std::string>();
    out.steps.push_back(std::move(step));
  } else if (type == "Strip") {
    Normalizer::Step step{Kind::kStrip};
    step.strip_left = get_or(value, "strip_left", true);
    step.strip_right = get_or(value, "strip_right", true);
    out.steps.push_back(std::move(step));
  } else {
    throw Error(
        fmt::format("{}: unsupported normalizer type '{}' (supported: NFC, NFD, Prepend, "
                    "Replace, Strip, Sequence)",
                    source, type));
  }
}

PreTokenizer::Behavior parse_behavior(const json& value, const std::string& source) {
  using Behavior = PreTokenizer::Behavior;
  const std::string name = value.is_string() ? value.get<std::string>() : "";
  if (name == "Isolated") return Behavior::kIsolated;
  if (name == "Removed") return Behavior::kRemoved;
  if (name == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return Behavior::kMergedWithNext;
  if (name == "Contiguous") return Behavior::kContiguous;
  throw Error(fmt::format("{}: unknown Split behavior {}", source, json_excerpt(value)));
}

// Metaspace's prepend scheme: "always"/"first"/"never", or the legacy add_prefix_space flag.
PreTokenizer::PrependScheme parse_prepend_scheme(const json& value, const std::string& source) {
  using Scheme = PreTokenizer::PrependScheme;
  if (value.contains("prepend_scheme") && value["prepend_scheme"].is_string()) {
    const std::string scheme = value["prepend_scheme"].get<std::string>();
    if (scheme == "always") return Scheme::kAlways;
    if (scheme == "first") return Scheme::kFirst;
    if (scheme == "never") return Scheme::kNever;
    throw Error(fmt::format("{}: unknown Metaspace prepend_scheme '{}'", source, scheme));
  }
  return get_or(value, "add_prefix_space", true) ? Scheme::kAlways : Scheme::kNever;
}

void parse_pre_tokenizer_into(const json& value, const std::string& source, PreTokenizer& out) {
  if (value.is_null()) return;
  const std::string type = type_of(value, source, "pre_tokenizer");
  using Kind = PreTokenizer::Kind;
  if (type != "Sequence" && type != "ByteLevel") {
    for (const auto& step : out.steps) {
      TESSERA_REQUIRE(step.kind != Kind::kByteLevel,
                      "{}: a {} pre-tokenizer after ByteLevel is not supported", source, type);
    }
  }
  if (type == "Sequence") {
    for (const json& child : value.at("pretokenizers")) {
      parse_pre_tokenizer_into(child, source, out);
    }
  } else if (type == "Split") {
    PreTokenizer::Step step{Kind::kSplit};
    const std::string literal = parse_pattern(value.at("pattern"), source, step.pattern);
    if (step.pattern == nullptr)
      step.pattern = std::make_shared<Regex>(Regex::escape(literal), source);
    step.behavior = parse_behavior(value.at("behavior"), source);
    step.invert = get_or(value, "invert", false);
    out.steps.push_back(std::move(step));
  } else if (type == "ByteLevel") {
    PreTokenizer::Step step{Kind::kByteLevel};
    step.add_prefix_space = get_or(value, "add_prefix_space", true);
    if (get_or(value, "use_regex", true))
      step.pattern = std::make_shared<Regex>(kGpt2Pattern, source);
    out.steps.push_back(std::move(step));
  } else if (type == "Metaspace") {
    PreTokenizer::Step step{Kind::kMetaspace};
    step.replacement = get_or<std::string>(value, "replacement", "\u2581");
    TESSERA_REQUIRE(!step.replacement.empty(),
                    "{}: a Metaspace pre-tokenizer needs a non-empty replacement", source);
    step.prepend_scheme = parse_prepend_scheme(value, source);
    step.split = get_or(value, "split", true);
    out.steps.push_back(std::move(step));
  } else if (type == "Digits") {
    PreTokenizer::Step step{Kind::kDigits};
    const bool individual = get_or(value, "individual_digits", false);
    step.pattern = std::make_shared<Regex>(R"(\p{N})", source);
    step.behavior =
        individual ? PreTokenizer::Behavior::kIsolated : PreTokenizer::Behavior::kContiguous;
    out.steps.push_back(std::move(step));
  } else {
    throw Error(
        fmt::format("{}: unsupported pre_tokenizer type '{}' (supported: Split, ByteLevel, "
                    "Metaspace, Digits, Sequence)",
                    source, type));
  }
}

void parse_decoder_into(const json& value, const std::string& source, Decoder& out) {
  if (value.is_null()) return;
  const std::string type = type_of(value, source, "decoder");
  using Kind = Decoder::Kind;
  if (type == "Sequence") {
    for (const json& child : value.at("decoders")) parse_decoder_into(child, source, out);
  } else if (type == "ByteLevel") {
    out.steps.push_back({Kind::kByteLevel});
  } else if (type == "Metaspace") {
    Decoder::Step step{Kind::kMetaspace};
    step.text = get_or<std::string>(value, "replacement", "\u2581");
    TESSERA_REQUIRE(!step.text.empty(), "{}: a Metaspace decoder needs a non-empty replacement",
                    source);
    step.metaspace_strips_first =
        parse_prepend_scheme(value, source) != PreTokenizer::PrependScheme::kNever;
    out.steps.push_back(std::move(step));
  } else if (type == "Replace") {
    Decoder::Step step{Kind::kReplace};
    step.text = parse_pattern(value.at("pattern"), source, step.pattern);
    step.content = value.at("content").get<std::string>();
    out.steps.push_back(std::move(step));
  } else if (type == "ByteFallback") {
    out.steps.push_back({Kind::kByteFallback});
  } else if (type == "Fuse") {
    out.steps.push_back({Kind::kFuse});
  } else if (type == "Strip") {
    Decoder::Step step{Kind::kStrip};
    step.content = value.at("content").get<std::string>();
    TESSERA_REQUIRE(!step.content.empty(), "{}: a Strip decoder needs a non-empty content", source);
    // A token's own length bounds what can be stripped; larger counts are clamped there.
    step.strip_start = static_cast<size_t>(
        json_integer(value.at("start"), 0, INT32_MAX, source + ": Strip decoder start"));
    step.strip_stop = static_cast<size_t>(
        json_integer(value.at("stop"), 0, INT32_MAX, source + ": Strip decoder stop"));
    out.steps.push_back(std::move(step));
  } else {
    throw Error(
        fmt::format("{}: unsupported decoder type '{}' (supported: ByteLevel, Metaspace, "
                    "Replace, ByteFallback, Fuse, Strip, Sequence)",
                    source, type));
  }
}

int32_t resolve_token(const std::string& token, const json& given_id, const std::string& source,
                      const std::map<std::string, int32_t>& token_ids) {
  if (given_id.is_number_integer()) return given_id.get<int32_t>();
  const auto it = token_ids.find(token);
  TESSERA_REQUIRE(it != token_ids.end(),
                  "{}: the post-processor uses the token '{}', which is not in the vocabulary",
                  source, token);
  return it->second;
}

PostProcessor parse_post_processor_impl(const json& value, const std::string& source,
                                        const std::map<std::string, int32_t>& token_ids) {
  PostProcessor out;
  if (value.is_null()) return out;
  const std::string type = type_of(value, source, "post_processor");
  if (type == "ByteLevel") return out;  // only adjusts offsets
  if (type == "Sequence") {
    // Each processor wraps the result of the previous one.
    for (const json& child : value.at("processors")) {
      PostProcessor inner = parse_post_processor_impl(child, source, token_ids);
      inner.prefix_ids.insert(inner.prefix_ids.end(), out.prefix_ids.begin(), out.prefix_ids.end());
      out.prefix_ids = std::move(inner.prefix_ids);
      out.suffix_ids.insert(out.suffix_ids.end(), inner.suffix_ids.begin(), inner.suffix_ids.end());
    }
    return out;
  }
  if (type == "TemplateProcessing") {
    const json& special_tokens =
        value.contains("special_tokens") ? value["special_tokens"] : json::object();
    bool seen_sequence = false;
    for (const json& item : value.at("single")) {
      if (item.contains("Sequence")) {
        seen_sequence = true;
        continue;
      }
      TESSERA_REQUIRE(item.contains("SpecialToken"), "{}: unknown template item {}", source,
                      json_excerpt(item));
      const std::string token = item["SpecialToken"].at("id").get<std::string>();
      std::vector<int32_t> ids;
      if (special_tokens.contains(token) && special_tokens[token].contains("ids")) {
        for (const json& id : special_tokens[token].at("ids"))
          ids.push_back(static_cast<int32_t>(json_integer(
              id, 0, int64_t{1} << 24, fmt::format("{}: special token '{}' id", source, token))));
      } else {
        ids.push_back(resolve_token(token, json(), source, token_ids));
      }
      auto& target = seen_sequence ? out.suffix_ids : out.prefix_ids;
      target.insert(target.end(), ids.begin(), ids.end());
    }
    return out;
  }
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    const json& cls = value.at("cls");
    const json& sep = value.at("sep");
    out.prefix_ids.push_back(
        resolve_token(cls.at(0).get<std::string>(), cls.at(1), source, token_ids));
    out.suffix_ids.push_back(
        resolve_token(sep.at(0).get<std::string>(), sep.at(1), source, token_ids));
    return out;
  }
  throw Error(
      fmt::format("{}: unsupported post_processor type '{}' (supported: "
                  "TemplateProcessing, ByteLevel, RobertaProcessing, BertProcessing, "
                  "Sequence)",
                  source, type));
}

// JSON errors (a missing key, a wrong type) become errors naming the file and the component.
template <typename Parse>
auto with_json_errors(const std::string& source, const char* what, Parse parse) {
  try {
    return parse();
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: malformed {}: {}", source, what, e.what()));
  }
}

}  // namespace

std::string Normalizer::apply(std::string text) const {
  for (const Step& step : steps) {
    switch (step.kind) {
      case Kind::kNfc:
        if (!unicode::is_nfc_quick(text)) text = unicode::normalize_nfc(text);
        break;
      case Kind::kNfd:
        text = unicode::normalize_nfd(text);
        break;
      case Kind::kPrepend:
        if (!text.empty()) text.insert(0, step.text);
        break;
      case Kind::kReplace:
        if (step.pattern) {
          replace_regex(text, *step.pattern, step.content);
        } else {
          replace_all(text, step.text, step.content);
        }
        break;
      case Kind::kStrip: {
        size_t begin = 0, end = text.size();
        if (step.strip_left) {
          for (size_t position = 0; position < text.size();) {
            if (!is_unicode_whitespace(unicode::decode_utf8(text, position))) break;
            begin = position;
          }
        }
        if (step.strip_right) {
          while (end > begin) {
            size_t start = end - 1;
            while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) {
              --start;
            }
            size_t cursor = start;
            if (!is_unicode_whitespace(unicode::decode_utf8(text, cursor))) break;
            end = start;
          }
        }
        text = text.substr(begin, end - begin);
        break;
      }
    }
  }
  return text;
}

bool PreTokenizer::byte_level() const {
  for (const Step& step : steps) {
    if (step.kind == Kind::kByteLevel) return true;
  }
  return false;
}

void PreTokenizer::apply(std::string_view segment, bool at_text_start,
                         const PieceSink& emit) const {
  run(0, segment, at_text_start, emit);
}

void PreTokenizer::run(size_t step_index, std::string_view piece, bool first,
                       const PieceSink& emit) const {
  if (piece.empty()) return;
  if (step_index == steps.size()) {
    emit(piece);
    return;
  }
  const Step& step = steps[step_index];
  const auto next = [&](std::string_view text, size_t begin, size_t end) {
    run(step_index + 1, text.substr(begin, end - begin), first && begin == 0, emit);
  };
  // Isolated and Removed splits stream the matches; the merging behaviors need the list.
  const auto split = [&](std::string_view text, const Regex& pattern, Behavior behavior,
                         bool invert) {
    if (behavior == Behavior::kIsolated || behavior == Behavior::kRemoved) {
      size_t previous_end = 0;
      const auto part = [&](size_t begin, size_t end, bool is_match) {
        if (!(behavior == Behavior::kRemoved && is_match)) next(text, begin, end);
      };
      pattern.for_each_match(text, [&](size_t begin, size_t end) {
        if (begin > previous_end) part(previous_end, begin, invert);
        part(begin, end, !invert);
        previous_end = end;
      });
      if (previous_end < text.size()) part(previous_end, text.size(), invert);
      return;
    }
    for (const auto& [begin, end] :
         split_by_matches(text.size(), pattern.find_all(text), behavior, invert)) {
      next(text, begin, end);
    }
  };
  switch (step.kind) {
    case Kind::kSplit:
    case Kind::kDigits:
      split(piece, *step.pattern, step.behavior, step.invert);
      break;
    case Kind::kByteLevel: {
      // The byte mapping itself happens in the model; here only the prefix space and GPT-2's
      // regex split.
      std::string prefixed;
      std::string_view text = piece;
      if (step.add_prefix_space && piece[0] != ' ') {
        prefixed.reserve(piece.size() + 1);
        prefixed.push_back(' ');
        prefixed.append(piece);
        text = prefixed;
      }
      if (step.pattern) {
        split(text, *step.pattern, Behavior::kIsolated, false);
      } else {
        run(step_index + 1, text, first, emit);
      }
      break;
    }
    case Kind::kMetaspace: {
      std::string text(piece);
      replace_all(text, " ", step.replacement);
      const bool prepend = step.prepend_scheme == PrependScheme::kAlways ||
                           (step.prepend_scheme == PrependScheme::kFirst && first);
      if (prepend && !text.starts_with(step.replacement)) text.insert(0, step.replacement);
      if (!step.split) {
        run(step_index + 1, text, first, emit);
        break;
      }
      std::vector<std::pair<size_t, size_t>> matches;
      for (size_t found = text.find(step.replacement); found != std::string::npos;
           found = text.find(step.replacement, found + step.replacement.size())) {
        matches.emplace_back(found, found + step.replacement.size());
      }
      for (const auto& [begin, end] :
           split_by_matches(text.size(), matches, Behavior::kMergedWithNext, false)) {
        next(text, begin, end);
      }
      break;
    }
  }
}

std::string Decoder::apply(std::vector<Token> tokens, bool sequence_start) const {
  if (steps.empty()) {
    // HF joins the tokens with spaces when a tokenizer has no decoder.
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0) out.push_back(' ');
      out += tokens[i].text;
    }
    return out;
  }
  for (const Step& step : steps) {
    switch (step.kind) {
      case Kind::kByteLevel: {
        Token joined;
        for (const Token& token : tokens) {
          if (token.added) {
            joined.text += token.text;
            continue;
          }
          for (size_t position = 0; position < token.text.size();) {
            const size_t start = position;
            const char32_t code_point = unicode::decode_utf8(token.text, position);
            const int byte = unicode::char_to_byte(code_point);
            if (byte >= 0) {
              joined.text.push_back(static_cast<char>(byte));
            } else {
              joined.text.append(token.text, start, position - start);
            }
          }
        }
        tokens.assign(1, std::move(joined));
        break;
      }
      case Kind::kMetaspace:
        for (size_t i = 0; i < tokens.size(); ++i) {
          // HF drops the replacement of the first token (the prepended space); only its leading
          // one here, so that a first token holding several spaces keeps the others.
          if (i == 0 && sequence_start && step.metaspace_strips_first &&
              tokens[0].text.rfind(step.text, 0) == 0) {
            tokens[0].text.erase(0, step.text.size());
          }
          replace_all(tokens[i].text, step.text, " ");
        }
        break;
      case Kind::kReplace:
        for (Token& token : tokens) {
          if (step.pattern) {
            replace_regex(token.text, *step.pattern, step.content);
          } else {
            replace_all(token.text, step.text, step.content);
          }
        }
        break;
      case Kind::kByteFallback: {
        std::vector<Token> out;
        bool previous_was_byte = false;
        for (Token& token : tokens) {
          const std::string& text = token.text;
          const bool is_byte = !token.added && text.size() == 6 && text.starts_with("<0x") &&
                               text[5] == '>' &&
                               std::isxdigit(static_cast<unsigned char>(text[3])) &&
                               std::isxdigit(static_cast<unsigned char>(text[4]));
          if (!is_byte) {
            out.push_back(std::move(token));
            previous_was_byte = false;
            continue;
          }
          const char byte = static_cast<char>(std::stoi(text.substr(3, 2), nullptr, 16));
          if (previous_was_byte) {
            out.back().text.push_back(byte);
          } else {
            out.push_back({std::string(1, byte), false});
          }
          previous_was_byte = true;
        }
        tokens.swap(out);
        break;
      }
      case Kind::kFuse: {
        Token joined;
        for (const Token& token : tokens) joined.text += token.text;
        tokens.assign(1, std::move(joined));
        break;
      }
      case Kind::kStrip:
        if (!sequence_start) break;
        for (Token& token : tokens) {
          size_t begin = 0, end = token.text.size();
          for (size_t i = 0; i < step.strip_start &&
                             token.text.compare(begin, step.content.size(), step.content) == 0;
               ++i) {
            begin += step.content.size();
          }
          for (size_t i = 0; i < step.strip_stop && end >= begin + step.content.size() &&
                             token.text.compare(end - step.content.size(), step.content.size(),
                                                step.content) == 0;
               ++i) {
            end -= step.content.size();
          }
          token.text = token.text.substr(begin, end - begin);
        }
        break;
    }
  }
  std::string out;
  for (const Token& token : tokens) out += token.text;
  return out;
}

Normalizer parse_normalizer(const json& value, const std::string& source) {
  return with_json_errors(source, "normalizer", [&] {
    Normalizer out;
    parse_normalizer_into(value, source, out);
    return out;
  });
}

PreTokenizer parse_pre_tokenizer(const json& value, const std::string& source) {
  return with_json_errors(source, "pre_tokenizer", [&] {
    PreTokenizer out;
    parse_pre_tokenizer_into(value, source, out);
    return out;
  });
}

Decoder parse_decoder(const json& value, const std::string& source) {
  return with_json_errors(source, "decoder", [&] {
    Decoder out;
    parse_decoder_into(value, source, out);
    return out;
  });
}

PostProcessor parse_post_processor(const json& value, const std::string& source,
                                   const std::map<std::string, int32_t>& token_ids) {
  return with_json_errors(source, "post_processor",
                          [&] { return parse_post_processor_impl(value, source, token_ids); });
}

}  // namespace tessera::hf
