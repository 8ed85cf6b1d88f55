// The run config: presets load, overrides apply, and every kind of bad input is a clear error
// naming the file/key and what is valid.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "engine/config.h"
#include "runtime/check.h"

using namespace tessera;
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
  RunConfig eager = load_run_config(std::string(TESSERA_SOURCE_DIR) + "/configs/eager.yaml");
  EXPECT_EQ(eager.compilation.mode, "eager");
  EXPECT_EQ(eager.compilation.cudagraph_mode, "none");
}

TEST(Config, OverridesApplyAfterTheFile) {
  std::string path =
      write_temp("overrides", "engine:\n  max_num_seqs: 8\ncompilation:\n  mode: traced\n");
  RunConfig config = load_run_config(
      path,
      {"compilation.mode=eager", "compilation.splitting_ops=[attention, argmax]",
       "compilation.custom_ops=[none, +rms_norm]", "compilation.pass_config.enable_fusion=false",
       "compilation.pass_config.enable_rotary_attention_fusion=false",
       "compilation.fuse_greedy_sampling=false"});
  EXPECT_EQ(config.engine.max_num_seqs, 8);
  EXPECT_EQ(config.compilation.mode, "eager");
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
  RunConfig defaults = load_run_config("");
  EXPECT_EQ(defaults.compilation.cudagraph_mode, "");
  EXPECT_EQ(defaults.compilation.resolved_cudagraph_mode(true, "compiled"), "full_and_piecewise");
  EXPECT_EQ(defaults.compilation.resolved_cudagraph_mode(false, "compiled"), "none");
  EXPECT_EQ(defaults.compilation.resolved_cudagraph_mode(true, "eager"), "none");
  EXPECT_NO_THROW(load_run_config("", {"compilation.cudagraph_mode=none"}));
  for (const char* mode : {"piecewise", "full", "full_and_piecewise"}) {
    EXPECT_EQ(load_run_config("", {fmt::format("compilation.cudagraph_mode={}", mode)})
                  .compilation.cudagraph_mode,
              mode);
  }
  EXPECT_THAT(error_of("compilation:\n  cudagraph_mode: fully\n"), HasSubstr("full_and_piecewise"));
  EXPECT_NO_THROW(load_run_config("", {"compilation.cudagraph_capture_sizes=[]"}));
  EXPECT_EQ(
      load_run_config("", {"engine.gpu_memory_utilization=0.5"}).engine.gpu_memory_utilization,
      0.5);
}

TEST(Config, ServerKeysAreCheckedAndKept) {
  RunConfig config = load_run_config("", {"engine.enable_prefix_caching=false", "engine.port=9000",
                                          "engine.host=0.0.0.0", "engine.seed=3"});
  EXPECT_FALSE(config.engine.enable_prefix_caching);
  EXPECT_EQ(config.engine.port, 9000);
  EXPECT_EQ(config.engine.host, "0.0.0.0");
  EXPECT_EQ(config.engine.seed, 3);
  EXPECT_TRUE(load_run_config("", {}).engine.enable_prefix_caching);  // on by default
  EXPECT_THAT(error_of("", {"engine.port=70000"}), HasSubstr("engine.port"));
  EXPECT_THAT(error_of("", {"engine.enable_prefix_caching=maybe"}),
              HasSubstr("engine.enable_prefix_caching"));
}

TEST(Config, CaptureKeysNeedAGraphMode) {
  RunConfig config = load_run_config(
      "", {"compilation.cudagraph_mode=piecewise", "compilation.cudagraph_capture_sizes=[1, 2, 4]",
           "compilation.max_cudagraph_capture_size=64", "compilation.cudagraph_num_warmups=3"});
  EXPECT_EQ(config.compilation.cudagraph_mode, "piecewise");
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
