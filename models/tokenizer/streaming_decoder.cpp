// StreamingDecoder: each pushed id decodes as the difference between decoding a short window of
// recent ids with and without it, so the cost per id stays constant and a leading-space rule
// (sentencepiece's Strip) only ever applies to the window's first token, never to the new one.
#include "models/tokenizer.h"
#include "models/tokenizer/unicode.h"

namespace tessera {
namespace {

// Ids of context kept before the new one: enough that the new id is never the first in the
// window (which would drop its leading space), with room for skipped special tokens.
constexpr size_t kContextIds = 8;

}  // namespace

StreamingDecoder::StreamingDecoder(const Tokenizer& tokenizer,
                                   const std::vector<int32_t>& context_ids, bool skip_special)
    : tokenizer_(tokenizer), skip_special_(skip_special) {
  const size_t keep = std::min(context_ids.size(), kContextIds);
  ids_.assign(context_ids.end() - static_cast<std::ptrdiff_t>(keep), context_ids.end());
}

std::string StreamingDecoder::push(int32_t id) {
  const std::string before = tokenizer_.decode(ids_, skip_special_);
  ids_.push_back(id);
  const std::string after = tokenizer_.decode(ids_, skip_special_);
  if (ids_.size() > kContextIds) ids_.erase(ids_.begin());
  // Decoders only append, so `before` is a prefix of `after`; should one ever rewrite earlier
  // text, emit from where the two differ.
  size_t common = 0;
  while (common < before.size() && common < after.size() && before[common] == after[common]) {
    ++common;
  }
  pending_.append(after, common);
  const size_t held = unicode::incomplete_utf8_tail(pending_);
  std::string ready =
      unicode::sanitize_utf8(std::string_view(pending_).substr(0, pending_.size() - held));
  pending_.erase(0, pending_.size() - held);
  return ready;
}

std::string StreamingDecoder::finish() {
  std::string rest = unicode::sanitize_utf8(pending_);
  pending_.clear();
  return rest;
}

}  // namespace tessera
