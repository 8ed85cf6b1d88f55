#include "models/tokenizer/text/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "runtime/check.h"

namespace tessera {

namespace {

// Backtracking steps one match may take. Tokenizer patterns need hundreds; a pattern from a file
// that backtracks exponentially fails with an error naming the file instead of running for hours.
constexpr uint32_t kMatchLimit = 1'000'000;

}  // namespace

struct Regex::Compiled {
  pcre2_code* code = nullptr;
  pcre2_match_context* context = nullptr;
  bool jit = false;
  ~Compiled() {
    pcre2_match_context_free(context);
    pcre2_code_free(code);
  }
};

Regex::Regex(const std::string& pattern, const std::string& source)
    : pattern_(pattern), source_(source), compiled_(std::make_unique<Compiled>()) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  // MATCH_INVALID_UTF: tokenizers get arbitrary bytes; invalid sequences must not abort a match.
  compiled_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                  PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error_code,
                                  &error_offset, nullptr);
  if (compiled_->code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof(message));
    throw Error(fmt::format("{}: the pre-tokenizer regex '{}' does not compile: {} (at offset {})",
                            source, pattern.substr(0, 200), reinterpret_cast<const char*>(message),
                            error_offset));
  }
  compiled_->jit = pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE) == 0;
  compiled_->context = pcre2_match_context_create(nullptr);
  TESSERA_CHECK(compiled_->context != nullptr, "out of memory for a PCRE2 match context");
  pcre2_set_match_limit(compiled_->context, kMatchLimit);
}

Regex::~Regex() = default;

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> matches;
  for_each_match(text, [&](size_t begin, size_t end) { matches.emplace_back(begin, end); });
  return matches;
}

void Regex::for_each_match(std::string_view text,
                           const std::function<void(size_t, size_t)>& on_match) const {
  const std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match_data(
      pcre2_match_data_create_from_pattern(compiled_->code, nullptr), &pcre2_match_data_free);
  TESSERA_CHECK(match_data != nullptr, "out of memory for PCRE2 match data");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t offset = 0;
  while (offset <= text.size()) {
    const int result = compiled_->jit
                           ? pcre2_jit_match(compiled_->code, subject, text.size(), offset, 0,
                                             match_data.get(), compiled_->context)
                           : pcre2_match(compiled_->code, subject, text.size(), offset, 0,
                                         match_data.get(), compiled_->context);
    if (result == PCRE2_ERROR_NOMATCH) break;
    if (result < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(result, message, sizeof(message));
      throw Error(fmt::format("{}: the pre-tokenizer regex '{}' failed on a {}-byte text: {}",
                              source_, pattern_.substr(0, 200), text.size(),
                              reinterpret_cast<const char*>(message)));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match_data.get());
    const size_t begin = ovector[0], end = ovector[1];
    if (end > begin) {
      on_match(begin, end);
      offset = end;
    } else {
      // An empty match: step over one character so the search always advances.
      offset = begin + 1;
      while (offset < text.size() && (static_cast<unsigned char>(text[offset]) & 0xC0) == 0x80) {
        ++offset;
      }
    }
  }
}

std::string Regex::escape(std::string_view literal) {
  // \Q...\E quotes everything except a literal "\E", which is split out.
  std::string out = "\\Q";
  for (size_t i = 0; i < literal.size(); ++i) {
    if (literal[i] == '\\' && i + 1 < literal.size() && literal[i + 1] == 'E') {
      out += "\\E\\\\\\Q";
      continue;
    }
    out.push_back(literal[i]);
  }
  out += "\\E";
  return out;
}

}  // namespace tessera
