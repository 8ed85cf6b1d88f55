#include "runtime/profiler/profiler.h"

#include <fmt/format.h>

#include "runtime/check.h"

namespace tessera {

namespace {

thread_local KernelProfiler* active = nullptr;

}  // namespace

const char* kernel_class_name(KernelClass kind) {
  switch (kind) {
    case KernelClass::gemm:
      return "gemm";
    case KernelClass::attention:
      return "attention";
    case KernelClass::fused:
      return "fused";
    case KernelClass::pointwise:
      return "pointwise";
    case KernelClass::sampling:
      return "sampling";
    case KernelClass::copy:
      return "copies";
    case KernelClass::collective:
      return "collectives";
  }
  return "?";
}

KernelProfiler::KernelProfiler(Device device, bool timing) : device_(device), timing_(timing) {
  start_event_ = backend(device_).create_event(device_.index);
  stop_event_ = backend(device_).create_event(device_.index);
}

KernelProfiler::~KernelProfiler() = default;

Event& KernelProfiler::next_event() {
  if (events_used_ == events_.size())
    events_.push_back(backend(device_).create_event(device_.index));
  return *events_[events_used_++];
}

void KernelProfiler::start() {
  TESSERA_CHECK(!started_, "profiler started twice");
  started_ = true;
  launches_.clear();
  begin_events_.clear();
  end_events_.clear();
  graph_events_.clear();
  events_used_ = 0;
  counts_ = {};
  graph_replays_ = graph_nodes_ = 0;
  graph_ms_ = 0;
  gate_timeouts_ = 0;
  if (timing_) backend(device_).release_streams();  // counts only this step's timeouts
  start_event_->record(backend(device_).current_stream(device_.index));
}

void KernelProfiler::stop() {
  TESSERA_CHECK(started_ && depth_ == 0, "profiler stopped outside a step or inside a launch");
  started_ = false;
  DeviceBackend& device = backend(device_);
  stop_event_->record(device.current_stream(device_.index));
  if (timing_) gate_timeouts_ = device.release_streams();
  stop_event_->synchronize();
  step_ms_ = start_event_->elapsed_ms(*stop_event_);
  for (size_t i = 0; i + 1 < graph_events_.size(); i += 2)
    graph_ms_ += events_[graph_events_[i]]->elapsed_ms(*events_[graph_events_[i + 1]]);
  for (size_t i = 0; i < launches_.size(); ++i) {
    launches_[i].start_ms = start_event_->elapsed_ms(*events_[begin_events_[i]]);
    launches_[i].end_ms = start_event_->elapsed_ms(*events_[end_events_[i]]);
  }
}

void KernelProfiler::begin_launch(std::string_view name, KernelClass kind,
                                  const LaunchDetail& detail) {
  if (!started_ || depth_++ > 0) return;
  counts_[static_cast<size_t>(kind)]++;
  if (!timing_) return;
  LaunchRecord record;
  record.name = name;
  record.kind = kind;
  record.region = regions_.empty() ? std::string("step") : regions_.back();
  record.detail = detail;
  DeviceBackend& device = backend(device_);
  Stream& stream = device.current_stream(device_.index);
  record.after_gate = device.hold_stream(stream);
  launches_.push_back(std::move(record));
  begin_events_.push_back(events_used_);
  next_event().record(stream);
}

void KernelProfiler::end_launch() {
  if (!started_) return;
  TESSERA_CHECK(depth_ > 0, "a launch ended that never began");
  if (--depth_ > 0 || !timing_) return;
  end_events_.push_back(events_used_);
  next_event().record(backend(device_).current_stream(device_.index));
}

void KernelProfiler::annotate(std::string_view variant) {
  if (!started_ || !timing_ || depth_ == 0 || launches_.empty()) return;
  launches_.back().name += fmt::format("[{}]", variant);
}

void KernelProfiler::push_region(std::string region) {
  regions_.push_back(std::move(region));
}

void KernelProfiler::pop_region() {
  TESSERA_CHECK(!regions_.empty(), "profile region closed twice");
  regions_.pop_back();
}

void KernelProfiler::begin_graph_replay() {
  if (!started_ || timing_) return;
  graph_events_.push_back(events_used_);
  next_event().record(backend(device_).current_stream(device_.index));
}

void KernelProfiler::end_graph_replay(size_t nodes) {
  if (!started_) return;
  ++graph_replays_;
  graph_nodes_ += nodes;
  if (timing_) return;
  graph_events_.push_back(events_used_);
  next_event().record(backend(device_).current_stream(device_.index));
}

KernelProfiler* active_profiler() {
  return active;
}

ProfilerScope::ProfilerScope(KernelProfiler& profiler) : previous_(active) {
  active = &profiler;
}

ProfilerScope::~ProfilerScope() {
  active = previous_;
}

ProfileRegion::ProfileRegion(const char* label, int index) : profiler_(active) {
  if (profiler_ == nullptr) return;
  profiler_->push_region(index >= 0 ? fmt::format("{} {}", label, index) : std::string(label));
}

ProfileRegion::~ProfileRegion() {
  if (profiler_ != nullptr) profiler_->pop_region();
}

void annotate_launch(std::string_view variant) {
  if (active != nullptr) active->annotate(variant);
}

ProfiledGraphReplay::ProfiledGraphReplay(size_t nodes) : profiler_(active), nodes_(nodes) {
  if (profiler_ != nullptr) profiler_->begin_graph_replay();
}

ProfiledGraphReplay::~ProfiledGraphReplay() {
  if (profiler_ != nullptr) profiler_->end_graph_replay(nodes_);
}

}  // namespace tessera
