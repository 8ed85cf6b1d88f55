#include "engine/text_stream.h"

#include <algorithm>

#include "models/tokenizer/text/unicode.h"

namespace tessera {

TextStream::TextStream(const Tokenizer& tokenizer, const std::vector<int32_t>& prompt_ids,
                       std::vector<std::string> stop_strings, bool skip_special)
    : decoder_(tokenizer, prompt_ids, skip_special), stop_strings_(std::move(stop_strings)) {}

void TextStream::emit(std::string text, Piece& piece) {
  shown_characters_ += static_cast<int64_t>(unicode::count_code_points(text));
  while (!unshown_.empty() && unshown_.front().text_offset < shown_characters_) {
    piece.shown.push_back(unshown_.front());
    unshown_.pop_front();
  }
  piece.text = std::move(text);
}

TextStream::Piece TextStream::push(int32_t id) {
  // The decoder's text so far is valid UTF-8 ending before this token's first byte, so the
  // token's text starts at that character (a character split over tokens is theirs alike).
  const int64_t starts_at = decoded_characters_;
  const std::string decoded = decoder_.push(id);
  if (!decoder_.last_added_bytes().empty())
    unshown_.push_back({pushes_, starts_at, decoder_.last_added_bytes()});
  ++pushes_;
  decoded_characters_ += static_cast<int64_t>(unicode::count_code_points(decoded));
  held_ += decoded;
  Piece piece;
  size_t earliest = std::string::npos;
  for (const std::string& stop : stop_strings_) {
    size_t at = held_.find(stop);
    if (at < earliest) {
      earliest = at;
      piece.stop_string = stop;
    }
  }
  if (earliest != std::string::npos) {
    piece.stopped = true;
    emit(held_.substr(0, earliest), piece);
    held_.clear();
    unshown_.clear();  // their text is the stop string's or after it
    return piece;
  }
  // Hold back the longest tail that a stop string starts with.
  size_t keep = 0;
  for (const std::string& stop : stop_strings_) {
    for (size_t length = std::min(stop.size() - 1, held_.size()); length > keep; --length) {
      if (held_.compare(held_.size() - length, length, stop, 0, length) == 0) {
        keep = length;
        break;
      }
    }
  }
  emit(held_.substr(0, held_.size() - keep), piece);
  held_.erase(0, held_.size() - keep);
  return piece;
}

TextStream::Piece TextStream::finish() {
  Piece piece;
  // Bytes of an unfinished character come out as U+FFFD, so every unshown token is shown here.
  emit(held_ + decoder_.finish(), piece);
  held_.clear();
  unshown_.clear();
  return piece;
}

}  // namespace tessera
