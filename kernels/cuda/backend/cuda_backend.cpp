// The GPU backend (CUDA; HIP from the same source through gpu_vendor.h): a caching allocator per
// device, non-blocking streams with a thread-local current stream, timing events, copies, and
// graph capture. Registered at load time; no GPU call happens until a device is first used, and a
// machine without a driver or GPU simply reports 0 devices.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kernels/cuda/backend/host_readback.h"
#include "kernels/cuda/backend/profiled_replay.h"
#include "kernels/cuda/backend/runtime_compiler.h"
#include "kernels/cuda/backend/stream_gates.h"
#include "kernels/cuda/gpu_runtime.h"
#include "kernels/cuda/gpu_vendor.h"
#include "runtime/backend/backend.h"
#include "runtime/check.h"

namespace tessera::gpu {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kGiB = 1024.0 * kMiB;

// Runs a call the current thread's stream capture would otherwise reject (cudaMalloc is
// "potentially unsafe" during capture): the allocation is not part of the graph, and the memory
// stays owned by the allocator, which is what a captured graph's static buffers need.
class RelaxedCaptureMode {
 public:
  RelaxedCaptureMode() : mode_(gpuStreamCaptureModeRelaxed) {
    GPU_CHECK(gpuThreadExchangeStreamCaptureMode(&mode_));
  }
  ~RelaxedCaptureMode() { (void)gpuThreadExchangeStreamCaptureMode(&mode_); }
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

 private:
  gpuStreamCaptureMode mode_;
};

// ---- Caching allocator.
//
// Device memory is expensive to get (cudaMalloc synchronizes) and an eager forward frees and
// re-requests the same sizes every step, so freed blocks go to a free list and are reused.
// Sizes are rounded: to 512 B up to 1 MiB (small blocks), to 2 MiB above. A request takes the
// smallest cached block that fits (best fit) when that block wastes at most a quarter of the
// request; blocks are never split or merged, which keeps this obviously correct. Stats count
// rounded block sizes: current/peak are the blocks held by live tensors, reserved adds the cache.
//
// Memory is reused in host order. That is safe for work on one stream (the engine's model); code
// that frees memory used on another stream must synchronize that stream first.
class CachingAllocator final : public Allocator {
 public:
  explicit CachingAllocator(int device_index) : device_index_(device_index) {}

  void* allocate(size_t bytes) override {
    if (bytes == 0) return nullptr;
    const size_t size = round_size(bytes);
    std::lock_guard lock(mutex_);
    void* ptr = take_cached_block(size);
    if (ptr == nullptr) ptr = allocate_from_device(bytes, size);
    stats_.current_bytes += allocated_.at(ptr);
    stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.current_bytes);
    return ptr;
  }

  void deallocate(void* ptr, size_t bytes) override {
    if (ptr == nullptr) return;
    std::lock_guard lock(mutex_);
    auto it = allocated_.find(ptr);
    TESSERA_CHECK(it != allocated_.end(), "freeing {} bytes at {} that this allocator never gave",
                  bytes, ptr);
    TESSERA_CHECK(it->second >= bytes, "block of {} bytes freed as {} bytes", it->second, bytes);
    stats_.current_bytes -= it->second;
    free_blocks_.emplace(it->second, ptr);
    allocated_.erase(it);
  }

  void empty_cache() override {
    std::lock_guard lock(mutex_);
    release_free_blocks();
  }

 private:
  static constexpr size_t kSmallBlockLimit = size_t{1} << 20;
  static constexpr size_t kSmallRounding = 512;
  static constexpr size_t kLargeRounding = size_t{2} << 20;

  static size_t round_up(size_t value, size_t multiple) {
    return (value + multiple - 1) / multiple * multiple;
  }
  static size_t round_size(size_t bytes) {
    return bytes <= kSmallBlockLimit ? round_up(bytes, kSmallRounding)
                                     : round_up(bytes, kLargeRounding);
  }

  // Best fit among the cached blocks; nullptr when none fits closely enough.
  void* take_cached_block(size_t size) {
    auto it = free_blocks_.lower_bound(size);
    if (it == free_blocks_.end() || it->first > size + size / 4) return nullptr;
    void* ptr = it->second;
    allocated_.emplace(ptr, it->first);
    free_blocks_.erase(it);
    return ptr;
  }

  // cudaMalloc; on failure empties the cache and retries once, then throws naming the request.
  void* allocate_from_device(size_t requested, size_t size) {
    DeviceGuard device(device_index_);
    void* ptr = nullptr;
    gpuError_t error = malloc_outside_capture(&ptr, size);
    if (error == gpuErrorMemoryAllocation) {
      (void)gpuGetLastError();  // clear it, or the next launch check would report it
      spdlog::debug("{}:{}: out of memory for {} bytes; releasing {:.1f} MiB of cached blocks",
                    device_type_name(kGpuDeviceType), device_index_, size, cached_bytes() / kMiB);
      release_free_blocks();
      error = malloc_outside_capture(&ptr, size);
    }
    if (error == gpuErrorMemoryAllocation) {
      (void)gpuGetLastError();
      throw_out_of_memory(requested, size);
    }
    if (error != gpuSuccess)
      throw_runtime_error("gpuMalloc(&ptr, size)", __FILE__, __LINE__, error);
    allocated_.emplace(ptr, size);
    stats_.reserved_bytes += size;
    ++stats_.num_device_allocations;
    return ptr;
  }

  static gpuError_t malloc_outside_capture(void** ptr, size_t size) {
    RelaxedCaptureMode relaxed;
    return gpuMalloc(ptr, size);
  }

  size_t cached_bytes() const {
    size_t total = 0;
    for (const auto& [size, ptr] : free_blocks_) total += size;
    return total;
  }

  void release_free_blocks() {
    if (free_blocks_.empty()) return;
    DeviceGuard device(device_index_);
    stream_gates().open_all();
    // cudaFree waits for the device's pending work, so no kernel still reads a freed block.
    while (!free_blocks_.empty()) {
      const auto [size, ptr] = *free_blocks_.begin();
      free_blocks_.erase(free_blocks_.begin());  // first, so a failed free is not retried
      stats_.reserved_bytes -= size;
      GPU_CHECK(gpuFree(ptr));
    }
  }

  [[noreturn]] void throw_out_of_memory(size_t requested, size_t size) const {
    size_t free_bytes = 0;
    size_t total_bytes = 0;
    const bool have_info = gpuMemGetInfo(&free_bytes, &total_bytes) == gpuSuccess;
    if (!have_info) (void)gpuGetLastError();
    throw Error(fmt::format(
        "{} out of memory on {}:{}: tried to allocate {} bytes ({:.2f} MiB, rounded to "
        "{:.2f} MiB); tessera holds {:.2f} GiB ({:.2f} GiB in use by tensors){}. Lower "
        "engine.num_kv_blocks or engine.max_model_len (the KV cache), "
        "engine.max_num_batched_tokens (the activation peak), or use a smaller model or dtype.",
        runtime_name(), device_type_name(kGpuDeviceType), device_index_, requested,
        requested / kMiB, size / kMiB, stats_.reserved_bytes / kGiB, stats_.current_bytes / kGiB,
        have_info ? fmt::format("; the device has {:.2f} GiB free of {:.2f} GiB", free_bytes / kGiB,
                                total_bytes / kGiB)
                  : std::string()));
  }

  const int device_index_;
  std::multimap<size_t, void*> free_blocks_;     // by size, for best fit
  std::unordered_map<void*, size_t> allocated_;  // live blocks and their rounded sizes
};

// ---- Streams, events, graphs.

class GpuStream final : public Stream {
 public:
  GpuStream(Device device, gpuStream_t handle) : device_(device), handle_(handle) {}
  ~GpuStream() override {
    // Errors cannot be thrown from here; a failed destroy only leaks the stream.
    if (gpuStreamDestroy(handle_) != gpuSuccess) (void)gpuGetLastError();
  }
  Device device() const override { return device_; }
  void synchronize() override {
    stream_gates().open_all();
    GPU_CHECK(gpuStreamSynchronize(handle_));
  }
  void* native_handle() const override { return handle_; }
  gpuStream_t handle() const { return handle_; }

 private:
  Device device_;
  gpuStream_t handle_;
};

gpuStream_t stream_handle(const Stream& stream) {
  const auto* gpu_stream = dynamic_cast<const GpuStream*>(&stream);
  TESSERA_REQUIRE(gpu_stream != nullptr, "a {} operation got a stream of device {}", runtime_name(),
                  stream.device().str());
  return gpu_stream->handle();
}

class GpuEvent final : public Event {
 public:
  explicit GpuEvent(int device_index) : device_index_(device_index) {
    DeviceGuard device(device_index_);
    GPU_CHECK(gpuEventCreate(&event_));  // default flags: timing enabled
  }
  ~GpuEvent() override {
    if (gpuEventDestroy(event_) != gpuSuccess) (void)gpuGetLastError();
  }
  void record(Stream& stream) override {
    DeviceGuard device(device_index_);
    GPU_CHECK(gpuEventRecord(event_, stream_handle(stream)));
  }
  void synchronize() override {
    stream_gates().open_all();
    GPU_CHECK(gpuEventSynchronize(event_));
  }
  float elapsed_ms(const Event& end) const override {
    const auto* end_event = dynamic_cast<const GpuEvent*>(&end);
    TESSERA_REQUIRE(end_event != nullptr, "elapsed_ms: the end event is not a {} event",
                    runtime_name());
    float ms = 0.0f;
    GPU_CHECK(gpuEventElapsedTime(&ms, event_, end_event->event_));
    return ms;
  }

 private:
  int device_index_;
  gpuEvent_t event_ = nullptr;
};

class GpuGraphExec final : public GraphExec {
 public:
  GpuGraphExec(int device_index, gpuGraphExec_t exec, size_t num_nodes)
      : device_index_(device_index), exec_(exec), num_nodes_(num_nodes) {}
  ~GpuGraphExec() override {
    if (gpuGraphExecDestroy(exec_) != gpuSuccess) (void)gpuGetLastError();
  }
  void replay(Stream& stream) override {
    DeviceGuard device(device_index_);
    const bool profiled = profiled_replay();
    if (profiled) GPU_CHECK(gpuProfilerStart());
    GPU_CHECK(gpuGraphLaunch(exec_, stream_handle(stream)));
    if (profiled) {
      GPU_CHECK(gpuStreamSynchronize(stream_handle(stream)));
      GPU_CHECK(gpuProfilerStop());
    }
  }
  size_t num_nodes() const override { return num_nodes_; }

 private:
  int device_index_;
  gpuGraphExec_t exec_;
  size_t num_nodes_;
};

// ---- Per-device state, created on first use of the device.

struct DeviceState {
  explicit DeviceState(int index) : allocator(index) {
    (void)profiled_replay_number();  // a bad TESSERA_PROFILE_REPLAY is an error now, not later
    // The runtime's primary context must exist before anything else touches the device: the
    // driver API (NVRTC-compiled modules) uses the context the runtime made current.
    GPU_CHECK(gpuSetDevice(index));
    GPU_CHECK(gpuFree(nullptr));
    gpuStream_t handle = nullptr;
    GPU_CHECK(gpuStreamCreateWithFlags(&handle, gpuStreamNonBlocking));
    // Not the legacy NULL stream: capture needs a stream that other work does not sync with.
    default_stream = std::make_unique<GpuStream>(Device{kGpuDeviceType, index}, handle);
    spdlog::debug("{}:{}: context ready, default stream created", device_type_name(kGpuDeviceType),
                  index);
  }
  CachingAllocator allocator;
  std::unique_ptr<GpuStream> default_stream;
  // Pinned bounce buffer for large copies to and from pageable host memory: the DMA engine
  // reads pinned pages at full speed, where pageable copies go through the driver's slow path.
  std::mutex staging_mutex;
  void* staging = nullptr;
  PinnedReadbackPool readbacks;
  PinnedUploads uploads{readbacks};  // after the pool it takes buffers from
};

constexpr size_t kStagingBytes = size_t{16} << 20;     // the pinned buffer, per device
constexpr size_t kStagingThreshold = size_t{1} << 20;  // smaller copies go direct

thread_local std::array<Stream*, kMaxGpuDevices> current_streams{};

class GpuBackend final : public DeviceBackend {
 public:
  // Device states are deliberately never destroyed: at process exit the GPU runtime may already
  // be unloaded, and tensors in static storage may still point at their allocator.
  ~GpuBackend() override {
    for (auto& state : states_) (void)state.release();
  }

  DeviceType type() const override { return kGpuDeviceType; }

  int device_count() const override {
    std::call_once(count_once_, [this] {
      int count = 0;
      gpuError_t error = gpuGetDeviceCount(&count);
      if (error != gpuSuccess) {
        (void)gpuGetLastError();
        spdlog::debug("{}: no devices ({}: {})", device_type_name(kGpuDeviceType),
                      gpuGetErrorName(error), gpuGetErrorString(error));
        count = 0;
      }
      count = std::min(count, kMaxGpuDevices);
      device_count_ = count;
      states_.resize(static_cast<size_t>(count));
      state_once_ = std::make_unique<std::once_flag[]>(static_cast<size_t>(count));
    });
    return device_count_;
  }

  std::string device_name(int index) const override {
    state(index);
    gpuDeviceProp properties{};
    GPU_CHECK(gpuGetDeviceProperties(&properties, index));
    return fmt::format("{} ({}, {:.1f} GiB, {} {})", properties.name, architecture(index),
                       properties.totalGlobalMem / kGiB, properties.multiProcessorCount,
                       kGpuDeviceType == DeviceType::hip ? "CUs" : "SMs");
  }

  std::string architecture(int index) const override {
    state(index);
    gpuDeviceProp properties{};
    GPU_CHECK(gpuGetDeviceProperties(&properties, index));
#if defined(TESSERA_GPU_HIP)
    return properties.gcnArchName;  // "gfx90a:sramecc+:xnack-": the target ID hipRTC takes
#else
    return fmt::format("sm_{}{}", properties.major, properties.minor);
#endif
  }

  Allocator& allocator(int index) override {
    return state(index).allocator;
  }

  std::unique_ptr<Stream> create_stream(int index) override {
    state(index);
    DeviceGuard device(index);
    gpuStream_t handle = nullptr;
    GPU_CHECK(gpuStreamCreateWithFlags(&handle, gpuStreamNonBlocking));
    return std::make_unique<GpuStream>(Device{kGpuDeviceType, index}, handle);
  }

  Stream& current_stream(int index) override {
    DeviceState& device = state(index);
    Stream* current = current_streams[static_cast<size_t>(index)];
    return current != nullptr ? *current : *device.default_stream;
  }

  void set_current_stream(int index, Stream* stream) override {
    state(index);
    if (stream != nullptr) {
      TESSERA_REQUIRE(stream->device() == (Device{kGpuDeviceType, index}),
                      "set_current_stream: a stream of {} cannot be current for {}:{}",
                      stream->device().str(), device_type_name(kGpuDeviceType), index);
    }
    current_streams[static_cast<size_t>(index)] = stream;
  }

  std::unique_ptr<Event> create_event(int index) override {
    state(index);
    return std::make_unique<GpuEvent>(index);
  }

  void synchronize(int index) override {
    state(index);
    DeviceGuard device(index);
    stream_gates().open_all();
    GPU_CHECK(gpuDeviceSynchronize());
  }

  // Host <-> device through the device's pinned buffer, a chunk at a time; synchronous.
  void copy_through_staging(void* dst, const void* src, size_t bytes, bool to_host, int index,
                            gpuStream_t handle) {
    DeviceState& device_state = state(index);
    std::lock_guard lock(device_state.staging_mutex);
    if (device_state.staging == nullptr)
      GPU_CHECK(gpuHostMalloc(&device_state.staging, kStagingBytes));
    auto* host = static_cast<char*>(to_host ? dst : const_cast<void*>(src));
    auto* device = static_cast<char*>(to_host ? const_cast<void*>(src) : dst);
    for (size_t done = 0; done < bytes; done += kStagingBytes) {
      size_t chunk = std::min(kStagingBytes, bytes - done);
      if (to_host) {
        GPU_CHECK(gpuMemcpyAsync(device_state.staging, device + done, chunk, gpuMemcpyDeviceToHost,
                                 handle));
        GPU_CHECK(gpuStreamSynchronize(handle));
        std::memcpy(host + done, device_state.staging, chunk);
      } else {
        std::memcpy(device_state.staging, host + done, chunk);
        GPU_CHECK(gpuMemcpyAsync(device + done, device_state.staging, chunk, gpuMemcpyHostToDevice,
                                 handle));
        GPU_CHECK(gpuStreamSynchronize(handle));
      }
    }
  }

  std::unique_ptr<HostReadback> start_readback(const void* src, Device src_device,
                                               size_t bytes) override {
    TESSERA_CHECK(src_device.type == kGpuDeviceType, "a {} readback from {}", runtime_name(),
                  src_device.str());
    Stream& stream = current_stream(src_device.index);
    return state(src_device.index)
        .readbacks.start(src_device.index, src, bytes, stream_handle(stream));
  }

  void upload(void* dst, Device dst_device, const void* src, size_t bytes) override {
    TESSERA_CHECK(dst_device.type == kGpuDeviceType, "upload to {} through the {} backend",
                  dst_device.str(), runtime_name());
    stream_gates().open_all();  // a profiler's gate would hold the copy until its timeout
    Stream& stream = current_stream(dst_device.index);
    state(dst_device.index)
        .uploads.upload(dst_device.index, dst, src, bytes, stream_handle(stream));
  }

  void copy(void* dst, Device dst_device, const void* src, Device src_device,
            size_t bytes) override {
    if (bytes == 0) return;
    const bool dst_host = dst_device.is_cpu();
    const bool src_host = src_device.is_cpu();
    TESSERA_CHECK((dst_host || dst_device.type == kGpuDeviceType) &&
                      (src_host || src_device.type == kGpuDeviceType),
                  "copy from {} to {} through the {} backend", src_device.str(), dst_device.str(),
                  runtime_name());
    if (dst_host && src_host) {
      std::memcpy(dst, src, bytes);
      return;
    }
    if (dst_host || src_host) stream_gates().open_all();  // the copy waits for the stream
    // The copy runs on the current stream of the GPU side (the destination for device to device),
    // so it is ordered after the kernels that produced the source.
    const int index = dst_host ? src_device.index : dst_device.index;
    Stream& stream = current_stream(index);
    DeviceGuard device(index);
    gpuStream_t handle = stream_handle(stream);
    if (!dst_host && !src_host && dst_device.index != src_device.index) {
      GPU_CHECK(gpuMemcpyPeerAsync(dst, dst_device.index, src, src_device.index, bytes, handle));
    } else if (dst_host && bytes >= kStagingThreshold) {  // logits and other readbacks
      copy_through_staging(dst, src, bytes, /*to_host=*/true, index, handle);
      return;
    } else {
      gpuMemcpyKind kind = dst_host   ? gpuMemcpyDeviceToHost
                           : src_host ? gpuMemcpyHostToDevice
                                      : gpuMemcpyDeviceToDevice;
      GPU_CHECK(gpuMemcpyAsync(dst, src, bytes, kind, handle));
    }
    // Host memory may be read or freed as soon as this returns. A copy to the host waits for the
    // stream. A copy from the host needs no wait: host tensors live in pageable memory (the CPU
    // allocator's), which the driver stages (or synchronizes for) before gpuMemcpyAsync returns,
    // so the device keeps the work queued ahead of it (a decode step copies its metadata this way
    // several times; draining the device at each cost a host round trip).
    if (dst_host) GPU_CHECK(gpuStreamSynchronize(handle));
  }

  bool supports_graphs() const override {
    return true;
  }

  bool hold_stream(Stream& stream) override {
    return stream_gates().hold(stream_handle(stream));
  }

  size_t release_streams() override {
    stream_gates().open_all();
    return stream_gates().take_timeouts();
  }

  void begin_capture(Stream& stream) override {
    DeviceGuard device(stream.device().index);
    // Thread-local: other threads' unrelated GPU calls (another engine, a logger reading memory
    // info) do not invalidate this capture.
    GPU_CHECK(gpuStreamBeginCapture(stream_handle(stream), gpuStreamCaptureModeThreadLocal));
  }

  std::unique_ptr<GraphExec> end_capture(Stream& stream) override {
    const int index = stream.device().index;
    DeviceGuard device(index);
    gpuGraph_t graph = nullptr;
    GPU_CHECK(gpuStreamEndCapture(stream_handle(stream), &graph));
    size_t num_nodes = 0;
    gpuGraphExec_t exec = nullptr;
    gpuError_t error = gpuGraphGetNodes(graph, nullptr, &num_nodes);
    if (error == gpuSuccess) error = gpuGraphInstantiateWithFlags(&exec, graph, 0);
    (void)gpuGraphDestroy(graph);  // the executable graph does not need it
    if (error != gpuSuccess) {
      throw_runtime_error("instantiating the captured graph", __FILE__, __LINE__, error);
    }
    return std::make_unique<GpuGraphExec>(index, exec, num_nodes);
  }

  const void* load_kernel_image(int index, const std::string& image,
                                const std::string& entry) override {
    state(index);  // the runtime's primary context exists from here on
    DeviceGuard device(index);
#if defined(TESSERA_GPU_HIP)
    gpuModule_t module = nullptr;
    gpuError_t status = gpuModuleLoadData(&module, image.data());
    gpuFunction_t kernel = nullptr;
    if (status == gpuSuccess) status = gpuModuleGetFunction(&kernel, module, entry.c_str());
#else
    gpuLibrary_t library = nullptr;
    gpuError_t status =
        gpuLibraryLoadData(&library, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
    gpuKernel_t kernel = nullptr;
    if (status == gpuSuccess) status = gpuLibraryGetKernel(&kernel, library, entry.c_str());
#endif
    if (status != gpuSuccess) {
      (void)gpuGetLastError();
      throw Error(fmt::format("{} ({}) loading {} on {}:{}", gpuGetErrorString(status),
                              gpuGetErrorName(status), entry, device_type_name(kGpuDeviceType),
                              index));
    }
    return reinterpret_cast<const void*>(kernel);
  }

  const RuntimeCompiler* runtime_compiler() const override {
    return &module_runtime_compiler();
  }

  void launch_kernel(const void* function, int64_t grid, int block, void** arguments,
                     Stream& stream) override {
    TESSERA_REQUIRE(grid > 0 && grid <= 0x7fffffff,
                    "a launch over {} blocks exceeds the grid limit (2^31 - 1 blocks)", grid);
    DeviceGuard device(stream.device().index);
#if defined(TESSERA_GPU_HIP)
    auto* kernel = reinterpret_cast<gpuFunction_t>(const_cast<void*>(function));
    GPU_CHECK(gpuModuleLaunchKernel(kernel, static_cast<unsigned int>(grid), 1, 1,
                                    static_cast<unsigned int>(block), 1, 1, 0,
                                    stream_handle(stream), arguments, nullptr));
#else
    // Generated kernels wait for the grids before them (the codegen's prelude), so they may be
    // launched programmatically.
    if (use_programmatic_launch(stream.device().index)) {
      cudaLaunchAttribute attribute;
      const cudaLaunchConfig_t config = programmatic_launch_config(
          dim3(static_cast<unsigned int>(grid)), dim3(static_cast<unsigned int>(block)), 0,
          stream_handle(stream), attribute);
      GPU_CHECK(cudaLaunchKernelExC(&config, function, arguments));
      return;
    }
    GPU_CHECK(gpuLaunchKernel(function, dim3(static_cast<unsigned int>(grid)),
                              dim3(static_cast<unsigned int>(block)), arguments, 0,
                              stream_handle(stream)));
#endif
  }

  std::pair<size_t, size_t> memory_info(int index) const override {
    state(index);
    DeviceGuard device(index);
    size_t free_bytes = 0;
    size_t total_bytes = 0;
    GPU_CHECK(gpuMemGetInfo(&free_bytes, &total_bytes));
    return {total_bytes, free_bytes};
  }

 private:
  // The device's state, created (context, default stream) on first use.
  DeviceState& state(int index) const {
    const int count = device_count();
    TESSERA_REQUIRE(index >= 0 && index < count,
                    "device {}:{} is not available: {} device(s) found",
                    device_type_name(kGpuDeviceType), index, count);
    const auto slot = static_cast<size_t>(index);
    std::call_once(state_once_[slot], [&] {
      DeviceGuard restore(index);  // DeviceState's constructor switches devices
      states_[slot] = std::make_unique<DeviceState>(index);
    });
    return *states_[slot];
  }

  mutable std::once_flag count_once_;
  mutable int device_count_ = 0;
  mutable std::vector<std::unique_ptr<DeviceState>> states_;
  mutable std::unique_ptr<std::once_flag[]> state_once_;
};

[[maybe_unused]] const bool registered = [] {
  register_backend(std::make_unique<GpuBackend>());
  return true;
}();

}  // namespace

}  // namespace tessera::gpu
