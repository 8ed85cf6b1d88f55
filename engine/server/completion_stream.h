// Streaming: the server-sent events of a streamed completion. Each engine output becomes one
// `data: {chunk}` event (a failed request's an error event); once every choice has ended, the
// usage chunk when stream_options.include_usage asked for it, then `data: [DONE]`.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "engine/request.h"
#include "engine/server/completion_assembler.h"

namespace tessera {

class CompletionStream {
 public:
  CompletionStream(size_t num_choices, bool include_usage);

  // The event for `output`, which `assembler` has recorded as choice `index`.
  std::string event(const RequestOutput& output, size_t index,
                    const CompletionAssembler& assembler);
  // The events after the last choice ended.
  std::string closing_events(const CompletionAssembler& assembler) const;

  // An SSE comment: written when nothing is new, so that a closed connection is noticed.
  static constexpr std::string_view keep_alive = ": keep-alive\n\n";

 private:
  std::vector<bool> started_;  // per choice: its first chunk (a chat's role) went out
  bool include_usage_ = false;
};

}  // namespace tessera
