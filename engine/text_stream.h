// A request's output text as tokens arrive: valid UTF-8 pieces (StreamingDecoder), with stop
// strings found even when they span tokens. Text that could still turn out to begin a stop string
// is held back until it cannot, so a stop string is never shown, not even in part.
#pragma once

#include <string>
#include <vector>

#include "models/tokenizer.h"

namespace tessera {

class TextStream {
 public:
  TextStream(const Tokenizer& tokenizer, const std::vector<int32_t>& prompt_ids,
             std::vector<std::string> stop_strings, bool skip_special = true);

  struct Piece {
    std::string text;         // safe to show now
    bool stopped = false;     // a stop string appeared; `text` ends where it began
    std::string stop_string;  // which one
  };
  Piece push(int32_t id);
  // At the end (not after a stop): everything still held back.
  std::string finish();

 private:
  StreamingDecoder decoder_;
  std::vector<std::string> stop_strings_;
  std::string held_;
};

}  // namespace tessera
