// Tensor parallelism's collectives on GPUs (runtime/communicator.h) through NCCL (RCCL on HIP),
// opened with dlopen at the first group: TESSERA_NCCL_LIBRARY when set, else the library by its
// soname on the loader's path, else the copy a pip-installed PyTorch ships (nvidia-nccl-cu13 puts
// it under site-packages/nvidia/nccl/lib). One process drives every rank (ncclCommInitAll), each
// rank from its own thread on its own stream.
#include <dlfcn.h>
#include <spdlog/spdlog.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/cuda/collectives/nccl_api.h"
#include "kernels/cuda/gpu_runtime.h"
#include "runtime/backend/backend.h"
#include "runtime/check.h"
#include "runtime/communicator.h"

namespace tessera {
namespace {

#if defined(TESSERA_GPU_HIP)
constexpr const char* kLibrary = "librccl.so.1";
constexpr const char* kLibraryName = "RCCL";
#else
constexpr const char* kLibrary = "libnccl.so.2";
constexpr const char* kLibraryName = "NCCL";
#endif

// The entry points, resolved once.
struct NcclLibrary {
  nccl::CommInitAll comm_init_all = nullptr;
  nccl::AllReduce all_reduce = nullptr;
  nccl::AllGather all_gather = nullptr;
  nccl::Broadcast broadcast = nullptr;
  nccl::CommAbort comm_abort = nullptr;
  nccl::CommDestroy comm_destroy = nullptr;
  nccl::GetErrorString error_string = nullptr;
  nccl::GetVersion get_version = nullptr;
  std::string path;
  std::string version;  // "2.27.3"
};

// NCCL_VERSION_CODE: X*10000 + Y*100 + Z since 2.9, X*1000 + Y*100 + Z before.
std::array<int, 3> decode_version(int code) {
  if (code >= 10000) return {code / 10000, code / 100 % 100, code % 100};
  return {code / 1000, code / 100 % 10, code % 100};
}

// Where a pip-installed NCCL may be: site-packages of the Python installs on this machine.
std::vector<std::string> pip_candidates() {
  std::vector<std::string> candidates;
  std::vector<std::filesystem::path> roots = {"/usr/lib", "/usr/local/lib"};
  if (const char* home = std::getenv("HOME"))
    roots.push_back(std::filesystem::path(home) / ".local/lib");
  std::error_code error;
  for (const auto& root : roots) {
    for (const auto& entry : std::filesystem::directory_iterator(root, error)) {
      const std::string name = entry.path().filename().string();
      if (!name.starts_with("python3")) continue;
      for (const char* packages : {"dist-packages", "site-packages"}) {
        const auto path = entry.path() / packages / "nvidia/nccl/lib" / kLibrary;
        if (std::filesystem::exists(path, error)) candidates.push_back(path.string());
      }
    }
  }
  return candidates;
}

template <typename Fn>
void resolve(void* handle, const char* symbol, Fn& fn, const std::string& path) {
  fn = reinterpret_cast<Fn>(dlsym(handle, symbol));
  TESSERA_REQUIRE(fn != nullptr, "{} at {} has no {}: is it {} 2?", kLibraryName, path, symbol,
                  kLibraryName);
}

const NcclLibrary& library() {
  static std::once_flag once;
  static NcclLibrary loaded;
  static std::string failure;
  std::call_once(once, [] {
    std::vector<std::string> tried;
    if (const char* path = std::getenv("TESSERA_NCCL_LIBRARY")) tried.push_back(path);
    tried.push_back(kLibrary);
    for (const std::string& candidate : pip_candidates()) tried.push_back(candidate);
    void* handle = nullptr;
    std::string errors;
    for (const std::string& candidate : tried) {
      handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle != nullptr) {
        loaded.path = candidate;
        break;
      }
      errors += fmt::format("\n  {}: {}", candidate, dlerror());
    }
    if (handle == nullptr) {
      failure = fmt::format(
          "engine.tensor_parallel_size > 1 on GPUs needs {} ({}), which did not load; set "
          "TESSERA_NCCL_LIBRARY to its path (pip's nvidia-nccl-cu13 puts it under "
          "site-packages/nvidia/nccl/lib). Tried:{}",
          kLibraryName, kLibrary, errors);
      return;
    }
    try {
      resolve(handle, "ncclCommInitAll", loaded.comm_init_all, loaded.path);
      resolve(handle, "ncclAllReduce", loaded.all_reduce, loaded.path);
      resolve(handle, "ncclAllGather", loaded.all_gather, loaded.path);
      resolve(handle, "ncclBroadcast", loaded.broadcast, loaded.path);
      resolve(handle, "ncclCommAbort", loaded.comm_abort, loaded.path);
      resolve(handle, "ncclCommDestroy", loaded.comm_destroy, loaded.path);
      resolve(handle, "ncclGetErrorString", loaded.error_string, loaded.path);
      resolve(handle, "ncclGetVersion", loaded.get_version, loaded.path);
      int code = 0;
      (void)loaded.get_version(&code);
      const auto [major, minor, patch] = decode_version(code);
      loaded.version = fmt::format("{}.{}.{}", major, minor, patch);
      // bf16 collectives came in 2.10 (graph capture of collectives in 2.9).
      TESSERA_REQUIRE(major > 2 || (major == 2 && minor >= 10),
                      "{} at {} is version {}; tensor parallelism needs 2.10 or later",
                      kLibraryName, loaded.path, loaded.version);
    } catch (const Error& error) {
      failure = error.what();
    }
  });
  if (!failure.empty()) throw Error(failure);
  return loaded;
}

void check(nccl::Result result, const char* call) {
  if (result == nccl::kSuccess) return;
  throw Error(
      fmt::format("{} failed: {} (error {})", call, library().error_string(result), result));
}

nccl::DataType nccl_type(DType dtype, const char* op) {
  switch (dtype) {
    case DType::f32:
      return nccl::kFloat32;
    case DType::f16:
      return nccl::kFloat16;
    case DType::bf16:
      return nccl::kBfloat16;
    case DType::i32:
      return nccl::kInt32;
    case DType::i64:
      return nccl::kInt64;
    default:
      break;
  }
  throw Error(fmt::format("{}: {} has no {} dtype", op, dtype_name(dtype), kLibraryName));
}

void require_device_tensor(const char* op, const Tensor& tensor, int device) {
  TESSERA_REQUIRE(tensor.device() == (Device{kGpuDeviceType, device}) && tensor.is_contiguous(),
                  "{}: rank on {}:{} needs a contiguous tensor on its device, got {}", op,
                  device_type_name(kGpuDeviceType), device, tensor.str());
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(nccl::Comm comm, int rank, int size, int device)
      : comm_(comm), rank_(rank), size_(size), device_(device) {}
  ~NcclCommunicator() override {
    if (!aborted_) (void)library().comm_destroy(comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void all_reduce_sum(const Tensor& input, Tensor& output) override {
    require_device_tensor("all_reduce", input, device_);
    require_device_tensor("all_reduce", output, device_);
    require_live("all_reduce");
    gpu::DeviceGuard guard(device_);
    check(library().all_reduce(input.data_ptr(), output.data_ptr(),
                               static_cast<size_t>(input.numel()),
                               nccl_type(input.dtype(), "all_reduce"), nccl::kSum, comm_, stream()),
          "ncclAllReduce");
  }

  void all_gather(const Tensor& input, Tensor& output) override {
    require_device_tensor("all_gather", input, device_);
    require_device_tensor("all_gather", output, device_);
    TESSERA_REQUIRE(output.numel() == input.numel() * size_,
                    "all_gather: output {} must hold {} times input {}", output.str(), size_,
                    input.str());
    require_live("all_gather");
    gpu::DeviceGuard guard(device_);
    check(library().all_gather(input.data_ptr(), output.data_ptr(),
                               static_cast<size_t>(input.numel()),
                               nccl_type(input.dtype(), "all_gather"), comm_, stream()),
          "ncclAllGather");
  }

  void broadcast(Tensor& tensor, int root) override {
    require_device_tensor("broadcast", tensor, device_);
    TESSERA_REQUIRE(root >= 0 && root < size_, "broadcast: root {} is not a rank of {}", root,
                    size_);
    require_live("broadcast");
    gpu::DeviceGuard guard(device_);
    check(library().broadcast(tensor.data_ptr(), tensor.data_ptr(),
                              static_cast<size_t>(tensor.numel()),
                              nccl_type(tensor.dtype(), "broadcast"), root, comm_, stream()),
          "ncclBroadcast");
  }

  // From any thread (the runner aborts every rank's communicator when one rank fails); it
  // unblocks this rank's queued collectives. A collective this rank enqueues in the same instant
  // may still reach the aborted communicator: the runner is broken after that and only destroys
  // it.
  void abort() override {
    std::lock_guard lock(mutex_);
    if (aborted_) return;
    aborted_ = true;
    (void)library().comm_abort(comm_);
  }

 private:
  void* stream() const {
    return backend(Device{kGpuDeviceType, device_}).current_stream(device_).native_handle();
  }
  void require_live(const char* op) const {
    if (aborted_)
      throw CollectiveAborted(
          fmt::format("{}: another rank of the tensor-parallel group failed and aborted it", op));
  }

  nccl::Comm comm_;
  int rank_, size_, device_;
  std::mutex mutex_;
  std::atomic<bool> aborted_{false};
};

std::vector<std::unique_ptr<Communicator>> nccl_group(std::span<const int> devices) {
  const NcclLibrary& nccl = library();
  const int count = static_cast<int>(devices.size());
  std::vector<nccl::Comm> comms(devices.size(), nullptr);
  check(nccl.comm_init_all(comms.data(), count, devices.data()), "ncclCommInitAll");
  spdlog::info("{} {} from {}: a group of {} ranks", kLibraryName, nccl.version, nccl.path, count);
  std::vector<std::unique_ptr<Communicator>> group;
  for (int r = 0; r < count; ++r)
    group.push_back(std::make_unique<NcclCommunicator>(comms[static_cast<size_t>(r)], r, count,
                                                       devices[static_cast<size_t>(r)]));
  return group;
}

[[maybe_unused]] const bool nccl_registered =
    register_communicator_factory(kGpuDeviceType, nccl_group);

}  // namespace
}  // namespace tessera
