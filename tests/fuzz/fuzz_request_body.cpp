// Fuzz target: the body of a POST to /v1/completions or /v1/chat/completions, as the server
// reads it: parse_request_body, then parse_completion_request against a real tokenizer, one of
// the chat template families, and the server's limits. The first input byte picks the route
// (bit 0) and the chat template (bits 1-2); the rest is the body. Every outcome must be a
// validated request (prompts of in-vocabulary ids that leave room to generate, sampling
// parameters that validate) or an API error with a status and a message.
#include <cstdio>

#include "engine/server/openai_protocol.h"
#include "fuzz/fuzz_support.h"
#include "models/tokenizer.h"
#include "runtime/check.h"

using namespace tessera;

namespace {

std::unique_ptr<Tokenizer> tokenizer;
PromptLimits limits;

void check_request(const CompletionRequest& request) {
  fuzz::require(!request.prompts.empty(), "a request without prompts");
  for (const std::vector<int32_t>& prompt : request.prompts) {
    fuzz::require(!prompt.empty(), "an empty prompt");
    fuzz::require(static_cast<int64_t>(prompt.size()) < limits.max_model_len,
                  "a prompt that leaves no room to generate");
    for (int32_t id : prompt)
      fuzz::require(id >= 0 && id < limits.vocab_size, "a prompt id outside the vocabulary");
  }
  request.params.validate(limits.vocab_size);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tokenizer = load_tokenizer(std::string(TESSERA_SHARED_DIR) + "/models/stories260K-hf");
  limits.vocab_size = tokenizer->vocab_size();
  limits.max_model_len = 256;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static const ChatTemplate::Kind kinds[] = {ChatTemplate::Kind::llama3, ChatTemplate::Kind::chatml,
                                             ChatTemplate::Kind::mistral,
                                             ChatTemplate::Kind::plain};
  const bool chat = data[0] & 1;
  const ChatTemplate chat_template(kinds[(data[0] >> 1) % 4]);
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    const nlohmann::json value = parse_request_body(body);
    check_request(parse_completion_request(value, chat, *tokenizer, chat_template, limits));
  } catch (const ApiError& error) {
    fuzz::require(error.status >= 400 && error.status < 600,
                  "an API error without a 4xx/5xx status");
    fuzz::require(*error.what() != '\0', "an API error without a message");
    dump_json(error.body());
  } catch (const Error& error) {
    // The server answers these with a 400 naming the field the message starts with.
    fuzz::require(*error.what() != '\0', "an error without a message");
  } catch (const std::exception& error) {
    std::fprintf(stderr, "fuzz: neither an ApiError nor a tessera::Error: %s\n", error.what());
    std::abort();
  }
  return 0;
}
