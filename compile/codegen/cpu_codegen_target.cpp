// The CPU codegen target: C++ source (cpp_codegen.h) built by the system compiler into a shared
// object (CpuKernelCache), launched as a loop over rows split across the CPU thread pool.
#include "compile/codegen/codegen_target.h"
#include "compile/codegen/cpp_codegen.h"
#include "runtime/cpu/parallel.h"

namespace tessera {
namespace {

class CpuLoadedKernel final : public LoadedKernel {
 public:
  CpuLoadedKernel(CpuKernelFunction function, size_t num_buffers)
      : function_(function), num_buffers_(num_buffers) {}

  void launch(int64_t rows, void* const* buffers, Stream&) const override {
    cpu::parallel_for(rows, 1, [&](int64_t begin, int64_t end) { function_(begin, end, buffers); });
  }
  size_t num_buffers() const override { return num_buffers_; }

 private:
  CpuKernelFunction function_;
  size_t num_buffers_;
};

class CpuCodegenTarget final : public CodegenTarget {
 public:
  explicit CpuCodegenTarget(const std::string& cache_dir) : cache_(cache_dir) {}

  std::string source_extension() const override { return "cpp"; }
  std::string render(const RowKernelBody& body, const std::string& name) const override {
    return generate_cpp_kernel(body, name);
  }
  std::shared_ptr<const LoadedKernel> load(const std::string& source, const std::string& name,
                                           const RowKernelBody& body) override {
    auto function = reinterpret_cast<CpuKernelFunction>(cache_.load(source, name));
    return std::make_shared<CpuLoadedKernel>(function,
                                             body.input_dtypes.size() + body.outputs.size());
  }
  const KernelCacheStats& stats() const override { return cache_.stats(); }
  std::string cache_directory() const override { return cache_.directory(); }

 private:
  CpuKernelCache cache_;
};

TESSERA_REGISTER_CODEGEN_TARGET(DeviceType::cpu, [](Device, const std::string& cache_dir) {
  return std::make_unique<CpuCodegenTarget>(cache_dir);
});

}  // namespace
}  // namespace tessera
