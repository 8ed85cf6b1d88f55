// The run config: presets load, overrides apply, and every kind of bad input is a clear error
// naming the file/key and what is valid.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/config.h"
#include "runtime/check.h"

using namespace tessera;
using ::testing::AllOf;
using ::testing::HasSubstr;

namespace {

std::string write_temp(const std::string& name, const std::string& text) {
  auto path = std::filesystem::temp_directory_path() / ("tessera_config_" + name + ".yaml");
  std::ofstream(path) << text;
  return path.string();
}

std::string error_of(const std::string& yaml, std::vector<std::string> overrides = {}) {
  try {
    load_run_config(yaml.empty() ? "" : write_temp("case", yaml), overrides);
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

}  // namespace

TEST(Config, PresetsLoad) {
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(TESSERA_SOURCE_DIR) + "/configs")) {
    EXPECT_NO_THROW(load_run_config(entry.path().string())) << entry.path();
  }
  EngineConfig eager = load_run_config(std::string(TESSERA_SOURCE_DIR) + "/configs/eager.yaml");
  EXPECT_EQ(eager.compilation.mode, CompilationMode::eager);
  EXPECT_EQ(eager.compilation.cudagraph_mode, CUDAGraphMode::none);
}

TEST(Config, OverridesApplyAfterTheFile) {
  std::string path =
      write_temp("overrides", "engine:\n  max_num_seqs: 8\ncompilation:\n  mode: traced\n");
  EngineConfig config = load_run_config(
      path,
      {"compilation.mode=eager", "compilation.splitting_ops=[attention, argmax]",
       "compilation.custom_ops=[none, +rms_norm]", "compilation.pass_config.enable_fusion=false",
       "compilation.pass_config.enable_rotary_attention_fusion=false",
       "compilation.fuse_greedy_sampling=false"});
  EXPECT_EQ(config.scheduler.max_num_seqs, 8);
  EXPECT_EQ(config.compilation.mode, CompilationMode::eager);
  EXPECT_EQ(config.compilation.splitting_ops, (std::vector<std::string>{"attention", "argmax"}));
  EXPECT_EQ(config.compilation.custom_ops, (std::vector<std::string>{"none", "+rms_norm"}));
  EXPECT_FALSE(config.compilation.pass_config.enable_fusion);
  EXPECT_FALSE(config.compilation.pass_config.enable_rotary_attention_fusion);
  EXPECT_TRUE(load_run_config(path, {}).compilation.pass_config.enable_rotary_attention_fusion);
  EXPECT_FALSE(config.compilation.fuse_greedy_sampling);
  EXPECT_TRUE(load_run_config(path, {}).compilation.fuse_greedy_sampling);
}

TEST(Config, DefaultCaptureSizesFollowVllm) {
  CompilationConfig config;
  std::vector<int64_t> sizes = config.resolved_capture_sizes(8192);
  EXPECT_EQ(sizes.front(), 1);
  EXPECT_EQ(sizes[3], 8);
  EXPECT_EQ(sizes.back(), 512);
  EXPECT_EQ(sizes.size(), 3u + 31u + 17u);  // 1,2,4; 8..248; 256..512
  EXPECT_EQ(config.resolved_capture_sizes(100).back(), 96);
}

TEST(Config, BadInputIsAClearError) {
  EXPECT_THAT(error_of("\n"), HasSubstr("is empty"));
  EXPECT_THAT(error_of("engine:\n  max_num_seqs: many\n"),
              HasSubstr("engine.max_num_seqs: expected a positive integer, got 'many'"));
  EXPECT_THAT(error_of("engine:\n  max_num_seqs: -3\n"), HasSubstr("must be in 1.."));
  EXPECT_THAT(error_of("engine:\n  max_num_seq: 3\n"),
              HasSubstr("unknown key 'engine.max_num_seq'"));
  EXPECT_THAT(error_of("engine:\n  max_num_seq: 3\n"),
              HasSubstr("max_num_seqs"));  // lists valid keys
  EXPECT_THAT(error_of("compilation:\n  cudagraph_mode: fulll\n"),
              HasSubstr("valid choices: none, piecewise, full, full_and_piecewise"));
  EXPECT_THAT(error_of("compilaton:\n  mode: eager\n"), HasSubstr("unknown section 'compilaton'"));
  EXPECT_THAT(error_of("mode: eager\n"), HasSubstr("must be a section"));
  EXPECT_THAT(error_of("- 1\n- 2\n"), HasSubstr("must be a map"));
  EXPECT_THAT(error_of("engine: [1, 2\n"), HasSubstr("not valid YAML"));
  EXPECT_THAT(error_of("compilation:\n  cudagraph_capture_sizes: 8\n"),
              HasSubstr("expected a list"));
  EXPECT_THAT(error_of("compilation:\n  cudagraph_capture_sizes: [1, x]\n"),
              HasSubstr("cudagraph_capture_sizes[1]"));
  EXPECT_THAT(error_of("engine:\n  gpu_memory_utilization: 1.5\n"), HasSubstr("(0, 1]"));
  EXPECT_THAT(error_of("engine:\n  model: [a, b]\n"), HasSubstr("engine.model: expected"));
  EXPECT_THAT(error_of("", {"compilation.mode"}), HasSubstr("must look like section.key=value"));
  EXPECT_THAT(error_of("", {"compilation.mode=jit"}),
              HasSubstr("valid choices: eager, traced, compiled"));
  EXPECT_THAT(error_of("", {"nonsense.key=1"}), HasSubstr("unknown section 'nonsense'"));
  EXPECT_THAT(error_of("", {"engine.port=99999"}), HasSubstr("0..65535"));
  try {
    load_run_config("/nonexistent/run.yaml");
    FAIL();
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("/nonexistent/run.yaml does not exist"));
  }
}

TEST(Config, GraphModesAndMemoryUtilization) {
  // Unset: full_and_piecewise on a GPU in compiled mode, none on the CPU or in eager mode.
  EngineConfig defaults = load_run_config("");
  EXPECT_EQ(defaults.compilation.cudagraph_mode, std::nullopt);
  EXPECT_EQ(defaults.compilation.resolved_cudagraph_mode(true), CUDAGraphMode::full_and_piecewise);
  EXPECT_EQ(defaults.compilation.resolved_cudagraph_mode(false), CUDAGraphMode::none);
  EngineConfig eager = load_run_config("", {"compilation.mode=eager"});
  EXPECT_EQ(eager.compilation.resolved_cudagraph_mode(true), CUDAGraphMode::none);
  EXPECT_NO_THROW(load_run_config("", {"compilation.cudagraph_mode=none"}));
  for (const char* mode : {"piecewise", "full", "full_and_piecewise"}) {
    const auto set = load_run_config("", {fmt::format("compilation.cudagraph_mode={}", mode)})
                         .compilation.cudagraph_mode;
    ASSERT_TRUE(set.has_value()) << mode;
    EXPECT_EQ(enum_name(*set), mode);
  }
  EXPECT_THAT(error_of("compilation:\n  cudagraph_mode: fully\n"), HasSubstr("full_and_piecewise"));
  EXPECT_NO_THROW(load_run_config("", {"compilation.cudagraph_capture_sizes=[]"}));
  EXPECT_EQ(load_run_config("", {"engine.gpu_memory_utilization=0.5"}).cache.gpu_memory_utilization,
            0.5);
}

TEST(Config, ServerKeysAreCheckedAndKept) {
  EngineConfig config =
      load_run_config("", {"engine.enable_prefix_caching=false", "engine.port=9000",
                           "engine.host=0.0.0.0", "engine.seed=3"});
  EXPECT_FALSE(config.cache.enable_prefix_caching);
  EXPECT_EQ(config.server.port, 9000);
  EXPECT_EQ(config.server.host, "0.0.0.0");
  EXPECT_EQ(config.seed, 3);
  EXPECT_TRUE(load_run_config("", {}).cache.enable_prefix_caching);  // on by default
  EXPECT_THAT(error_of("", {"engine.port=70000"}), HasSubstr("engine.port"));
  EXPECT_THAT(error_of("", {"engine.enable_prefix_caching=maybe"}),
              HasSubstr("engine.enable_prefix_caching"));
}

TEST(Config, CaptureKeysNeedAGraphMode) {
  EngineConfig config = load_run_config(
      "", {"compilation.cudagraph_mode=piecewise", "compilation.cudagraph_capture_sizes=[1, 2, 4]",
           "compilation.max_cudagraph_capture_size=64", "compilation.cudagraph_num_warmups=3"});
  EXPECT_EQ(config.compilation.cudagraph_mode, CUDAGraphMode::piecewise);
  EXPECT_EQ(config.compilation.cudagraph_capture_sizes, (std::vector<int64_t>{1, 2, 4}));
  EXPECT_EQ(config.compilation.max_cudagraph_capture_size, 64);
  EXPECT_EQ(config.compilation.cudagraph_num_warmups, 3);
  for (const char* key :
       {"compilation.cudagraph_capture_sizes=[8]", "compilation.max_cudagraph_capture_size=64",
        "compilation.cudagraph_num_warmups=3"}) {
    EXPECT_THAT(error_of("", {"compilation.cudagraph_mode=none", key}),
                HasSubstr("have no effect with compilation.cudagraph_mode=none"))
        << key;
    EXPECT_NO_THROW(load_run_config("", {key})) << key;  // unset: the GPU default captures
  }
  EXPECT_THAT(error_of("", {"compilation.cudagraph_mode=piecewise",
                            "compilation.cudagraph_capture_sizes=[1, 0]"}),
              HasSubstr("must be in 1.."));
}

// The engine: section's keys land in the parts of the tree that use them, each read from one
// place (a key mapped to the wrong part, or a part's default declared elsewhere, fails here).
TEST(Config, EngineKeysMapOntoTheTreesParts) {
  const std::string path = write_temp("tree", R"(engine:
  model: m.gguf
  tokenizer: t.json
  device: cuda:1
  dtype: bf16
  max_model_len: 100
  max_num_batched_tokens: 300
  max_num_seqs: 7
  async_scheduling: false
  scheduling_policy: priority
  block_size: 32
  num_kv_blocks: 40
  gpu_memory_utilization: 0.5
  enable_prefix_caching: false
  tensor_parallel_size: 2
  seed: 9
  host: 0.0.0.0
  port: 8123
)");
  const EngineConfig config = load_run_config(path);
  EXPECT_EQ(config.model.model, "m.gguf");
  EXPECT_EQ(config.model.tokenizer, "t.json");
  EXPECT_EQ(config.model.device, "cuda:1");
  EXPECT_EQ(config.model.dtype, "bf16");
  EXPECT_EQ(config.model.max_model_len, 100);
  EXPECT_EQ(config.scheduler.max_num_batched_tokens, 300);
  EXPECT_EQ(config.scheduler.max_num_seqs, 7);
  EXPECT_FALSE(config.scheduler.async_scheduling);
  EXPECT_EQ(config.scheduler.policy, SchedulingPolicy::priority);
  EXPECT_EQ(config.cache.block_size, 32);
  EXPECT_EQ(config.cache.num_kv_blocks, 40);
  EXPECT_EQ(config.cache.gpu_memory_utilization, 0.5);
  EXPECT_FALSE(config.cache.enable_prefix_caching);
  EXPECT_EQ(config.parallel.tensor_parallel_size, 2);
  EXPECT_EQ(config.seed, 9);
  EXPECT_EQ(config.server.host, "0.0.0.0");
  EXPECT_EQ(config.server.port, 8123);
  // Unset, each part keeps its one default (the values configs/default.yaml documents).
  const EngineConfig defaults = load_run_config("");
  EXPECT_EQ(defaults.scheduler.max_num_batched_tokens, 2048);
  EXPECT_EQ(defaults.scheduler.max_num_seqs, 64);
  EXPECT_EQ(defaults.scheduler.policy, SchedulingPolicy::fcfs);
  EXPECT_EQ(defaults.compilation.mode, CompilationMode::compiled);
}

// Users' files and -O lines name these keys: the list is the file format, kept as it was.
TEST(Config, TheKeysAreTheFileFormat) {
  std::vector<std::string> keys;
  std::istringstream lines(describe_config_keys());
  for (std::string key, rest; lines >> key && std::getline(lines, rest);) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{
                      "compilation.cache_dir",
                      "compilation.cudagraph_capture_sizes",
                      "compilation.cudagraph_mode",
                      "compilation.cudagraph_num_warmups",
                      "compilation.custom_ops",
                      "compilation.dump_dir",
                      "compilation.fuse_greedy_sampling",
                      "compilation.max_cudagraph_capture_size",
                      "compilation.mode",
                      "compilation.pass_config.enable_cse",
                      "compilation.pass_config.enable_fusion",
                      "compilation.pass_config.enable_linear_prologue_fusion",
                      "compilation.pass_config.enable_noop_elimination",
                      "compilation.pass_config.enable_rotary_attention_fusion",
                      "compilation.pass_config.enable_weight_prefetch",
                      "compilation.programmatic_dependent_launch",
                      "compilation.recompile_limit",
                      "compilation.splitting_ops",
                      "engine.async_scheduling",
                      "engine.block_size",
                      "engine.device",
                      "engine.dtype",
                      "engine.enable_expert_parallel",
                      "engine.enable_prefix_caching",
                      "engine.gpu_memory_utilization",
                      "engine.host",
                      "engine.kv_cache_dtype",
                      "engine.max_model_len",
                      "engine.max_num_batched_tokens",
                      "engine.max_num_seqs",
                      "engine.model",
                      "engine.num_kv_blocks",
                      "engine.port",
                      "engine.quantization",
                      "engine.scheduling_policy",
                      "engine.seed",
                      "engine.speculative_config",
                      "engine.speculative_config.disable_by_batch_size",
                      "engine.speculative_config.method",
                      "engine.speculative_config.num_speculative_tokens",
                      "engine.speculative_config.prompt_lookup_max",
                      "engine.speculative_config.prompt_lookup_min",
                      "engine.tensor_parallel_size",
                      "engine.tokenizer",
                  }));
  EXPECT_THAT(describe_config_keys(), HasSubstr("one of: eager, traced, compiled"));
  EXPECT_THAT(describe_config_keys(),
              HasSubstr("one of: none, piecewise, full, full_and_piecewise"));
}

// Modes are enums spelled as users write them: every spelling parses back to its value, and a
// bad one names the key, the value and the valid choices, from a file and from -O alike.
TEST(Config, ModeEnumsParseAndPrintTheirNames) {
  for (const std::string& name : enum_names<CompilationMode>())
    EXPECT_EQ(enum_name(load_run_config("", {"compilation.mode=" + name}).compilation.mode), name);
  for (const std::string& name : enum_names<CUDAGraphMode>())
    EXPECT_EQ(enum_name(parse_enum<CUDAGraphMode>(name, "k")), name);
  EXPECT_EQ(enum_names<CompilationMode>(),
            (std::vector<std::string>{"eager", "traced", "compiled"}));
  EXPECT_THAT(error_of("compilation:\n  mode: jit\n"),
              AllOf(HasSubstr("compilation.mode: 'jit' is not valid"),
                    HasSubstr("valid choices: eager, traced, compiled")));
  EXPECT_THAT(error_of("", {"compilation.cudagraph_mode=partial"}),
              AllOf(HasSubstr("override: compilation.cudagraph_mode: 'partial' is not valid"),
                    HasSubstr("valid choices: none, piecewise, full, full_and_piecewise")));
  EXPECT_THAT(error_of("", {"compilation.mode=[eager]"}),
              HasSubstr("compilation.mode: expected a string, got a list"));
  EXPECT_THAT(error_of("", {"engine.dtype=f64"}),
              AllOf(HasSubstr("engine.dtype: 'f64' is not valid"),
                    HasSubstr("valid choices: auto, f32, bf16, f16")));
}

// Graphs capture compiled pieces: the config says so before a model is loaded.
TEST(Config, GraphModesNeedCompiledMode) {
  for (const char* mode : {"eager", "traced"}) {
    EXPECT_THAT(error_of("", {fmt::format("compilation.mode={}", mode),
                              "compilation.cudagraph_mode=piecewise"}),
                AllOf(HasSubstr("compilation.cudagraph_mode=piecewise captures compiled pieces"),
                      HasSubstr(fmt::format("not {}", mode))));
    EXPECT_NO_THROW(load_run_config(
        "", {fmt::format("compilation.mode={}", mode), "compilation.cudagraph_mode=none"}));
    EXPECT_NO_THROW(load_run_config("", {fmt::format("compilation.mode={}", mode)}));
  }
}
