// How one request picks its tokens and when it stops: vLLM's SamplingParams. Validated once, at
// admission, so that nothing a client sends can fail later inside a batch.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/structured_output/compiled_grammar.h"

namespace tessera {

struct SamplingParams {
  int64_t n = 1;                    // completions per prompt (the server fans them out)
  double temperature = 1.0;         // 0: greedy
  int64_t top_k = 0;                // 0 or -1: off
  double top_p = 1.0;               // 1: off
  double min_p = 0.0;               // 0: off
  std::optional<uint64_t> seed;     // the same seed gives the same tokens whatever else runs
  double repetition_penalty = 1.0;  // > 1 discourages tokens of the prompt and the output
  double presence_penalty = 0.0;    // subtracted once from tokens already generated
  double frequency_penalty = 0.0;   // subtracted per occurrence in the generated tokens
  int64_t max_tokens = 16;
  std::vector<std::string> stop;        // stop strings, not part of the output text
  std::vector<int32_t> stop_token_ids;  // besides the tokenizer's end tokens
  bool ignore_eos = false;              // keep going past the end tokens
  std::optional<int64_t> logprobs;      // return the chosen token's logprob plus this many top
  bool skip_special_tokens = true;
  // Structured output: the output must match this grammar (GrammarCompiler made it for the
  // served model's vocabulary); the request ends when the grammar is complete.
  std::shared_ptr<CompiledGrammar> grammar;

  static constexpr int64_t max_logprobs = 20;
  static constexpr size_t max_stop_strings = 16;
  static constexpr size_t max_stop_string_bytes = 256;

  bool greedy() const { return temperature == 0; }
  bool has_penalties() const {
    return repetition_penalty != 1.0 || presence_penalty != 0.0 || frequency_penalty != 0.0;
  }
  // Throws tessera::Error naming the bad field and its valid range. vocab_size > 0 also checks
  // stop_token_ids against it.
  void validate(int64_t vocab_size = 0) const;
};

}  // namespace tessera
