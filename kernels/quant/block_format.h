// ggml's quantized block formats (the quantized dtypes of runtime/dtype.h) as the kernels read
// them. A format file (kernels/quant/q*.cpp, one per format) registers how to unpack one block
// into int8 quants with a scale and a min per group of 16 (value = scale * quant - min, the same
// float operations as llama.cpp's dequantize_row_*, so dequantization matches it bit for bit),
// and optionally a vectorized dot product. Dequantization and the portable dot product are built
// here from the unpacking.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/quant/activation_blocks.h"
#include "runtime/dtype.h"

namespace tessera::quant {

// Values per scale group: the finest group of any format (the 16 of q2_k, q3_k, q6_k); a format
// with coarser groups repeats its scale.
inline constexpr int kGroupElements = 16;
inline constexpr int kMaxBlockElements = 256;

// Unpacks one block: quants[block_elements], scales and mins[block_elements / kGroupElements].
using UnpackBlockFn = void (*)(const std::byte* block, int8_t* quants, float* scales, float* mins);
// The dot product of `blocks` consecutive weight blocks with the activation blocks covering the
// same elements (block_elements / kActivationBlockElements of them per weight block), quantized
// with one scale per weight block (quantize_activation's group = block_elements).
using RowDotFn = float (*)(const std::byte* weight, const ActivationRow& activation,
                           int64_t blocks);

// Quantizes block_elements values into one block (the plain max-magnitude scaling of llama.cpp's
// reference quantizers, without their error-minimizing search).
using QuantizeBlockFn = void (*)(const float* values, std::byte* block);

struct BlockFormat {
  DType dtype = DType::q8_0;
  uint32_t ggml_type = 0;      // its type id in GGUF files
  const char* gguf_name = "";  // "Q4_K"
  UnpackBlockFn unpack = nullptr;
  RowDotFn avx2_dot = nullptr;  // needs AVX2 and FMA; nullptr where only the portable dot exists
  QuantizeBlockFn quantize = nullptr;  // nullptr where Tessera cannot write the format
};

// The registered format of a quantized dtype; an invariant failure for an unregistered one.
const BlockFormat& block_format(DType dtype);
// The format stored as ggml type `ggml_type`, or nullptr when no registered format is.
const BlockFormat* block_format_for_ggml(uint32_t ggml_type);
// Every registered format, in dtype order.
std::vector<const BlockFormat*> block_formats();
bool register_block_format(const BlockFormat& format);

// out[0, blocks * block_elements) = the values of `blocks` consecutive blocks of `dtype`.
void dequantize_blocks(DType dtype, const std::byte* blocks, float* out, int64_t blocks_count);

// out[0, blocks_count * block bytes) = values[0, blocks_count * block_elements) as `dtype`'s
// blocks; throws naming the format where it has no quantizer.
void quantize_blocks(DType dtype, const float* values, std::byte* out, int64_t blocks_count);

// The row dot product the CPU runs: the format's vectorized one when it has one and the CPU can
// run it, else portable_row_dot. Kernels resolve vectorized_row_dot once per call instead.
float row_dot(DType dtype, const std::byte* weight, const ActivationRow& activation,
              int64_t blocks);
// The format's vectorized dot product where this CPU runs it, else nullptr.
RowDotFn vectorized_row_dot(DType dtype);
// The portable dot product, through unpack: integer sums per group, scaled in f32.
float portable_row_dot(DType dtype, const std::byte* weight, const ActivationRow& activation,
                       int64_t blocks);

#define TESSERA_BLOCK_FORMAT_CONCAT_INNER(a, b) a##b
#define TESSERA_BLOCK_FORMAT_CONCAT(a, b) TESSERA_BLOCK_FORMAT_CONCAT_INNER(a, b)
#define TESSERA_REGISTER_BLOCK_FORMAT(format)                     \
  [[maybe_unused]] static const bool TESSERA_BLOCK_FORMAT_CONCAT( \
      block_format_registered_, __COUNTER__) = ::tessera::quant::register_block_format(format)

}  // namespace tessera::quant
