// What a server operator watches, in Prometheus' text format: requests running and waiting,
// prompt and generated tokens, KV-cache usage, the prefix cache's hit rate, and histograms of
// time to first token, inter-token latency, end-to-end latency and structured output's grammar
// compiles and token masks. The engine thread writes;
// the HTTP thread renders; one mutex guards both.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace tessera {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  void render(std::string& out, const std::string& name, const std::string& help,
              const std::string& labels) const;
  int64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<double> upper_bounds_;
  std::vector<int64_t> counts_;  // per bucket, not cumulative; the last is +Inf
  int64_t count_ = 0;
  double sum_ = 0;
};

struct EngineMetrics {
  EngineMetrics();

  // Counters.
  int64_t prompt_tokens = 0;
  int64_t generation_tokens = 0;
  int64_t preemptions = 0;
  // Speculative decoding: proposals verified, the tokens they held, and those accepted.
  int64_t spec_decode_drafts = 0;
  int64_t spec_decode_draft_tokens = 0;
  int64_t spec_decode_accepted_tokens = 0;
  std::map<std::string, int64_t> finished_requests;  // by finish reason
  // Gauges, set every step.
  int64_t requests_running = 0;
  int64_t requests_waiting = 0;
  double kv_cache_usage = 0;         // in [0, 1]
  int64_t prefix_cache_queries = 0;  // prompt tokens looked up
  int64_t prefix_cache_hits = 0;     // of which found cached
  Histogram time_to_first_token;     // seconds
  Histogram inter_token_latency;     // seconds
  Histogram end_to_end_latency;      // seconds
  // Structured output: a grammar's compile (on a request's arrival, when not cached) and one
  // sequence's token mask in one step.
  Histogram grammar_compile_time;  // seconds
  Histogram grammar_mask_time;     // seconds

  double prefix_cache_hit_rate() const;
  std::string render_prometheus(const std::string& model_name) const;
};

// EngineMetrics behind a mutex, readable from any thread.
class SharedMetrics {
 public:
  template <typename Update>
  void update(Update&& update) {
    std::lock_guard lock(mutex_);
    update(metrics_);
  }
  EngineMetrics snapshot() const {
    std::lock_guard lock(mutex_);
    return metrics_;
  }

 private:
  mutable std::mutex mutex_;
  EngineMetrics metrics_;
};

}  // namespace tessera
