// Tensor: shared storage, dtype, sizes, strides (in elements), offset and device. Views share
// storage. A tensor is "fake" while tracing: no storage, and a FakeInfo (defined by compile/)
// carries its symbolic shape and the graph value it stands for.
#pragma once

#include <cstdint>
#include <memory>
#include <source_location>
#include <span>
#include <string>
#include <vector>

#include "runtime/backend/allocator.h"
#include "runtime/device.h"
#include "runtime/dtype.h"

namespace tessera {

using Shape = std::vector<int64_t>;

std::string shape_str(std::span<const int64_t> sizes);  // "[2, 3]"
int64_t shape_numel(std::span<const int64_t> sizes);
Shape contiguous_strides(std::span<const int64_t> sizes);
// Wraps a possibly negative dim into [0, rank); throws naming `what` when out of range.
int64_t wrap_dim(int64_t dim, int64_t rank, const char* what);

class Storage {
 public:
  Storage(size_t nbytes, Device device);  // allocates through the device's allocator
  Storage(void* external, size_t nbytes, Device device);  // borrows; never frees
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  Allocator* allocator_ = nullptr;  // null when borrowed
};

// Base for what compile/ attaches to a fake tensor (symbolic shape, graph value).
struct FakeInfo {
  virtual ~FakeInfo() = default;
  virtual int64_t rank() const = 0;
  // A concrete size of a symbolic dim: specializes, and the tracer records a guard that names
  // `where` (the model code that asked).
  virtual int64_t concrete_size(int64_t dim, const std::source_location& where) const = 0;
};

class Tensor {
 public:
  Tensor() = default;  // undefined tensor

  static Tensor empty(Shape sizes, DType dtype, Device device = kCPU);
  // A view over memory the caller owns and keeps alive (weights mapped from a file, arenas).
  static Tensor from_blob(void* data, Shape sizes, DType dtype, Device device);
  // Host values converted to `dtype` (rounded for f16/bf16), then placed on `device`.
  static Tensor from_floats(std::span<const float> values, Shape sizes, DType dtype = DType::f32,
                            Device device = kCPU);
  static Tensor from_ints(std::span<const int64_t> values, Shape sizes, DType dtype = DType::i64,
                          Device device = kCPU);
  static Tensor fake(DType dtype, Device device, std::shared_ptr<const FakeInfo> info);

  bool defined() const { return dtype_set_; }
  bool is_fake() const { return fake_ != nullptr; }
  const FakeInfo* fake_info() const { return fake_.get(); }

  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  int64_t dim() const { return fake_ ? fake_->rank() : static_cast<int64_t>(sizes_.size()); }
  // sizes()/strides() of a fake tensor are empty: traced code uses compile/'s sym_size.
  const Shape& sizes() const { return sizes_; }
  const Shape& strides() const { return strides_; }
  // Negative dims count from the end. On a fake tensor this specializes the size (a guard).
  int64_t size(int64_t dim,
               const std::source_location& where = std::source_location::current()) const;
  int64_t stride(int64_t dim) const;
  int64_t offset() const { return offset_; }
  int64_t numel() const { return shape_numel(sizes_); }
  size_t nbytes() const { return static_cast<size_t>(storage_bytes(dtype_, numel())); }
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  // Address of element 0 (storage base + offset).
  void* data_ptr() const;
  template <typename T>
  T* data() const {
    return static_cast<T*>(data_ptr());
  }

  // Views (share storage).
  Tensor view(Shape sizes) const;  // needs a compatible layout; one size may be -1
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor expand(Shape sizes) const;  // broadcast with stride 0
  Tensor unsqueeze(int64_t dim) const;
  Tensor as_strided(Shape sizes, Shape strides, int64_t offset) const;

  // Copies.
  Tensor contiguous() const;  // self when already contiguous
  Tensor clone() const;
  Tensor to(Device device) const;        // self when already there
  void copy_from(const Tensor& source);  // same sizes; any devices, any layouts, same dtype

  // Host readback, converted to float/int64 (copies from the device when needed).
  std::vector<float> to_floats() const;
  std::vector<double> to_doubles() const;
  std::vector<int64_t> to_ints() const;
  std::string str() const;  // "Tensor(f32, [2, 3], cuda:0)"

 private:
  // A contiguous tensor of `sizes` over the whole of `storage`.
  static Tensor contiguous_over(std::shared_ptr<Storage> storage, Shape sizes, DType dtype);

  std::shared_ptr<Storage> storage_;
  std::shared_ptr<const FakeInfo> fake_;
  Shape sizes_;
  Shape strides_;
  int64_t offset_ = 0;
  DType dtype_ = DType::f32;
  bool dtype_set_ = false;
  Device device_;
};

}  // namespace tessera
