// The quantized block formats against llama.cpp, and the CPU kernels that read them:
// - dequantization of every format equals llama.cpp's dequantize_row_* bit for bit, on blocks
//   whose scales are zero, negative zero, subnormal, the largest f16 and random
//   (tests/data/quant/formats, written by tests/quant_reference/make_references.sh);
// - the vectorized dot products equal the portable ones;
// - linear with a quantized weight equals float64 of the dequantized weight within the bound of
//   the 8-bit activation rounding, for decode rows (dot products) and prefill rows (tiled GEMM);
// - embedding of a quantized table gives the dequantized rows.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>

#include "compile/ir/op_registry.h"
#include "compile/ops/ops.h"
#include "kernels/cpu/quantized_linear.h"
#include "kernels/quant/block_format.h"
#include "runtime/check.h"
#include "runtime/cpu/cpu_features.h"
#include "runtime/half.h"
#include "support/quantized_blocks.h"
#include "support/reference.h"
#include "support/test_tensors.h"

namespace tessera {
namespace {

const std::string kFormats = std::string(TESSERA_SOURCE_DIR) + "/tests/data/quant/formats/";

std::vector<char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// `count` blocks of random bytes whose scales are random in [0.001, 0.03]: values of ordinary
// weights, so the dot products are compared where they are meaningful.
std::vector<std::byte> random_blocks(DType dtype, int64_t count, uint32_t seed) {
  const Tensor blocks = testing::random_quantized(dtype, {count * block_elements(dtype)}, seed);
  const auto* bytes = static_cast<const std::byte*>(blocks.data_ptr());
  return std::vector<std::byte>(bytes, bytes + blocks.nbytes());
}

std::vector<float> random_floats(int64_t count, uint32_t seed) {
  std::mt19937 random(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(count));
  for (float& v : values) v = normal(random);
  return values;
}

class QuantizedFormat : public ::testing::TestWithParam<DType> {};

TEST_P(QuantizedFormat, DequantizesAsLlamaCppBitForBit) {
  const DType dtype = GetParam();
  const std::vector<char> blocks = read_file(kFormats + dtype_name(dtype) + ".blocks");
  const std::vector<char> expected = read_file(kFormats + dtype_name(dtype) + ".f32");
  ASSERT_EQ(blocks.size() % block_bytes(dtype), 0u);
  const int64_t count = static_cast<int64_t>(blocks.size() / block_bytes(dtype));
  ASSERT_EQ(expected.size(), static_cast<size_t>(count * block_elements(dtype)) * sizeof(float));
  std::vector<float> values(static_cast<size_t>(count * block_elements(dtype)));
  quant::dequantize_blocks(dtype, reinterpret_cast<const std::byte*>(blocks.data()), values.data(),
                           count);
  for (size_t i = 0; i < values.size(); ++i) {
    uint32_t got, want;
    std::memcpy(&got, &values[i], 4);
    std::memcpy(&want, expected.data() + 4 * i, 4);
    ASSERT_EQ(got, want) << dtype_name(dtype) << " value " << i << " (block "
                         << i / block_elements(dtype) << "): " << values[i] << " vs llama.cpp's "
                         << std::bit_cast<float>(want);
  }
}

// The formats with a vectorized dot product.
std::vector<DType> vectorized_formats() {
  std::vector<DType> dtypes;
  for (const quant::BlockFormat* format : quant::block_formats())
    if (format->avx2_dot != nullptr) dtypes.push_back(format->dtype);
  return dtypes;
}

class VectorizedFormat : public ::testing::TestWithParam<DType> {};

TEST_P(VectorizedFormat, Avx2DotEqualsPortable) {
  const DType dtype = GetParam();
  const quant::BlockFormat& format = quant::block_format(dtype);
  if (!cpu::cpu_has_avx2_fma() || !cpu::cpu_has_f16c()) GTEST_SKIP() << "this CPU has no AVX2";
  const int64_t blocks = 12, k = blocks * block_elements(dtype);
  const std::vector<std::byte> weight = random_blocks(dtype, blocks, 7);
  std::vector<int8_t> quants(k);
  std::vector<float> scales(k / quant::kActivationBlockElements);
  std::vector<int16_t> group_sums(k / quant::kActivationGroupElements);
  quant::quantize_activation(random_floats(k, 3).data(), k, block_elements(dtype), quants.data(),
                             scales.data(), group_sums.data());
  const quant::ActivationRow row{quants.data(), scales.data(), group_sums.data()};
  const float portable = quant::portable_row_dot(dtype, weight.data(), row, blocks);
  const float vectorized = format.avx2_dot(weight.data(), row, blocks);
  EXPECT_NEAR(vectorized, portable, 1e-5 * (1 + std::fabs(portable))) << dtype_name(dtype);
}

// out = x @ w^T against float64 of the dequantized weight. Decode rows quantize x to 8 bits with
// a step of scale = max|x| / 127 per weight block (32 or 256 values), so each value is off by at
// most scale / 2 and an output by at most sum over blocks of scale / 2 * sum |w| there; f32
// accumulation adds far less than the 1e-5 relative slack.
TEST_P(QuantizedFormat, LinearMatchesFloat64OfDequantizedWeight) {
  const DType dtype = GetParam();
  const int64_t k = 512, n = 24;
  const std::vector<std::byte> blocks = random_blocks(dtype, n * k / block_elements(dtype), 11);
  std::vector<float> dequantized(static_cast<size_t>(n * k));
  quant::dequantize_blocks(dtype, blocks.data(), dequantized.data(), n * k / block_elements(dtype));
  Tensor weight = Tensor::empty({n, k}, dtype);
  std::memcpy(weight.data_ptr(), blocks.data(), blocks.size());
  for (int64_t m : {int64_t{1}, int64_t{3}, cpu::kQuantizedDotMaxRows + 5}) {
    const std::vector<float> x_values = random_floats(m * k, 5 + static_cast<uint32_t>(m));
    Tensor out = ops::linear(Tensor::from_floats(x_values, {m, k}), weight);
    const std::vector<float> got = out.to_floats();
    const bool dot_path = m <= cpu::kQuantizedDotMaxRows;
    for (int64_t row = 0; row < m; ++row)
      for (int64_t j = 0; j < n; ++j) {
        double want = 0, magnitude = 0, rounding = 0;
        const int64_t group = block_elements(dtype);
        for (int64_t b = 0; b < k / group; ++b) {
          double largest = 0, weight_sum = 0;
          for (int64_t i = group * b; i < group * (b + 1); ++i) {
            const double xv = x_values[row * k + i], wv = dequantized[j * k + i];
            want += xv * wv;
            magnitude += std::fabs(xv * wv);
            largest = std::max(largest, std::fabs(xv));
            weight_sum += std::fabs(wv);
          }
          rounding += largest / 127 / 2 * weight_sum;
        }
        const double bound = (dot_path ? rounding : 0) + 1e-5 * magnitude;
        ASSERT_NEAR(got[row * n + j], want, bound)
            << dtype_name(dtype) << " row " << row << " of " << m << ", output " << j;
      }
  }
}

TEST_P(QuantizedFormat, EmbeddingGivesDequantizedRows) {
  const DType dtype = GetParam();
  const int64_t vocab = 6, width = 256;
  const std::vector<std::byte> blocks =
      random_blocks(dtype, vocab * width / block_elements(dtype), 13);
  Tensor table = Tensor::empty({vocab, width}, dtype);
  std::memcpy(table.data_ptr(), blocks.data(), blocks.size());
  std::vector<float> dequantized(static_cast<size_t>(vocab * width));
  quant::dequantize_blocks(dtype, blocks.data(), dequantized.data(),
                           vocab * width / block_elements(dtype));
  const std::vector<int64_t> ids{4, 0, 4, 5};
  Tensor rows = ops::embedding(table, Tensor::from_ints(ids, {4}));
  ASSERT_EQ(rows.dtype(), DType::f32);
  const std::vector<float> got = rows.to_floats();
  for (size_t i = 0; i < ids.size(); ++i)
    for (int64_t c = 0; c < width; ++c)
      ASSERT_EQ(got[i * width + c], dequantized[ids[i] * width + c]) << dtype_name(dtype);
}

INSTANTIATE_TEST_SUITE_P(Ggml, QuantizedFormat, ::testing::ValuesIn(kQuantizedDTypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });
INSTANTIATE_TEST_SUITE_P(Ggml, VectorizedFormat, ::testing::ValuesIn(vectorized_formats()),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// Tessera's own quantizers (synthetic models' weight formats): every value comes back within a
// fraction of its block's largest magnitude that a mispacked quant or scale would break (half a
// step is 1/254 of it for Q8_0, about 1/62 for Q6_K's groups, 1/15 of the range for Q4_K), on
// random blocks, blocks of one sign, constant blocks and zeros.
TEST(QuantizeBlocks, DequantizeToTheValuesWithinHalfAStep) {
  const std::vector<std::pair<DType, double>> formats = {
      {DType::q8_0, 1.0 / 127}, {DType::q6_k, 1.0 / 24}, {DType::q4_k, 1.0 / 7}};
  for (const auto& [dtype, allowed] : formats) {
    const int64_t elements = block_elements(dtype);
    std::vector<std::vector<float>> blocks;
    for (uint32_t seed = 0; seed < 20; ++seed) blocks.push_back(random_floats(elements, seed));
    std::vector<float> positive = random_floats(elements, 99), negative = positive;
    for (float& v : positive) v = std::fabs(v) + 0.5f;
    for (float& v : negative) v = -std::fabs(v) * 1e-3f;
    blocks.push_back(positive);
    blocks.push_back(negative);
    blocks.push_back(std::vector<float>(elements, 0.25f));
    blocks.push_back(std::vector<float>(elements, 0.0f));
    for (size_t b = 0; b < blocks.size(); ++b) {
      std::vector<std::byte> block(block_bytes(dtype));
      quant::quantize_blocks(dtype, blocks[b].data(), block.data(), 1);
      std::vector<float> back(elements);
      quant::dequantize_blocks(dtype, block.data(), back.data(), 1);
      double largest = 0, worst = 0;
      for (int64_t i = 0; i < elements; ++i) {
        largest = std::max(largest, std::fabs(double{blocks[b][i]}));
        worst = std::max(worst, std::fabs(double{back[i]} - blocks[b][i]));
      }
      EXPECT_LE(worst, allowed * largest) << dtype_name(dtype) << " block " << b;
    }
  }
}

TEST(QuantizeBlocks, RefusesAFormatItCannotWrite) {
  std::vector<float> values(32, 1.0f);
  std::vector<std::byte> block(block_bytes(DType::q4_0));
  try {
    quant::quantize_blocks(DType::q4_0, values.data(), block.data(), 1);
    FAIL() << "quantized to Q4_0";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("Q4_0"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("Q8_0"), std::string::npos) << error.what();
  }
}

TEST(QuantizedLinear, RefusesRowsThatAreNotWholeBlocks) {
  Tensor weight = Tensor::empty({4, 256}, DType::q4_k);
  std::memset(weight.data_ptr(), 0, weight.nbytes());
  try {
    ops::linear(Tensor::from_floats(random_floats(2 * 128, 1), {2, 128}), weight.view({8, 128}));
    FAIL() << "a q4_k weight of rows 128 wide was accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("q4_k"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// A format for the down projections other than `dtype`, as llama.cpp's Q4_K_M writes down Q6_K.
DType other_format(DType dtype) {
  return dtype == DType::q6_k ? DType::q8_0 : DType::q6_k;
}

std::vector<test::RefTensor> reference_inputs(const std::vector<Tensor>& inputs) {
  std::vector<test::RefTensor> values;
  for (const Tensor& input : inputs)
    values.push_back({input.sizes(), is_quantized(input.dtype())
                                         ? testing::dequantized(input).to_doubles()
                                         : input.to_doubles()});
  return values;
}

class QuantizedExperts : public ::testing::TestWithParam<DType> {};

// fused_moe with experts in block formats (as llama.cpp's quantized mixtures store them, gate and
// up in one format, down in another): each expert's projections through the quantized linear's
// kernels. Against the op's decomposition (a quantized linear per expert over every token: the
// same dot products while no expert has more than kQuantizedDotMaxRows tokens, so equal up to the
// f32 sums' order), and against float64 of the dequantized experts within the 8-bit rounding of
// x and of the activations (1e-3 of the products' magnitudes, whose random errors mostly cancel;
// a misread block is off by the whole value).
TEST_P(QuantizedExperts, FusedMoeMatchesItsDecompositionAndTheDequantizedExperts) {
  const DType dtype = GetParam();
  const int64_t hidden = 256, intermediate = 256, experts = 4;  // whole blocks of every format
  const Tensor gate_up = testing::random_quantized(dtype, {experts, 2 * intermediate, hidden}, 21);
  const Tensor down =
      testing::random_quantized(other_format(dtype), {experts, hidden, intermediate}, 22);
  const OpDef& op = OpRegistry::global().get("fused_moe");
  const Attributes attributes{{"top_k", int64_t{2}}, {"renormalize", true}};
  for (int64_t tokens : {int64_t{1}, int64_t{5}, int64_t{40}}) {
    const std::vector<Tensor> inputs{
        Tensor::from_floats(random_floats(tokens * hidden, 30), {tokens, hidden}),
        Tensor::from_floats(random_floats(tokens * experts, 31), {tokens, experts}), gate_up, down};
    const Tensor fused = ops::fused_moe(inputs[0], inputs[1], gate_up, down, 2, true, 0);
    if (tokens <= cpu::kQuantizedDotMaxRows) {
      EXPECT_LT(testing::relative_error(fused, op.decompose(inputs, attributes).at(0)), 1e-6)
          << dtype_name(dtype) << ", " << tokens << " tokens";
    }
    EXPECT_LE(test::fused_moe_error_over_bound(reference_inputs(inputs), attributes,
                                               fused.to_doubles(), 1e-3),
              1.0)
        << dtype_name(dtype) << ", " << tokens << " tokens";
  }
}

INSTANTIATE_TEST_SUITE_P(Ggml, QuantizedExperts, ::testing::ValuesIn(kQuantizedDTypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace tessera
