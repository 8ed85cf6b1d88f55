#include "models/fp8_format.h"

#include <set>

#include "models/json_input.h"
#include "models/tokenizer/text/regex.h"
#include "runtime/check.h"

namespace tessera {
namespace {

using nlohmann::json;

// Keys of a compressed-tensors quantization args object that only describe how the checkpoint
// was calibrated: what the weights are does not depend on them.
const std::set<std::string> kCalibrationKeys = {"observer", "observer_kwargs"};

[[noreturn]] void refuse(const std::string& file, const std::string& key, const json& value,
                         const std::string& supported) {
  throw Error(fmt::format("{}: quantization_config {} = {} is not supported; {}", file, key,
                          json_excerpt(value), supported));
}

// A list of module names (ignore, ignored_layers, modules_to_not_convert).
std::vector<std::string> module_list(const HfConfigFields& fields, const char* key) {
  return fields.has(key) ? fields.texts(key) : std::vector<std::string>{};
}

void read_fp8_method(const HfConfigFields& q, const std::string& where, Fp8Format& format) {
  for (const auto& [key, value] : q.raw_object().items()) {
    static const std::set<std::string> known = {"quant_method",      "fmt",
                                                "activation_scheme", "weight_block_size",
                                                "ignored_layers",    "modules_to_not_convert"};
    if (!known.count(key))
      refuse(where, key, value,
             "the fp8 method takes fmt, activation_scheme, "
             "weight_block_size, ignored_layers and modules_to_not_convert");
  }
  const std::string fmt_name = q.text("fmt", "e4m3");
  if (fmt_name != "e4m3") refuse(where, "fmt", fmt_name, "FP8 weights must be e4m3");
  const std::string scheme = q.text("activation_scheme", "dynamic");
  if (scheme != "dynamic" && scheme != "static")
    refuse(where, "activation_scheme", scheme, "use dynamic or static");
  if (q.has("weight_block_size")) {
    const json& block = q.raw("weight_block_size");
    if (block != json::array({kFp8Block, kFp8Block}))
      refuse(where, "weight_block_size", block, "FP8 weight blocks must be [128, 128]");
    if (scheme != "dynamic")
      refuse(where, "activation_scheme", scheme,
             "block-scaled weights take dynamic activations (per token and 128 columns)");
    format.weight_scale = Fp8Format::WeightScale::block;
    format.activation = Fp8ActivationScale::group;
  } else {
    format.weight_scale = Fp8Format::WeightScale::tensor;
    format.activation = scheme == "static" ? Fp8ActivationScale::fixed : Fp8ActivationScale::token;
  }
  for (const char* key : {"ignored_layers", "modules_to_not_convert"})
    for (const std::string& name : module_list(q, key)) format.ignored.push_back(name);
}

// One compressed-tensors quantization args object ("weights" or "input_activations"): checks the
// keys every FP8 scheme shares and returns its strategy.
std::string compressed_args(const HfConfigFields& args, const std::string& where,
                            const std::string& path) {
  for (const auto& [key, value] : args.raw_object().items()) {
    static const std::set<std::string> known = {"num_bits",        "type",    "strategy",
                                                "symmetric",       "dynamic", "group_size",
                                                "block_structure", "actorder"};
    if (!known.count(key) && !kCalibrationKeys.count(key))
      refuse(where, path + "." + key, value,
             "FP8 quantization args take num_bits, type, "
             "strategy, symmetric, dynamic, group_size and "
             "block_structure");
  }
  if (args.integer("num_bits", 8) != 8)
    refuse(where, path + ".num_bits", args.raw("num_bits"), "FP8 is 8 bits");
  if (args.text("type", "float") != "float")
    refuse(where, path + ".type", args.raw("type"),
           "only float (FP8 e4m3) compressed-tensors schemes are supported");
  if (!args.boolean("symmetric", true))
    refuse(where, path + ".symmetric", false, "FP8 scales are symmetric");
  if (args.has("actorder")) refuse(where, path + ".actorder", args.raw("actorder"), "use null");
  return args.text("strategy", "tensor");
}

void read_compressed_tensors(const HfConfigFields& q, const std::string& where, Fp8Format& format) {
  for (const auto& [key, value] : q.raw_object().items()) {
    static const std::set<std::string> known = {"quant_method",
                                                "config_groups",
                                                "ignore",
                                                "format",
                                                "quantization_status",
                                                "kv_cache_scheme",
                                                "global_compression_ratio",
                                                "sparsity_config",
                                                "version",
                                                "transform_config"};
    if (!known.count(key))
      refuse(where, key, value, "compressed-tensors FP8 takes config_groups, ignore, format");
  }
  const std::string format_name = q.text("format", "float-quantized");
  if (format_name != "float-quantized" && format_name != "naive-quantized")
    refuse(where, "format", format_name, "FP8 checkpoints are float-quantized");
  for (const char* off : {"sparsity_config", "transform_config"})
    if (q.has(off)) refuse(where, off, q.raw(off), "use null");
  if (q.has("kv_cache_scheme") && !q.raw("kv_cache_scheme").is_null()) {
    const HfConfigFields scheme = q.object("kv_cache_scheme");
    if (compressed_args(scheme, where, "kv_cache_scheme") != "tensor")
      refuse(where, "kv_cache_scheme.strategy", scheme.raw("strategy"),
             "FP8 KV cache scales are per tensor (self_attn.k_scale and v_scale)");
    if (scheme.boolean("dynamic", false))
      refuse(where, "kv_cache_scheme.dynamic", true,
             "KV cache scales are static (k_scale, v_scale)");
    format.kv_cache_scales = true;
  }
  const HfConfigFields groups = q.object("config_groups");
  TESSERA_REQUIRE(groups.raw_object().size() == 1,
                  "{}: quantization_config.config_groups has {} groups; FP8 checkpoints with one "
                  "group (targets [\"Linear\"]) are supported",
                  where, groups.raw_object().size());
  const std::string group_name = groups.raw_object().begin().key();
  const HfConfigFields group = groups.object(group_name.c_str());
  const std::string path = "config_groups." + group_name;
  for (const auto& [key, value] : group.raw_object().items())
    if (key != "targets" && key != "weights" && key != "input_activations" &&
        key != "output_activations" && key != "format")
      refuse(where, path + "." + key, value, "a group takes targets, weights, input_activations");
  if (group.texts("targets") != std::vector<std::string>{"Linear"})
    refuse(where, path + ".targets", group.raw("targets"), "use [\"Linear\"]");
  if (group.has("output_activations"))
    refuse(where, path + ".output_activations", group.raw("output_activations"), "use null");

  const std::string weights = compressed_args(group.object("weights"), where, path + ".weights");
  if (group.object("weights").boolean("dynamic", false))
    refuse(where, path + ".weights.dynamic", true, "weights carry their scales");
  if (weights == "tensor") {
    format.weight_scale = Fp8Format::WeightScale::tensor;
  } else if (weights == "channel") {
    format.weight_scale = Fp8Format::WeightScale::channel;
  } else if (weights == "block") {
    const HfConfigFields w = group.object("weights");
    if (!w.has("block_structure") ||
        w.raw("block_structure") != json::array({kFp8Block, kFp8Block}))
      refuse(where, path + ".weights.block_structure",
             w.has("block_structure") ? w.raw("block_structure") : json(nullptr),
             "FP8 weight blocks must be [128, 128]");
    format.weight_scale = Fp8Format::WeightScale::block;
  } else {
    refuse(where, path + ".weights.strategy", weights, "use tensor, channel or block");
  }

  if (!group.has("input_activations"))
    refuse(where, path + ".input_activations", nullptr,
           "weight-only FP8 is not supported: the FP8 GEMMs quantize activations too");
  const HfConfigFields input = group.object("input_activations");
  const std::string activations = compressed_args(input, where, path + ".input_activations");
  const bool dynamic = input.boolean("dynamic", false);
  if (activations == "token" && dynamic) {
    format.activation = Fp8ActivationScale::token;
  } else if (activations == "tensor" && !dynamic) {
    format.activation = Fp8ActivationScale::fixed;
  } else if (activations == "group" && dynamic && input.integer("group_size", 0) == kFp8Block) {
    format.activation = Fp8ActivationScale::group;
  } else if (activations == "tensor") {
    refuse(where, path + ".input_activations.dynamic", true,
           "a dynamic scale per tensor would make each request's output depend on the others "
           "in its batch; FP8 activations are dynamic per token, per token group of 128, or "
           "static per tensor");
  } else {
    refuse(where, path + ".input_activations.strategy", activations,
           "use token (dynamic), tensor (static) or group (dynamic, group_size 128)");
  }
  if (format.weight_scale == Fp8Format::WeightScale::block &&
      format.activation == Fp8ActivationScale::fixed)
    refuse(where, path + ".input_activations.dynamic", false,
           "block-scaled weights take dynamic activations");
  // Scales per 128 columns of x pair with weights scaled per 128x128 block (the form
  // DeepSeek-V3 and Qwen3-FP8 use, and the one FP8 matmul libraries take).
  if (format.activation == Fp8ActivationScale::group &&
      format.weight_scale != Fp8Format::WeightScale::block)
    refuse(where, path + ".input_activations.strategy", "group",
           "activations per group of 128 go with weights per 128x128 block (strategy block)");
  for (const std::string& name : module_list(q, "ignore")) format.ignored.push_back(name);
}

// "re:PATTERN" as a pattern that must match a whole module name.
std::string whole_match(const std::string& name) {
  return "^(?:" + name.substr(3) + ")$";
}

}  // namespace

void read_quantization_config(const HfConfigFields& fields, ModelConfig& config) {
  if (!fields.has("quantization_config")) return;
  const HfConfigFields q = fields.object("quantization_config");
  const std::string method = q.text("quant_method", "");
  Fp8Format format;
  format.method = method;
  if (method == "fp8") {
    read_fp8_method(q, fields.file(), format);
  } else if (method == "compressed-tensors") {
    read_compressed_tensors(q, fields.file(), format);
  } else {
    refuse(fields.file(), "quant_method", method.empty() ? json(nullptr) : json(method),
           "Tessera reads FP8 checkpoints (quant_method fp8 or compressed-tensors); for GGUF "
           "quantizations load the .gguf file");
  }
  for (const std::string& name : format.ignored)  // a bad pattern fails here, naming it
    if (name.starts_with("re:")) Regex(whole_match(name), fields.file() + " quantization_config");
  config.fp8 = std::move(format);
}

bool fp8_ignores(const Fp8Format& format, const std::string& module) {
  const size_t dot = module.rfind('.');
  const std::string last = dot == std::string::npos ? module : module.substr(dot + 1);
  for (const std::string& name : format.ignored) {
    if (name.starts_with("re:")) {
      if (!Regex(whole_match(name), "quantization_config").find_all(module).empty()) return true;
    } else if (name == module || name == last ||
               (name.ends_with('.') && module.starts_with(name))) {
      return true;
    }
  }
  return false;
}

}  // namespace tessera
