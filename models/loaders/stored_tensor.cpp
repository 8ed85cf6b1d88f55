#include "models/loaders/stored_tensor.h"

#include <cstring>

#include "kernels/quant/block_format.h"
#include "runtime/check.h"
#include "runtime/cpu/parallel.h"

namespace tessera::loaders {
namespace {

// Reads element `index` of a source buffer of type Source (possibly unaligned) as float.
template <typename Source>
float read_as_float(const std::byte* base, int64_t index) {
  Source value;
  std::memcpy(&value, base + index * static_cast<int64_t>(sizeof(Source)), sizeof(Source));
  return static_cast<float>(value);
}

// Converts `count` elements from `source` (type Source) into `target` (type Target).
template <typename Source, typename Target>
void convert_run(const std::byte* source, Target* target, int64_t count) {
  for (int64_t i = 0; i < count; ++i) target[i] = Target(read_as_float<Source>(source, i));
}

// Copies or converts `rows` rows of `row_elements` each; row r of the output comes from stored
// row source_row(r).
template <typename SourceRowFn>
void convert_rows(const StoredTensor& stored, void* out, DType target_dtype, int64_t rows,
                  int64_t row_elements, SourceRowFn source_row) {
  const size_t source_row_bytes = static_cast<size_t>(storage_bytes(stored.dtype, row_elements));
  const size_t target_row_bytes = static_cast<size_t>(storage_bytes(target_dtype, row_elements));
  auto* out_bytes = static_cast<std::byte*>(out);
  // Roughly 1 MiB of output per chunk: big tensors convert on every core.
  const int64_t min_rows = std::max<int64_t>(1, (1 << 20) / std::max<size_t>(target_row_bytes, 1));
  cpu::parallel_for(rows, min_rows, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const std::byte* from = stored.data + source_row(row) * source_row_bytes;
      std::byte* to = out_bytes + row * target_row_bytes;
      if (stored.dtype == target_dtype) {
        std::memcpy(to, from, source_row_bytes);
        continue;
      }
      visit_dtype(stored.dtype, [&]<typename Source>() {
        visit_dtype(target_dtype, [&]<typename Target>() {
          // Integer dtypes only ever copy (materialize() refuses int <-> float casts).
          if constexpr (!std::is_integral_v<Source> && !std::is_integral_v<Target>)
            convert_run<Source>(from, reinterpret_cast<Target*>(to), row_elements);
        });
      });
    }
  });
}

}  // namespace

int64_t rope_pairs_source_row(int64_t row, int64_t head_dim) {
  const int64_t half = head_dim / 2;
  const int64_t head = row / head_dim;
  const int64_t within = row % head_dim;
  const int64_t pair_member = within / half;  // 0: first of the pair (cos part), 1: second
  const int64_t pair_index = within % half;
  return head * head_dim + 2 * pair_index + pair_member;
}

namespace {

// A 1-D quantized tensor (a norm or bias some quantizer did not keep in F32): its values in f32,
// which materialize() then casts like any stored f32 tensor.
Tensor dequantized_vector(const StoredTensor& stored, const LoadOptions& options) {
  Tensor values = Tensor::empty(stored.shape, DType::f32, kCPU);
  quant::dequantize_blocks(stored.dtype, stored.data, values.data<float>(),
                           values.numel() / block_elements(stored.dtype));
  return materialize(
      StoredTensor{static_cast<const std::byte*>(values.data_ptr()), DType::f32, stored.shape},
      options);
}

}  // namespace

Tensor materialize(const StoredTensor& stored, const LoadOptions& options, RowOrder order,
                   int64_t head_dim) {
  const bool quantized = is_quantized(stored.dtype);
  if (quantized && stored.shape.size() == 1) return dequantized_vector(stored, options);
  // A quantized matrix keeps its blocks, an FP8 one its codes: their kernels read them.
  const bool kept = quantized || stored.dtype == DType::f8_e4m3;
  const DType target = kept ? stored.dtype : options.dtype;
  const bool both_float = is_floating(stored.dtype) && is_floating(options.dtype);
  TESSERA_REQUIRE(both_float || kept || stored.dtype == options.dtype,
                  "cannot convert a stored {} tensor to {}: only floating-point weights are cast",
                  dtype_name(stored.dtype), dtype_name(options.dtype));
  // Rows are dim 0; a 1-D tensor (a bias) has one element per row.
  const int64_t rows = stored.shape.empty() ? 1 : stored.shape[0];
  const int64_t row_elements = rows == 0 ? 0 : shape_numel(stored.shape) / rows;
  Tensor host = Tensor::empty(stored.shape, target, kCPU);
  if (host.numel() == 0) return host.to(options.device);
  if (order == RowOrder::rope_pairs_to_halves) {
    TESSERA_CHECK(head_dim > 0 && head_dim % 2 == 0 && rows % head_dim == 0,
                  "rope row reorder of {} rows with head_dim {}", rows, head_dim);
    convert_rows(stored, host.data_ptr(), target, rows, row_elements,
                 [&](int64_t row) { return rope_pairs_source_row(row, head_dim); });
  } else {
    convert_rows(stored, host.data_ptr(), target, rows, row_elements,
                 [](int64_t row) { return row; });
  }
  return host.to(options.device);
}

}  // namespace tessera::loaders
