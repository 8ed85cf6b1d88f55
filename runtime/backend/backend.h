// One interface per device type: memory, streams, events, copies and graph capture. The CPU
// implements it in the core; CUDA and HIP implement it from the same sources (kernels/cuda, through
// gpu_vendor.h) in modules loaded on first use (backend_modules.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/backend/allocator.h"
#include "runtime/backend/runtime_compiler.h"
#include "runtime/device.h"

namespace tessera {

class Stream {
 public:
  virtual ~Stream() = default;
  virtual Device device() const = 0;
  virtual void synchronize() = 0;
  virtual void* native_handle() const = 0;  // cudaStream_t / hipStream_t; nullptr on the CPU
};

class Event {
 public:
  virtual ~Event() = default;
  virtual void record(Stream& stream) = 0;
  virtual void synchronize() = 0;
  // Milliseconds between this event and `end`, both recorded and complete.
  virtual float elapsed_ms(const Event& end) const = 0;
};

// A copy to the host that the host collects later (DeviceBackend::start_readback): the engine
// reads a step's sampled ids this way while the next step already runs.
class HostReadback {
 public:
  virtual ~HostReadback() = default;
  // Blocks until the bytes have landed; they stay valid while this object lives.
  virtual const void* wait() = 0;
};

// An instantiated captured graph: the work recorded on a stream between begin/end capture.
class GraphExec {
 public:
  virtual ~GraphExec() = default;
  virtual void replay(Stream& stream) = 0;
  virtual size_t num_nodes() const = 0;
};

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  virtual DeviceType type() const = 0;
  virtual int device_count() const = 0;
  virtual std::string device_name(int index) const = 0;
  // What code generators compile for: "sm_90" on CUDA, "gfx90a" on HIP, "" on the CPU.
  virtual std::string architecture(int index) const = 0;
  virtual Allocator& allocator(int index) = 0;

  virtual std::unique_ptr<Stream> create_stream(int index) = 0;
  // The stream kernels launch on from this thread; the device's default stream unless set.
  virtual Stream& current_stream(int index) = 0;
  virtual void set_current_stream(int index, Stream* stream) = 0;  // nullptr: back to default
  virtual std::unique_ptr<Event> create_event(int index) = 0;
  virtual void synchronize(int index) = 0;

  // Copies bytes; either side may be the host (Device kCPU) or this backend's device.
  virtual void copy(void* dst, Device dst_device, const void* src, Device src_device,
                    size_t bytes) = 0;

  // Copies `bytes` of host memory at `src` to `dst` on `dst_device` (this backend's), ordered on
  // the current stream like copy(), but never waiting for the device: the bytes go through pinned
  // memory that is reused once the copy has landed, so a step's inputs can go up while the work
  // queued before them still runs (a pageable copy of a megabyte may wait for the stream). The
  // default is copy() (right for synchronous devices).
  virtual void upload(void* dst, Device dst_device, const void* src, size_t bytes);

  // Queues a copy of `bytes` from `src` (on `src_device`, this backend's) to host memory the
  // readback owns, ordered after the work queued on the current stream; returns at once where
  // the device runs asynchronously. The default copies now (right for synchronous devices).
  virtual std::unique_ptr<HostReadback> start_readback(const void* src, Device src_device,
                                                       size_t bytes);

  virtual bool supports_graphs() const = 0;
  virtual void begin_capture(Stream& stream) = 0;
  virtual std::unique_ptr<GraphExec> end_capture(Stream& stream) = 0;

  // The step profiler's gate (runtime/profiler/profiler.h): hold_stream queues on `stream` a wait
  // that holds back the work queued after it until release_streams(), any synchronizing call of
  // this backend, or a safety timeout, so that the host can queue launches ahead and events around
  // each launch time the device rather than the host's launch. It returns whether it queued one:
  // not while a gate is already held on the stream, nor during a capture, nor where launches are
  // synchronous (the CPU). release_streams opens every gate and returns how many gates timed out
  // since its last call (each held its stream that long).
  virtual bool hold_stream(Stream& stream);
  virtual size_t release_streams();

  // (total, free) bytes of device memory.
  virtual std::pair<size_t, size_t> memory_info(int index) const = 0;

  // Generated code (compile/codegen): loads a compiled image (a cubin or PTX on CUDA, a code
  // object on HIP) on device
  // `index` and returns its entry point `entry`, or throws an Error saying why it does not load.
  // Loaded code lives as long as the process. Devices without run-time code loading throw.
  virtual const void* load_kernel_image(int index, const std::string& image,
                                        const std::string& entry);
  // Launches a loaded entry point over `grid` blocks of `block` threads on `stream`; `arguments`
  // points to each kernel parameter, as cudaLaunchKernel takes them.
  virtual void launch_kernel(const void* function, int64_t grid, int block, void** arguments,
                             Stream& stream);
  // The compiler of generated source for this device type (NVRTC, hipRTC); nullptr where there
  // is none (the CPU builds its generated C++ with the system compiler). Usable without a device:
  // tests compile for sm_90 on machines with no GPU.
  virtual const RuntimeCompiler* runtime_compiler() const;
};

// Registered backends, one per device type. find_backend loads the type's module on first use
// (nullptr when it is missing); registered_backend loads nothing. backend() throws a user-facing
// error naming the device and why it is missing (no module, the module did not load, no device).
void register_backend(std::unique_ptr<DeviceBackend> backend);
DeviceBackend* find_backend(DeviceType type);
DeviceBackend* registered_backend(DeviceType type);
DeviceBackend& backend(Device device);
bool device_available(Device device);
// The first GPU device with a working backend, if any (cuda:0, then hip:0).
bool first_gpu(Device* device);

// Sets the current stream for the scope, restoring the previous one on exit.
class StreamGuard {
 public:
  explicit StreamGuard(Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Device device_;
  Stream* previous_;
};

}  // namespace tessera
