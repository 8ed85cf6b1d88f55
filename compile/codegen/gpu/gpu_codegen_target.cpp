// The GPU codegen target of the module this file is built into: source in the module's dialect
// (cuda_codegen.h) compiled by NVRTC or hipRTC for the device's architecture (GpuKernelCache),
// loaded and launched through the module's DeviceBackend, cuda_blocks_per_row blocks per row.
#include "compile/codegen/codegen_target.h"
#include "compile/codegen/cuda_codegen.h"
#include "compile/codegen/gpu/gpu_kernel_cache.h"
#include "kernels/cuda/gpu_vendor.h"
#include "runtime/check.h"

namespace tessera {
namespace {

constexpr GpuDialect kDialect =
    kGpuDeviceType == DeviceType::hip ? GpuDialect::hip : GpuDialect::cuda;

class GpuLoadedKernel final : public LoadedKernel {
 public:
  GpuLoadedKernel(const void* function, int block_size, int blocks_per_row, size_t num_buffers,
                  Device device)
      : function_(function),
        block_size_(block_size),
        blocks_per_row_(blocks_per_row),
        num_buffers_(num_buffers),
        backend_(&backend(device)) {}

  void launch(int64_t rows, void* const* buffers, Stream& stream) const override {
    if (rows == 0) return;
    long long row_count = rows;
    // The buffers parameter is a struct of num_buffers pointers passed by value: its bytes are
    // those of the host array.
    void* arguments[] = {&row_count, const_cast<void**>(buffers)};
    TESSERA_REQUIRE(rows <= INT64_MAX / blocks_per_row_, "a launch over {} rows of {} blocks", rows,
                    blocks_per_row_);
    backend_->launch_kernel(function_, rows * blocks_per_row_, block_size_, arguments, stream);
  }
  size_t num_buffers() const override { return num_buffers_; }

 private:
  const void* function_;
  int block_size_;
  int blocks_per_row_;
  size_t num_buffers_;
  DeviceBackend* backend_;
};

class GpuCodegenTarget final : public CodegenTarget {
 public:
  GpuCodegenTarget(Device device, const std::string& cache_dir)
      : device_(device), cache_(GpuKernelCache::for_device(cache_dir, device.index)) {}

  std::string source_extension() const override {
    return kDialect == GpuDialect::hip ? "hip" : "cu";
  }
  std::string render(const RowKernelBody& body, const std::string&) const override {
    return generate_cuda_kernel(body, kDialect);
  }
  std::shared_ptr<const LoadedKernel> load(const std::string& source, const std::string& name,
                                           const RowKernelBody& body) override {
    return std::make_shared<GpuLoadedKernel>(
        cache_.load(source, name), cuda_block_size(body), cuda_blocks_per_row(body),
        body.input_dtypes.size() + body.outputs.size(), device_);
  }
  const KernelCacheStats& stats() const override { return cache_.stats(); }
  std::string cache_directory() const override { return cache_.directory(); }

 private:
  Device device_;
  GpuKernelCache cache_;
};

TESSERA_REGISTER_CODEGEN_TARGET(kGpuDeviceType, [](Device device, const std::string& cache_dir) {
  return std::make_unique<GpuCodegenTarget>(device, cache_dir);
});

}  // namespace
}  // namespace tessera
