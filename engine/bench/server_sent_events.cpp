#include "engine/bench/server_sent_events.h"

namespace tessera::bench {

void ServerSentEvents::feed(std::string_view bytes) {
  for (char c : bytes) {
    if (c == '\n' && after_carriage_return_) {
      after_carriage_return_ = false;
      continue;
    }
    after_carriage_return_ = c == '\r';
    if (c == '\n' || c == '\r') {
      line(pending_);
      pending_.clear();
    } else {
      pending_ += c;
    }
  }
}

void ServerSentEvents::finish() {
  if (!pending_.empty()) line(pending_);
  pending_.clear();
  line("");
}

void ServerSentEvents::line(std::string_view text) {
  if (text.empty()) {  // the end of an event
    if (has_data_) on_event_(data_);
    data_.clear();
    has_data_ = false;
    return;
  }
  if (text.front() == ':') return;  // a comment
  const size_t colon = text.find(':');
  const std::string_view field = text.substr(0, colon);
  if (field != "data") return;
  std::string_view value = colon == std::string_view::npos ? "" : text.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (has_data_) data_ += '\n';
  data_ += value;
  has_data_ = true;
}

}  // namespace tessera::bench
