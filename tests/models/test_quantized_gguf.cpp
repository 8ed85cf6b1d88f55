// Quantized GGUF files (tests/data/quant/models, quantized by llama.cpp's own quantizer:
// tests/quant_reference/make_references.sh) against llama.cpp's greedy tokens: stories260K in
// Q8_0, a synthetic llama with rows of 256 in each K mixture (Q4_K_S/M, Q5_K_S/M, Q6_K), and
// synthetic mixtures of experts, Mixtral-style (llama) and Qwen3-MoE (qwen3moe), with llama.cpp's
// stacked ffn_*_exps, in F32, Q8_0 and Q4_K_M. Fed
// llama.cpp's tokens, each step's argmax must be llama.cpp's next token; where llama.cpp's top
// two logits are within kNearTie, either of the two. Also: what the loader keeps quantized, and
// what it refuses.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/runner/run_setup.h"
#include "models/architecture_registry.h"
#include "models/loaders/gguf.h"
#include "runtime/check.h"
#include "support/runner_steps.h"

namespace tessera {
namespace {

using testing::logits_by_chunks;
using testing::runner_config;

const std::string kModels = std::string(TESSERA_SOURCE_DIR) + "/tests/data/quant/models/";

// The two engines read the same blocks but do not round the 8-bit activations to the same integers
// everywhere, nor sum in the same order: with a step of max|x| / 127 against weights of 0.1 (the
// synthetic LM head), a rounding moves a logit by about 0.02 (one standard deviation), so a lead
// under 0.1 (3 of the difference's) may go either way.
constexpr double kNearTie = 0.1;

struct GreedyReference {
  std::string file;
  std::vector<int32_t> prompt, generated, runners_up;
  std::vector<double> gaps;  // llama.cpp's top logit minus its runner-up's, per step
};

template <typename T>
std::vector<T> numbers(const std::string& text) {
  std::istringstream in(text);
  std::vector<T> values;
  for (T value; in >> value;) values.push_back(value);
  return values;
}

// greedy.txt: "FILE: PROMPT -> GENERATED | RUNNERS-UP | GAPS" per line.
std::vector<GreedyReference> greedy_references() {
  std::ifstream in(kModels + "greedy.txt");
  std::vector<GreedyReference> references;
  std::string line;
  while (std::getline(in, line)) {
    GreedyReference reference;
    const size_t colon = line.find(':'), arrow = line.find("->");
    const size_t bar = line.find('|'), second_bar = line.find('|', bar + 1);
    reference.file = line.substr(0, colon);
    reference.prompt = numbers<int32_t>(line.substr(colon + 1, arrow - colon - 1));
    reference.generated = numbers<int32_t>(line.substr(arrow + 2, bar - arrow - 2));
    reference.runners_up = numbers<int32_t>(line.substr(bar + 1, second_bar - bar - 1));
    reference.gaps = numbers<double>(line.substr(second_bar + 1));
    references.push_back(reference);
  }
  return references;
}

int32_t argmax(const std::vector<float>& logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

// The greedy tokens the runner picks when fed the prompt, then the reference's own tokens.
std::vector<int32_t> greedy_picks(ModelRunner& runner, const GreedyReference& reference) {
  std::vector<int32_t> ids = reference.prompt;
  ids.insert(ids.end(), reference.generated.begin(), reference.generated.end() - 1);
  std::vector<int64_t> chunks{static_cast<int64_t>(reference.prompt.size())};
  chunks.resize(reference.generated.size(), 1);
  std::vector<int32_t> picks;
  for (const std::vector<float>& logits : logits_by_chunks(runner, ids, chunks))
    picks.push_back(argmax(logits));
  return picks;
}

class QuantizedGguf : public ::testing::TestWithParam<GreedyReference> {};

TEST_P(QuantizedGguf, GreedyTokensMatchLlamaCpp) {
  const GreedyReference& reference = GetParam();
  ASSERT_EQ(reference.generated.size(), 24u) << reference.file;
  ASSERT_EQ(reference.runners_up.size(), 24u) << reference.file;
  ASSERT_EQ(reference.gaps.size(), 24u) << reference.file;
  std::shared_ptr<const CausalLM> model =
      create_model(load_model(kModels + reference.file, LoadOptions{}), 64);
  for (CompilationMode mode : {CompilationMode::eager, CompilationMode::compiled}) {
    RunnerConfig config = runner_config(mode);
    ModelRunner runner(model, with_kv_blocks_for(config, model->max_positions()));
    const std::vector<int32_t> picks = greedy_picks(runner, reference);
    ASSERT_EQ(picks.size(), reference.generated.size());
    for (size_t step = 0; step < picks.size(); ++step) {
      const bool near_tie = reference.gaps[step] < kNearTie;
      EXPECT_TRUE(picks[step] == reference.generated[step] ||
                  (near_tie && picks[step] == reference.runners_up[step]))
          << reference.file << " in " << enum_name(mode) << " mode, step " << step << ": picked "
          << picks[step] << ", llama.cpp " << reference.generated[step] << " (runner-up "
          << reference.runners_up[step] << ", gap " << reference.gaps[step] << ")";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(LlamaCpp, QuantizedGguf, ::testing::ValuesIn(greedy_references()),
                         [](const auto& info) {
                           std::string name = info.param.file.substr(0, info.param.file.find('.'));
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(QuantizedGgufLoader, KeepsMatricesInTheirBlocks) {
  ModelWeights weights = load_model(kModels + "synthetic-q4_k_m.gguf", LoadOptions{});
  EXPECT_EQ(weights.get("model.layers.0.mlp.gate_proj.weight").dtype(), DType::q4_k);
  EXPECT_EQ(weights.get("model.layers.0.input_layernorm.weight").dtype(), DType::f32);
  auto model = create_model(std::move(weights), 64);
  EXPECT_EQ(model->dtype(), DType::f32);
  EXPECT_GT(model->weight_bytes_by_dtype().at(DType::q4_k), 0u);
  EXPECT_NE(model->weight_formats_str().find("q4_k"), std::string::npos);
}

// llama.cpp's Q4_K_M of a Qwen3-MoE: the stacked experts stay in their blocks, gate and up Q4_K,
// down Q6_K (its placement for the last eighth of the layers), the router as written (F32).
TEST(QuantizedGgufLoader, KeepsExpertsInTheirBlocks) {
  ModelWeights weights = load_model(kModels + "synthetic-qwen3moe-q4_k_m.gguf", LoadOptions{});
  EXPECT_EQ(weights.get("model.layers.0.mlp.experts.3.gate_proj.weight").dtype(), DType::q4_k);
  EXPECT_EQ(weights.get("model.layers.0.mlp.experts.3.up_proj.weight").dtype(), DType::q4_k);
  EXPECT_EQ(weights.get("model.layers.0.mlp.experts.3.down_proj.weight").dtype(), DType::q6_k);
  EXPECT_EQ(weights.get("model.layers.0.mlp.gate.weight").dtype(), DType::f32);
  auto model = create_model(std::move(weights), 64);
  const std::map<DType, size_t> bytes = model->weight_bytes_by_dtype();
  // 4 experts' gate and up rows of 256 (2048 rows of one 144-byte Q4_K block), and their down rows
  // (1024 rows of one 210-byte Q6_K block), beside the attention's projections.
  EXPECT_GE(bytes.at(DType::q4_k), size_t{2048 * 144});
  EXPECT_GE(bytes.at(DType::q6_k), size_t{1024 * 210});
}

// A synthetic model quantized by Tessera: llama.cpp's Q4_K_M placement (4 layers: v and down Q6_K
// in layer 3, the last eighth, and layer 2, every third; the tied embedding Q6_K), and logits
// near the float model's: Q8_0 within 5e-2 (its weights' and the CPU's activations' 8-bit
// rounding, through four layers: 2e-2 measured), Q4_K_M within a fifth (mispacked blocks would
// give unrelated logits).
TEST(QuantizedSynthetic, PlacesLlamaCppsFormatsAndKeepsTheLogits) {
  ModelWeights weights = load_model("synthetic:small:q4_k_m", LoadOptions{});
  EXPECT_EQ(weights.get("model.embed_tokens.weight").dtype(), DType::q6_k);
  EXPECT_EQ(weights.get("model.layers.0.input_layernorm.weight").dtype(), DType::f32);
  for (int layer = 0; layer < 4; ++layer) {
    const std::string prefix = "model.layers." + std::to_string(layer) + ".";
    const DType sensitive = layer >= 2 ? DType::q6_k : DType::q4_k;
    EXPECT_EQ(weights.get(prefix + "self_attn.v_proj.weight").dtype(), sensitive) << layer;
    EXPECT_EQ(weights.get(prefix + "mlp.down_proj.weight").dtype(), sensitive) << layer;
    EXPECT_EQ(weights.get(prefix + "self_attn.q_proj.weight").dtype(), DType::q4_k) << layer;
    EXPECT_EQ(weights.get(prefix + "mlp.gate_proj.weight").dtype(), DType::q4_k) << layer;
  }
  const std::vector<int32_t> ids{1, 200, 40, 100, 7, 9};
  const std::vector<int64_t> chunks{4, 1, 1};
  const auto logits_of = [&](const std::string& name) {
    std::shared_ptr<const CausalLM> model = create_model(load_model(name, LoadOptions{}), 64);
    ModelRunner runner(model, with_kv_blocks_for(testing::runner_config(CompilationMode::eager),
                                                 model->max_positions()));
    return logits_by_chunks(runner, ids, chunks);
  };
  const auto want = logits_of("synthetic:small");
  for (const auto& [name, bound] : {std::pair<std::string, double>{"synthetic:small:q8_0", 5e-2},
                                    {"synthetic:small:q4_k_m", 0.2}}) {
    const auto got = logits_of(name);
    for (size_t step = 0; step < want.size(); ++step) {
      double difference = 0, norm = 0;
      for (size_t i = 0; i < want[step].size(); ++i) {
        difference = std::max(difference, std::fabs(double{got[step][i]} - want[step][i]));
        norm = std::max(norm, std::fabs(double{want[step][i]}));
      }
      EXPECT_LT(difference / norm, bound) << name << " step " << step;
    }
  }
  EXPECT_THROW(load_model("synthetic:small:q4_0", LoadOptions{}), Error);
  EXPECT_THROW(load_model("synthetic:tiny:q8_0", LoadOptions{}), Error);  // rows of 172
}

// A copy of `source` with the type of tensor `name` set to `type` (the u32 after its dims).
std::string with_tensor_type(const std::string& source, const std::string& name, uint32_t type) {
  std::ifstream in(source, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = bytes.find(name) + name.size();
  uint32_t dims;
  std::memcpy(&dims, bytes.data() + at, 4);
  std::memcpy(bytes.data() + at + 4 + 8 * dims, &type, 4);
  const std::string path =
      (std::filesystem::temp_directory_path() / ("tessera-quant-" + name + ".gguf")).string();
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

TEST(QuantizedGgufLoader, RefusesIQuantsNamingTensorTypeAndSupported) {
  const std::string path =
      with_tensor_type(kModels + "synthetic-q4_k_m.gguf", "blk.0.ffn_up.weight", 23);  // IQ4_XS
  try {
    load_model(path, LoadOptions{});
    FAIL() << "an IQ4_XS tensor was loaded";
  } catch (const Error& error) {
    const std::string message = error.what();
    for (const char* part : {"blk.0.ffn_up.weight", "IQ4_XS", "Q4_K", "Q6_K", "Q8_0"})
      EXPECT_NE(message.find(part), std::string::npos) << part << " in: " << message;
  }
  std::filesystem::remove(path);
}

TEST(QuantizedGgufLoader, RefusesATruncatedTensor) {
  const std::string source = kModels + "synthetic-q4_k_m.gguf";
  const std::string path =
      (std::filesystem::temp_directory_path() / "tessera-quant-truncated.gguf").string();
  std::filesystem::copy_file(source, path, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::resize_file(path, std::filesystem::file_size(source) - 100);
  try {
    loaders::GgufFile file(path);
    FAIL() << "a truncated file was read";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("runs past the end"), std::string::npos)
        << error.what();
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace tessera
