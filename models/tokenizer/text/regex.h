// A compiled PCRE2 pattern (UTF + Unicode properties, JIT when available) for pre-tokenizer
// splits. Immutable after construction, so one instance can be matched from many threads.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessera {

class Regex {
 public:
  // Throws tessera::Error naming `source` (the file it came from), the pattern and PCRE2's
  // message when the pattern does not compile.
  Regex(const std::string& pattern, const std::string& source);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // The [begin, end) byte ranges of all non-overlapping matches, left to right. Invalid UTF-8 in
  // `text` never matches a character class but does not stop the search.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;
  // The same matches, handed to `on_match(begin, end)` as they are found (no list is built).
  void for_each_match(std::string_view text,
                      const std::function<void(size_t, size_t)>& on_match) const;

  const std::string& pattern() const { return pattern_; }

  // A pattern matching `literal` exactly.
  static std::string escape(std::string_view literal);

 private:
  struct Compiled;
  std::string pattern_;
  std::string source_;  // for messages
  std::unique_ptr<Compiled> compiled_;
};

}  // namespace tessera
