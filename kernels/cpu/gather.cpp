// CPU kernels that move whole rows: embedding (gather rows of a table by id) and cat. Both only
// copy bytes, so one code path serves every dtype.
#include <cstring>
#include <vector>

#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/quantized_linear.h"
#include "runtime/cpu/parallel.h"
#include "runtime/kernel_registry.h"

namespace tessera::cpu {
namespace {

// The multi-index of flat element `index` of a tensor of shape `sizes`, as "[1, 3]".
std::string position_str(int64_t index, const Shape& sizes) {
  Shape position(sizes.size());
  for (size_t dim = sizes.size(); dim-- > 0;) {
    position[dim] = index % sizes[dim];
    index /= sizes[dim];
  }
  return shape_str(position);
}

// Copies `count` rows of `row_bytes` each: row i from source(i) to destination(i).
template <typename SourceFn, typename DestinationFn>
void copy_rows(int64_t count, size_t row_bytes, const SourceFn& source,
               const DestinationFn& destination) {
  const int64_t min_rows =
      std::max<int64_t>(1, kParallelGrain * 4 / std::max<int64_t>(row_bytes, 1));
  parallel_for(count, min_rows, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row)
      std::memcpy(destination(row), source(row), row_bytes);
  });
}

void embedding_kernel(const KernelArgs& args) {
  const EmbeddingArgs embedding = check_embedding(args);
  const Tensor &weight = embedding.weight, &ids = embedding.ids, &out = embedding.out;
  const int64_t vocab = embedding.vocab, width = embedding.width, count = embedding.count;
  const int64_t vocab_start = embedding.vocab_start;
  if (out.numel() == 0) return;
  // Ids are read into int64 and checked all before any row is copied; a shard's ids outside it
  // become -1, a zero row.
  std::vector<int64_t> rows(static_cast<size_t>(count));
  visit_dtype(ids.dtype(), [&]<typename Id>() {
    if constexpr (std::is_integral_v<Id>) {
      const Id* id_data = ids.data<Id>();
      for (int64_t i = 0; i < count; ++i) {
        rows[i] = static_cast<int64_t>(id_data[i]);
        if (vocab_start >= 0) {
          rows[i] -= vocab_start;
          if (rows[i] < 0 || rows[i] >= vocab) rows[i] = -1;
          continue;
        }
        TESSERA_REQUIRE(rows[i] >= 0 && rows[i] < vocab,
                        "embedding: id {} at position {} of ids {} is outside [0, {}): the weight "
                        "has V = {} rows",
                        rows[i], position_str(i, ids.sizes()), shape_str(ids.sizes()), vocab,
                        vocab);
      }
    }
  });
  if (is_quantized(weight.dtype())) return quantized_embedding(weight, rows.data(), count, out);
  const size_t row_bytes = static_cast<size_t>(width) * element_size(weight.dtype());
  const auto* table = static_cast<const char*>(weight.data_ptr());
  auto* result = static_cast<char*>(out.data_ptr());
  const std::vector<char> zero_row(vocab_start >= 0 ? row_bytes : 0);
  copy_rows(
      count, row_bytes,
      [&](int64_t i) { return rows[i] < 0 ? zero_row.data() : table + rows[i] * row_bytes; },
      [&](int64_t i) { return result + i * row_bytes; });
}

// Inputs are contiguous: per index of the dims before `dim`, each input contributes one
// contiguous block, and the output row is those blocks side by side.
void cat_kernel(const KernelArgs& args) {
  const Tensor& out = args.outputs[0];
  const int64_t dim = args.attributes.get_int("dim");
  TESSERA_REQUIRE(dim >= 0 && dim < out.dim(), "cat: dim {} is out of range for output {}", dim,
                  out.str());
  const Shape& sizes = out.sizes();
  const int64_t outer = shape_numel(std::span(sizes).first(dim));
  const int64_t inner = shape_numel(std::span(sizes).subspan(dim + 1));
  // Whole rows of blocks for a quantized dtype (its rows are cat along dim 0 only).
  TESSERA_REQUIRE(!is_quantized(out.dtype()) || dim == 0,
                  "cat: quantized tensors join along dim 0 only (whole rows of blocks), got dim {}",
                  dim);
  auto bytes_of = [&](int64_t elements) {
    return static_cast<size_t>(storage_bytes(out.dtype(), elements));
  };
  int64_t total = 0;
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    const Tensor& input = args.inputs[i];
    Shape expected = sizes;
    expected[dim] = input.dim() == out.dim() ? input.size(dim) : -1;
    const std::string what = fmt::format("tensors[{}]", i);
    require_sizes("cat", what.c_str(), input, expected);
    require_dtype("cat", what.c_str(), input, out.dtype());
    require_contiguous("cat", what.c_str(), input);
    total += input.size(dim);
  }
  TESSERA_REQUIRE(total == sizes[dim],
                  "cat: inputs add up to {} along dim {} but the output {} has {}", total, dim,
                  out.str(), sizes[dim]);
  const size_t out_row_bytes = bytes_of(sizes[dim] * inner);
  auto* result = static_cast<char*>(out.data_ptr());
  size_t column = 0;  // byte offset of the current input's block within an output row
  for (const Tensor& input : args.inputs) {
    const size_t block_bytes = bytes_of(input.size(dim) * inner);
    if (block_bytes > 0) {
      const auto* source = static_cast<const char*>(input.data_ptr());
      copy_rows(
          outer, block_bytes, [&](int64_t row) { return source + row * block_bytes; },
          [&](int64_t row) { return result + row * out_row_bytes + column; });
    }
    column += block_bytes;
  }
}

constexpr DeviceType kCpu = DeviceType::cpu;
TESSERA_REGISTER_KERNEL("embedding", kCpu, embedding_kernel);
TESSERA_REGISTER_KERNEL("cat", kCpu, cat_kernel);

}  // namespace
}  // namespace tessera::cpu
