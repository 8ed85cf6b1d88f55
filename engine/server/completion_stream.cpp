#include "engine/server/completion_stream.h"

namespace tessera {
namespace {

std::string data_event(const nlohmann::json& value) {
  return "data: " + dump_json(value) + "\n\n";
}

}  // namespace

CompletionStream::CompletionStream(size_t num_choices, bool include_usage)
    : started_(num_choices, false), include_usage_(include_usage) {}

std::string CompletionStream::event(const RequestOutput& output, size_t index,
                                    const CompletionAssembler& assembler) {
  if (output.finish_reason == FinishReason::error)
    return data_event(failed_request_error(output.error).body());
  const bool first = !started_.at(index);
  started_[index] = true;
  const CompletionAssembler::Shown& shown = assembler.last_shown();
  nlohmann::json chunk;
  if (shown.text == output.text && shown.tool_calls.empty()) {
    chunk = completion_chunk(assembler.context(), index, output, first);
  } else {
    RequestOutput visible = output;  // the text that is content, not a tool call
    visible.text = shown.text;
    chunk = completion_chunk(assembler.context(), index, visible, first, shown.tool_calls);
  }
  // With include_usage every chunk carries "usage": null, as OpenAI sends it.
  if (include_usage_) chunk["usage"] = nullptr;
  return data_event(chunk);
}

std::string CompletionStream::closing_events(const CompletionAssembler& assembler) const {
  std::string events;
  if (include_usage_) events += data_event(usage_chunk(assembler.context(), assembler.usage()));
  return events + "data: [DONE]\n\n";
}

}  // namespace tessera
