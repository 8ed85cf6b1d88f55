// Host-side helpers shared by the GPU backend and kernels: return-code checks that throw
// tessera::Error naming the call and file:line, a scoped device switch, the stream kernels launch
// on, and launch-size arithmetic. Vendor names come from gpu_vendor.h.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>

#include "kernels/cuda/gpu_vendor.h"
#include "runtime/backend/backend.h"
#include "runtime/backend/programmatic_launch.h"
#include "runtime/check.h"

#define GPU_CHECK(call)                                                                 \
  do {                                                                                  \
    gpuError_t gpu_check_error_ = (call);                                               \
    if (gpu_check_error_ != gpuSuccess)                                                 \
      ::tessera::gpu::throw_runtime_error(#call, __FILE__, __LINE__, gpu_check_error_); \
  } while (0)

#define GPU_CHECK_LAUNCH(kernel_name) ::tessera::gpu::check_launch(kernel_name, __FILE__, __LINE__)

namespace tessera::gpu {

// The most devices a process addresses: per-device state lives in arrays of this size.
constexpr int kMaxGpuDevices = 64;

// A device index as a slot of such an array, checked.
inline size_t device_slot(int device) {
  TESSERA_CHECK(device >= 0 && device < kMaxGpuDevices, "device index {} is outside [0, {})",
                device, kMaxGpuDevices);
  return static_cast<size_t>(device);
}

// "CUDA" or "HIP", for messages.
inline const char* runtime_name() {
  return kGpuDeviceType == DeviceType::hip ? "HIP" : "CUDA";
}

[[noreturn]] inline void throw_runtime_error(const char* call, const char* file, int line,
                                             gpuError_t error) {
  throw Error(fmt::format("{} error at {}:{}: {} failed: {} ({})", runtime_name(), file, line, call,
                          gpuGetErrorString(error), gpuGetErrorName(error)));
}

// After a kernel launch: a bad launch configuration shows up here; faults inside the kernel show
// up at a later synchronizing call, which is checked the same way.
inline void check_launch(const char* kernel, const char* file, int line) {
  gpuError_t error = gpuGetLastError();
  if (error != gpuSuccess) {
    throw Error(fmt::format("{} error at {}:{}: launching the {} kernel failed: {} ({})",
                            runtime_name(), file, line, kernel, gpuGetErrorString(error),
                            gpuGetErrorName(error)));
  }
}

// Makes `index` the current device for the scope and restores the previous one on exit.
class DeviceGuard {
 public:
  explicit DeviceGuard(int index) : index_(index) {
    GPU_CHECK(gpuGetDevice(&previous_));
    if (previous_ != index_) GPU_CHECK(gpuSetDevice(index_));
  }
  ~DeviceGuard() {
    if (previous_ != index_) (void)gpuSetDevice(previous_);  // a destructor cannot throw
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
  int index_ = 0;
};

// The stream that kernels for `device` launch on from this thread (the backend's current stream).
inline gpuStream_t current_stream(Device device) {
  return static_cast<gpuStream_t>(backend(device).current_stream(device.index).native_handle());
}

inline int gpu_index(Device device) {
  TESSERA_CHECK(device.type == kGpuDeviceType, "a {} kernel got a tensor on {}", runtime_name(),
                device.str());
  return device.index;
}

// Everything a kernel launch needs: the device made current and its current stream.
class LaunchScope {
 public:
  explicit LaunchScope(Device device)
      : guard_(gpu_index(device)), stream_(current_stream(device)) {}
  gpuStream_t stream() const { return stream_; }

 private:
  DeviceGuard guard_;
  gpuStream_t stream_;
};

// A device's properties the kernels size their launches by, read once per device.
struct DeviceLimits {
  int sm_count = 0;
  int compute_major = 0;          // compute capability (CUDA) / GCN architecture major (HIP)
  size_t shared_bytes_optin = 0;  // the most dynamic shared memory a block may opt into
  size_t l2_bytes = 0;
};

inline const DeviceLimits& device_limits(int device) {
  static std::mutex mutex;
  static std::map<int, DeviceLimits> limits;
  std::lock_guard lock(mutex);
  auto found = limits.find(device);
  if (found != limits.end()) return found->second;
  gpuDeviceProp properties;
  GPU_CHECK(gpuGetDeviceProperties(&properties, device));
  DeviceLimits device_limit;
  device_limit.sm_count = properties.multiProcessorCount;
  device_limit.compute_major = properties.major;
  device_limit.shared_bytes_optin = properties.GPU_PROP_SHARED_MEM_PER_BLOCK_OPTIN;
  device_limit.l2_bytes = static_cast<size_t>(properties.l2CacheSize);
  return limits.emplace(device, device_limit).first->second;
}

// Lets `kernel` launch with `bytes` of dynamic shared memory on `device` (above the default
// 48 KiB a block must opt in); the caller has checked bytes against shared_bytes_optin.
inline void allow_dynamic_shared_memory(const void* kernel, size_t bytes, int device) {
  constexpr size_t kDefaultLimit = 48 * 1024;
  if (bytes <= kDefaultLimit) return;
  static std::mutex mutex;
  static std::map<std::pair<const void*, int>, size_t> allowed;
  std::lock_guard lock(mutex);
  size_t& done = allowed[{kernel, device}];
  if (bytes <= done) return;
  GPU_CHECK(gpuFuncSetAttribute(kernel, gpuFuncAttributeMaxDynamicSharedMemorySize,
                                static_cast<int>(bytes)));
  done = bytes;
}

// Whether `stream` is capturing a graph (timing, which synchronizes, cannot run then).
inline bool stream_capturing(gpuStream_t stream) {
  gpuStreamCaptureStatus capture = gpuStreamCaptureStatusNone;
  GPU_CHECK(gpuStreamIsCapturing(stream, &capture));
  return capture != gpuStreamCaptureStatusNone;
}

inline int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// Blocks for `work_items` items of `per_block` each, capped for grid-stride kernels.
// Whether this thread's launches on `device` are programmatic
// (runtime/backend/programmatic_launch.h): compute capability 9.0 and later, never on HIP.
inline bool use_programmatic_launch(int device) {
#if defined(TESSERA_GPU_HIP)
  (void)device;
  return false;
#else
  return programmatic_launch_enabled() && device_limits(device).compute_major >= 9;
#endif
}

#if !defined(TESSERA_GPU_HIP)
// A programmatic launch's configuration; `attribute` holds its one attribute and must outlive
// the launch call.
inline cudaLaunchConfig_t programmatic_launch_config(dim3 grid, dim3 block, size_t shared_bytes,
                                                     gpuStream_t stream,
                                                     cudaLaunchAttribute& attribute) {
  attribute = cudaLaunchAttribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = 1;
  return config;
}
#endif

inline unsigned int grid_size(int64_t work_items, int64_t per_block, int64_t cap = 1 << 20) {
  int64_t blocks = ceil_div(work_items, per_block);
  if (blocks < 1) blocks = 1;
  if (blocks > cap) blocks = cap;
  return static_cast<unsigned int>(blocks);
}

}  // namespace tessera::gpu
