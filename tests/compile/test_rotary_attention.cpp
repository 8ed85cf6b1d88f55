// rotary_attention (compile/ops/rotary_attention.cpp) and the pass that makes it
// (compile/passes/rotary_attention.cpp): which graphs it rewrites and which it leaves alone;
// compiled models decode as eager ones do with it on and off; on a GPU, the decode kernel that
// rotates the query and the step's key itself matches the rotary and attention kernels apart
// (the CPU's path), output and KV cache alike, and so does the GPU's path that runs them apart
// over the qkv slices in place (prefill, the CUDA-core decode kernel).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <numeric>
#include <random>

#include "compile/compiler.h"
#include "compile/ops/ops.h"
#include "compile/passes/pass_manager.h"
#include "compile/trace/dispatch.h"
#include "compile/trace/tracer.h"
#include "engine/runner/run_setup.h"
#include "kernels/attention_metadata.h"
#include "models/architecture_registry.h"
#include "runtime/backend/backend.h"
#include "runtime/check.h"
#include "support/runner_steps.h"
#include "support/test_tensors.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

std::shared_ptr<const CausalLM> load(const std::string& path) {
  return create_model(load_model(path, LoadOptions{DType::f32, kCPU}), 128);
}

size_t count_op(const Graph& graph, const std::string& name) {
  size_t count = 0;
  for (const Node& node : graph.nodes())
    if (node.kind == NodeKind::call && node.op->name == name) ++count;
  return count;
}

// The model's forward traced with `custom_ops` as the passes need them, cleaned up and passed
// through the rotary-attention pass.
Graph fused_forward(const std::string& model_name, const std::vector<std::string>& custom_ops,
                    bool pass_on) {
  auto model = load(model_name);
  const std::vector<int64_t> ids{1, 5, 9}, positions{0, 1, 2};
  std::vector<Tensor> inputs{Tensor::from_ints(ids, {3}, DType::i32),
                             Tensor::from_ints(positions, {3}, DType::i32)};
  CompilationConfig config;
  config.pass_config.enable_rotary_attention_fusion = pass_on;
  TraceOptions options;
  options.dynamic_dims = {{0, 0}, {1, 0}};
  options.custom_ops =
      custom_ops_for_passes(CustomOpConfig::parse(custom_ops, false), config.pass_config);
  TraceResult result = trace(
      [&](std::span<const Tensor> in) { return std::vector<Tensor>{model->forward(in[0], in[1])}; },
      inputs, options);
  CompiledPlan plan;
  plan.graph = std::move(result.graph);
  PassManager({.config = config, .device = kCPU}, {"cleanup", "rotary_attention"}).run(plan);
  return plan.graph;
}

double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    diff += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    norm += double(want[i]) * want[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-30));
}

}  // namespace

TEST(RotaryAttentionPass, FoldsEveryLayersRopeIntoItsAttention) {
  const int64_t layers = load("synthetic:tiny")->config().num_layers;
  Graph graph = fused_forward("synthetic:tiny", {"none"}, true);
  EXPECT_EQ(count_op(graph, "rotary_attention"), static_cast<size_t>(layers)) << graph.str();
  EXPECT_EQ(count_op(graph, "attention"), 0u);
  EXPECT_EQ(count_op(graph, "rotary_embedding"), 0u);
  // Qwen2's qkv has a bias: the slices still read one tensor.
  EXPECT_EQ(count_op(fused_forward("synthetic:qwen2-tiny", {"none"}, true), "rotary_attention"),
            static_cast<size_t>(load("synthetic:qwen2-tiny")->config().num_layers));
}

TEST(RotaryAttentionPass, LeavesAloneWhatItCannotFold) {
  const int64_t layers = load("synthetic:tiny")->config().num_layers;
  // Off: rope is traced as its decomposition (custom ops "none") and attention stays.
  Graph off = fused_forward("synthetic:tiny", {"none"}, false);
  EXPECT_EQ(count_op(off, "rotary_attention"), 0u);
  EXPECT_EQ(count_op(off, "rotary_embedding"), 0u);
  EXPECT_EQ(count_op(off, "attention"), static_cast<size_t>(layers));
  // Disabled by name: the pass finds no rotary_embedding.
  Graph disabled = fused_forward("synthetic:tiny", {"none", "-rotary_embedding"}, true);
  EXPECT_EQ(count_op(disabled, "rotary_attention"), 0u);
  EXPECT_EQ(count_op(disabled, "attention"), static_cast<size_t>(layers));
  // Qwen3 normalizes q and k per head between the slices and rope: not one qkv read.
  Graph qk_norm = fused_forward("synthetic:qwen3-tiny", {"none"}, true);
  EXPECT_EQ(count_op(qk_norm, "rotary_attention"), 0u);
  EXPECT_EQ(count_op(qk_norm, "rotary_embedding"),
            static_cast<size_t>(load("synthetic:qwen3-tiny")->config().num_layers));
}

// Compiled with the pass on and off, chunked prefill and decodes give eager mode's logits.
TEST(RotaryAttention, CompiledModelsDecodeAsEagerOnesWithThePassOnAndOff) {
  for (const char* name : {"synthetic:tiny", "synthetic:qwen2-tiny", "synthetic:qwen3-tiny"}) {
    auto model = load(name);
    std::vector<int32_t> ids;
    for (int i = 0; i < 19; ++i) ids.push_back((i * 37 + 11) % 500 + 3);
    RunnerConfig eager_options = runner_config(CompilationMode::eager);
    ModelRunner eager(model, with_kv_blocks_for(eager_options, model->max_positions()));
    const auto want = logits_by_chunks(eager, ids, {19}).back();
    for (bool pass_on : {true, false}) {
      RunnerConfig options = runner_config(CompilationMode::compiled);
      options.compilation.pass_config.enable_rotary_attention_fusion = pass_on;
      options.compilation.cache_dir = fresh_temp_dir("cache_rotary_attention");
      ModelRunner compiled(model, with_kv_blocks_for(options, model->max_positions()));
      std::vector<int64_t> chunks{5, 1, 9};
      chunks.resize(chunks.size() + 4, 1);
      const auto got = logits_by_chunks(compiled, ids, chunks).back();
      EXPECT_LT(relative_error(got, want), 1e-5) << name << " pass " << pass_on;
    }
  }
}

namespace {

struct RotaryCase {
  int64_t heads, kv_heads, head_size;
  bool is_neox;
  std::vector<std::pair<int64_t, int64_t>> sequences;  // (cached tokens, new tokens)
  // Rows of qkv past the step's tokens (a captured graph's padding), and a token whose slot is -1
  // (written nowhere; -1: none).
  int64_t padding_rows = 0;
  int64_t unwritten_token = -1;
};

struct RotaryResult {
  std::vector<std::vector<float>> outputs;  // out, rotated query, rotated key, value
  std::vector<float> key_cache, value_cache;
};

// Runs rotary_attention on `device` over random bf16 rows and caches made from `seed`.
RotaryResult run_rotary_attention(const RotaryCase& c, Device device, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  auto random = [&](size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = uniform(rng);
    return v;
  };
  constexpr int64_t kBlockSize = 16, kMaxPosition = 512;
  const int64_t width = (c.heads + 2 * c.kv_heads) * c.head_size;
  AttentionMetadata meta;
  meta.num_seqs = static_cast<int64_t>(c.sequences.size());
  meta.query_start_loc.push_back(0);
  std::vector<int64_t> positions;
  int64_t next_block = 0;
  for (const auto& [cached, fresh] : c.sequences) {
    const int64_t total = cached + fresh, blocks = (total + kBlockSize - 1) / kBlockSize;
    std::vector<int32_t> table;
    for (int64_t b = 0; b < blocks; ++b) table.push_back(static_cast<int32_t>(next_block++));
    meta.block_tables.insert(meta.block_tables.end(), table.begin(), table.end());
    meta.max_blocks_per_seq = std::max(meta.max_blocks_per_seq, blocks);
    meta.seq_lens.push_back(static_cast<int32_t>(total));
    meta.max_query_len = std::max(meta.max_query_len, fresh);
    meta.max_seq_len = std::max(meta.max_seq_len, total);
    meta.query_start_loc.push_back(meta.query_start_loc.back() + static_cast<int32_t>(fresh));
    for (int64_t p = cached; p < total; ++p) {
      meta.slot_mapping.push_back(
          static_cast<int32_t>(table[p / kBlockSize] * kBlockSize + p % kBlockSize));
      positions.push_back(p);
    }
  }
  // Block tables padded to max_blocks_per_seq per sequence.
  std::vector<int32_t> tables(static_cast<size_t>(meta.num_seqs * meta.max_blocks_per_seq), -1);
  for (int64_t s = 0, at = 0; s < meta.num_seqs; ++s) {
    const int64_t blocks = (meta.seq_lens[s] + kBlockSize - 1) / kBlockSize;
    std::copy(meta.block_tables.begin() + at, meta.block_tables.begin() + at + blocks,
              tables.begin() + s * meta.max_blocks_per_seq);
    at += blocks;
  }
  meta.block_tables = tables;
  meta.num_tokens = meta.query_start_loc.back();
  if (c.unwritten_token >= 0) meta.slot_mapping[static_cast<size_t>(c.unwritten_token)] = -1;
  const int64_t rows = meta.num_tokens + c.padding_rows;
  positions.resize(static_cast<size_t>(rows), 0);
  const Shape cache_shape{next_block, kBlockSize, c.kv_heads, c.head_size};
  std::vector<PagedKVCache> caches{
      {Tensor::from_floats(random(static_cast<size_t>(shape_numel(cache_shape))), cache_shape,
                           DType::bf16, device),
       Tensor::from_floats(random(static_cast<size_t>(shape_numel(cache_shape))), cache_shape,
                           DType::bf16, device)}};
  if (!device.is_cpu()) upload_metadata(meta, device);
  const Tensor qkv = Tensor::from_floats(random(static_cast<size_t>(rows * width)), {rows, width},
                                         DType::bf16, device);
  const Tensor position_tensor = Tensor::from_ints(positions, {rows}, DType::i64, device);
  const Tensor cos_sin =
      Tensor::from_floats(random(static_cast<size_t>(kMaxPosition * c.head_size)),
                          {kMaxPosition, c.head_size}, DType::f32, device);
  const Attributes attributes{{"layer", int64_t{0}},
                              {"num_heads", c.heads},
                              {"num_kv_heads", c.kv_heads},
                              {"head_size", c.head_size},
                              {"scale", 1.0 / std::sqrt(double(c.head_size))},
                              {"is_neox", c.is_neox}};
  RotaryResult result;
  {
    ForwardContextScope scope(ForwardContext{&meta, &caches});
    const std::vector<Tensor> inputs{position_tensor, qkv, cos_sin};
    // The step's rows only: past them the kernels leave the outputs as they are.
    for (const Tensor& out : call_op("rotary_attention", inputs, attributes))
      result.outputs.push_back(out.slice(0, 0, meta.num_tokens).to_floats());
  }
  result.key_cache = caches[0].key.to_floats();
  result.value_cache = caches[0].value.to_floats();
  return result;
}

// Element by element within a bf16 rounding or two.
void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= 2e-2 * std::fabs(want[i]) + 2e-3)) ++bad;
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " elements differ";
}

const std::vector<RotaryCase>& gpu_cases() {
  static const std::vector<RotaryCase> all = {
      // decode steps (the fused kernel): the 1B shape (GQA 4, head 64), head 128, groups of 8
      // and 16, gptj pairs, a fresh sequence and ones across blocks and partitions
      {32, 8, 64, true, {{127, 1}, {0, 1}, {300, 1}, {15, 1}}},
      {8, 2, 128, true, {{40, 1}, {257, 1}}},
      {16, 2, 64, false, {{33, 1}, {0, 1}}},
      {16, 1, 128, true, {{500, 1}}},
      // a graph's padding rows past the step's tokens, and a token written nowhere (slot -1)
      {32, 8, 64, true, {{60, 1}, {9, 1}, {200, 1}}, 5, 1},
      // a mixed step (prefill chunks and decodes: the kernels apart)
      {8, 2, 64, true, {{0, 7}, {20, 1}, {16, 5}}},
  };
  return all;
}

}  // namespace

TEST(GpuRotaryAttention, FusedDecodeMatchesRopeThenAttention) {
  Device gpu;
  if (!first_gpu(&gpu)) GTEST_SKIP() << "no GPU device is available";
  // On the decode kernel's default choice (tensor cores: the fused launch) and on CUDA cores
  // (rope apart, then the CUDA-core decode kernel over the value's slice in place).
  for (const char* kernel : {"auto", "cuda_cores"})
    for (const RotaryCase& c : gpu_cases()) {
      const std::string what =
          fmt::format("decode kernel {}, heads {}/{} head {} neox {} sequences {}", kernel, c.heads,
                      c.kv_heads, c.head_size, c.is_neox, c.sequences.size());
      const RotaryResult want = run_rotary_attention(c, kCPU, 3);
      setenv("TESSERA_DECODE_ATTENTION", kernel, 1);
      const RotaryResult got = run_rotary_attention(c, gpu, 3);
      unsetenv("TESSERA_DECODE_ATTENTION");
      EXPECT_LT(relative_error(got.outputs[0], want.outputs[0]), 1e-2) << what;
      expect_close(got.key_cache, want.key_cache, what + " key cache");
      expect_close(got.value_cache, want.value_cache, what + " value cache");
      bool decode = true;
      for (const auto& [cached, fresh] : c.sequences) decode = decode && fresh == 1;
      if (!decode) {  // apart, the GPU rotates into outputs 1 and 2 and reads the value in place
        for (size_t i = 1; i < 3; ++i)
          expect_close(got.outputs[i], want.outputs[i], what + fmt::format(" output {}", i));
      }
    }
}
