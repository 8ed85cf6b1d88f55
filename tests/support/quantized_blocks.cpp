#include "support/quantized_blocks.h"

#include <cstring>
#include <random>
#include <vector>

#include "kernels/quant/block_format.h"
#include "runtime/half.h"

namespace tessera::testing {

Tensor random_quantized(DType dtype, Shape sizes, uint32_t seed) {
  std::mt19937 random(seed);
  Tensor weight = Tensor::empty(std::move(sizes), dtype);
  auto* bytes = static_cast<uint8_t*>(weight.data_ptr());
  for (size_t i = 0; i < weight.nbytes(); ++i) bytes[i] = static_cast<uint8_t>(random());
  // Every format's f16 fields sit at these offsets of a block (d, and dmin or m; see
  // kernels/quant).
  const std::vector<size_t> offsets = dtype == DType::q2_k   ? std::vector<size_t>{80, 82}
                                      : dtype == DType::q3_k ? std::vector<size_t>{108}
                                      : dtype == DType::q6_k ? std::vector<size_t>{208}
                                      : (dtype == DType::q4_1 || dtype == DType::q5_1 ||
                                         dtype == DType::q4_k || dtype == DType::q5_k)
                                          ? std::vector<size_t>{0, 2}
                                          : std::vector<size_t>{0};
  std::uniform_real_distribution<float> scale(0.001f, 0.03f);
  const auto blocks = static_cast<int64_t>(weight.nbytes() / block_bytes(dtype));
  for (int64_t b = 0; b < blocks; ++b)
    for (size_t offset : offsets) {
      const uint16_t bits = Half(scale(random)).bits;
      std::memcpy(bytes + b * block_bytes(dtype) + offset, &bits, 2);
    }
  return weight;
}

Tensor dequantized(const Tensor& quantized) {
  const Tensor host = quantized.to(kCPU).contiguous();
  Tensor values = Tensor::empty(host.sizes(), DType::f32);
  quant::dequantize_blocks(host.dtype(), static_cast<const std::byte*>(host.data_ptr()),
                           values.data<float>(), host.numel() / block_elements(host.dtype()));
  return values;
}

}  // namespace tessera::testing
