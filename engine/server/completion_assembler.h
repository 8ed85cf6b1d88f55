// Response assembly: one HTTP response's choices as the engine's outputs arrive (text, token
// ids, logprobs, how each finished), its usage, and the final JSON body of a response that is
// not streamed.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/request.h"
#include "engine/server/openai_protocol.h"
#include "engine/server/tool_call_extractor.h"

namespace tessera {

class CompletionAssembler {
 public:
  // `request_ids`: the engine requests of the choices, in choice order.
  CompletionAssembler(ResponseContext context, const std::vector<std::string>& request_ids,
                      int64_t prompt_tokens);

  // Adds one output to its choice; returns the choice's index. With tools, the output's text
  // goes through the choice's ToolCallExtractor: last_shown() is what of it may be shown now and
  // the calls it completed.
  size_t record(const RequestOutput& output);
  struct Shown {
    std::string text;
    std::vector<ToolCall> tool_calls;
  };
  const Shown& last_shown() const { return last_shown_; }
  bool finished() const { return finished_ == choices_.size(); }  // every choice has ended
  bool failed() const { return !error_.empty(); }  // a request ended in an engine error
  nlohmann::json usage() const;
  // The body of a response that is not streamed: the whole completion, or the error of the
  // first request that failed. write_body hands it to `sink` a choice at a time, so a large
  // response is never held whole; it stops, returning false, when `sink` does.
  bool write_body(const std::function<bool(std::string_view)>& sink) const;
  std::string final_body() const;

  const ResponseContext& context() const { return context_; }

 private:
  ResponseContext context_;
  std::unordered_map<std::string, size_t> index_of_;
  std::vector<ChoiceState> choices_;
  size_t finished_ = 0;
  int64_t prompt_tokens_ = 0;
  int64_t completion_tokens_ = 0;
  int64_t cached_tokens_ = 0;
  std::string error_;                                         // the first engine error
  std::vector<std::optional<ToolCallExtractor>> extractors_;  // per choice, with tools
  Shown last_shown_;
};

// The error a request that failed reports, in a body or a stream.
ApiError failed_request_error(const std::string& engine_error);

}  // namespace tessera
