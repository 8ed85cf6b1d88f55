#include "engine/server/openai_protocol.h"

#include "engine/server/chat_tools.h"
#include "engine/server/output_constraint_fields.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <set>

#include "engine/server/json_error_field.h"
#include "models/json_input.h"

namespace tessera {
namespace {

using nlohmann::json;

ApiError bad(const std::string& param, const std::string& message) {
  return ApiError(400, message, param);
}

std::string type_name(const json& value) {
  return value.type_name();
}

double number_field(const json& body, const char* key, double low, double high) {
  const json& value = body.at(key);
  if (!value.is_number())
    throw bad(key, fmt::format("'{}' must be a number, got {}", key, type_name(value)));
  double number = value.get<double>();
  if (!(number >= low && number <= high))
    throw bad(key, fmt::format("'{}' must be in [{}, {}], got {}", key, low, high, number));
  return number;
}

int64_t integer_field(const json& body, const char* key, int64_t low, int64_t high) {
  const json& value = body.at(key);
  if (!value.is_number_integer())
    throw bad(key, fmt::format("'{}' must be an integer, got {}", key, type_name(value)));
  if (value.is_number_unsigned() &&
      value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    throw bad(key, fmt::format("'{}' must be in [{}, {}]", key, low, high));
  int64_t number = value.get<int64_t>();
  if (number < low || number > high)
    throw bad(key, fmt::format("'{}' must be in [{}, {}], got {}", key, low, high, number));
  return number;
}

bool bool_field(const json& body, const char* key) {
  const json& value = body.at(key);
  if (!value.is_boolean())
    throw bad(key, fmt::format("'{}' must be true or false, got {}", key, type_name(value)));
  return value.get<bool>();
}

std::string string_field(const json& value, const std::string& param) {
  if (!value.is_string())
    throw bad(param, fmt::format("'{}' must be a string, got {}", param, type_name(value)));
  return value.get<std::string>();
}

bool present(const json& body, const char* key) {
  return body.contains(key) && !body.at(key).is_null();
}

std::vector<int32_t> token_ids(const json& value, const std::string& param,
                               const PromptLimits& limits) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < value.size(); ++i) {
    const json& id = value[i];
    std::string where = fmt::format("{}[{}]", param, i);
    if (!id.is_number_integer())
      throw bad(param,
                fmt::format("'{}' must be a token id (an integer), got {}", where, type_name(id)));
    if (id.is_number_unsigned() ? id.get<uint64_t>() >= static_cast<uint64_t>(limits.vocab_size)
                                : (id.get<int64_t>() < 0 || id.get<int64_t>() >= limits.vocab_size))
      throw bad(param, fmt::format("'{}' = {} is outside the vocabulary 0..{}", where, id.dump(),
                                   limits.vocab_size - 1));
    ids.push_back(id.get<int32_t>());
  }
  if (ids.empty()) throw bad(param, fmt::format("'{}' must not be empty", param));
  return ids;
}

void check_prompt_bytes(size_t bytes, const std::string& param, const std::string& field,
                        const PromptLimits& limits) {
  if (bytes > limits.max_prompt_bytes)
    throw bad(field, fmt::format("'{}' is {} bytes; this model's maximum context length is {} "
                                 "tokens, which no text longer than {} bytes fits. Please "
                                 "shorten it.",
                                 param, bytes, limits.max_model_len, limits.max_prompt_bytes));
}

std::vector<int32_t> text_prompt(const json& value, const std::string& param,
                                 const Tokenizer& tokenizer, const PromptLimits& limits) {
  std::string text = string_field(value, param);
  if (text.empty()) throw bad(param, fmt::format("'{}' must not be empty", param));
  check_prompt_bytes(text.size(), param, "prompt", limits);
  return tokenizer.encode(text, /*add_special=*/true);
}

std::vector<std::vector<int32_t>> parse_prompts(const json& prompt, const Tokenizer& tokenizer,
                                                const PromptLimits& limits) {
  std::vector<std::vector<int32_t>> prompts;
  if (prompt.is_string()) {
    prompts.push_back(text_prompt(prompt, "prompt", tokenizer, limits));
  } else if (prompt.is_array() && !prompt.empty() && prompt[0].is_number()) {
    prompts.push_back(token_ids(prompt, "prompt", limits));
  } else if (prompt.is_array() && !prompt.empty()) {
    if (prompt.size() > limits.max_prompts)
      throw bad("prompt", fmt::format("'prompt' holds {} prompts; at most {} are allowed",
                                      prompt.size(), limits.max_prompts));
    for (size_t i = 0; i < prompt.size(); ++i) {
      std::string where = fmt::format("prompt[{}]", i);
      if (prompt[i].is_string())
        prompts.push_back(text_prompt(prompt[i], where, tokenizer, limits));
      else if (prompt[i].is_array())
        prompts.push_back(token_ids(prompt[i], where, limits));
      else
        throw bad("prompt", fmt::format("'{}' must be a string or a list of token ids, got {}",
                                        where, type_name(prompt[i])));
    }
  } else {
    throw bad("prompt", fmt::format("'prompt' must be a non-empty string, a list of token ids or "
                                    "a list of those, got {}",
                                    prompt.is_array() ? "an empty list" : type_name(prompt)));
  }
  return prompts;
}

std::string message_content(const json& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array())
    throw bad("messages", fmt::format("'{}' must be a string or a list of text parts, got {}",
                                      where, type_name(content)));
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    std::string part_where = fmt::format("{}[{}]", where, i);
    if (!part.is_object() || part.value("type", json()) != "text" || !part.contains("text") ||
        !part["text"].is_string())
      throw bad("messages", fmt::format("'{}' must be {{\"type\": \"text\", \"text\": ...}}; only "
                                        "text parts are supported",
                                        part_where));
    text += part["text"].get<std::string>();
  }
  return text;
}

// An assistant message's tool_calls: [{"id", "type": "function", "function": {"name",
// "arguments"}}], arguments a JSON text.
std::vector<ToolCall> parse_tool_calls(const json& calls, const std::string& where) {
  if (!calls.is_array()) throw bad("messages", fmt::format("'{}' must be a list", where));
  std::vector<ToolCall> result;
  for (size_t i = 0; i < calls.size(); ++i) {
    const json& call = calls[i];
    const std::string at = fmt::format("{}[{}]", where, i);
    if (!call.is_object() || !call.contains("function") || !call["function"].is_object() ||
        !call["function"].contains("name") || !call["function"]["name"].is_string())
      throw bad("messages", fmt::format("'{}' must be {{\"id\", \"type\": \"function\", "
                                        "\"function\": {{\"name\", \"arguments\"}}}}",
                                        at));
    ToolCall parsed;
    parsed.name = call["function"]["name"].get<std::string>();
    if (call.contains("id")) parsed.id = string_field(call["id"], at + ".id");
    const json& arguments = call["function"].value("arguments", json("{}"));
    parsed.arguments = arguments.is_string() ? arguments.get<std::string>() : arguments.dump();
    result.push_back(std::move(parsed));
  }
  return result;
}

std::vector<ChatMessage> parse_messages(const json& body) {
  if (!body.contains("messages")) throw bad("messages", "'messages' is required");
  const json& messages = body["messages"];
  if (!messages.is_array() || messages.empty())
    throw bad("messages", "'messages' must be a non-empty list of messages");
  std::vector<ChatMessage> result;
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    std::string where = fmt::format("messages[{}]", i);
    if (!m.is_object()) throw bad("messages", fmt::format("'{}' must be an object", where));
    for (const auto& [key, value] : m.items())
      if (key != "role" && key != "content" && key != "name" && key != "tool_calls" &&
          key != "tool_call_id")
        throw bad("messages", fmt::format("'{}.{}' is not a supported message field", where, key));
    if (!m.contains("role") || !m["role"].is_string())
      throw bad("messages", fmt::format("'{}.role' must be a string", where));
    ChatMessage message;
    message.role = m["role"].get<std::string>();
    if (message.role == "developer") message.role = "system";  // OpenAI's newer name
    if (message.role != "system" && message.role != "user" && message.role != "assistant" &&
        message.role != "tool")
      throw bad("messages", fmt::format("'{}.role' = '{}' is not one of system, developer, user, "
                                        "assistant, tool",
                                        where, message.role));
    if (m.contains("tool_calls") && !m["tool_calls"].is_null()) {
      if (message.role != "assistant")
        throw bad("messages", fmt::format("'{}.tool_calls' is only for assistant messages", where));
      message.tool_calls = parse_tool_calls(m["tool_calls"], where + ".tool_calls");
    }
    if (message.role == "tool") {
      if (!m.contains("tool_call_id") || !m["tool_call_id"].is_string())
        throw bad("messages",
                  fmt::format("'{}.tool_call_id' is required for a tool message", where));
      message.tool_call_id = m["tool_call_id"].get<std::string>();
    } else if (m.contains("tool_call_id")) {
      throw bad("messages", fmt::format("'{}.tool_call_id' is only for tool messages", where));
    }
    const bool has_content = m.contains("content") && !m["content"].is_null();
    if (!has_content && message.tool_calls.empty())
      throw bad("messages", fmt::format("'{}.content' is required", where));
    if (has_content) message.content = message_content(m["content"], where + ".content");
    result.push_back(std::move(message));
  }
  return result;
}

const std::set<std::string>& allowed_fields(bool chat) {
  static const std::set<std::string> common = {
      "model", "max_tokens", "temperature", "top_p", "n", "stream", "stream_options", "stop",
      "presence_penalty", "frequency_penalty", "seed", "user", "logit_bias",
      // vLLM's extensions
      "top_k", "min_p", "repetition_penalty", "ignore_eos", "stop_token_ids", "skip_special_tokens",
      "priority"};
  static const std::set<std::string> with_constraints = [] {
    std::set<std::string> s = common;
    for (const char* field : kOutputConstraintFields) s.insert(field);
    return s;
  }();
  static const std::set<std::string> completion = [] {
    std::set<std::string> s = with_constraints;
    s.insert({"prompt", "logprobs", "echo", "best_of", "suffix"});
    return s;
  }();
  static const std::set<std::string> chat_fields = [] {
    std::set<std::string> s = with_constraints;
    s.insert({"messages", "logprobs", "top_logprobs", "max_completion_tokens"});
    for (const char* field : kChatToolFields) s.insert(field);
    return s;
  }();
  return chat ? chat_fields : completion;
}

}  // namespace

ApiError::ApiError(int status_, std::string message, std::string param_, std::string type_,
                   std::string code_)
    : std::runtime_error(std::move(message)),
      status(status_),
      type(std::move(type_)),
      param(std::move(param_)),
      code(std::move(code_)) {}

json ApiError::body() const {
  return json{{"error",
               {{"message", what()},
                {"type", type},
                {"param", param.empty() ? json() : json(param)},
                {"code", code.empty() ? json() : json(code)}}}};
}

json parse_request_body(const std::string& body) {
  // Bound the nesting before parsing: nlohmann's parser recurses once per level.
  if (json_nesting_depth(body, max_json_depth) > max_json_depth)
    throw ApiError(400,
                   fmt::format("the request body nests deeper than {} levels", max_json_depth));
  json value;
  try {
    value = json::parse(body);
  } catch (const json::parse_error& error) {
    // error.byte is 1-based: the byte the parser stopped at.
    const std::string field = json_field_at(body, error.byte > 0 ? error.byte - 1 : 0);
    throw ApiError(400,
                   fmt::format("{}the request body is not valid JSON (or not valid UTF-8) at "
                               "byte {}",
                               field.empty() ? "" : field + ": ", error.byte),
                   field);
  } catch (const json::out_of_range& error) {
    // A number beyond double's range ("number overflow parsing '1e309'"): find the literal.
    const std::string message = error.what();
    const size_t open = message.find('\'');
    const size_t close = message.rfind('\'');
    size_t at = std::string::npos;
    if (open != std::string::npos && close > open)
      at = body.find(message.substr(open + 1, close - open - 1));
    const std::string field = at == std::string::npos ? "" : json_field_at(body, at);
    throw ApiError(400,
                   fmt::format("{}a number in the request body is out of range",
                               field.empty() ? "" : field + ": "),
                   field);
  }
  if (!value.is_object()) throw ApiError(400, "the request body must be a JSON object");
  return value;
}

CompletionRequest parse_completion_request(const json& body, bool chat, const Tokenizer& tokenizer,
                                           const ChatTemplate& chat_template,
                                           const PromptLimits& limits,
                                           const std::vector<ToolDefinition>& tools) {
  CompletionRequest request;
  request.chat = chat;
  for (const auto& [key, value] : body.items())
    if (!allowed_fields(chat).count(key))
      throw bad(key, fmt::format("Unrecognized request argument supplied: {}", key));
  if (!body.contains("model")) throw bad("model", "'model' is required");
  request.model = string_field(body["model"], "model");
  SamplingParams& p = request.params;
  if (present(body, "n")) p.n = integer_field(body, "n", 1, 128);
  if (present(body, "best_of") && integer_field(body, "best_of", 1, 128) != p.n)
    throw bad("best_of", "'best_of' other than n is not supported");
  if (present(body, "echo") && bool_field(body, "echo"))
    throw bad("echo", "'echo' is not supported");
  if (present(body, "suffix")) throw bad("suffix", "'suffix' is not supported");
  if (present(body, "logit_bias") &&
      !(body["logit_bias"].is_object() && body["logit_bias"].empty()))
    throw bad("logit_bias", "'logit_bias' is not supported");
  if (present(body, "user")) string_field(body["user"], "user");
  if (present(body, "priority"))
    request.priority = integer_field(body, "priority", std::numeric_limits<int32_t>::min(),
                                     std::numeric_limits<int32_t>::max());
  if (present(body, "temperature")) p.temperature = number_field(body, "temperature", 0, 2);
  if (present(body, "top_p")) p.top_p = number_field(body, "top_p", 0, 1);
  if (p.top_p == 0) throw bad("top_p", "'top_p' must be greater than 0");
  if (present(body, "top_k")) p.top_k = integer_field(body, "top_k", -1, 1 << 30);
  if (present(body, "min_p")) p.min_p = number_field(body, "min_p", 0, 1);
  if (present(body, "presence_penalty"))
    p.presence_penalty = number_field(body, "presence_penalty", -2, 2);
  if (present(body, "frequency_penalty"))
    p.frequency_penalty = number_field(body, "frequency_penalty", -2, 2);
  if (present(body, "repetition_penalty"))
    p.repetition_penalty = number_field(body, "repetition_penalty", 0.01, 100);
  if (present(body, "seed"))
    p.seed = static_cast<uint64_t>(integer_field(body, "seed", std::numeric_limits<int64_t>::min(),
                                                 std::numeric_limits<int64_t>::max()));
  if (present(body, "ignore_eos")) p.ignore_eos = bool_field(body, "ignore_eos");
  if (present(body, "skip_special_tokens"))
    p.skip_special_tokens = bool_field(body, "skip_special_tokens");
  const char* max_key =
      chat && present(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  if (present(body, max_key)) {
    p.max_tokens = integer_field(body, max_key, 1, std::numeric_limits<int32_t>::max());
    request.max_tokens_given = true;
  }
  if (present(body, "stop")) {
    const json& stop = body["stop"];
    if (stop.is_string()) {
      p.stop.push_back(stop.get<std::string>());
    } else if (stop.is_array()) {
      if (stop.size() > SamplingParams::max_stop_strings)
        throw bad("stop", fmt::format("'stop' holds {} strings; at most {} are allowed",
                                      stop.size(), SamplingParams::max_stop_strings));
      for (size_t i = 0; i < stop.size(); ++i)
        p.stop.push_back(string_field(stop[i], fmt::format("stop[{}]", i)));
    } else {
      throw bad("stop", fmt::format("'stop' must be a string or a list of strings, got {}",
                                    type_name(stop)));
    }
    for (const std::string& text : p.stop)
      if (text.empty() || text.size() > SamplingParams::max_stop_string_bytes)
        throw bad("stop", fmt::format("each stop string must hold 1..{} bytes",
                                      SamplingParams::max_stop_string_bytes));
  }
  if (present(body, "stop_token_ids")) {
    const json& ids = body["stop_token_ids"];
    if (!ids.is_array()) throw bad("stop_token_ids", "'stop_token_ids' must be a list of integers");
    if (!ids.empty()) p.stop_token_ids = token_ids(ids, "stop_token_ids", limits);
  }
  if (chat) {
    bool logprobs = present(body, "logprobs") && bool_field(body, "logprobs");
    if (present(body, "top_logprobs")) {
      int64_t top = integer_field(body, "top_logprobs", 0, SamplingParams::max_logprobs);
      if (!logprobs) throw bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
      p.logprobs = top;
    } else if (logprobs) {
      p.logprobs = 0;
    }
  } else if (present(body, "logprobs")) {
    p.logprobs = integer_field(body, "logprobs", 0, SamplingParams::max_logprobs);
  }
  if (present(body, "stream")) request.stream = bool_field(body, "stream");
  if (present(body, "stream_options")) {
    const json& options = body["stream_options"];
    if (!request.stream)
      throw bad("stream_options", "'stream_options' is only allowed when 'stream' is true");
    if (!options.is_object()) throw bad("stream_options", "'stream_options' must be an object");
    for (const auto& [key, value] : options.items())
      if (key != "include_usage" && key != "continuous_usage_stats")
        throw bad("stream_options", fmt::format("Unrecognized stream option: {}", key));
    if (present(options, "include_usage"))
      request.include_usage = bool_field(options, "include_usage");
  }
  if (chat) {
    std::vector<ChatMessage> messages = parse_messages(body);
    size_t content_bytes = 0;
    for (const ChatMessage& message : messages) content_bytes += message.content.size();
    check_prompt_bytes(content_bytes, "messages' content", "messages", limits);
    request.prompts.push_back(chat_template.render(tokenizer, messages, tools));
    std::vector<int32_t> end_of_turn = chat_template.end_of_turn_ids(tokenizer);
    p.stop_token_ids.insert(p.stop_token_ids.end(), end_of_turn.begin(), end_of_turn.end());
  } else {
    if (!body.contains("prompt")) throw bad("prompt", "'prompt' is required");
    request.prompts = parse_prompts(body["prompt"], tokenizer, limits);
  }
  for (const std::vector<int32_t>& prompt : request.prompts) {
    const int64_t length = static_cast<int64_t>(prompt.size());
    if (length >= limits.max_model_len)
      throw bad(chat ? "messages" : "prompt",
                fmt::format("This model's maximum context length is {} tokens. However, your "
                            "prompt has {} tokens; at least one must be left to generate.",
                            limits.max_model_len, length));
    if (request.max_tokens_given && length + p.max_tokens > limits.max_model_len)
      throw bad(max_key, fmt::format("This model's maximum context length is {} tokens. However, "
                                     "you requested {} tokens ({} in the prompt, {} for the "
                                     "completion). Please reduce the prompt or '{}'.",
                                     limits.max_model_len, length + p.max_tokens, length,
                                     p.max_tokens, max_key));
  }
  return request;
}

json usage_json(int64_t prompt_tokens, int64_t completion_tokens, int64_t cached_tokens) {
  json usage = {{"prompt_tokens", prompt_tokens},
                {"completion_tokens", completion_tokens},
                {"total_tokens", prompt_tokens + completion_tokens}};
  usage["prompt_tokens_details"] = {{"cached_tokens", cached_tokens}};
  return usage;
}

namespace {

json finish_reason_json(FinishReason reason) {
  if (reason == FinishReason::none) return json();
  return reason == FinishReason::abort || reason == FinishReason::error
             ? json("abort")
             : json(finish_reason_name(reason));
}

std::string piece_of(const Tokenizer& tokenizer, int32_t id) {
  return tokenizer.token_to_piece(id);
}

json bytes_of(const std::string& piece) {
  json bytes = json::array();
  for (unsigned char c : piece) bytes.push_back(static_cast<int>(c));
  return bytes;
}

// Completions' logprobs: parallel lists; chat's: one object per token.
json logprobs_json(const ResponseContext& context, const std::vector<OutputLogprob>& tokens) {
  if (!context.logprobs) return json();
  const Tokenizer& tokenizer = *context.tokenizer;
  if (context.chat) {
    json content = json::array();
    for (const OutputLogprob& shown : tokens) {
      const SampledToken& token = shown.token;
      const std::string& piece = shown.text;
      json top = json::array();
      for (const TokenLogprob& alternative : token.top) {
        std::string alt = piece_of(tokenizer, alternative.id);
        top.push_back({{"token", alt}, {"logprob", alternative.logprob}, {"bytes", bytes_of(alt)}});
      }
      content.push_back({{"token", piece},
                         {"logprob", token.logprob},
                         {"bytes", bytes_of(piece)},
                         {"top_logprobs", top}});
    }
    return json{{"content", content}};
  }
  json result = {{"tokens", json::array()},
                 {"token_logprobs", json::array()},
                 {"top_logprobs", json::array()},
                 {"text_offset", json::array()}};
  for (const auto& [token, text_offset, text] : tokens) {
    result["tokens"].push_back(text);
    result["token_logprobs"].push_back(token.logprob);
    json top = json::object();
    for (const TokenLogprob& alternative : token.top)
      top[piece_of(tokenizer, alternative.id)] = alternative.logprob;
    result["top_logprobs"].push_back(top);
    result["text_offset"].push_back(text_offset);
  }
  return result;
}

json stop_reason_json(const std::string& stop_reason) {
  if (stop_reason.empty()) return json();
  // A stop token id is reported as a number, a stop string as itself (vLLM's stop_reason).
  bool digits = std::all_of(stop_reason.begin(), stop_reason.end(), ::isdigit);
  return digits ? json(std::stoll(stop_reason)) : json(stop_reason);
}

// OpenAI's tool_calls list; in a stream each entry carries its index.
json tool_calls_json(const std::vector<ToolCall>& calls, bool with_index) {
  json list = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    json call = {{"id", calls[i].id},
                 {"type", "function"},
                 {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}};
    if (with_index) call["index"] = i;
    list.push_back(std::move(call));
  }
  return list;
}

}  // namespace

json completion_envelope(const ResponseContext& context, const json& usage) {
  return json{{"id", context.id},
              {"object", context.chat ? "chat.completion" : "text_completion"},
              {"created", context.created},
              {"model", context.model},
              {"usage", usage}};
}

json completion_choice(const ResponseContext& context, size_t index, const ChoiceState& choice) {
  json entry = {{"index", index},
                {"logprobs", logprobs_json(context, choice.logprobs)},
                {"finish_reason", finish_reason_json(choice.finish_reason)},
                {"stop_reason", stop_reason_json(choice.stop_reason)}};
  if (context.chat) {
    entry["message"] = {{"role", "assistant"}, {"content", choice.text}};
    if (!choice.tool_calls.empty()) {
      if (choice.text.empty()) entry["message"]["content"] = nullptr;
      entry["message"]["tool_calls"] = tool_calls_json(choice.tool_calls, false);
      if (choice.finish_reason == FinishReason::stop) entry["finish_reason"] = "tool_calls";
    }
  } else {
    entry["text"] = choice.text;
  }
  return entry;
}

json completion_chunk(const ResponseContext& context, size_t index, const RequestOutput& output,
                      bool first_for_choice, const std::vector<ToolCall>& tool_calls) {
  json choice = {{"index", index},
                 {"logprobs", logprobs_json(context, output.logprobs)},
                 {"finish_reason", finish_reason_json(output.finish_reason)}};
  if (output.finished()) choice["stop_reason"] = stop_reason_json(output.stop_reason);
  if (context.chat) {
    json delta = json::object();
    if (first_for_choice) delta["role"] = "assistant";
    if (!output.text.empty() || first_for_choice) delta["content"] = output.text;
    if (!tool_calls.empty()) {
      delta["tool_calls"] = tool_calls_json(tool_calls, true);
      if (output.finish_reason == FinishReason::stop) choice["finish_reason"] = "tool_calls";
    }
    choice["delta"] = delta;
  } else {
    choice["text"] = output.text;
  }
  return json{{"id", context.id},
              {"object", context.chat ? "chat.completion.chunk" : "text_completion"},
              {"created", context.created},
              {"model", context.model},
              {"choices", json::array({choice})}};
}

json usage_chunk(const ResponseContext& context, const json& usage) {
  return json{{"id", context.id},
              {"object", context.chat ? "chat.completion.chunk" : "text_completion"},
              {"created", context.created},
              {"model", context.model},
              {"choices", json::array()},
              {"usage", usage}};
}

size_t max_prompt_bytes(int64_t max_model_len, const Tokenizer& tokenizer) {
  constexpr size_t normalization_slack = 4;
  const size_t per_token = longest_token_bytes(tokenizer) * normalization_slack;
  const auto tokens = static_cast<size_t>(std::max<int64_t>(max_model_len, 1));
  return tokens > SIZE_MAX / per_token ? SIZE_MAX : tokens * per_token;
}

int64_t unix_seconds_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string dump_json(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace tessera
