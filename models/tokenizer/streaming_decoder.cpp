// StreamingDecoder: each pushed id decodes as the difference between decoding a short window of
// recent ids with and without it, so the cost per id stays constant and a leading-space rule
// (sentencepiece's Strip) only ever applies to the window's first token, never to the new one.
#include <algorithm>

#include "models/tokenizer.h"
#include "models/tokenizer/text/unicode.h"

namespace tessera {
namespace {

// Ids of context that show text, kept before the new one, so that the new id is never the first
// text of the window (which would drop its leading space). Ids that show nothing (skipped special
// tokens, ids past the vocabulary) do not count, or a run of them would push all the text out;
// of such a run only kHiddenRun are kept (hidden_id_to_drop picks which go).
constexpr size_t kContextIds = 8;
constexpr size_t kHiddenRun = 4;

// Of the hidden run of `ids` from `first` to the end, the id whose loss changes the least: one
// past the vocabulary (decoders skip it), else one repeated later in the run (a skipped BOS's
// effect, such as sentencepiece stripping the next token's space, outlives any run of other
// hidden ids after it), else the oldest.
size_t hidden_id_to_drop(const std::vector<int32_t>& ids, size_t first, int64_t vocab_size) {
  for (size_t i = first; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= vocab_size) return i;
  for (size_t i = first; i < ids.size(); ++i)
    if (std::find(ids.begin() + static_cast<std::ptrdiff_t>(i) + 1, ids.end(), ids[i]) != ids.end())
      return i;
  return first;
}

}  // namespace

StreamingDecoder::StreamingDecoder(const Tokenizer& tokenizer,
                                   const std::vector<int32_t>& context_ids, bool skip_special)
    : tokenizer_(tokenizer), skip_special_(skip_special) {
  for (int32_t id : context_ids) {
    append(id);
    trim();
  }
}

void StreamingDecoder::append(int32_t id) {
  ids_.push_back(id);
  // Twice: one token alone may decode to nothing at the start of a text (a lone "▁") yet show.
  shows_.push_back(!tokenizer_.decode({id, id}, skip_special_).empty());
}

void StreamingDecoder::trim() {
  size_t hidden_run = 0;
  while (hidden_run < shows_.size() && !shows_[shows_.size() - 1 - hidden_run]) ++hidden_run;
  if (hidden_run > kHiddenRun) {
    const size_t first = ids_.size() - hidden_run;
    const auto drop =
        static_cast<std::ptrdiff_t>(hidden_id_to_drop(ids_, first, tokenizer_.vocab_size()));
    ids_.erase(ids_.begin() + drop);
    shows_.erase(shows_.begin() + drop);
  }
  auto showing = static_cast<size_t>(std::count(shows_.begin(), shows_.end(), true));
  while (showing > kContextIds) {
    showing -= shows_.front();
    ids_.erase(ids_.begin());
    shows_.erase(shows_.begin());
  }
}

std::string StreamingDecoder::push(int32_t id) {
  const std::string before = tokenizer_.decode(ids_, skip_special_);
  append(id);
  const std::string after = tokenizer_.decode(ids_, skip_special_);
  trim();  // for the next id: both of its decodes see the same window
  // Decoders only append, so `before` is a prefix of `after`; should one ever rewrite earlier
  // text, emit from where the two differ.
  size_t common = 0;
  while (common < before.size() && common < after.size() && before[common] == after[common]) {
    ++common;
  }
  last_added_bytes_.assign(after, common);
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
