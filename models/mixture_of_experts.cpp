#include "models/mixture_of_experts.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string_view>

#include "compile/ops/ops.h"
#include "models/decoder_weights.h"
#include "runtime/check.h"

namespace tessera {
namespace {

constexpr const char* kMixtral = "MixtralForCausalLM";
constexpr const char* kQwen3Moe = "Qwen3MoeForCausalLM";

// Hugging Face names of a layer's experts: Mixtral's w1 (gate), w3 (up), w2 (down).
struct ExpertNames {
  const char* router;
  const char* experts;  // the prefix of "<experts><e>.<projection>"
  const char* gate;
  const char* up;
  const char* down;
};

constexpr ExpertNames kMixtralNames{"block_sparse_moe.gate.weight", "block_sparse_moe.experts.",
                                    "w1.weight", "w3.weight", "w2.weight"};
constexpr ExpertNames kQwen3MoeNames{"mlp.gate.weight", "mlp.experts.", "gate_proj.weight",
                                     "up_proj.weight", "down_proj.weight"};

ExpertNames expert_names(const ModelConfig& config) {
  return config.architecture == kMixtral ? kMixtralNames : kQwen3MoeNames;
}

std::string expert_weight(int64_t layer, const ExpertNames& names, int64_t expert,
                          const char* projection) {
  return layer_weight(layer, names.experts) + std::to_string(expert) + "." + projection;
}

}  // namespace

std::optional<ExpertWeightName> parse_expert_weight(const std::string& name) {
  static const std::pair<const char*, ExpertProjection> projections[] = {
      {"w1.weight", ExpertProjection::gate},    {"w3.weight", ExpertProjection::up},
      {"w2.weight", ExpertProjection::down},    {"gate_proj.weight", ExpertProjection::gate},
      {"up_proj.weight", ExpertProjection::up}, {"down_proj.weight", ExpertProjection::down}};
  for (const char* pattern :
       {"model.layers.%d.block_sparse_moe.experts.%d.%n", "model.layers.%d.mlp.experts.%d.%n"}) {
    int layer = -1, expert = -1, consumed = 0;
    if (std::sscanf(name.c_str(), pattern, &layer, &expert, &consumed) != 2 || consumed == 0 ||
        layer < 0 || expert < 0)
      continue;
    const std::string rest = name.substr(static_cast<size_t>(consumed));
    for (const auto& [suffix, projection] : projections)
      if (rest == suffix) return ExpertWeightName{layer, expert, projection};
  }
  return std::nullopt;
}

bool is_router_weight(const std::string& name) {
  for (const ExpertNames& names : {kMixtralNames, kQwen3MoeNames}) {
    const std::string_view router = names.router;
    // ".<router>" after the layer's prefix.
    if (name.size() > router.size() && name.ends_with(router) &&
        name[name.size() - router.size() - 1] == '.')
      return true;
  }
  return false;
}

bool has_experts(const std::string& architecture) {
  return architecture == kMixtral || architecture == kQwen3Moe;
}

void read_expert_config(const HfConfigFields& fields, ModelConfig& config) {
  TESSERA_CHECK(has_experts(config.architecture), "read_expert_config for {}", config.architecture);
  config.num_experts_per_tok = fields.integer("num_experts_per_tok");
  if (config.architecture == kMixtral) {
    config.num_experts = fields.integer("num_local_experts");
    TESSERA_REQUIRE(config.num_experts >= 1, "{}: num_local_experts must be at least 1, got {}",
                    fields.file(), config.num_experts);
    config.moe_intermediate_size = config.intermediate_size;
    config.norm_topk_prob = true;
    config.expert_layers.assign(static_cast<size_t>(config.num_layers), true);
    return;
  }
  config.num_experts = fields.has("num_experts") ? fields.integer("num_experts")
                                                 : fields.integer("num_local_experts");
  config.moe_intermediate_size = fields.integer("moe_intermediate_size");
  config.norm_topk_prob = fields.boolean("norm_topk_prob", false);
  const int64_t step = fields.integer("decoder_sparse_step", 1);
  TESSERA_REQUIRE(step >= 1, "{}: decoder_sparse_step must be at least 1, got {}", fields.file(),
                  step);
  const std::vector<int64_t> dense_layers = fields.ids("mlp_only_layers");
  for (int64_t layer : dense_layers)
    TESSERA_REQUIRE(layer >= 0 && layer < config.num_layers,
                    "{}: mlp_only_layers entry {} is not a layer (num_hidden_layers is {})",
                    fields.file(), layer, config.num_layers);
  config.expert_layers.clear();
  for (int64_t layer = 0; layer < config.num_layers; ++layer)
    config.expert_layers.push_back(config.num_experts > 0 && (layer + 1) % step == 0 &&
                                   std::find(dense_layers.begin(), dense_layers.end(), layer) ==
                                       dense_layers.end());
}

std::string expert_parameters_str(const ModelWeights& weights) {
  const ModelConfig& c = weights.config;
  int64_t total = 0;
  for (const auto& [name, tensor] : weights.tensors) total += tensor.numel();
  const int64_t expert_layers = std::count(c.expert_layers.begin(), c.expert_layers.end(), true);
  const int64_t unused = unchosen_expert_parameters(c);
  auto count_str = [](int64_t count) {
    return count >= 100'000'000 ? fmt::format("{:.1f}B", static_cast<double>(count) / 1e9)
                                : fmt::format("{:.2f}M", static_cast<double>(count) / 1e6);
  };
  return fmt::format("{} parameters, {} active per token ({} of {} experts in {} layers)",
                     count_str(total), count_str(total - unused), c.num_experts_per_tok,
                     c.num_experts, expert_layers);
}

double unchosen_experts_per_layer(const ModelConfig& config) {
  const auto held = static_cast<double>(config.local_experts());
  const double chosen = static_cast<double>(config.num_experts_per_tok) * held /
                        static_cast<double>(std::max<int64_t>(config.num_experts, 1));
  return held - std::min(held, chosen);
}

int64_t unchosen_expert_parameters(const ModelConfig& config) {
  const int64_t layers = std::count(config.expert_layers.begin(), config.expert_layers.end(), true);
  return std::llround(
      static_cast<double>(layers * 3 * config.hidden_size * config.moe_intermediate_size) *
      unchosen_experts_per_layer(config));
}

void add_expert_weights(std::vector<WeightSpec>& specs, const ModelConfig& config, int64_t layer) {
  const ExpertNames names = expert_names(config);
  const int64_t hidden = config.hidden_size, intermediate = config.moe_intermediate_size;
  specs.push_back({layer_weight(layer, names.router), {config.num_experts, hidden}});
  for (int64_t e = config.first_local_expert;
       e < config.first_local_expert + config.local_experts(); ++e) {
    specs.push_back({expert_weight(layer, names, e, names.gate), {intermediate, hidden}});
    specs.push_back({expert_weight(layer, names, e, names.up), {intermediate, hidden}});
    specs.push_back({expert_weight(layer, names, e, names.down), {hidden, intermediate}});
  }
}

namespace {

// The matrices `parts` (each [rows, columns], one dtype) one after another as [count, rows per
// group, columns], copied as bytes: whole rows of blocks for a quantized dtype, as stored.
Tensor stack_matrices(const std::vector<Tensor>& parts, int64_t count, int64_t group_rows) {
  const Tensor& first = parts.front();
  const int64_t columns = first.size(1);
  Tensor stacked = Tensor::empty({count, group_rows, columns}, first.dtype(), first.device());
  Tensor rows = stacked.view({count * group_rows, columns});
  int64_t row = 0;
  for (const Tensor& part : parts) {
    rows.slice(0, row, row + part.size(0)).copy_from(part);
    row += part.size(0);
  }
  TESSERA_CHECK(row == count * group_rows, "stacked {} rows of {}", row, count * group_rows);
  return stacked;
}

}  // namespace

ExpertWeights expert_weights(ModelWeights& weights, const ModelConfig& config, int64_t layer) {
  const ExpertNames names = expert_names(config);
  ExpertWeights experts;
  experts.router = weights.get(layer_weight(layer, names.router));
  std::vector<Tensor> gate_up, down;
  // fused_moe takes one format for all gate and up rows and one for all down rows; llama.cpp's
  // mixtures quantize a layer's stacked gate, up and down tensors each in one type.
  auto add = [&](std::vector<Tensor>& stack, const std::string& name, const std::string& like) {
    Tensor tensor = weights.get(name);
    TESSERA_REQUIRE(is_floating(tensor.dtype()) || is_quantized(tensor.dtype()),
                    "{} is stored as {}: experts must be f32, f16, bf16 or a GGUF block format",
                    name, dtype_name(tensor.dtype()));
    if (!stack.empty())
      TESSERA_REQUIRE(tensor.dtype() == stack.front().dtype(),
                      "{} is stored as {} but {} as {}: the experts' gate and up projections must "
                      "share one format, and their down projections one (requantize the file "
                      "with one type per tensor kind)",
                      name, dtype_name(tensor.dtype()), like, dtype_name(stack.front().dtype()));
    stack.push_back(tensor.contiguous());
  };
  const int64_t first = config.first_local_expert;
  const std::string first_gate = expert_weight(layer, names, first, names.gate);
  const std::string first_down = expert_weight(layer, names, first, names.down);
  for (int64_t e = first; e < first + config.local_experts(); ++e) {
    add(gate_up, expert_weight(layer, names, e, names.gate), first_gate);
    add(gate_up, expert_weight(layer, names, e, names.up), first_gate);
    add(down, expert_weight(layer, names, e, names.down), first_down);
  }
  for (int64_t e = first; e < first + config.local_experts(); ++e)
    for (const char* projection : {names.gate, names.up, names.down})
      weights.tensors.erase(expert_weight(layer, names, e, projection));
  const int64_t hidden = config.hidden_size, count = config.local_experts();
  experts.gate_up = stack_matrices(gate_up, count, 2 * gate_up.front().size(0));
  experts.down = stack_matrices(down, count, hidden);
  return experts;  // the parts die with `gate_up` and `down`
}

Tensor ExpertWeights::apply(const Tensor& hidden, const ModelConfig& config) const {
  return ops::fused_moe(hidden, ops::linear(hidden, router), gate_up, down,
                        config.num_experts_per_tok, config.norm_topk_prob,
                        config.first_local_expert);
}

}  // namespace tessera
