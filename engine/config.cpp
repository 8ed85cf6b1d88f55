#include "engine/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <type_traits>

#include "models/input_file.h"
#include "runtime/check.h"

namespace tessera {
namespace {

// One settable key: how to parse a YAML node into the config, and how to describe it.
struct Field {
  std::string type;  // for messages: "an integer", "one of: a, b"
  std::function<void(EngineConfig&, const YAML::Node&, const std::string& where)> set;
};

template <typename T>
T scalar_as(const YAML::Node& node, const std::string& where, const char* type) {
  if constexpr (std::is_same_v<T, std::string>) {
    if (node.IsNull()) return "";  // `dump_dir:` or `-O compilation.dump_dir=` clears it
  }
  if (!node.IsScalar())
    throw Error(
        fmt::format("{}: expected {}, got a {}", where, type, node.IsSequence() ? "list" : "map"));
  try {
    return node.as<T>();
  } catch (const YAML::Exception&) {
    throw Error(fmt::format("{}: expected {}, got '{}'", where, type, node.Scalar()));
  }
}

using Fields = std::map<std::string, Field>;

// The setting a chain of member pointers from the root names, e.g. <&EngineConfig::scheduler,
// &SchedulerConfig::max_num_seqs>: how a key maps onto the tree.
template <auto... Path>
auto& member(EngineConfig& config) {
  return (config.*....*Path);
}
template <auto... Path>
using MemberType = std::remove_cvref_t<decltype(member<Path...>(std::declval<EngineConfig&>()))>;

template <typename T>
using Check = std::function<void(const T&, const std::string& where)>;

template <auto... Path>
Field scalar(const char* type, Check<MemberType<Path...>> check = {}) {
  using Value = MemberType<Path...>;
  return Field{type, [=](EngineConfig& config, const YAML::Node& node, const std::string& where) {
                 Value value = scalar_as<Value>(node, where, type);
                 if (check) check(value, where);
                 member<Path...>(config) = value;
               }};
}

template <typename T>
struct Unwrapped {
  using type = T;
};
template <typename T>
struct Unwrapped<std::optional<T>> {
  using type = T;
};

// A key whose value is one of an enum's names (compile/config_enum.h).
template <auto... Path>
Field choice() {
  using Enum = typename Unwrapped<MemberType<Path...>>::type;
  return Field{"one of: " + enum_choices<Enum>(),
               [](EngineConfig& config, const YAML::Node& node, const std::string& where) {
                 member<Path...>(config) =
                     parse_enum<Enum>(scalar_as<std::string>(node, where, "a string"), where);
               }};
}

// A string key with a fixed list of values that is no enum of the code (engine.dtype's "auto").
template <auto... Path>
Field string_choice(std::vector<std::string> choices) {
  std::string listed = fmt::format("{}", fmt::join(choices, ", "));
  return Field{"one of: " + listed,
               [=](EngineConfig& config, const YAML::Node& node, const std::string& where) {
                 std::string value = scalar_as<std::string>(node, where, "a string");
                 if (std::find(choices.begin(), choices.end(), value) == choices.end())
                   throw_invalid_choice(where, value, listed);
                 member<Path...>(config) = value;
               }};
}

template <auto... Path>
Field list(const char* type, Check<typename MemberType<Path...>::value_type> check = {}) {
  using Item = typename MemberType<Path...>::value_type;
  return Field{type, [=](EngineConfig& config, const YAML::Node& node, const std::string& where) {
                 if (!node.IsSequence() && !(node.IsScalar() && node.Scalar().empty()))
                   throw Error(fmt::format("{}: expected {} such as [a, b]", where, type));
                 std::vector<Item> items;
                 for (size_t i = 0; i < node.size(); ++i) {
                   Item item = scalar_as<Item>(node[i], fmt::format("{}[{}]", where, i), type);
                   if (check) check(item, where);
                   items.push_back(item);
                 }
                 member<Path...>(config) = items;
               }};
}

// A check that an integer key lies in [low, high]. Every integer key has an upper bound: sizes
// multiplied from them (KV blocks x block size x layers x ...) must not overflow.
Check<int64_t> in_range(int64_t low, int64_t high) {
  return [low, high](const int64_t& value, const std::string& where) {
    if (value < low || value > high)
      throw Error(fmt::format("{}: must be in {}..{}, got {}", where, low, high, value));
  };
}

void set_key(EngineConfig& config, const std::string& key, const YAML::Node& value,
             const std::string& origin);

// A key whose value is a map of the keys under it (engine.speculative_config, as vLLM's
// --speculative-config JSON): each entry is set as `key.name`.
Field group(const std::string& key) {
  return Field{"a map of " + key + ".* keys",
               [key](EngineConfig& config, const YAML::Node& node, const std::string& where) {
                 if (!node.IsMap())
                   throw Error(
                       fmt::format("{}: expected a map such as {{\"method\": \"ngram\", "
                                   "\"num_speculative_tokens\": 3}}",
                                   where));
                 const std::string origin = where.substr(0, where.rfind(": "));
                 for (const auto& item : node) {
                   if (!item.first.IsScalar())
                     throw Error(fmt::format("{}: a key is not a name", where));
                   set_key(config, key + "." + item.first.Scalar(), item.second, origin);
                 }
               }};
}

// Upper bounds far above any real run (vLLM's defaults: 8192 tokens, 256 sequences, blocks of 16).
constexpr int64_t kMaxTokens = int64_t{1} << 24;
constexpr int64_t kMaxPositions = int64_t{1} << 28;  // as models' max_position_embeddings
constexpr int64_t kMaxSequences = int64_t{1} << 16;
constexpr int64_t kMaxBlockSize = int64_t{1} << 16;
// KV-cache slots (block * block_size + offset) are int32 in the attention metadata.
constexpr int64_t kMaxSlots = INT32_MAX;
// A run config is a few dozen lines.
constexpr size_t kMaxConfigBytes = size_t{1} << 20;

const Fields& fields() {
  static const Fields table = [] {
    using E = EngineConfig;
    using M = ModelLoadConfig;
    using K = CacheConfig;
    using S = SchedulerConfig;
    using C = CompilationConfig;
    using P = PassConfig;
    constexpr const char* kBool = "true or false";
    Fields f;
    f["engine.model"] = scalar<&E::model, &M::model>("a path or synthetic:NAME");
    f["engine.tokenizer"] = scalar<&E::model, &M::tokenizer>("a path");
    f["engine.device"] = scalar<&E::model, &M::device>("cpu, cuda or cuda:N");
    f["engine.dtype"] = string_choice<&E::model, &M::dtype>({"auto", "f32", "bf16", "f16"});
    f["engine.quantization"] = string_choice<&E::model, &M::quantization>({"none", "fp8"});
    f["engine.max_model_len"] =
        scalar<&E::model, &M::max_model_len>("an integer >= 0", in_range(0, kMaxPositions));
    f["engine.max_num_batched_tokens"] = scalar<&E::scheduler, &S::max_num_batched_tokens>(
        "a positive integer", in_range(1, kMaxTokens));
    f["engine.max_num_seqs"] =
        scalar<&E::scheduler, &S::max_num_seqs>("a positive integer", in_range(1, kMaxSequences));
    f["engine.async_scheduling"] = scalar<&E::scheduler, &S::async_scheduling>(kBool);
    f["engine.scheduling_policy"] = choice<&E::scheduler, &S::policy>();
    f["engine.block_size"] =
        scalar<&E::cache, &K::block_size>("a positive integer", in_range(1, kMaxBlockSize));
    f["engine.num_kv_blocks"] =
        scalar<&E::cache, &K::num_kv_blocks>("an integer >= 0", in_range(0, kMaxSlots));
    f["engine.gpu_memory_utilization"] = scalar<&E::cache, &K::gpu_memory_utilization>(
        "a number in (0, 1]", [](const double& v, const std::string& where) {
          if (!(v > 0 && v <= 1))
            throw Error(fmt::format("{}: must be in (0, 1], got {}", where, v));
        });
    f["engine.kv_cache_dtype"] =
        string_choice<&E::cache, &K::kv_cache_dtype>({"auto", "fp8", "fp8_e4m3"});
    f["engine.enable_prefix_caching"] = scalar<&E::cache, &K::enable_prefix_caching>(kBool);
    f["engine.tensor_parallel_size"] = scalar<&E::parallel, &ParallelConfig::tensor_parallel_size>(
        "an integer from 1 to 64 (devices from engine.device on)", in_range(1, 64));
    f["engine.enable_expert_parallel"] =
        scalar<&E::parallel, &ParallelConfig::enable_expert_parallel>(kBool);
    using D = SpeculativeConfig;
    f["engine.speculative_config"] = group("engine.speculative_config");
    f["engine.speculative_config.method"] = string_choice<&E::speculative, &D::method>({"ngram"});
    f["engine.speculative_config.num_speculative_tokens"] =
        scalar<&E::speculative, &D::num_speculative_tokens>("an integer from 1 to 16",
                                                            in_range(1, 16));
    f["engine.speculative_config.prompt_lookup_min"] =
        scalar<&E::speculative, &D::prompt_lookup_min>("an integer from 1 to 64", in_range(1, 64));
    f["engine.speculative_config.prompt_lookup_max"] =
        scalar<&E::speculative, &D::prompt_lookup_max>("an integer from 1 to 64", in_range(1, 64));
    f["engine.speculative_config.disable_by_batch_size"] =
        scalar<&E::speculative, &D::disable_by_batch_size>("an integer >= 0 (0: never)",
                                                           in_range(0, kMaxSequences));
    f["engine.seed"] = scalar<&E::seed>("an integer");
    f["engine.host"] = scalar<&E::server, &ServerConfig::host>("an address");
    f["engine.port"] = scalar<&E::server, &ServerConfig::port>(
        "a port number (0: any free port)", [](const int& v, const std::string& where) {
          if (v < 0 || v > 65535)
            throw Error(fmt::format("{}: must be in 0..65535, got {}", where, v));
        });
    f["compilation.mode"] = choice<&E::compilation, &C::mode>();
    f["compilation.custom_ops"] =
        list<&E::compilation, &C::custom_ops>("a list of \"all\", \"none\", \"+name\", \"-name\"");
    f["compilation.splitting_ops"] = list<&E::compilation, &C::splitting_ops>("a list of op names");
    // Graph modes other than none need a GPU (the model runner says so) and compiled mode.
    f["compilation.cudagraph_mode"] = choice<&E::compilation, &C::cudagraph_mode>();
    f["compilation.cudagraph_capture_sizes"] = list<&E::compilation, &C::cudagraph_capture_sizes>(
        "a list of positive integers", in_range(1, kMaxTokens));
    f["compilation.max_cudagraph_capture_size"] =
        scalar<&E::compilation, &C::max_cudagraph_capture_size>("a positive integer",
                                                                in_range(1, kMaxTokens));
    f["compilation.cudagraph_num_warmups"] =
        scalar<&E::compilation, &C::cudagraph_num_warmups>("an integer >= 1", in_range(1, 1000));
    f["compilation.programmatic_dependent_launch"] =
        scalar<&E::compilation, &C::programmatic_dependent_launch>(kBool);
    f["compilation.fuse_greedy_sampling"] =
        scalar<&E::compilation, &C::fuse_greedy_sampling>(kBool);
    f["compilation.pass_config.enable_fusion"] =
        scalar<&E::compilation, &C::pass_config, &P::enable_fusion>(kBool);
    f["compilation.pass_config.enable_noop_elimination"] =
        scalar<&E::compilation, &C::pass_config, &P::enable_noop_elimination>(kBool);
    f["compilation.pass_config.enable_cse"] =
        scalar<&E::compilation, &C::pass_config, &P::enable_cse>(kBool);
    f["compilation.pass_config.enable_linear_prologue_fusion"] =
        scalar<&E::compilation, &C::pass_config, &P::enable_linear_prologue_fusion>(kBool);
    f["compilation.pass_config.enable_weight_prefetch"] =
        scalar<&E::compilation, &C::pass_config, &P::enable_weight_prefetch>(kBool);
    f["compilation.pass_config.enable_rotary_attention_fusion"] =
        scalar<&E::compilation, &C::pass_config, &P::enable_rotary_attention_fusion>(kBool);
    f["compilation.cache_dir"] = scalar<&E::compilation, &C::cache_dir>("a directory");
    f["compilation.dump_dir"] = scalar<&E::compilation, &C::dump_dir>("a directory");
    f["compilation.recompile_limit"] =
        scalar<&E::compilation, &C::recompile_limit>("a positive integer", in_range(1, 1 << 16));
    return f;
  }();
  return table;
}

std::string keys_under(const std::string& prefix) {
  std::vector<std::string> names;
  for (const auto& [key, field] : fields())
    if (key.starts_with(prefix)) names.push_back(key.substr(prefix.size()));
  return fmt::format("{}", fmt::join(names, ", "));
}

void set_key(EngineConfig& config, const std::string& key, const YAML::Node& value,
             const std::string& origin) {
  auto it = fields().find(key);
  if (it == fields().end()) {
    auto dot = key.find('.');
    std::string section = key.substr(0, dot);
    if (section != "engine" && section != "compilation")
      throw Error(fmt::format("{}: unknown section '{}'; valid sections: engine, compilation",
                              origin, section));
    throw Error(fmt::format("{}: unknown key '{}'; valid keys of {}: {}", origin, key, section,
                            keys_under(section + ".")));
  }
  it->second.set(config, value, fmt::format("{}: {}", origin, key));
}

// Walks a YAML map, setting leaves by their dotted path (pass_config nests one level further).
void apply_map(EngineConfig& config, const YAML::Node& map, const std::string& prefix,
               const std::string& origin) {
  for (const auto& item : map) {
    if (!item.first.IsScalar())
      throw Error(
          fmt::format("{}: a key under '{}' is a {}, not a name", origin,
                      prefix.empty() ? "the top level" : prefix.substr(0, prefix.size() - 1),
                      item.first.IsSequence() ? "list" : "map"));
    std::string key = prefix + item.first.Scalar();
    bool nested = item.second.IsMap();
    if (nested && fields().count(key) == 0) {
      if (prefix.empty() && key != "engine" && key != "compilation")
        throw Error(fmt::format("{}: unknown section '{}'; valid sections: engine, compilation",
                                origin, key));
      // Only a group of keys (pass_config) nests; anything else is an unknown key, reported here
      // rather than after walking however deep the map goes.
      if (keys_under(key + ".").empty()) set_key(config, key, item.second, origin);
      apply_map(config, item.second, key + ".", origin);
    } else if (prefix.empty()) {
      throw Error(
          fmt::format("{}: top-level key '{}' must be a section (engine: or compilation:) "
                      "holding keys",
                      origin, key));
    } else {
      set_key(config, key, item.second, origin);
    }
  }
}

// The checks that involve more than one key, once every key is set.
void check_across_keys(const EngineConfig& config) {
  const CacheConfig& cache = config.cache;
  TESSERA_REQUIRE(cache.num_kv_blocks <= kMaxSlots / cache.block_size,
                  "engine.num_kv_blocks {} x engine.block_size {} is more than the {} KV-cache "
                  "slots the attention metadata can address; lower one of them",
                  cache.num_kv_blocks, cache.block_size, kMaxSlots);
  const SpeculativeConfig& speculative = config.speculative;
  TESSERA_REQUIRE(
      speculative.enabled() ||
          (speculative.num_speculative_tokens == 0 && speculative.prompt_lookup_min == 0 &&
           speculative.prompt_lookup_max == 0 && speculative.disable_by_batch_size == 0),
      "engine.speculative_config: its keys need a method (method: ngram)");
  TESSERA_REQUIRE(!speculative.enabled() || speculative.num_speculative_tokens > 0,
                  "engine.speculative_config.num_speculative_tokens: required with method {} "
                  "(how many tokens to propose per step, e.g. 3)",
                  speculative.method);
  TESSERA_REQUIRE(speculative.prompt_lookup_min <= speculative.prompt_lookup_max ||
                      speculative.prompt_lookup_max == 0,
                  "engine.speculative_config: prompt_lookup_min {} is above prompt_lookup_max {}",
                  speculative.prompt_lookup_min, speculative.prompt_lookup_max);
  const CompilationConfig defaults;
  const CompilationConfig& compilation = config.compilation;
  const std::optional<CUDAGraphMode> graphs = compilation.cudagraph_mode;
  bool capture_keys_set =
      !compilation.cudagraph_capture_sizes.empty() ||
      compilation.max_cudagraph_capture_size != defaults.max_cudagraph_capture_size ||
      compilation.cudagraph_num_warmups != defaults.cudagraph_num_warmups;
  TESSERA_REQUIRE(!capture_keys_set || graphs != CUDAGraphMode::none,  // unset may capture
                  "compilation.cudagraph_capture_sizes, max_cudagraph_capture_size and "
                  "cudagraph_num_warmups have no effect with compilation.cudagraph_mode=none; "
                  "set cudagraph_mode=piecewise or remove them");
  TESSERA_REQUIRE(
      !graphs || *graphs == CUDAGraphMode::none || compilation.mode == CompilationMode::compiled,
      "compilation.cudagraph_mode={} captures compiled pieces: it needs "
      "compilation.mode=compiled, not {}",
      enum_name(graphs.value_or(CUDAGraphMode::none)), enum_name(compilation.mode));
}

}  // namespace

EngineConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides) {
  EngineConfig config;
  if (!path.empty()) {
    TESSERA_REQUIRE(std::filesystem::exists(path), "config file {} does not exist", path);
    const std::string text = read_input_file(path, "config file", kMaxConfigBytes);
    YAML::Node root;
    try {
      root = YAML::Load(text);
    } catch (const YAML::Exception& error) {
      throw Error(fmt::format("config file {} is not valid YAML: {}", path, error.what()));
    }
    if (root.IsNull())
      throw Error(
          fmt::format("config file {} is empty; it needs an engine: or compilation: section "
                      "(see configs/default.yaml)",
                      path));
    if (!root.IsMap())
      throw Error(
          fmt::format("config file {} must be a map with engine: and/or compilation: "
                      "sections",
                      path));
    try {
      apply_map(config, root, "", path);
    } catch (const YAML::Exception& error) {  // a node of an unexpected kind
      throw Error(fmt::format("config file {}: {}", path, error.what()));
    }
  }
  for (const std::string& override_text : overrides) {
    auto equals = override_text.find('=');
    if (equals == std::string::npos || equals == 0)
      throw Error(
          fmt::format("override '{}' must look like section.key=value, e.g. "
                      "compilation.mode=eager",
                      override_text));
    std::string key = override_text.substr(0, equals);
    YAML::Node value;
    try {
      value = YAML::Load(override_text.substr(equals + 1));
    } catch (const YAML::Exception& error) {
      throw Error(fmt::format("override '{}': the value is not valid YAML: {}", override_text,
                              error.what()));
    }
    try {
      set_key(config, key, value, "override");
    } catch (const YAML::Exception& error) {
      throw Error(fmt::format("override '{}': {}", override_text, error.what()));
    }
  }
  check_across_keys(config);
  return config;
}

std::string describe_config_keys() {
  std::string out;
  for (const auto& [key, field] : fields()) out += fmt::format("  {:<45} {}\n", key, field.type);
  return out;
}

}  // namespace tessera
