#include "runtime/profiler/profile_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <vector>

#include "runtime/check.h"

namespace tessera {

namespace {

constexpr double kMB = 1e6;

// The sums of one table row.
struct Totals {
  size_t launches = 0;
  double ms = 0;
  double bytes = 0;
  double flops = 0;
  void add(const LaunchRecord& launch) {
    ++launches;
    ms += launch.end_ms - launch.start_ms;
    bytes += launch.detail.bytes;
    flops += launch.detail.flops;
  }
};

// The header of a table; `extra` names a last column (empty: none).
std::string header(const std::string& first, const ProfileCeilings& ceilings,
                   const char* extra = "") {
  std::string line = fmt::format("{:<44} {:>8} {:>9} {:>7} {:>10} {:>8} {:>8}", first, "launches",
                                 "time ms", "share", "MB moved", "GB/s", "TFLOP/s");
  if (ceilings.copy_gb_per_s > 0) line += fmt::format(" {:>7}", "% copy");
  if (ceilings.gemm_tflops > 0) line += fmt::format(" {:>7}", "% gemm");
  if (*extra != 0) line += fmt::format(" {:>8}", extra);
  return line + "\n";
}

// A row of kernels; `gap_ms` >= 0 fills the extra column.
std::string row(const std::string& label, const Totals& totals, double whole_ms,
                const ProfileCeilings& ceilings, double gap_ms = -1) {
  const double seconds = totals.ms * 1e-3;
  const double gb_per_s = seconds > 0 ? totals.bytes / seconds / 1e9 : 0;
  const double tflops = seconds > 0 ? totals.flops / seconds / 1e12 : 0;
  std::string line = fmt::format(
      "{:<44} {:>8} {:>9.3f} {:>6.1f}% {:>10.2f} {:>8.0f} {:>8.2f}",
      label.size() > 44 ? label.substr(0, 41) + "..." : label, totals.launches, totals.ms,
      whole_ms > 0 ? 100.0 * totals.ms / whole_ms : 0.0, totals.bytes / kMB, gb_per_s, tflops);
  if (ceilings.copy_gb_per_s > 0)
    line += fmt::format(" {:>6.1f}%", 100.0 * gb_per_s / ceilings.copy_gb_per_s);
  if (ceilings.gemm_tflops > 0)
    line += fmt::format(" {:>6.1f}%", 100.0 * tflops / ceilings.gemm_tflops);
  if (gap_ms >= 0) line += fmt::format(" {:>8.3f}", gap_ms);
  return line + "\n";
}

// A row of time that no launch holds.
std::string time_row(const char* label, double ms, double whole_ms) {
  return fmt::format("{:<44} {:>8} {:>9.3f} {:>6.1f}%\n", label, "-", ms,
                     whole_ms > 0 ? 100.0 * ms / whole_ms : 0.0);
}

}  // namespace

std::string format_profile(const KernelProfiler& profiler, const ProfileCeilings& ceilings,
                           size_t top_kernels) {
  TESSERA_CHECK(profiler.timing(), "format_profile needs a timing profiler");
  const std::vector<LaunchRecord>& launches = profiler.launches();

  // Device gaps: the device clock between one launch's end and the next one's start, charged to
  // the region of the launch that waited; not before a launch that opened a gate (the host was
  // still queuing then).
  std::vector<Totals> by_class(kNumKernelClasses);
  std::map<std::string, Totals> by_region;
  std::map<std::string, double> region_gaps;
  std::vector<std::string> region_order;
  std::map<std::string, Totals> by_kernel;
  std::map<std::string, KernelClass> kernel_class;
  Totals all;
  double gaps_ms = 0, previous_end = 0;
  for (const LaunchRecord& launch : launches) {
    const double gap = launch.after_gate ? 0.0 : std::max(0.0, launch.start_ms - previous_end);
    gaps_ms += gap;
    previous_end = std::max(previous_end, launch.end_ms);
    all.add(launch);
    by_class[static_cast<size_t>(launch.kind)].add(launch);
    if (!by_region.contains(launch.region)) region_order.push_back(launch.region);
    by_region[launch.region].add(launch);
    region_gaps[launch.region] += gap;
    std::string key = launch.detail.shape.empty()
                          ? launch.name
                          : fmt::format("{} {}", launch.name, launch.detail.shape);
    by_kernel[key].add(launch);
    kernel_class[key] = launch.kind;
  }
  const double whole = all.ms + gaps_ms;

  // On a device whose launches are synchronous (the CPU) the time between launches is the host's.
  const bool synchronous = profiler.device().is_cpu();
  std::string out =
      synchronous
          ? fmt::format(
                "{} launches timed one by one: kernels {:.3f} ms, the host between them "
                "{:.3f} ms\n",
                launches.size(), all.ms, gaps_ms)
          : fmt::format(
                "{} launches timed one by one by device events, the host queuing ahead of the "
                "device: kernels {:.3f} ms, device gaps between them {:.3f} ms. Outside graphs, "
                "each time holds the device's latency of a stream launch, and transfers to or "
                "from the host hold the host's part\n",
                launches.size(), all.ms, gaps_ms);
  if (profiler.gate_timeouts() > 0)
    out += fmt::format(
        "warning: {} stream gates timed out (a wait for the device the backend did not see); "
        "times around them are too long\n",
        profiler.gate_timeouts());
  out += "\n" + header("by class", ceilings);
  for (size_t k = 0; k < kNumKernelClasses; ++k) {
    if (by_class[k].launches == 0) continue;
    out += row(kernel_class_name(static_cast<KernelClass>(k)), by_class[k], whole, ceilings);
  }
  out += row("kernels, all", all, whole, ceilings);
  out += time_row(synchronous ? "host between launches" : "device gaps between queued launches",
                  gaps_ms, whole);

  out += "\n" + header("by region (in step order)", ceilings, "gaps ms");
  for (const std::string& region : region_order)
    out += row(region, by_region[region], whole, ceilings, region_gaps[region]);

  std::vector<std::pair<std::string, Totals>> kernels(by_kernel.begin(), by_kernel.end());
  std::sort(kernels.begin(), kernels.end(),
            [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  if (kernels.size() > top_kernels) kernels.resize(top_kernels);
  out += "\n" + header(fmt::format("kernels by total time (top {})", top_kernels), ceilings);
  for (const auto& [name, totals] : kernels)
    out += row(fmt::format("{}: {}", kernel_class_name(kernel_class[name]), name), totals, whole,
               ceilings);
  return out;
}

std::string format_launch_counts(const KernelProfiler& profiler) {
  size_t total = 0;
  std::vector<std::string> parts;
  for (size_t k = 0; k < kNumKernelClasses; ++k) {
    const size_t count = profiler.launch_counts()[k];
    total += count;
    if (count > 0)
      parts.push_back(fmt::format("{} {}", kernel_class_name(static_cast<KernelClass>(k)), count));
  }
  std::string out = fmt::format("{} launched from the host ({})", total, fmt::join(parts, ", "));
  if (profiler.graph_replays() > 0)
    out += fmt::format(", {} graph replays holding {} nodes", profiler.graph_replays(),
                       profiler.graph_nodes());
  out += fmt::format("; on the device the step took {:.3f} ms", profiler.step_ms());
  if (profiler.graph_replays() > 0)
    out += fmt::format(", the graph replays {:.3f} ms of it", profiler.graph_ms());
  return out;
}

}  // namespace tessera
