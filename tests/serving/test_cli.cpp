// The tessera binary and its shared model flags: logs go to stderr and stdout holds only the
// generated text; every subcommand that takes a model parses the same flags.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/cli/command.h"
#include "engine/cli/model_flags.h"
#include "support/loader_files.h"
#include "support/server_process.h"
#include "support/test_tensors.h"

using namespace tessera;
using namespace tessera::testing;
using namespace tessera::cli;
using ::testing::AllOf;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

struct RunResult {
  int status = -1;
  std::string out, err;
};

// Runs the tessera binary with `arguments` (shell words), capturing stdout and stderr apart.
RunResult run_tessera(const std::string& arguments) {
  CommandResult result = run_shell(fmt::format("'{}' {}", TESSERA_BINARY, arguments), true);
  return {result.status, result.output, result.error_output};
}

// The same with `environment` (NAME=value words) set for the binary.
RunResult run_tessera_with(const std::string& environment, const std::string& arguments) {
  CommandResult result =
      run_shell(fmt::format("{} '{}' {}", environment, TESSERA_BINARY, arguments), true);
  return {result.status, result.output, result.error_output};
}

ModelFlags parse_all(const std::vector<std::string>& args) {
  ModelFlags flags;
  for (size_t i = 0; i < args.size(); ++i)
    if (!parse_model_flag(args, i, flags)) ADD_FAILURE() << "not a model flag: " << args[i];
  return flags;
}

}  // namespace

TEST(Cli, GenerateWritesLogsToStderrAndOnlyTextToStdout) {
  RunResult result = run_tessera("generate -n 2");
  ASSERT_EQ(result.status, 0) << result.err;
  EXPECT_THAT(result.err, HasSubstr("[info]"));  // spdlog's lines, e.g. the model and KV cache
  EXPECT_THAT(result.err, HasSubstr("KV cache"));
  EXPECT_THAT(result.out, Not(HasSubstr("[info]")));
  EXPECT_THAT(result.out, Not(HasSubstr("KV cache")));
  EXPECT_THAT(result.out, Not(HasSubstr("tokens/s")));  // the speed report is stderr's too
}

TEST(Cli, LogLevelComesFromTheEnvironmentAndBadLevelsAreRefused) {
  RunResult silent = run_tessera_with("TESSERA_LOG_LEVEL=off", "generate -n 2");
  ASSERT_EQ(silent.status, 0) << silent.err;
  EXPECT_THAT(silent.err, Not(HasSubstr("[info]")));
  EXPECT_FALSE(silent.out.empty());  // the text still comes
  RunResult debug = run_tessera_with("TESSERA_LOG_LEVEL=debug", "generate -n 2");
  ASSERT_EQ(debug.status, 0) << debug.err;
  EXPECT_THAT(debug.err, HasSubstr("[info]"));
  RunResult warn = run_tessera_with("TESSERA_LOG_LEVEL=warn", "generate -n 2");
  ASSERT_EQ(warn.status, 0) << warn.err;
  EXPECT_THAT(warn.err, Not(HasSubstr("[info]")));
  RunResult bad = run_tessera_with("TESSERA_LOG_LEVEL=loud", "devices");
  EXPECT_EQ(bad.status, 1);
  EXPECT_THAT(bad.err, AllOf(HasSubstr("TESSERA_LOG_LEVEL=loud"), HasSubstr("debug")));
}

TEST(Cli, ModelFlagsBecomeConfigOverridesInOrder) {
  ModelFlags flags = parse_all({"--model", "synthetic:qwen3-tiny", "--tokenizer", "tok.bin",
                                "--device", "cpu", "--dtype", "f32", "--max-model-len", "64",
                                "--mode", "eager", "-O", "engine.block_size=8", "-c", "run.yaml"});
  EXPECT_EQ(flags.config_path, "run.yaml");
  EXPECT_EQ(flags.overrides, (std::vector<std::string>{
                                 "engine.model=synthetic:qwen3-tiny", "engine.tokenizer=tok.bin",
                                 "engine.device=cpu", "engine.dtype=f32", "engine.max_model_len=64",
                                 "compilation.mode=eager", "engine.block_size=8"}));
  EXPECT_TRUE(flags.model_given());
  EXPECT_FALSE(parse_all({"--dtype", "bf16"}).model_given());
  EXPECT_TRUE(parse_all({"-m", "x.gguf"}).model_given());
  EXPECT_EQ(parse_all({"--config", "a.yaml"}).config_path, "a.yaml");

  EngineConfig config = parse_all({"-m", "synthetic:qwen2-tiny", "--tokenizer", "t.json", "--mode",
                                   "traced", "-O", "engine.block_size=8"})
                            .load();
  EXPECT_EQ(config.model.model, "synthetic:qwen2-tiny");
  EXPECT_EQ(config.model.tokenizer, "t.json");
  EXPECT_EQ(config.compilation.mode, CompilationMode::traced);
  EXPECT_EQ(config.cache.block_size, 8);
}

TEST(Cli, OtherArgumentsAreLeftAndMissingValuesAreUsageErrors) {
  ModelFlags flags;
  std::vector<std::string> args{"--prompt", "hi"};
  size_t i = 0;
  EXPECT_FALSE(parse_model_flag(args, i, flags));
  EXPECT_EQ(i, 0u);
  std::vector<std::string> missing{"--tokenizer"};
  EXPECT_THROW(parse_model_flag(missing, i, flags), UsageError);
}

// Each compiled function dumps into its own folder: the LM head, compiled after the forward, used
// to overwrite the forward's pass graphs with its own.
TEST(Cli, ExplainDumpsEachCompiledFunctionIntoItsOwnFolder) {
  TempDir dir;
  // A file an earlier run left in a function's folder goes.
  std::filesystem::create_directories(dir / "forward");
  std::ofstream(dir / "forward/stale.txt") << "from an earlier run";
  RunResult result =
      run_tessera(fmt::format("explain --model synthetic:tiny --dump-dir '{}'", dir.str()));
  ASSERT_EQ(result.status, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr(dir / "forward"));
  auto text_of = [&](const std::string& relative) {
    std::ifstream file(dir / relative);
    std::stringstream text;
    text << file.rdbuf();
    return text.str();
  };
  const std::string forward = text_of("forward/00-traced.txt");
  EXPECT_THAT(forward, HasSubstr("embedding"));
  EXPECT_THAT(forward, HasSubstr("attention"));
  EXPECT_THAT(text_of("forward/explain.txt"), HasSubstr("split: "));
  // Each pass's result, named after it, in pipeline order.
  EXPECT_THAT(text_of("forward/01-cleanup.txt"), HasSubstr("embedding"));
  EXPECT_THAT(text_of("forward/02-rotary_attention.txt"), HasSubstr("rotary_attention"));
  EXPECT_THAT(text_of("forward/04-fuse.txt"), HasSubstr("fused"));
  const std::string head = text_of("logits_head/00-traced.txt");
  EXPECT_THAT(head, HasSubstr("linear"));
  EXPECT_THAT(head, Not(HasSubstr("embedding")));
  EXPECT_FALSE(std::filesystem::exists(dir / "forward/stale.txt"));
}

TEST(Cli, ExplainShowsTheTimeOfEachPass) {
  RunResult result = run_tessera("explain --model synthetic:tiny");
  ASSERT_EQ(result.status, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("time per pass:"));
  for (const char* pass : {"cleanup", "rotary_attention", "split", "fuse", "materialize",
                           "follows_splitting", "memory_plan", "codegen"})
    EXPECT_THAT(result.out, ContainsRegex(fmt::format("\n  {} +[0-9]+\\.[0-9] ms\n", pass)))
        << result.out;
}

// The KV cache's dtype and bytes: the model's dtype, or e4m3 with --kv-cache-dtype fp8 (a quarter
// of f32's bytes for the same blocks).
TEST(Cli, ExplainShowsTheKvCacheDtype) {
  RunResult f32 = run_tessera("explain --model synthetic:tiny");
  RunResult fp8 = run_tessera("explain --model synthetic:tiny --kv-cache-dtype fp8");
  ASSERT_EQ(f32.status, 0) << f32.err;
  ASSERT_EQ(fp8.status, 0) << fp8.err;
  EXPECT_THAT(f32.out, ContainsRegex("KV cache: 128 blocks of 16 tokens of f32, 1\\.00 MiB"));
  EXPECT_THAT(fp8.out, ContainsRegex("KV cache: 128 blocks of 16 tokens of f8_e4m3, 0\\.25 MiB"));
}

TEST(Cli, ExplainTakesTheSameModelFlagsAsGenerate) {
  // --tokenizer and --mode parse (no usage error, status 2); explain then refuses a mode that is
  // not compiled, before loading anything.
  RunResult result = run_tessera("explain --tokenizer tok.bin --device cpu --mode eager");
  EXPECT_EQ(result.status, 1) << result.err;
  EXPECT_THAT(result.err, HasSubstr("compilation.mode must be compiled"));
  EXPECT_EQ(run_tessera("explain --no-such-flag").status, 2);
  EXPECT_EQ(run_tessera("generate --no-such-flag").status, 2);
}
