#include "kernels/quant/block_format.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <cmath>
#include <string>

#include "runtime/check.h"
#include "runtime/cpu/cpu_features.h"

namespace tessera::quant {
namespace {

constexpr size_t kDTypeCount = static_cast<size_t>(DType::q6_k) + 1;

std::array<BlockFormat, kDTypeCount>& registered() {
  static std::array<BlockFormat, kDTypeCount> formats{};
  return formats;
}

// The groups of one block: quants, and a scale and min per group of kGroupElements.
struct UnpackedBlock {
  int8_t quants[kMaxBlockElements];
  float scales[kMaxBlockElements / kGroupElements];
  float mins[kMaxBlockElements / kGroupElements];
};

}  // namespace

bool register_block_format(const BlockFormat& format) {
  TESSERA_CHECK(is_quantized(format.dtype) && format.unpack != nullptr,
                "block format {} registered without a quantized dtype or an unpack",
                format.gguf_name);
  BlockFormat& slot = registered()[static_cast<size_t>(format.dtype)];
  TESSERA_CHECK(slot.unpack == nullptr, "block format {} registered twice", format.gguf_name);
  TESSERA_CHECK(block_elements(format.dtype) % kGroupElements == 0 &&
                    block_elements(format.dtype) <= kMaxBlockElements,
                "block format {}: {} elements per block", format.gguf_name,
                block_elements(format.dtype));
  slot = format;
  return true;
}

const BlockFormat& block_format(DType dtype) {
  TESSERA_CHECK(is_quantized(dtype), "block_format of plain dtype {}", dtype_name(dtype));
  const BlockFormat& format = registered()[static_cast<size_t>(dtype)];
  TESSERA_CHECK(format.unpack != nullptr, "no block format registered for {}", dtype_name(dtype));
  return format;
}

const BlockFormat* block_format_for_ggml(uint32_t ggml_type) {
  for (const BlockFormat& format : registered())
    if (format.unpack != nullptr && format.ggml_type == ggml_type) return &format;
  return nullptr;
}

std::vector<const BlockFormat*> block_formats() {
  std::vector<const BlockFormat*> formats;
  for (const BlockFormat& format : registered())
    if (format.unpack != nullptr) formats.push_back(&format);
  return formats;
}

void dequantize_blocks(DType dtype, const std::byte* blocks, float* out, int64_t blocks_count) {
  const BlockFormat& format = block_format(dtype);
  const int64_t elements = block_elements(dtype);
  const size_t bytes = block_bytes(dtype);
  UnpackedBlock unpacked;
  for (int64_t b = 0; b < blocks_count; ++b) {
    format.unpack(blocks + b * bytes, unpacked.quants, unpacked.scales, unpacked.mins);
    float* values = out + b * elements;
    for (int64_t i = 0; i < elements; ++i) {
      const int64_t group = i / kGroupElements;
      // Separate multiply and subtract, as llama.cpp rounds them (never fused).
      const float scaled = unpacked.scales[group] * static_cast<float>(unpacked.quants[i]);
      values[i] = scaled - unpacked.mins[group];
    }
  }
}

void quantize_blocks(DType dtype, const float* values, std::byte* out, int64_t blocks_count) {
  const BlockFormat& format = block_format(dtype);
  std::vector<std::string> writable;
  for (const BlockFormat* known : block_formats())
    if (known->quantize != nullptr) writable.emplace_back(known->gguf_name);
  TESSERA_REQUIRE(format.quantize != nullptr,
                  "Tessera cannot quantize weights to {}; it writes {} (llama.cpp's llama-quantize "
                  "writes the others)",
                  format.gguf_name, fmt::join(writable, ", "));
  const int64_t elements = block_elements(dtype);
  const size_t bytes = block_bytes(dtype);
  for (int64_t b = 0; b < blocks_count; ++b)
    format.quantize(values + b * elements, out + b * bytes);
}

float portable_row_dot(DType dtype, const std::byte* weight, const ActivationRow& activation,
                       int64_t blocks) {
  const BlockFormat& format = block_format(dtype);
  const int64_t elements = block_elements(dtype);
  const size_t bytes = block_bytes(dtype);
  UnpackedBlock unpacked;
  float total = 0;
  for (int64_t b = 0; b < blocks; ++b) {
    format.unpack(weight + b * bytes, unpacked.quants, unpacked.scales, unpacked.mins);
    for (int64_t group = 0; group < elements / kGroupElements; ++group) {
      const int64_t first = group * kGroupElements;
      const int64_t element = b * elements + first;
      int32_t products = 0;
      for (int i = 0; i < kGroupElements; ++i)
        products += int32_t{unpacked.quants[first + i]} * activation.quants[element + i];
      const int16_t activation_sum = activation.group_sums[element / kActivationGroupElements];
      total += activation.scales[element / kActivationBlockElements] *
               (unpacked.scales[group] * static_cast<float>(products) -
                unpacked.mins[group] * static_cast<float>(activation_sum));
    }
  }
  return total;
}

RowDotFn vectorized_row_dot(DType dtype) {
  const BlockFormat& format = block_format(dtype);
  return cpu::cpu_has_avx2_fma() && cpu::cpu_has_f16c() ? format.avx2_dot : nullptr;
}

float row_dot(DType dtype, const std::byte* weight, const ActivationRow& activation,
              int64_t blocks) {
  if (RowDotFn vectorized = vectorized_row_dot(dtype))
    return vectorized(weight, activation, blocks);
  return portable_row_dot(dtype, weight, activation, blocks);
}

}  // namespace tessera::quant
