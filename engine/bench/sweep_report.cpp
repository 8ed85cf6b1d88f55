#include "engine/bench/sweep_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>

namespace tessera::bench {
namespace {

constexpr double kMiB = 1048576.0;

using json = nlohmann::ordered_json;  // keys in the order written

json optional_number(const std::optional<double>& value) {
  return value ? json(*value) : json(nullptr);
}

std::optional<double> copy_fraction(const SweepReport& report, const SweepRow& row) {
  if (!row.weight_gb_per_second || report.copy_gb_per_second <= 0) return std::nullopt;
  return *row.weight_gb_per_second / report.copy_gb_per_second;
}

const ModeResult* mode_of(const SweepReport& report, const std::string& label) {
  for (const ModeResult& mode : report.modes)
    if (mode.label == label) return &mode;
  return nullptr;
}

std::string number_or_dash(const std::optional<double>& value, const char* format) {
  return value ? fmt::format(fmt::runtime(format), *value) : "-";
}

}  // namespace

std::string sweep_json(const SweepReport& report) {
  const SweepOptions& options = report.options;
  const EngineConfig& config = options.config;
  json document = {
      {"schema", "tessera-sweep/1"},
      {"engine", "tessera"},
      {"complete", report.complete},
      {"created", report.created},
      {"commit", report.commit},
      {"machine",
       {{"hostname", report.machine.hostname},
        {"cpu", report.machine.cpu},
        {"cores", report.machine.cores},
        {"memory_gib", report.machine.memory_gib},
        {"os", report.machine.os}}},
      {"device",
       {{"device", report.device.device},
        {"name", report.device.name},
        {"memory_gib", report.device.memory_gib}}},
      {"config",
       {{"model", config.model.model},
        {"model_description", report.model_description},
        {"model_length", report.model_length},
        {"dtype", report.dtype},
        {"batch_sizes", options.batch_sizes},
        {"modes", options.modes},
        {"cudagraph_modes", options.cudagraph_modes},
        {"context", options.context},
        {"steps", options.steps},
        {"warmup", options.warmup},
        {"prompt_len", options.prompt_len},
        {"max_model_len", options.max_model_len},
        {"profile", options.profile},
        {"async_scheduling", config.scheduler.async_scheduling},
        {"linear", options.linear_path},
        {"max_num_batched_tokens", config.scheduler.max_num_batched_tokens},
        {"max_num_seqs",
         std::max(config.scheduler.max_num_seqs,
                  options.batch_sizes.empty()
                      ? int64_t{0}
                      : *std::max_element(options.batch_sizes.begin(), options.batch_sizes.end()))},
        {"block_size", config.cache.block_size},
        {"step",
         "one token for each sequence: forward, greedy pick on the device, ids copied to the "
         "host; timed with device events"}}},
      {"copy_gb_per_s", report.copy_gb_per_second},
      {"weight_bytes", report.weight_bytes},
      {"weight_bytes_per_step", report.weight_bytes_per_step},
      {"startup", {{"load_s", report.load_seconds}}},
      {"notes", report.notes},
  };
  json modes = json::array();
  for (const ModeResult& mode : report.modes) {
    modes.push_back({
        {"label", mode.label},
        {"mode", mode.mode},
        {"cudagraph_mode", mode.cudagraph_mode},
        {"startup",
         {{"compile_cold_s", optional_number(mode.compile_cold_seconds)},
          {"compile_warm_s", optional_number(mode.compile_warm_seconds)},
          {"capture_s", optional_number(mode.capture_seconds)},
          {"runner_s", mode.runner_seconds}}},
        {"memory",
         {{"weights_bytes", report.weight_bytes},
          {"kv_cache_bytes", mode.kv_cache_bytes},
          {"arena_bytes", mode.arena_bytes},
          {"graphs_bytes", mode.graph_bytes}}},
        {"ttft_ms", mode.ttft_ms},
        {"notes", mode.notes},
    });
  }
  json rows = json::array();
  for (const SweepRow& row : report.rows) {
    rows.push_back({
        {"label", row.label},
        {"mode", row.mode},
        {"cudagraph_mode", row.cudagraph_mode},
        {"batch_size", row.batch_size},
        {"step_ms_median", row.step_ms_median},
        {"step_ms_p90", row.step_ms_p90},
        {"step_ms_min", row.step_ms_min},
        {"tokens_per_s", row.tokens_per_second},
        {"prefill_tokens_per_s", row.prefill_tokens_per_second},
        {"weight_gb_per_s", optional_number(row.weight_gb_per_second)},
        {"weight_read_fraction_of_copy", optional_number(copy_fraction(report, row))},
    });
  }
  document["modes"] = modes;
  document["rows"] = rows;
  return document.dump(2) + "\n";
}

std::string sweep_csv(const SweepReport& report) {
  std::string text =
      "engine,label,mode,cudagraph_mode,batch_size,step_ms_median,step_ms_p90,step_ms_min,"
      "tokens_per_s,prefill_tokens_per_s,ttft_ms,weight_gb_per_s,weight_read_fraction_of_copy\n";
  auto cell = [](const std::optional<double>& value) {
    return value ? fmt::format("{:.6g}", *value) : std::string();
  };
  for (const SweepRow& row : report.rows) {
    const ModeResult* mode = mode_of(report, row.label);
    text += fmt::format("tessera,{},{},{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{},{},{}\n",
                        row.label, row.mode, row.cudagraph_mode, row.batch_size, row.step_ms_median,
                        row.step_ms_p90, row.step_ms_min, row.tokens_per_second,
                        row.prefill_tokens_per_second,
                        cell(mode ? std::optional(mode->ttft_ms) : std::nullopt),
                        cell(row.weight_gb_per_second), cell(copy_fraction(report, row)));
  }
  return text;
}

std::string sweep_table(const SweepReport& report) {
  const SweepOptions& options = report.options;
  std::string text = fmt::format(
      "=== tessera bench sweep: {} ({}) {} on {} ({}), commit {} ===\n"
      "context {} tokens, median and p90 of {} decode steps after {} warm-up; prefill and TTFT "
      "at {}-token prompts; linear path {}; model length {}; async scheduling {}\n"
      "copy bandwidth {:.1f} GB/s (read + write); weights {:.1f} MiB, {:.1f} MiB read per step; "
      "load {:.2f} s\n",
      options.config.model.model, report.model_description, report.dtype, report.device.device,
      report.device.name, report.commit, options.context, options.steps, options.warmup,
      options.prompt_len, options.linear_path, report.model_length,
      options.config.scheduler.async_scheduling ? "on" : "off", report.copy_gb_per_second,
      report.weight_bytes / kMiB, report.weight_bytes_per_step / kMiB, report.load_seconds);
  for (const std::string& note : report.notes) text += "note: " + note + "\n";
  text += fmt::format("\n{:<28} {:>6} {:>11} {:>11} {:>12} {:>14} {:>13} {:>9}\n", "mode", "batch",
                      "median ms", "p90 ms", "tokens/s", "prefill tok/s", "weights GB/s", "% copy");
  for (const SweepRow& row : report.rows) {
    const std::optional<double> fraction = copy_fraction(report, row);
    text += fmt::format(
        "{:<28} {:>6} {:>11.3f} {:>11.3f} {:>12.1f} {:>14.0f} {:>13} {:>9}\n", row.label,
        row.batch_size, row.step_ms_median, row.step_ms_p90, row.tokens_per_second,
        row.prefill_tokens_per_second, number_or_dash(row.weight_gb_per_second, "{:.1f}"),
        number_or_dash(fraction ? std::optional(100.0 * *fraction) : std::nullopt, "{:.1f}%"));
  }
  text += fmt::format("\n{:<28} {:>9} {:>15} {:>15} {:>10} {:>10} {:>10} {:>11} {:>10}\n", "mode",
                      "TTFT ms", "compile cold s", "compile warm s", "capture s", "runner s",
                      "KV MiB", "arena MiB", "graph MiB");
  for (const ModeResult& mode : report.modes) {
    text += fmt::format(
        "{:<28} {:>9.2f} {:>15} {:>15} {:>10} {:>10.3f} {:>10.1f} {:>11.1f} "
        "{:>10.1f}\n",
        mode.label, mode.ttft_ms, number_or_dash(mode.compile_cold_seconds, "{:.3f}"),
        number_or_dash(mode.compile_warm_seconds, "{:.3f}"),
        number_or_dash(mode.capture_seconds, "{:.3f}"), mode.runner_seconds,
        mode.kv_cache_bytes / kMiB, mode.arena_bytes / kMiB, mode.graph_bytes / kMiB);
  }
  if (!report.complete) text += "(incomplete: the sweep stopped early)\n";
  return text;
}

}  // namespace tessera::bench
