// The per-kernel profile of one step (tessera bench sweep --profile). While a KernelProfiler is
// active on this thread, every launch site wrapped in a ProfiledLaunch (compiled pieces' steps,
// attention, eager ops, device copies) records a device event before and after itself on the
// current stream.
// So that those events time the device and not the host's launch (a launch reaching an idle
// device would start late by its own host cost), the profiler holds the stream behind a gate
// (DeviceBackend::hold_stream) while the host queues launches, up to the next call that waits for
// the device: the launches then run back to back, and the gaps between them are what the device
// itself spends between queued launches. Launched one by one outside graphs, each kernel's time
// holds the device's latency of a stream launch (microseconds; graphs cut it). A profiler made with
// timing off leaves the step's path as it is: it counts launches and graph replays, and times the
// graph replays and the whole step with events. Without an active profiler a ProfiledLaunch costs
// one thread-local read.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/backend/backend.h"

namespace tessera {

// What a launch does, for the profile's per-class table.
// (collective: tensor parallelism's all-reduce and all-gather.)
enum class KernelClass { gemm, attention, fused, pointwise, sampling, copy, collective };
inline constexpr size_t kNumKernelClasses = 7;
const char* kernel_class_name(KernelClass kind);  // "gemm", "attention", ...

// What a launch works on: the fewest bytes it must move (each input read once, each output
// written once), the floating-point operations it must do, and its shape for the tables
// ("1x2048x2048" for a GEMM's M x N x K).
struct LaunchDetail {
  double bytes = 0;
  double flops = 0;
  std::string shape;
};

struct LaunchRecord {
  std::string name;  // "linear[skinny_mma_t1]", "fused_3_rms_norm", "attention", "copy h2d"
  KernelClass kind = KernelClass::pointwise;
  std::string region;  // the innermost ProfileRegion open at the launch: "piece 3", "logits"
  LaunchDetail detail;
  double start_ms = 0;  // device clock, from the profiler's start()
  double end_ms = 0;
  // The launch opened a gate: the time before it is the host queuing, not a device gap.
  bool after_gate = false;
};

class KernelProfiler {
 public:
  // timing: events around every launch (graphs are bypassed, see bypasses_graphs()); otherwise
  // launches are counted, and events time the step and each graph replay.
  KernelProfiler(Device device, bool timing);
  ~KernelProfiler();
  KernelProfiler(const KernelProfiler&) = delete;
  KernelProfiler& operator=(const KernelProfiler&) = delete;

  Device device() const { return device_; }
  bool timing() const { return timing_; }
  // A timing profiler launches what graphs would replay, so that each kernel gets its events.
  bool bypasses_graphs() const { return timing_; }

  // Brackets the step: start() records the step's first event on the current stream; stop()
  // records the last, waits for the device and resolves every launch's times.
  void start();
  void stop();

  // Launches since start(), in stream order (timing profilers; times valid after stop()).
  const std::vector<LaunchRecord>& launches() const { return launches_; }
  // Launches per class since start() (both kinds of profiler).
  const std::array<size_t, kNumKernelClasses>& launch_counts() const { return counts_; }
  size_t graph_replays() const { return graph_replays_; }
  size_t graph_nodes() const { return graph_nodes_; }  // nodes of the graphs replayed
  double graph_ms() const { return graph_ms_; }        // their device time (counting profilers)
  double step_ms() const { return step_ms_; }          // start() to stop() on the device clock
  // Gates that timed out (a wait for the device the backend did not see): times near them
  // include the timeout.
  size_t gate_timeouts() const { return gate_timeouts_; }

  // Called by ProfiledLaunch, ProfileRegion, annotate_launch and note_graph_replay.
  void begin_launch(std::string_view name, KernelClass kind, const LaunchDetail& detail);
  void end_launch();
  void annotate(std::string_view variant);
  void push_region(std::string region);
  void pop_region();
  void begin_graph_replay();
  void end_graph_replay(size_t nodes);

 private:
  Event& next_event();

  Device device_;
  bool timing_;
  bool started_ = false;
  int depth_ = 0;  // open launches: only the outermost is recorded
  std::vector<std::unique_ptr<Event>> events_;
  size_t events_used_ = 0;
  std::unique_ptr<Event> start_event_, stop_event_;
  std::vector<size_t> begin_events_, end_events_;  // per launch, into events_
  std::vector<size_t> graph_events_;               // counting profilers: begin, end per replay
  std::vector<LaunchRecord> launches_;
  std::vector<std::string> regions_;
  std::array<size_t, kNumKernelClasses> counts_{};
  size_t graph_replays_ = 0;
  size_t graph_nodes_ = 0;
  double graph_ms_ = 0;
  double step_ms_ = 0;
  size_t gate_timeouts_ = 0;
};

// The profiler active on this thread, or nullptr.
KernelProfiler* active_profiler();

// Makes `profiler` active on this thread for the scope (nests; the previous one returns after).
class ProfilerScope {
 public:
  explicit ProfilerScope(KernelProfiler& profiler);
  ~ProfilerScope();
  ProfilerScope(const ProfilerScope&) = delete;
  ProfilerScope& operator=(const ProfilerScope&) = delete;

 private:
  KernelProfiler* previous_;
};

// One launch site. Its detail is computed only while a profiler is active: pass a callable
// returning LaunchDetail, so that an unprofiled launch does no size arithmetic.
class ProfiledLaunch {
 public:
  template <typename DetailFn>
  ProfiledLaunch(std::string_view name, KernelClass kind, DetailFn&& detail)
      : profiler_(active_profiler()) {
    if (profiler_ != nullptr) profiler_->begin_launch(name, kind, detail());
  }
  ProfiledLaunch(std::string_view name, KernelClass kind) : profiler_(active_profiler()) {
    if (profiler_ != nullptr) profiler_->begin_launch(name, kind, LaunchDetail{});
  }
  ~ProfiledLaunch() {
    if (profiler_ != nullptr) profiler_->end_launch();
  }
  ProfiledLaunch(const ProfiledLaunch&) = delete;
  ProfiledLaunch& operator=(const ProfiledLaunch&) = delete;

 private:
  KernelProfiler* profiler_;
};

// Names the launches inside the scope by where they come from ("piece 3", "logits"); `index`
// (when >= 0) is appended to the label.
class ProfileRegion {
 public:
  explicit ProfileRegion(const char* label, int index = -1);
  ~ProfileRegion();
  ProfileRegion(const ProfileRegion&) = delete;
  ProfileRegion& operator=(const ProfileRegion&) = delete;

 private:
  KernelProfiler* profiler_;
};

// Adds "[variant]" to the name of the launch being recorded (which GEMM implementation ran).
void annotate_launch(std::string_view variant);

// A captured graph of `nodes` nodes replayed instead of launching its work: counted, and timed by
// a counting profiler.
class ProfiledGraphReplay {
 public:
  explicit ProfiledGraphReplay(size_t nodes);
  ~ProfiledGraphReplay();
  ProfiledGraphReplay(const ProfiledGraphReplay&) = delete;
  ProfiledGraphReplay& operator=(const ProfiledGraphReplay&) = delete;

 private:
  KernelProfiler* profiler_;
  size_t nodes_;
};

}  // namespace tessera
