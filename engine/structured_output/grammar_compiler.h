// What a request's output must match (a JSON schema, any JSON object, a regex, one of some
// strings, a GBNF grammar) compiled into a CompiledGrammar for the served model's vocabulary.
// Compiled grammars are kept by their text, up to a count, so clients that send the same schema
// again share one automaton and its cached masks, and clients that send it at once wait for one
// compile; all of them together stay within one memory limit (grammar_memory.h), the least
// recently used that no request holds dropped first.
// Thread-safe: the server's handler threads compile, the engine thread then uses what they made.
#pragma once

#include <cstdint>
#include <future>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/structured_output/compiled_grammar.h"

namespace tessera {

struct OutputConstraint {
  enum class Kind { json_schema, json_object, regex, choice, grammar };
  Kind kind = Kind::json_object;
  std::string text;                  // the schema (JSON text), regex or grammar
  std::vector<std::string> choices;  // Kind::choice
  std::string field;                 // the request field it came from, for errors
};

struct GrammarCompilerStatistics {
  int64_t compiled = 0;
  int64_t reused = 0;
  int64_t evicted = 0;         // dropped from the cache to keep within the shared memory
  double compile_seconds = 0;  // all compiles together
  size_t memory_bytes = 0;     // what every compiled grammar still alive holds
};

class GrammarCompiler {
 public:
  static constexpr size_t kDefaultCapacity = 64;
  // The heap all compiled grammars may hold together (grammar_memory.h).
  static constexpr size_t kDefaultMemoryBytes = size_t{1} << 30;

  // `tokenizer` must outlive the compiler; the vocabulary is built on the first compile.
  GrammarCompiler(const Tokenizer& tokenizer, int64_t logits_width,
                  size_t capacity = kDefaultCapacity, size_t memory_bytes = kDefaultMemoryBytes);
  // Throws Error naming constraint.field when the constraint is malformed or unsupported.
  // `compile_seconds`, when given, gets the time a compile took (0 when the cache had it).
  std::shared_ptr<CompiledGrammar> compile(const OutputConstraint& constraint,
                                           double* compile_seconds = nullptr);
  GrammarCompilerStatistics statistics() const;

 private:
  std::shared_ptr<const TokenVocabulary> vocabulary();
  // Compiles `constraint` and keeps it in the cache under `key`.
  std::shared_ptr<CompiledGrammar> compile_and_keep(const OutputConstraint& constraint,
                                                    const std::string& key,
                                                    double* compile_seconds);
  // Drops least recently used grammars no request holds while the memory is over `bytes`.
  void evict_unused_above(size_t bytes);

  const Tokenizer& tokenizer_;
  int64_t logits_width_;
  size_t capacity_;
  std::shared_ptr<GrammarMemory> memory_;
  mutable std::mutex mutex_;
  std::shared_ptr<const TokenVocabulary> vocabulary_;
  // Most recently used first.
  std::list<std::pair<std::string, std::shared_ptr<CompiledGrammar>>> cache_;
  // Compiles under way, by key: a request with the same constraint waits for the one running.
  std::unordered_map<std::string, std::shared_future<std::shared_ptr<CompiledGrammar>>> in_flight_;
  GrammarCompilerStatistics statistics_;
};

// The grammar of a constraint, before it meets a vocabulary (for tests and tools).
Grammar constraint_grammar(const OutputConstraint& constraint);

}  // namespace tessera
