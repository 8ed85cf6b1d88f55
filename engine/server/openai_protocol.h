// The OpenAI API's request and response bodies: JSON to a validated request (every field
// type-checked, unknown fields refused as OpenAI refuses them, each error naming its field), and
// results to the JSON OpenAI sends, whole or as server-sent-event chunks.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/request.h"
#include "engine/sampling_params.h"
#include "engine/server/chat_template.h"
#include "engine/server/chat_tools.h"
#include "engine/structured_output/grammar_compiler.h"
#include "models/tokenizer.h"

namespace tessera {

// An error as the API reports it: {"error": {"message", "type", "param", "code"}} with a status.
class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string param = "",
           std::string type = "invalid_request_error", std::string code = "");
  int status;
  std::string type, param, code;
  nlohmann::json body() const;
};

constexpr int max_json_depth = 32;
// Parses a request body: invalid JSON, invalid UTF-8, nesting deeper than max_json_depth or a
// body that is not an object are 400s.
nlohmann::json parse_request_body(const std::string& body);

struct CompletionRequest {
  bool chat = false;
  std::string model;
  std::vector<std::vector<int32_t>> prompts;  // token ids, one list per prompt
  SamplingParams params;                      // n included; seed as given
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool max_tokens_given = false;
  int64_t priority = 0;  // vLLM's: lower runs first under --scheduling-policy priority
  // Structured output: what the output must match (compiled into params.grammar by
  // CompletionParser), and how long its compile took (0 when cached).
  std::optional<OutputConstraint> constraint;
  double grammar_compile_seconds = 0;
  ChatTools tools;  // chat: tools, tool_choice, parallel_tool_calls
};

struct PromptLimits {
  int64_t vocab_size = 0;
  int64_t logits_width = 0;  // the model's vocabulary: the width of structured output's masks
  int64_t max_model_len = 0;
  size_t max_prompts = 64;  // prompts in one /v1/completions call
  // A prompt text longer than this cannot fit max_model_len tokens: refused before tokenizing.
  size_t max_prompt_bytes = SIZE_MAX;
};

// max_prompt_bytes for a model of `max_model_len` tokens: each token stands for at most the
// tokenizer's longest token, with room for normalizations that shorten a text (NFC composes up
// to three characters into one).
size_t max_prompt_bytes(int64_t max_model_len, const Tokenizer& tokenizer);

// /v1/completions (chat = false) or /v1/chat/completions (chat = true), the chat's prompt
// offering `tools`. Throws ApiError.
CompletionRequest parse_completion_request(const nlohmann::json& body, bool chat,
                                           const Tokenizer& tokenizer,
                                           const ChatTemplate& chat_template,
                                           const PromptLimits& limits,
                                           const std::vector<ToolDefinition>& tools = {});

// One choice's result so far.
struct ChoiceState {
  std::string text;
  std::vector<int32_t> token_ids;
  std::vector<OutputLogprob> logprobs;
  FinishReason finish_reason = FinishReason::none;
  std::string stop_reason;
  std::vector<ToolCall> tool_calls;  // a chat answer's calls (finish_reason "tool_calls")
};

// The clock of the `created` fields: seconds since the Unix epoch.
int64_t unix_seconds_now();

struct ResponseContext {
  bool chat = false;
  std::string id;  // cmpl-... or chatcmpl-...
  int64_t created = 0;
  std::string model;
  std::optional<int64_t> logprobs;  // what the request asked
  const Tokenizer* tokenizer = nullptr;
  // Tool calling: the request's tools (null: none asked) and the template family, whose syntax
  // ToolCallExtractor looks for.
  std::shared_ptr<const ChatTools> tools;
  ChatTemplate::Kind template_kind = ChatTemplate::Kind::plain;
};

nlohmann::json usage_json(int64_t prompt_tokens, int64_t completion_tokens, int64_t cached_tokens);
// A non-streamed response is its envelope (id, object, created, model, usage) with "choices", a
// list of completion_choice: built and written one choice at a time.
nlohmann::json completion_envelope(const ResponseContext& context, const nlohmann::json& usage);
nlohmann::json completion_choice(const ResponseContext& context, size_t index,
                                 const ChoiceState& choice);
// One streamed chunk for choice `index`: its new text/tokens, the tool calls it completed, and,
// when finished, the reason ("tool_calls" when it made calls).
nlohmann::json completion_chunk(const ResponseContext& context, size_t index,
                                const RequestOutput& output, bool first_for_choice,
                                const std::vector<ToolCall>& tool_calls = {});
// The last chunk when stream_options.include_usage is set: no choices, the usage.
nlohmann::json usage_chunk(const ResponseContext& context, const nlohmann::json& usage);
// JSON text with invalid UTF-8 (e.g. half a character in a logprob's token) replaced.
std::string dump_json(const nlohmann::json& value);

}  // namespace tessera
