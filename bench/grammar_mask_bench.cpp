// Structured output's host cost: the time to compute one sequence's token mask for one step, on
// a real vocabulary (default Qwen3's 151k tokens), for a nested JSON schema. Documents that fit
// the schema are tokenized and walked token by token as a model would write them: each step
// computes the mask (timed), then takes the document's next token. The first document meets a
// freshly compiled grammar (every state new: its masks are computed); the later ones reuse the
// grammar, as later requests with the same schema do. Prints means, medians, p99 and maxima in
// microseconds. Usage: grammar_mask_bench [--tokenizer PATH] [--documents N]
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "engine/structured_output/grammar_compiler.h"
#include "runtime/check.h"

using namespace tessera;

namespace {

using Clock = std::chrono::steady_clock;

const char* kSchema = R"({
  "type": "object",
  "properties": {
    "order_id": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{6}$"},
    "customer": {"type": "object", "properties": {
      "name": {"type": "string", "maxLength": 40},
      "email": {"type": "string", "format": "email"},
      "address": {"type": "object", "properties": {
        "street": {"type": "string"}, "city": {"type": "string"},
        "country": {"enum": ["DE", "FR", "US", "JP", "BR"]}},
        "required": ["street", "city", "country"], "additionalProperties": false}},
      "required": ["name", "email", "address"], "additionalProperties": false},
    "items": {"type": "array", "minItems": 1, "maxItems": 8, "items": {
      "type": "object", "properties": {
        "sku": {"type": "string"}, "quantity": {"type": "integer", "minimum": 1, "maximum": 99},
        "price": {"type": "number", "minimum": 0}, "gift": {"type": "boolean"}},
      "required": ["sku", "quantity", "price"], "additionalProperties": false}},
    "notes": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    "priority": {"enum": ["low", "normal", "high"]}
  },
  "required": ["order_id", "customer", "items", "notes", "priority"],
  "additionalProperties": false
})";

std::string document(std::mt19937& random) {
  auto pick = [&](std::initializer_list<const char*> options) {
    return std::string(*(options.begin() + random() % options.size()));
  };
  std::string items;
  const int count = 1 + static_cast<int>(random() % 4);
  for (int i = 0; i < count; ++i)
    items += fmt::format("{}{{\"sku\": \"{}-{}\", \"quantity\": {}, \"price\": {}.{:02}{}}}",
                         i ? ", " : "", pick({"book", "lamp", "cable", "mug"}), random() % 1000,
                         1 + random() % 20, random() % 200, random() % 100,
                         random() % 2 ? ", \"gift\": true" : "");
  return fmt::format(
      "{{\"order_id\": \"{}-{:06}\", \"customer\": {{\"name\": \"{}\", \"email\": "
      "\"{}@example.com\", "
      "\"address\": {{\"street\": \"{} {}\", \"city\": \"{}\", \"country\": \"{}\"}}}}, \"items\": "
      "[{}], \"notes\": {}, \"priority\": \"{}\"}}",
      pick({"ABC", "XYZ", "QRS"}), random() % 1000000,
      pick({"Ada Lovelace", "Grace Hopper", "Alan Turing"}), pick({"ada", "grace", "alan"}),
      random() % 200, pick({"Main Street", "Rue de Rivoli", "Hauptstraße"}),
      pick({"Berlin", "Paris", "São Paulo", "Tokyo"}), pick({"DE", "FR", "US", "JP", "BR"}), items,
      random() % 2 ? "null" : "\"leave at the door\"", pick({"low", "normal", "high"}));
}

struct Summary {
  double mean = 0, median = 0, p99 = 0, max = 0;
  size_t count = 0;
};

Summary summarize(std::vector<double> micros) {
  std::sort(micros.begin(), micros.end());
  Summary s;
  s.count = micros.size();
  if (micros.empty()) return s;
  for (double micro : micros) s.mean += micro / static_cast<double>(micros.size());
  s.median = micros[micros.size() / 2];
  s.p99 = micros[std::min(micros.size() - 1, micros.size() * 99 / 100)];
  s.max = micros.back();
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  std::string tokenizer_path = std::string(TESSERA_SHARED_DIR) + "/models/tokenizers/qwen3";
  int documents = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--tokenizer" && i + 1 < argc) {
      tokenizer_path = argv[++i];
    } else if (flag == "--documents" && i + 1 < argc) {
      documents = std::max(2, std::atoi(argv[++i]));
    } else {
      fmt::print(stderr, "usage: grammar_mask_bench [--tokenizer PATH] [--documents N]\n");
      return 2;
    }
  }
  spdlog::set_level(spdlog::level::warn);
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(tokenizer_path);
  GrammarCompiler compiler(*tokenizer, tokenizer->vocab_size());
  OutputConstraint constraint;
  constraint.kind = OutputConstraint::Kind::json_schema;
  constraint.text = kSchema;
  constraint.field = "schema";
  auto start = Clock::now();
  std::shared_ptr<CompiledGrammar> grammar = compiler.compile(constraint);
  const double first_compile_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  const double compile_ms = compiler.statistics().compile_seconds * 1e3;
  std::vector<uint32_t> words(static_cast<size_t>(grammar->vocabulary().mask_words()));
  const std::vector<int32_t> end_ids = tokenizer->eos_ids();
  std::mt19937 random(7);
  std::vector<double> cold, warm;
  size_t tokens = 0;
  for (int d = 0; d < documents; ++d) {
    const std::string text = document(random);
    GrammarMatcher matcher(grammar);
    for (int32_t token : tokenizer->encode(text, false)) {
      start = Clock::now();
      matcher.fill_mask(words, end_ids);
      const double micros = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
      (d == 0 ? cold : warm).push_back(micros);
      TESSERA_CHECK((words[static_cast<size_t>(token) / 32] >> (token % 32)) & 1u,
                    "the mask forbids token {} of document {}: {}", token, d, text);
      TESSERA_CHECK(matcher.accept(token), "token {} rejected", token);
      ++tokens;
    }
    TESSERA_CHECK(matcher.terminated(), "document {} did not complete the grammar: {}", d, text);
  }
  const GrammarStatistics stats = grammar->statistics();
  fmt::print("grammar_mask_bench: {} ({} tokens), nested order schema, {} documents, {} tokens\n",
             tokenizer_path, tokenizer->vocab_size(), documents, tokens);
  fmt::print("first compile (vocabulary trie + grammar): {:.1f} ms; grammar alone: {:.2f} ms\n",
             first_compile_ms, compile_ms);
  fmt::print("automaton states {}, masks computed {} ({} from decided positions), reused {}\n",
             stats.automaton_states, stats.masks_computed, stats.masks_from_positions,
             stats.masks_reused);
  fmt::print("positions decided {} ({:.1f} KiB)\n", stats.positions_decided,
             static_cast<double>(stats.position_bytes) / 1024);
  fmt::print("{:<34} {:>8} {:>10} {:>10} {:>10} {:>10}\n", "mask per token per sequence (us)",
             "steps", "mean", "median", "p99", "max");
  for (const auto& [name, samples] :
       {std::pair<const char*, const std::vector<double>&>{"first document (new grammar)", cold},
        {"later documents (same schema)", warm}}) {
    const Summary s = summarize(samples);
    fmt::print("{:<34} {:>8} {:>10.2f} {:>10.2f} {:>10.2f} {:>10.2f}\n", name, s.count, s.mean,
               s.median, s.p99, s.max);
  }
  return 0;
}
