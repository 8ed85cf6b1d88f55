#include "engine/structured_output/grammar_compiler.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <future>
#include <nlohmann/json.hpp>

#include "engine/structured_output/grammar_text.h"
#include "engine/structured_output/json_schema_grammar.h"
#include "engine/structured_output/regex_grammar.h"
#include "runtime/check.h"

namespace tessera {

Grammar constraint_grammar(const OutputConstraint& constraint) {
  switch (constraint.kind) {
    case OutputConstraint::Kind::json_schema: {
      nlohmann::ordered_json schema;
      try {
        schema = nlohmann::ordered_json::parse(constraint.text);
      } catch (const std::exception&) {
        throw Error(fmt::format("{}: the schema is not valid JSON", constraint.field));
      }
      return json_schema_grammar(schema, constraint.field);
    }
    case OutputConstraint::Kind::json_object:
      return json_object_grammar();
    case OutputConstraint::Kind::regex:
      return regex_grammar(constraint.text, constraint.field);
    case OutputConstraint::Kind::grammar:
      return parse_grammar_text(constraint.text, constraint.field);
    case OutputConstraint::Kind::choice: {
      TESSERA_REQUIRE(!constraint.choices.empty(), "{}: the list of choices is empty",
                      constraint.field);
      Grammar grammar;
      const int32_t root = grammar.add_rule("root");
      for (const std::string& choice : constraint.choices) {
        TESSERA_REQUIRE(!choice.empty(), "{}: a choice is empty", constraint.field);
        grammar.add_alternative(root, grammar.literal(choice));
      }
      grammar.set_root(root);
      grammar.validate(constraint.field);
      return grammar;
    }
  }
  TESSERA_CHECK(false, "unknown constraint kind");
}

GrammarCompiler::GrammarCompiler(const Tokenizer& tokenizer, int64_t logits_width, size_t capacity,
                                 size_t memory_bytes)
    : tokenizer_(tokenizer),
      logits_width_(logits_width),
      capacity_(capacity),
      memory_(std::make_shared<GrammarMemory>(memory_bytes)) {
  TESSERA_CHECK(capacity_ > 0, "a grammar cache of no entries");
}

void GrammarCompiler::evict_unused_above(size_t bytes) {
  for (auto it = cache_.end(); it != cache_.begin() && memory_->used() > bytes;) {
    --it;
    if (it->second.use_count() > 1) continue;  // a request still uses it
    it = cache_.erase(it);
    ++statistics_.evicted;
  }
}

std::shared_ptr<const TokenVocabulary> GrammarCompiler::vocabulary() {
  std::lock_guard lock(mutex_);
  if (!vocabulary_) {
    const auto start = std::chrono::steady_clock::now();
    vocabulary_ = std::make_shared<TokenVocabulary>(tokenizer_, logits_width_);
    spdlog::info("structured output: the vocabulary's token trie ({} nodes) took {:.1f} ms",
                 vocabulary_->num_nodes(),
                 std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  return vocabulary_;
}

std::shared_ptr<CompiledGrammar> GrammarCompiler::compile(const OutputConstraint& constraint,
                                                          double* compile_seconds) {
  if (compile_seconds) *compile_seconds = 0;
  std::string key = std::to_string(static_cast<int>(constraint.kind)) + '\n' + constraint.text;
  for (const std::string& choice : constraint.choices)
    key += '\n' + std::to_string(choice.size()) + ':' + choice;
  std::promise<std::shared_ptr<CompiledGrammar>> promise;
  std::shared_future<std::shared_ptr<CompiledGrammar>> pending;
  {
    std::lock_guard lock(mutex_);
    for (auto it = cache_.begin(); it != cache_.end(); ++it)
      if (it->first == key) {
        cache_.splice(cache_.begin(), cache_, it);
        ++statistics_.reused;
        return it->second;
      }
    if (auto found = in_flight_.find(key); found != in_flight_.end()) {
      pending = found->second;
    } else {
      in_flight_.emplace(key, promise.get_future().share());
    }
  }
  if (pending.valid()) {
    // Another request compiles the same constraint: wait for it rather than compile it twice.
    // When that compile fails, this one compiles once for itself (joining no other), so that
    // its error names its own field.
    std::shared_ptr<CompiledGrammar> compiled;
    try {
      compiled = pending.get();
    } catch (...) {
      return compile_and_keep(constraint, key, compile_seconds);
    }
    std::lock_guard lock(mutex_);
    ++statistics_.reused;
    return compiled;
  }
  try {
    std::shared_ptr<CompiledGrammar> compiled = compile_and_keep(constraint, key, compile_seconds);
    {
      std::lock_guard lock(mutex_);
      in_flight_.erase(key);
    }
    promise.set_value(compiled);
    return compiled;
  } catch (...) {
    {
      std::lock_guard lock(mutex_);
      in_flight_.erase(key);
    }
    promise.set_exception(std::current_exception());
    throw;
  }
}

std::shared_ptr<CompiledGrammar> GrammarCompiler::compile_and_keep(
    const OutputConstraint& constraint, const std::string& key, double* compile_seconds) {
  std::shared_ptr<const TokenVocabulary> tokens = vocabulary();
  {
    // Room for the new grammar: a quarter of the memory, as far as unused grammars can give it.
    std::lock_guard lock(mutex_);
    evict_unused_above(memory_->limit() - memory_->limit() / 4);
  }
  const auto start = std::chrono::steady_clock::now();
  auto compiled =
      std::make_shared<CompiledGrammar>(constraint_grammar(constraint), tokens, memory_);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (compile_seconds) *compile_seconds = seconds;
  std::lock_guard lock(mutex_);
  ++statistics_.compiled;
  statistics_.compile_seconds += seconds;
  cache_.emplace_front(key, compiled);
  if (cache_.size() > capacity_) cache_.pop_back();
  return compiled;
}

GrammarCompilerStatistics GrammarCompiler::statistics() const {
  std::lock_guard lock(mutex_);
  GrammarCompilerStatistics result = statistics_;
  result.memory_bytes = memory_->used();
  return result;
}

}  // namespace tessera
