// Elementwise loops over operands of one shape with arbitrary strides (0 for broadcast dims,
// transposed, sliced). Dims that are contiguous in every operand are merged first, so contiguous
// operands become one flat row and run through a loop the compiler can vectorize.
#pragma once

#include <array>
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/cpu/kernel_util.h"
#include "runtime/check.h"
#include "runtime/cpu/parallel.h"
#include "runtime/tensor.h"

namespace tessera::cpu {

// N operands over one shape; dims are stored innermost first, size-1 dims dropped.
template <size_t N>
struct LoopLayout {
  using Strides = std::array<int64_t, N>;
  std::vector<int64_t> sizes;
  std::vector<Strides> strides;  // strides[dim][operand]
};

template <size_t N>
LoopLayout<N> make_loop_layout(const Shape& sizes, const std::array<const Shape*, N>& strides) {
  LoopLayout<N> layout;
  for (size_t dim = sizes.size(); dim-- > 0;) {
    if (sizes[dim] == 1) continue;
    typename LoopLayout<N>::Strides dim_strides;
    for (size_t k = 0; k < N; ++k) dim_strides[k] = (*strides[k])[dim];
    if (!layout.sizes.empty()) {
      // Merge into the inner dim when every operand steps over it exactly.
      bool mergeable = true;
      for (size_t k = 0; k < N; ++k)
        mergeable &= dim_strides[k] == layout.strides.back()[k] * layout.sizes.back();
      if (mergeable) {
        layout.sizes.back() *= sizes[dim];
        continue;
      }
    }
    layout.sizes.push_back(sizes[dim]);
    layout.strides.push_back(dim_strides);
  }
  if (layout.sizes.empty()) {  // a single element
    layout.sizes.push_back(1);
    layout.strides.push_back({});
  }
  return layout;
}

// Calls row(offsets, count, inner_strides) for each run of the innermost dim that falls in the
// row-major element range [begin, end); offsets are each operand's element offset of the run.
template <size_t N, typename RowFn>
void for_each_row(const LoopLayout<N>& layout, int64_t begin, int64_t end, RowFn&& row) {
  const size_t dims = layout.sizes.size();
  std::vector<int64_t> index(dims);
  std::array<int64_t, N> offsets{};
  int64_t rest = begin;
  for (size_t dim = 0; dim < dims; ++dim) {
    index[dim] = rest % layout.sizes[dim];
    rest /= layout.sizes[dim];
    for (size_t k = 0; k < N; ++k) offsets[k] += index[dim] * layout.strides[dim][k];
  }
  for (int64_t position = begin; position < end;) {
    int64_t count = std::min(layout.sizes[0] - index[0], end - position);
    row(offsets, count, layout.strides[0]);
    position += count;
    index[0] += count;
    for (size_t k = 0; k < N; ++k) offsets[k] += count * layout.strides[0][k];
    for (size_t dim = 0; dim + 1 < dims && index[dim] == layout.sizes[dim]; ++dim) {
      index[dim] = 0;
      ++index[dim + 1];
      for (size_t k = 0; k < N; ++k)
        offsets[k] += layout.strides[dim + 1][k] - layout.sizes[dim] * layout.strides[dim][k];
    }
  }
}

// An input read as element type T.
template <typename T>
struct Input {
  const Tensor& tensor;
};

namespace detail {

template <typename Out, typename Fn, typename Pointers, size_t... I>
void map_row(Out* out, const Fn& fn, const Pointers& inputs,
             const std::array<int64_t, sizeof...(I) + 1>& offsets, int64_t count,
             const std::array<int64_t, sizeof...(I) + 1>& strides, std::index_sequence<I...>) {
  out += offsets[0];
  Pointers row_inputs{(std::get<I>(inputs) + offsets[I + 1])...};
  if (strides[0] == 1 && ((strides[I + 1] == 1) && ...)) {
    // Blocks computed into a local array before being stored: the compiler vectorizes them
    // without a runtime alias check, which -O2's cost model refuses for the plain loop.
    constexpr int kBlock = 8;
    int64_t i = 0;
    for (; i + kBlock <= count; i += kBlock) {
      Out block[kBlock];
      for (int lane = 0; lane < kBlock; ++lane)
        block[lane] = fn(std::get<I>(row_inputs)[i + lane]...);
      for (int lane = 0; lane < kBlock; ++lane) out[i + lane] = block[lane];
    }
    for (; i < count; ++i) out[i] = fn(std::get<I>(row_inputs)[i]...);
  } else {
    for (int64_t i = 0; i < count; ++i)
      out[i * strides[0]] = fn(std::get<I>(row_inputs)[i * strides[I + 1]]...);
  }
}

}  // namespace detail

// out[i] = fn(inputs[i]...) over out's shape, every operand (out included) at its own strides;
// the inputs must have out's sizes. Runs on the thread pool when large.
template <typename Out, typename Fn, typename... In>
void map_elements(const Tensor& out, const Fn& fn, Input<In>... inputs) {
  constexpr size_t N = 1 + sizeof...(In);
  for (const Tensor* input : {&inputs.tensor...})
    TESSERA_REQUIRE(input->sizes() == out.sizes(),
                    "elementwise kernel: input of shape {} does not match the output's {}; "
                    "expand inputs to the output shape first",
                    shape_str(input->sizes()), shape_str(out.sizes()));
  const int64_t numel = out.numel();
  if (numel == 0) return;
  const LoopLayout<N> layout =
      make_loop_layout<N>(out.sizes(), {&out.strides(), &inputs.tensor.strides()...});
  Out* out_data = out.data<Out>();
  const std::tuple<const In*...> input_data{inputs.tensor.template data<In>()...};
  parallel_for(numel, kParallelGrain, [&](int64_t begin, int64_t end) {
    for_each_row(layout, begin, end, [&](const auto& offsets, int64_t count, const auto& strides) {
      detail::map_row(out_data, fn, input_data, offsets, count, strides,
                      std::index_sequence_for<In...>{});
    });
  });
}

}  // namespace tessera::cpu
