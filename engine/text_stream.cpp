#include "engine/text_stream.h"

#include <algorithm>

namespace tessera {

TextStream::TextStream(const Tokenizer& tokenizer, const std::vector<int32_t>& prompt_ids,
                       std::vector<std::string> stop_strings, bool skip_special)
    : decoder_(tokenizer, prompt_ids, skip_special), stop_strings_(std::move(stop_strings)) {}

TextStream::Piece TextStream::push(int32_t id) {
  held_ += decoder_.push(id);
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
    piece.text = held_.substr(0, earliest);
    piece.stopped = true;
    held_.clear();
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
  piece.text = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return piece;
}

std::string TextStream::finish() {
  std::string rest = held_ + decoder_.finish();
  held_.clear();
  return rest;
}

}  // namespace tessera
