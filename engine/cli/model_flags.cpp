#include "engine/cli/model_flags.h"

#include <algorithm>

namespace tessera::cli {

bool ModelFlags::model_given() const {
  return !config_path.empty() ||
         std::any_of(overrides.begin(), overrides.end(),
                     [](const std::string& o) { return o.starts_with("engine.model="); });
}

EngineConfig ModelFlags::load() const {
  return load_run_config(config_path, overrides);
}

void declare_model_flags(FlagSet& flag_set, ModelFlags& flags) {
  std::vector<std::string>* overrides = &flags.overrides;
  flag_set.section("model options (every command that takes a model)")
      .config_key({"--model", "-m", "PATH",
                   "a Hugging Face folder, a llama2.c .bin (needs --tokenizer), a .gguf file, "
                   "embedded:NAME or synthetic:NAME (default embedded:stories260K)"},
                  "engine.model", overrides)
      .config_key({"--tokenizer", "", "PATH", "the tokenizer, when the model has none inside"},
                  "engine.tokenizer", overrides)
      .config_key({"--device", "", "D", "cpu (default), cuda, cuda:N"}, "engine.device", overrides)
      .config_key({"--dtype", "", "T", "auto, f32, bf16, f16"}, "engine.dtype", overrides)
      .config_key({"--quantization", "-q", "Q",
                   "fp8: quantize a float model's projections to FP8 at load time"},
                  "engine.quantization", overrides)
      .config_key({"--kv-cache-dtype", "", "T",
                   "auto (the model's dtype) or fp8: an e4m3 KV cache, half of bf16's bytes"},
                  "engine.kv_cache_dtype", overrides)
      .config_key({"--max-model-len", "", "N", "cap on prompt + output tokens"},
                  "engine.max_model_len", overrides)
      .config_key({"--mode", "", "M", "eager, traced or compiled"}, "compilation.mode", overrides)
      .config_key({"--tensor-parallel-size", "-tp", "N",
                   "shard the model over N devices (engine.device on)"},
                  "engine.tensor_parallel_size", overrides)
      .config_switch({"--enable-expert-parallel", "", "",
                      "mixtures of experts: whole experts on each rank, not every expert split"},
                     "engine.enable_expert_parallel", overrides)
      .config_key({"--speculative-config", "", "JSON",
                   "speculative decoding, e.g. '{\"method\": \"ngram\", "
                   "\"num_speculative_tokens\": 3, \"prompt_lookup_max\": 4}'"},
                  "engine.speculative_config", overrides)
      .text({"--config", "-c", "FILE", "a YAML config (configs/*.yaml)"}, &flags.config_path)
      .add({"-O", "", "section.key=value",
            "override any config key, e.g. -O compilation.custom_ops=[none]"},
           "a config override section.key=value",
           [overrides](const std::string&, const std::string& value) {
             overrides->push_back(value);
           });
}

bool parse_model_flag(const std::vector<std::string>& args, size_t& i, ModelFlags& flags) {
  FlagSet flag_set("model flags");
  declare_model_flags(flag_set, flags);
  return flag_set.parse_one(args, i);
}

}  // namespace tessera::cli
