#include "runtime/tensor.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <optional>

#include "runtime/backend/backend.h"
#include "runtime/check.h"
#include "runtime/checked_math.h"
#include "runtime/kernel_registry.h"
#include "runtime/profiler/profiler.h"

namespace tessera {

std::string shape_str(std::span<const int64_t> sizes) {
  return fmt::format("[{}]", fmt::join(sizes, ", "));
}

int64_t shape_numel(std::span<const int64_t> sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) {
    const std::optional<int64_t> product = checked_multiply(n, s);
    TESSERA_CHECK(product.has_value(), "the element count of shape {} overflows int64",
                  shape_str(sizes));
    n = *product;
  }
  return n;
}

std::optional<int64_t> checked_numel(std::span<const int64_t> sizes) {
  int64_t n = 1;
  // The strides multiply the sizes with zeros read as one: a zero size must not hide an
  // overflowing product of the others.
  int64_t span = 1;
  for (int64_t s : sizes) {
    if (s < 0) return std::nullopt;
    const std::optional<int64_t> product = checked_multiply(n, s);
    const std::optional<int64_t> spanned = checked_multiply(span, std::max<int64_t>(s, 1));
    if (!product || !spanned) return std::nullopt;
    n = *product;
    span = *spanned;
  }
  return n;
}

std::optional<int64_t> checked_nbytes(std::span<const int64_t> sizes, size_t element_size) {
  const std::optional<int64_t> numel = checked_numel(sizes);
  if (!numel) return std::nullopt;
  return checked_multiply(*numel, static_cast<int64_t>(element_size));
}

Shape contiguous_strides(std::span<const int64_t> sizes) {
  Shape strides(sizes.size());
  int64_t running = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = running;
    running *= std::max<int64_t>(sizes[i], 1);
  }
  return strides;
}

int64_t wrap_dim(int64_t dim, int64_t rank, const char* what) {
  int64_t wrapped = dim < 0 ? dim + rank : dim;
  TESSERA_REQUIRE(wrapped >= 0 && wrapped < std::max<int64_t>(rank, 1),
                  "{}: dim {} is out of range for a tensor of rank {}", what, dim, rank);
  return wrapped;
}

Storage::Storage(size_t nbytes, Device device)
    : nbytes_(nbytes), device_(device), allocator_(&backend(device).allocator(device.index)) {
  data_ = nbytes ? allocator_->allocate(nbytes) : nullptr;
}

Storage::Storage(void* external, size_t nbytes, Device device)
    : data_(external), nbytes_(nbytes), device_(device) {}

Storage::~Storage() {
  if (allocator_ && data_) allocator_->deallocate(data_, nbytes_);
}

Tensor Tensor::empty(Shape sizes, DType dtype, Device device) {
  for (int64_t s : sizes)
    TESSERA_REQUIRE(s >= 0, "cannot create a tensor of shape {}: sizes must be >= 0",
                    shape_str(sizes));
  const std::optional<int64_t> numel = checked_numel(sizes);
  const std::optional<int64_t> bytes =
      numel ? checked_storage_bytes(dtype, *numel) : std::optional<int64_t>{};
  TESSERA_REQUIRE(
      !is_quantized(dtype) || sizes.empty() || sizes.back() % block_elements(dtype) == 0,
      "cannot create a {} tensor of shape {}: its last size must be whole blocks of {}",
      dtype_name(dtype), shape_str(sizes), block_elements(dtype));
  TESSERA_REQUIRE(bytes.has_value(),
                  "cannot create a {} tensor of shape {}: its byte size overflows",
                  dtype_name(dtype), shape_str(sizes));
  return contiguous_over(std::make_shared<Storage>(static_cast<size_t>(*bytes), device),
                         std::move(sizes), dtype);
}

Tensor Tensor::from_blob(void* data, Shape sizes, DType dtype, Device device) {
  const auto bytes = static_cast<size_t>(storage_bytes(dtype, shape_numel(sizes)));
  return contiguous_over(std::make_shared<Storage>(data, bytes, device), std::move(sizes), dtype);
}

Tensor Tensor::contiguous_over(std::shared_ptr<Storage> storage, Shape sizes, DType dtype) {
  Tensor t;
  t.device_ = storage->device();
  t.storage_ = std::move(storage);
  t.strides_ = contiguous_strides(sizes);
  t.sizes_ = std::move(sizes);
  t.dtype_ = dtype;
  t.dtype_set_ = true;
  return t;
}

namespace {

template <typename Source>
Tensor from_host_values(std::span<const Source> values, Shape sizes, DType dtype, Device device) {
  TESSERA_REQUIRE(static_cast<int64_t>(values.size()) == shape_numel(sizes),
                  "{} values do not fill a tensor of shape {}", values.size(), shape_str(sizes));
  Tensor host = Tensor::empty(std::move(sizes), dtype, kCPU);
  visit_dtype(dtype, [&]<typename T>() {
    T* out = host.data<T>();
    for (size_t i = 0; i < values.size(); ++i) {
      if constexpr (std::is_integral_v<T>)
        out[i] = static_cast<T>(values[i]);
      else
        out[i] = T(static_cast<float>(values[i]));
    }
  });
  return host.to(device);
}

}  // namespace

Tensor Tensor::from_floats(std::span<const float> values, Shape sizes, DType dtype, Device device) {
  return from_host_values(values, std::move(sizes), dtype, device);
}

Tensor Tensor::from_ints(std::span<const int64_t> values, Shape sizes, DType dtype, Device device) {
  return from_host_values(values, std::move(sizes), dtype, device);
}

Tensor Tensor::fake(DType dtype, Device device, std::shared_ptr<const FakeInfo> info) {
  Tensor t;
  t.fake_ = std::move(info);
  t.dtype_ = dtype;
  t.dtype_set_ = true;
  t.device_ = device;
  return t;
}

int64_t Tensor::size(int64_t dim, const std::source_location& where) const {
  int64_t wrapped = wrap_dim(dim, this->dim(), "size");
  return fake_ ? fake_->concrete_size(wrapped, where) : sizes_[wrapped];
}
int64_t Tensor::stride(int64_t dim) const {
  return strides_[wrap_dim(dim, this->dim(), "stride")];
}

bool Tensor::is_contiguous() const {
  if (numel() == 0) return true;  // nothing to lay out
  int64_t expected = 1;
  for (size_t i = sizes_.size(); i-- > 0;) {
    if (sizes_[i] == 1) continue;
    if (strides_[i] != expected) return false;
    expected *= sizes_[i];
  }
  return true;
}

void* Tensor::data_ptr() const {
  TESSERA_CHECK(!is_fake(), "data_ptr() of a fake tensor: tracing code asked for data");
  if (!storage_ || !storage_->data()) return nullptr;
  // A quantized view starts on a block boundary (storage_bytes checks it).
  return static_cast<char*>(storage_->data()) + storage_bytes(dtype_, offset_);
}

Tensor Tensor::as_strided(Shape sizes, Shape strides, int64_t offset) const {
  TESSERA_CHECK(sizes.size() == strides.size());
  Tensor t = *this;
  t.sizes_ = std::move(sizes);
  t.strides_ = std::move(strides);
  t.offset_ = offset;
  return t;
}

Tensor Tensor::view(Shape sizes) const {
  int64_t inferred = -1;
  int64_t known = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == -1) {
      TESSERA_REQUIRE(inferred < 0, "view {}: only one size may be -1", shape_str(sizes));
      inferred = static_cast<int64_t>(i);
    } else {
      TESSERA_REQUIRE(sizes[i] >= 0, "view {}: sizes must be >= 0 or -1", shape_str(sizes));
      known *= sizes[i];
    }
  }
  if (inferred >= 0) {
    TESSERA_REQUIRE(known > 0 && numel() % known == 0,
                    "view: cannot infer the -1 in {} for a tensor of shape {}", shape_str(sizes),
                    shape_str(sizes_));
    sizes[inferred] = numel() / known;
  }
  TESSERA_REQUIRE(shape_numel(sizes) == numel(),
                  "view: shape {} has {} elements but the tensor of shape {} has {}",
                  shape_str(sizes), shape_numel(sizes), shape_str(sizes_), numel());
  TESSERA_REQUIRE(is_contiguous(),
                  "view: a tensor of shape {} with strides {} is not contiguous; use reshape",
                  shape_str(sizes_), shape_str(strides_));
  Shape strides = contiguous_strides(sizes);
  return as_strided(std::move(sizes), std::move(strides), offset_);
}

Tensor Tensor::slice(int64_t dim, int64_t start, int64_t end, int64_t step) const {
  dim = wrap_dim(dim, this->dim(), "slice");
  TESSERA_REQUIRE(step > 0, "slice: step must be positive, got {}", step);
  int64_t n = sizes_[dim];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape sizes = sizes_;
  Shape strides = strides_;
  sizes[dim] = (end - start + step - 1) / step;
  strides[dim] *= step;
  return as_strided(std::move(sizes), std::move(strides), offset_ + start * strides_[dim]);
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
  dim0 = wrap_dim(dim0, dim(), "transpose");
  dim1 = wrap_dim(dim1, dim(), "transpose");
  Shape sizes = sizes_;
  Shape strides = strides_;
  std::swap(sizes[dim0], sizes[dim1]);
  std::swap(strides[dim0], strides[dim1]);
  return as_strided(std::move(sizes), std::move(strides), offset_);
}

Tensor Tensor::expand(Shape sizes) const {
  TESSERA_REQUIRE(sizes.size() >= sizes_.size(), "expand: cannot expand shape {} to {}",
                  shape_str(sizes_), shape_str(sizes));
  Shape strides(sizes.size(), 0);
  size_t lead = sizes.size() - sizes_.size();
  for (size_t i = 0; i < sizes_.size(); ++i) {
    if (sizes_[i] == sizes[lead + i]) {
      strides[lead + i] = strides_[i];
    } else {
      TESSERA_REQUIRE(sizes_[i] == 1, "expand: cannot expand shape {} to {}", shape_str(sizes_),
                      shape_str(sizes));
    }
  }
  return as_strided(std::move(sizes), std::move(strides), offset_);
}

Tensor Tensor::unsqueeze(int64_t dim) const {
  dim = wrap_dim(dim, this->dim() + 1, "unsqueeze");
  Shape sizes = sizes_;
  Shape strides = strides_;
  int64_t stride = dim < this->dim() ? strides_[dim] * sizes_[dim] : 1;
  sizes.insert(sizes.begin() + dim, 1);
  strides.insert(strides.begin() + dim, stride);
  return as_strided(std::move(sizes), std::move(strides), offset_);
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  Tensor out = Tensor::empty(sizes_, dtype_, device_);
  out.copy_from(*this);
  return out;
}

Tensor Tensor::to(Device device) const {
  if (device == device_) return *this;
  Tensor out = Tensor::empty(sizes_, dtype_, device);
  out.copy_from(*this);
  return out;
}

namespace {

// Names a copy for the step profiler: which way the bytes go.
const char* copy_direction(Device source, Device destination) {
  if (source.is_cpu() == destination.is_cpu()) return source.is_cpu() ? "copy host" : "copy d2d";
  return source.is_cpu() ? "copy h2d" : "copy d2h";
}

}  // namespace

void Tensor::copy_from(const Tensor& source) {
  TESSERA_REQUIRE(source.sizes_ == sizes_ && source.dtype_ == dtype_,
                  "copy_from: source {} does not match destination {}", source.str(), str());
  if (numel() == 0) return;
  // A contiguous tensor copied onto itself: nothing to do (a caller that wrote into the slot).
  if (source.device_ == device_ && source.data_ptr() == data_ptr() && source.is_contiguous() &&
      is_contiguous())
    return;
  // A same-device copy reads and writes its bytes on that device; a transfer moves them once.
  // Host-to-host copies count only when the profiled device is the CPU.
  std::optional<ProfiledLaunch> profiled;
  const KernelProfiler* profiler = active_profiler();
  if (profiler != nullptr &&
      (!device_.is_cpu() || !source.device_.is_cpu() || profiler->device().is_cpu())) {
    profiled.emplace(copy_direction(source.device_, device_), KernelClass::copy, [&] {
      const double bytes = static_cast<double>(nbytes());
      return LaunchDetail{source.device_ == device_ ? 2 * bytes : bytes, 0,
                          fmt::format("{} {}", shape_str(sizes_), dtype_name(dtype_))};
    });
  }
  if (source.device_ == device_) {
    if (source.is_contiguous() && is_contiguous()) {
      backend(device_).copy(data_ptr(), device_, source.data_ptr(), device_, nbytes());
      return;
    }
    Tensor out = *this;
    run_kernel("copy", device_.type,
               KernelArgs{std::span(&source, 1), Attributes{}, std::span(&out, 1)});
    return;
  }
  // Across devices: bytes move contiguously; any re-striding happens on one side.
  Tensor packed = source.contiguous();
  Tensor staging = is_contiguous() ? *this : Tensor::empty(sizes_, dtype_, device_);
  DeviceBackend& mover = device_.is_cpu() ? backend(source.device_) : backend(device_);
  mover.copy(staging.data_ptr(), device_, packed.data_ptr(), source.device_, nbytes());
  if (!is_contiguous()) copy_from(staging);
}

namespace {

// Every element of `tensor`, in row-major order, converted to Out on the host (16-bit floats
// through f32).
template <typename Out>
std::vector<Out> host_values(const Tensor& tensor) {
  Tensor host = tensor.to(kCPU).contiguous();
  std::vector<Out> out(static_cast<size_t>(host.numel()));
  visit_dtype(host.dtype(), [&]<typename T>() {
    const T* in = host.data<T>();
    for (size_t i = 0; i < out.size(); ++i) {
      if constexpr (std::is_integral_v<T>)
        out[i] = static_cast<Out>(in[i]);
      else
        out[i] = static_cast<Out>(static_cast<float>(in[i]));
    }
  });
  return out;
}

}  // namespace

std::vector<double> Tensor::to_doubles() const {
  return host_values<double>(*this);
}

std::vector<float> Tensor::to_floats() const {
  return host_values<float>(*this);
}

std::vector<int64_t> Tensor::to_ints() const {
  return host_values<int64_t>(*this);
}

std::string Tensor::str() const {
  if (!defined()) return "Tensor(undefined)";
  if (is_fake()) return fmt::format("FakeTensor({}, {})", dtype_name(dtype_), device_.str());
  return fmt::format("Tensor({}, {}, {})", dtype_name(dtype_), shape_str(sizes_), device_.str());
}

}  // namespace tessera
