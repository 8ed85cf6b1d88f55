// Fuzz target: model.safetensors.index.json of a sharded Hugging Face folder. The folder holds
// a fixed tiny Llama config.json and its weights in two shards; the input is the index, which
// maps tensor names to shard file names (a name outside the folder, a missing shard, a tensor in
// the wrong shard must all be clean errors).
#include <nlohmann/json.hpp>

#include "fuzz/fuzz_support.h"
#include "fuzz/tiny_model.h"
#include "models/loaders/safetensors.h"
#include "models/model_weights.h"

using namespace tessera;

namespace {

std::string folder;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quiet_logs();
  folder = fuzz::scratch_dir() + "/sharded";
  fuzz::write_scratch_file("sharded/config.json", fuzz::kTinyLlamaConfig);
  // The tiny Llama's tensors (zeros: only shapes matter here), alternately in two shards.
  const std::vector<std::pair<std::string, Shape>> shapes = {
      {"model.embed_tokens.weight", {16, 8}},
      {"model.layers.0.input_layernorm.weight", {8}},
      {"model.layers.0.self_attn.q_proj.weight", {8, 8}},
      {"model.layers.0.self_attn.k_proj.weight", {4, 8}},
      {"model.layers.0.self_attn.v_proj.weight", {4, 8}},
      {"model.layers.0.self_attn.o_proj.weight", {8, 8}},
      {"model.layers.0.post_attention_layernorm.weight", {8}},
      {"model.layers.0.mlp.gate_proj.weight", {16, 8}},
      {"model.layers.0.mlp.up_proj.weight", {16, 8}},
      {"model.layers.0.mlp.down_proj.weight", {8, 16}},
      {"model.norm.weight", {8}}};
  std::vector<std::pair<std::string, Tensor>> shards[2];
  for (size_t i = 0; i < shapes.size(); ++i) {
    const std::vector<float> zeros(static_cast<size_t>(shape_numel(shapes[i].second)), 0.0f);
    shards[i % 2].emplace_back(shapes[i].first, Tensor::from_floats(zeros, shapes[i].second));
  }
  loaders::save_safetensors(folder + "/model-00001-of-00002.safetensors", shards[0]);
  loaders::save_safetensors(folder + "/model-00002-of-00002.safetensors", shards[1]);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path =
      fuzz::write_scratch_file("sharded/model.safetensors.index.json", fuzz::as_text(data, size));
  fuzz::expect_clean_failure([&] { load_model(folder, LoadOptions{}); }, {folder});
  return 0;
}
