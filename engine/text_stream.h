// A request's output text as tokens arrive: valid UTF-8 pieces (StreamingDecoder), with stop
// strings found even when they span tokens. Text that could still turn out to begin a stop string
// is held back until it cannot, so a stop string is never shown, not even in part. Each pushed
// token is released once its text is shown (with where it starts), or never when it adds no text
// (a skipped special token) or its text lies past a stop string: logprobs list exactly the tokens
// whose text is in the output.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "models/tokenizer.h"

namespace tessera {

class TextStream {
 public:
  TextStream(const Tokenizer& tokenizer, const std::vector<int32_t>& prompt_ids,
             std::vector<std::string> stop_strings, bool skip_special = true);

  // A pushed token whose text is now in the output.
  struct ShownToken {
    int64_t push_number = 0;  // 0 for the first push(), 1 for the second, ...
    int64_t text_offset = 0;  // in characters (code points) from the start of the output text
    std::string text;         // the bytes it added there (may be part of a character)
  };
  struct Piece {
    std::string text;               // safe to show now
    bool stopped = false;           // a stop string appeared; `text` ends where it began
    std::string stop_string;        // which one
    std::vector<ShownToken> shown;  // in push order
  };
  Piece push(int32_t id);
  int64_t pushes() const { return pushes_; }  // the push_number the next push() gets
  // At the end (not after a stop): everything still held back.
  Piece finish();

 private:
  // Appends `text` to the output and releases the tokens whose text starts before its end.
  void emit(std::string text, Piece& piece);

  StreamingDecoder decoder_;
  std::vector<std::string> stop_strings_;
  std::string held_;
  int64_t pushes_ = 0;
  int64_t decoded_characters_ = 0;  // characters the decoder has given
  int64_t shown_characters_ = 0;    // characters of the output text so far
  std::deque<ShownToken> unshown_;  // tokens that added text not shown yet
};

}  // namespace tessera
