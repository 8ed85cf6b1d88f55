#include "engine/bench/serve_report.h"

#include <fmt/format.h>

#include <functional>
#include <nlohmann/json.hpp>

namespace tessera::bench {
namespace {

using json = nlohmann::ordered_json;  // keys in the order written

json distribution_json(const Distribution& distribution) {
  return {{"mean", distribution.mean},
          {"median", distribution.median},
          {"p90", distribution.p90},
          {"p99", distribution.p99}};
}

}  // namespace

std::string serve_json(const ServeReport& report) {
  const ServeOptions& options = report.options;
  json levels = json::array();
  for (const ServeLevel& level : report.levels) {
    levels.push_back({{"concurrency", level.concurrency},
                      {"completed", level.completed},
                      {"failed", level.failed},
                      {"duration_s", level.duration_seconds},
                      {"input_tokens", level.input_tokens},
                      {"output_tokens", level.output_tokens},
                      {"request_throughput", level.request_throughput},
                      {"output_throughput", level.output_throughput},
                      {"total_token_throughput", level.total_token_throughput},
                      {"ttft_ms", distribution_json(level.ttft_ms)},
                      {"tpot_ms", distribution_json(level.tpot_ms)},
                      {"itl_ms", distribution_json(level.itl_ms)},
                      {"e2e_ms", distribution_json(level.e2e_ms)},
                      {"errors", level.errors}});
  }
  json document = {
      {"schema", "tessera-serve/1"},
      {"created", report.created},
      {"commit", report.commit},
      {"url", options.url},
      {"endpoint", options.endpoint},
      {"model", options.model},
      {"config",
       {{"num_prompts", options.prompts.size()},
        {"prompts", options.prompt_source},
        {"request_rate", options.request_rate ? json(*options.request_rate) : json("inf")},
        {"ignore_eos", options.ignore_eos},
        {"extra_body", options.extra_body.empty() ? json() : json::parse(options.extra_body)},
        {"seed", options.seed}}},
      {"levels", levels},
  };
  return document.dump(2) + "\n";
}

std::string serve_table(const ServeReport& report) {
  const ServeOptions& options = report.options;
  std::string text = fmt::format(
      "=== tessera bench serve: {}{} model {}, {} prompts ({}), request rate {} ===\n", options.url,
      options.endpoint, options.model, options.prompts.size(), options.prompt_source,
      options.request_rate ? fmt::format("{:g}/s", *options.request_rate) : "inf");
  auto row = [&](const std::string& name,
                 const std::function<std::string(const ServeLevel&)>& cell) {
    text += fmt::format("{:<28}", name);
    for (const ServeLevel& level : report.levels) text += fmt::format(" {:>12}", cell(level));
    text += "\n";
  };
  auto fixed = [](double value) { return fmt::format("{:.2f}", value); };
  row("concurrency", [](const ServeLevel& level) { return std::to_string(level.concurrency); });
  row("completed", [](const ServeLevel& level) { return std::to_string(level.completed); });
  row("failed", [](const ServeLevel& level) { return std::to_string(level.failed); });
  row("duration s", [&](const ServeLevel& level) { return fixed(level.duration_seconds); });
  row("input tokens", [](const ServeLevel& level) { return std::to_string(level.input_tokens); });
  row("output tokens", [](const ServeLevel& level) { return std::to_string(level.output_tokens); });
  row("requests/s", [&](const ServeLevel& level) { return fixed(level.request_throughput); });
  row("output tokens/s", [&](const ServeLevel& level) { return fixed(level.output_throughput); });
  row("total tokens/s",
      [&](const ServeLevel& level) { return fixed(level.total_token_throughput); });
  const std::pair<const char*, Distribution ServeLevel::*> latencies[] = {
      {"TTFT", &ServeLevel::ttft_ms},
      {"TPOT", &ServeLevel::tpot_ms},
      {"ITL", &ServeLevel::itl_ms},
      {"E2E latency", &ServeLevel::e2e_ms}};
  for (const auto& [name, member] : latencies) {
    const std::pair<const char*, double Distribution::*> statistics[] = {
        {"mean", &Distribution::mean},
        {"median", &Distribution::median},
        {"p90", &Distribution::p90},
        {"p99", &Distribution::p99}};
    for (const auto& [statistic, field] : statistics)
      row(fmt::format("{} ms {}", name, statistic),
          [&](const ServeLevel& level) { return fixed(level.*member.*field); });
  }
  for (const ServeLevel& level : report.levels)
    for (const std::string& error : level.errors)
      text += fmt::format("concurrency {}: error: {}\n", level.concurrency, error);
  return text;
}

}  // namespace tessera::bench
