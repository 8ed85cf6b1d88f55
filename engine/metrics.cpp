#include "engine/metrics.h"

#include <fmt/format.h>

#include <algorithm>

namespace tessera {

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)), counts_(upper_bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  size_t bucket = static_cast<size_t>(
      std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value) - upper_bounds_.begin());
  ++counts_[bucket];
  ++count_;
  sum_ += value;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help,
                       const std::string& labels) const {
  out += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  int64_t cumulative = 0;
  for (size_t i = 0; i < upper_bounds_.size(); ++i) {
    cumulative += counts_[i];
    out +=
        fmt::format("{}_bucket{{{},le=\"{}\"}} {}\n", name, labels, upper_bounds_[i], cumulative);
  }
  out += fmt::format("{}_bucket{{{},le=\"+Inf\"}} {}\n", name, labels, count_);
  out +=
      fmt::format("{}_sum{{{}}} {}\n{}_count{{{}}} {}\n", name, labels, sum_, name, labels, count_);
}

namespace {
std::vector<double> latency_buckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1,  0.25, 0.5,
          0.75,  1.0,    2.5,   5.0,  7.5,   10.0, 20.0,  40.0, 80.0};
}
std::vector<double> grammar_buckets() {
  return {1e-6,   2.5e-6, 5e-6, 1e-5,  2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3,
          2.5e-3, 5e-3,   0.01, 0.025, 0.05,   0.1,  0.25, 0.5,    1.0};
}
}  // namespace

EngineMetrics::EngineMetrics()
    : time_to_first_token(latency_buckets()),
      inter_token_latency(latency_buckets()),
      end_to_end_latency(latency_buckets()),
      grammar_compile_time(grammar_buckets()),
      grammar_mask_time(grammar_buckets()) {}

double EngineMetrics::prefix_cache_hit_rate() const {
  return prefix_cache_queries == 0
             ? 0.0
             : static_cast<double>(prefix_cache_hits) / static_cast<double>(prefix_cache_queries);
}

std::string EngineMetrics::render_prometheus(const std::string& model_name) const {
  std::string out;
  const std::string labels = fmt::format("model_name=\"{}\"", model_name);
  auto metric = [&](const char* name, const char* type, const char* help, auto value) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{}{{{}}} {}\n", name, help, name, type, name,
                       labels, value);
  };
  metric("tessera:num_requests_running", "gauge", "Requests in the running batch.",
         requests_running);
  metric("tessera:num_requests_waiting", "gauge", "Requests waiting to be scheduled.",
         requests_waiting);
  metric("tessera:kv_cache_usage_perc", "gauge", "Share of KV-cache blocks in use (0 to 1).",
         kv_cache_usage);
  metric("tessera:prompt_tokens_total", "counter", "Prompt tokens processed.", prompt_tokens);
  metric("tessera:generation_tokens_total", "counter", "Tokens generated.", generation_tokens);
  metric("tessera:num_preemptions_total", "counter",
         "Requests preempted for KV-cache room or for a request of a higher priority.",
         preemptions);
  metric("tessera:spec_decode_num_drafts_total", "counter",
         "Speculative proposals verified (one per request and step).", spec_decode_drafts);
  metric("tessera:spec_decode_num_draft_tokens_total", "counter", "Speculative tokens proposed.",
         spec_decode_draft_tokens);
  metric("tessera:spec_decode_num_accepted_tokens_total", "counter",
         "Speculative tokens accepted (acceptance rate: over the proposed; mean accepted length: "
         "1 + these over the drafts).",
         spec_decode_accepted_tokens);
  metric("tessera:prefix_cache_queries_total", "counter",
         "Prompt tokens looked up in the prefix cache.", prefix_cache_queries);
  metric("tessera:prefix_cache_hits_total", "counter", "Prompt tokens found in the prefix cache.",
         prefix_cache_hits);
  metric("tessera:prefix_cache_hit_rate", "gauge", "Prefix-cache hits over queries (0 to 1).",
         prefix_cache_hit_rate());
  out +=
      "# HELP tessera:request_success_total Finished requests by finish reason.\n"
      "# TYPE tessera:request_success_total counter\n";
  for (const char* reason : {"stop", "length", "abort", "error"}) {
    auto it = finished_requests.find(reason);
    out += fmt::format("tessera:request_success_total{{{},finished_reason=\"{}\"}} {}\n", labels,
                       reason, it == finished_requests.end() ? 0 : it->second);
  }
  time_to_first_token.render(out, "tessera:time_to_first_token_seconds",
                             "Time from arrival to the first token.", labels);
  inter_token_latency.render(out, "tessera:inter_token_latency_seconds",
                             "Time between a request's consecutive tokens.", labels);
  end_to_end_latency.render(out, "tessera:e2e_request_latency_seconds",
                            "Time from arrival to the last token.", labels);
  grammar_compile_time.render(out, "tessera:grammar_compile_seconds",
                              "Time to compile a request's output constraint (not cached).",
                              labels);
  grammar_mask_time.render(out, "tessera:grammar_mask_seconds",
                           "Time to compute one sequence's token mask for one step.", labels);
  return out;
}

}  // namespace tessera
