// Reads a text/event-stream response as it arrives (the OpenAI API's streaming format): bytes in,
// in chunks cut anywhere, and each complete event's data out. Lines are "field: value" (one
// optional space after the colon), ended by \n, \r\n or \r; a blank line ends an event; several
// data lines join with \n; comments (":...") and other fields (event, id, retry) carry nothing a
// completion stream needs.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace tessera::bench {

class ServerSentEvents {
 public:
  explicit ServerSentEvents(std::function<void(const std::string& data)> on_event)
      : on_event_(std::move(on_event)) {}

  void feed(std::string_view bytes);
  // The stream ended: an event without its blank line still counts (some servers close right
  // after the last data line).
  void finish();

 private:
  void line(std::string_view text);

  std::function<void(const std::string&)> on_event_;
  std::string pending_;  // an unfinished line
  std::string data_;
  bool has_data_ = false;
  bool after_carriage_return_ = false;  // a \n right after \r ends no second line
};

}  // namespace tessera::bench
