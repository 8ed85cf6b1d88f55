#include "models/tokenizer/tokenizer_json.h"

#include <algorithm>
#include <charconv>
#include <cstring>

#include "models/input_file.h"
#include "models/json_input.h"
#include "models/tokenizer/text/unicode.h"
#include "runtime/check.h"

namespace tessera::hf {
namespace {

using json = nlohmann::json;

// A JSON parser specialized for tokenizer.json: model.vocab (object form) and model.merges are
// parsed straight into TokenizerJson's vectors without tree nodes, and strings are copied in
// runs between escapes, which keeps loading a large tokenizer.json fast where building nlohmann's
// tree was slow (docs/performance.md "Tokenizer loading").
class TokenizerJsonParser {
 public:
  TokenizerJsonParser(std::string_view text, TokenizerJson& out) : text_(text), out_(out) {}

  // Throws ParseFailure with a message and the byte offset.
  void parse() {
    out_.document = parse_value(0, Context::kRoot);
    skip_whitespace();
    if (position_ != text_.size()) fail("unexpected characters after the JSON value");
  }

  struct ParseFailure {
    std::string message;
    size_t offset;
  };

 private:
  enum class Context { kRoot, kDocument, kModel, kOther };

  [[noreturn]] void fail(const std::string& message) const {
    throw ParseFailure{message, position_};
  }

  void skip_whitespace() {
    while (position_ < text_.size()) {
      const char c = text_[position_];
      if (c != ' ' && c != '\n' && c != '\r' && c != '\t') break;
      ++position_;
    }
  }

  char peek() {
    skip_whitespace();
    if (position_ >= text_.size()) fail("unexpected end of file");
    return text_[position_];
  }

  void expect(char c) {
    if (peek() != c) fail(fmt::format("expected '{}'", c));
    ++position_;
  }

  // True (and consumes it) when the next character is `c`.
  bool accept(char c) {
    if (peek() != c) return false;
    ++position_;
    return true;
  }

  uint32_t parse_hex4() {
    if (position_ + 4 > text_.size()) fail("truncated \\u escape");
    uint32_t value = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = text_[position_++];
      value <<= 4;
      if (c >= '0' && c <= '9') {
        value |= c - '0';
      } else if (c >= 'a' && c <= 'f') {
        value |= c - 'a' + 10;
      } else if (c >= 'A' && c <= 'F') {
        value |= c - 'A' + 10;
      } else {
        fail("bad hex digit in a \\u escape");
      }
    }
    return value;
  }

  void parse_string_into(std::string& out) {
    expect('"');
    out.clear();
    while (true) {
      const size_t run_start = position_;
      while (position_ < text_.size()) {
        const auto c = static_cast<unsigned char>(text_[position_]);
        if (c == '"' || c == '\\' || c < 0x20) break;
        ++position_;
      }
      out.append(text_.data() + run_start, position_ - run_start);
      if (position_ >= text_.size()) fail("unterminated string");
      const char c = text_[position_++];
      if (c == '"') return;
      if (c != '\\') fail("control character in a string");
      if (position_ >= text_.size()) fail("unterminated string");
      const char escape = text_[position_++];
      switch (escape) {
        case '"':
          out.push_back('"');
          break;
        case '\\':
          out.push_back('\\');
          break;
        case '/':
          out.push_back('/');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'u': {
          char32_t code_point = parse_hex4();
          if (code_point >= 0xD800 && code_point <= 0xDBFF && text_.substr(position_, 2) == "\\u") {
            const size_t saved = position_;
            position_ += 2;
            const uint32_t low = parse_hex4();
            if (low >= 0xDC00 && low <= 0xDFFF) {
              code_point = 0x10000 + ((code_point - 0xD800) << 10) + (low - 0xDC00);
            } else {
              position_ = saved;
            }
          }
          if (code_point >= 0xD800 && code_point <= 0xDFFF)
            fail("unpaired surrogate in \\u escape");
          unicode::append_utf8(out, code_point);
          break;
        }
        default:
          fail(fmt::format("invalid escape '\\{}'", escape));
      }
    }
  }

  json parse_number() {
    const size_t start = position_;
    bool is_integer = true;
    if (position_ < text_.size() && text_[position_] == '-') ++position_;
    while (position_ < text_.size()) {
      const char c = text_[position_];
      if (c >= '0' && c <= '9') {
        ++position_;
      } else if (c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
        is_integer = false;
        ++position_;
      } else {
        break;
      }
    }
    const char* first = text_.data() + start;
    const char* last = text_.data() + position_;
    if (is_integer) {
      int64_t value = 0;
      if (std::from_chars(first, last, value).ptr == last) return json(value);
    }
    double value = 0;
    if (std::from_chars(first, last, value).ptr != last || first == last) {
      position_ = start;
      fail("invalid number");
    }
    return json(value);
  }

  void expect_literal(std::string_view literal) {
    if (text_.substr(position_, literal.size()) != literal) fail("invalid literal");
    position_ += literal.size();
  }

  // model.vocab: {"token": id, ...}
  void parse_vocab() {
    expect('{');
    out_.has_vocab = true;
    if (accept('}')) return;
    std::string token;
    do {
      parse_string_into(token);
      expect(':');
      peek();
      const json id = parse_number();
      if (!id.is_number_integer()) fail("a vocab id that is not an integer");
      out_.vocab.emplace_back(std::move(token), id.get<int64_t>());
    } while (accept(','));
    expect('}');
  }

  // model.merges: ["left right", ...] or [["left", "right"], ...]
  void parse_merges() {
    expect('[');
    out_.has_merges = true;
    if (accept(']')) return;
    std::string merge;
    do {
      if (peek() == '[') {
        ++position_;
        std::pair<std::string, std::string> pair;
        parse_string_into(pair.first);
        expect(',');
        parse_string_into(pair.second);
        expect(']');
        out_.merges.push_back(std::move(pair));
      } else {
        parse_string_into(merge);
        const size_t space = merge.find(' ');
        if (space == std::string::npos) fail("merge '" + merge + "' has no space");
        out_.merges.emplace_back(merge.substr(0, space), merge.substr(space + 1));
      }
    } while (accept(','));
    expect(']');
  }

  json parse_value(int depth, Context context) {
    if (depth > kMaxJsonDepth) fail(fmt::format("nesting deeper than {} levels", kMaxJsonDepth));
    const char c = peek();
    if (c == '{') {
      ++position_;
      json object = json::object();
      if (accept('}')) return object;
      std::string key;
      do {
        parse_string_into(key);
        expect(':');
        if (context == Context::kModel && key == "vocab" && peek() == '{') {
          parse_vocab();
          continue;
        }
        if (context == Context::kModel && key == "merges" && peek() == '[') {
          parse_merges();
          continue;
        }
        const Context child =
            context == Context::kRoot && key == "model" ? Context::kModel : Context::kOther;
        object[key] = parse_value(depth + 1, child);
      } while (accept(','));
      expect('}');
      return object;
    }
    if (c == '[') {
      ++position_;
      json array = json::array();
      if (accept(']')) return array;
      do {
        array.push_back(parse_value(depth + 1, Context::kOther));
      } while (accept(','));
      expect(']');
      return array;
    }
    if (c == '"') {
      std::string value;
      parse_string_into(value);
      return json(std::move(value));
    }
    if (c == 't') {
      expect_literal("true");
      return json(true);
    }
    if (c == 'f') {
      expect_literal("false");
      return json(false);
    }
    if (c == 'n') {
      expect_literal("null");
      return json(nullptr);
    }
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number();
    fail(fmt::format("unexpected character '{}'", c));
  }

  std::string_view text_;
  TokenizerJson& out_;
  size_t position_ = 0;
};

}  // namespace

TokenizerJson read_tokenizer_json(const std::string& path) {
  const std::string contents = read_input_file(path, "tokenizer");
  TokenizerJson result;
  try {
    TokenizerJsonParser(contents, result).parse();
  } catch (const TokenizerJsonParser::ParseFailure& failure) {
    const size_t line = 1 + std::count(contents.begin(),
                                       contents.begin() + static_cast<std::ptrdiff_t>(std::min(
                                                              failure.offset, contents.size())),
                                       '\n');
    throw Error(fmt::format("{}: not a valid tokenizer.json: {} at byte {} (line {})", path,
                            failure.message, failure.offset, line));
  }
  TESSERA_REQUIRE(result.document.is_object(),
                  "{}: not a valid tokenizer.json: the top level is "
                  "not a JSON object",
                  path);
  return result;
}

}  // namespace tessera::hf
