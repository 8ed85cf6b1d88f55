// The flag parser every subcommand uses (engine/cli/flag_parser.h): declared flags set their
// options, --help is generated from the declarations, and errors read the same everywhere.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>

#include "engine/cli/flag_parser.h"
#include "engine/cli/model_flags.h"

using namespace tessera::cli;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

struct Options {
  std::string name = "default";
  int64_t count = 3;
  std::optional<uint64_t> seed;
  double rate = 0.5;
  double timeout = 10;
  bool quiet = false;
  std::vector<std::string> modes;
  std::vector<int64_t> sizes{1, 2};
  std::vector<std::string> overrides;
};

FlagSet declare(Options& options) {
  FlagSet flags("demo");
  flags.text({"--name", "-N", "TEXT", "a name"}, &options.name)
      .integer({"--count", "-c", "N", "how many"}, &options.count, 1, 100)
      .integer({"--seed", "", "S", "a seed"}, &options.seed, uint64_t{0},
               std::numeric_limits<uint64_t>::max())
      .number({"--rate", "", "R", "a rate"}, &options.rate, 0, 1)
      .positive_number({"--timeout", "", "SECONDS", "a timeout"}, &options.timeout)
      .flag({"--quiet", "-q", "", "say less"}, &options.quiet)
      .section("lists")
      .text_list({"--modes", "", "A,B", "modes"}, &options.modes)
      .integer_list({"--sizes", "", "1,2", "sizes"}, &options.sizes, 1, 8)
      .config_key({"--host", "", "ADDR", "where"}, "engine.host", &options.overrides);
  return flags;
}

Options parsed(const std::vector<std::string>& args) {
  Options options;
  declare(options).parse(args);
  return options;
}

std::string error_of(const std::vector<std::string>& args) {
  try {
    parsed(args);
  } catch (const UsageError& error) {
    return error.what();
  }
  ADD_FAILURE() << "no usage error";
  return "";
}

}  // namespace

TEST(FlagParser, DeclaredFlagsSetTheirOptionsByNameOrAlias) {
  Options options = parsed({"-N", "x", "--count", "7", "--seed", "18446744073709551615", "--rate",
                            "0.25", "--timeout", "1e3", "-q", "--modes", "a,b", "--sizes", "8",
                            "--host", "0.0.0.0", "--host", "::1"});
  EXPECT_EQ(options.name, "x");
  EXPECT_EQ(options.count, 7);
  EXPECT_EQ(options.seed, std::numeric_limits<uint64_t>::max());
  EXPECT_DOUBLE_EQ(options.rate, 0.25);
  EXPECT_DOUBLE_EQ(options.timeout, 1000);
  EXPECT_TRUE(options.quiet);
  EXPECT_EQ(options.modes, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(options.sizes, (std::vector<int64_t>{8}));
  EXPECT_EQ(options.overrides,
            (std::vector<std::string>{"engine.host=0.0.0.0", "engine.host=::1"}));

  Options untouched = parsed({});
  EXPECT_EQ(untouched.name, "default");
  EXPECT_EQ(untouched.count, 3);
  EXPECT_FALSE(untouched.seed.has_value());
  EXPECT_FALSE(untouched.quiet);
}

TEST(FlagParser, TellsWhichFlagsWereGiven) {
  Options options;
  FlagSet flags = declare(options);
  flags.parse({"-c", "2"});
  EXPECT_TRUE(flags.given("--count"));  // by its name, though the alias was used
  EXPECT_FALSE(flags.given("--name"));
}

TEST(FlagParser, AnUnknownFlagNamesItselfTheCommandAndTheNearestFlag) {
  EXPECT_EQ(error_of({"--verbose"}), "unknown option '--verbose' for 'tessera demo'");
  EXPECT_THAT(error_of({"--cuont", "2"}), HasSubstr("did you mean --count?"));
  EXPECT_THAT(error_of({"stray"}), HasSubstr("'tessera demo' takes no positional arguments"));
}

TEST(FlagParser, MissingAndBadValuesNameTheFlagAndWhatItExpects) {
  EXPECT_EQ(error_of({"--count"}), "--count needs a value: N, an integer in 1..100");
  EXPECT_EQ(error_of({"-c", "0"}), "-c expects an integer in 1..100, got '0'");
  EXPECT_EQ(error_of({"--count", "4x"}), "--count expects an integer in 1..100, got '4x'");
  // Overflow is an error, not a wrapped value.
  EXPECT_THAT(error_of({"--count", "99999999999999999999999"}), HasSubstr("1..100"));
  EXPECT_THAT(error_of({"--seed", "18446744073709551616"}), HasSubstr("--seed expects an integer"));
  EXPECT_THAT(error_of({"--seed", "-1"}), HasSubstr("--seed expects an integer"));
  EXPECT_EQ(error_of({"--rate", "2"}), "--rate expects a number in [0, 1], got '2'");
  EXPECT_THAT(error_of({"--rate", "nan"}), HasSubstr("--rate expects a number"));
  EXPECT_THAT(error_of({"--timeout", "0"}), HasSubstr("--timeout expects a positive number"));
  EXPECT_THAT(error_of({"--timeout", "inf"}), HasSubstr("--timeout expects a positive number"));
  EXPECT_THAT(error_of({"--sizes", "1,,2"}), HasSubstr("empty item in '1,,2'"));
  EXPECT_THAT(error_of({"--sizes", "1,9"}), HasSubstr("--sizes expects an integer in 1..8"));
}

TEST(FlagParser, HelpListsEveryFlagWithItsValueDefaultAndSection) {
  Options options;
  const std::string help = declare(options).help();
  EXPECT_THAT(help, HasSubstr("options:\n  --name TEXT, -N TEXT"));
  EXPECT_THAT(help, HasSubstr("a name (default default)"));
  EXPECT_THAT(help, HasSubstr("how many (default 3)"));
  EXPECT_THAT(help, AllOf(HasSubstr("a seed\n"), Not(HasSubstr("a seed (default"))));
  EXPECT_THAT(help, HasSubstr("  --quiet, -q "));
  EXPECT_THAT(help, Not(HasSubstr("say less (default")));
  EXPECT_THAT(help, HasSubstr("\nlists:\n  --modes A,B"));
  EXPECT_THAT(help, HasSubstr("sizes (default 1,2)"));
  EXPECT_THAT(help, HasSubstr("where (engine.host)"));
  for (size_t begin = 0, end; (end = help.find('\n', begin)) != std::string::npos; begin = end + 1)
    EXPECT_LE(end - begin, 100u) << help.substr(begin, end - begin);
}

TEST(FlagParser, ACommandCanDropASharedFlagAndDeclareItsOwn) {
  ModelFlags model;
  int64_t length = 0;
  FlagSet flags("bench sweep");
  declare_model_flags(flags, model);
  flags.remove("--mode").section("options").integer({"--max-model-len", "", "N", "its own"},
                                                    &length, 1, 1000);
  flags.parse({"--max-model-len", "20", "-m", "x.gguf", "-tp", "2", "--enable-expert-parallel"});
  EXPECT_EQ(length, 20);
  EXPECT_EQ(model.overrides,
            (std::vector<std::string>{"engine.model=x.gguf", "engine.tensor_parallel_size=2",
                                      "engine.enable_expert_parallel=true"}));
  EXPECT_THROW(flags.parse({"--mode", "eager"}), UsageError);
  EXPECT_THAT(flags.help(), HasSubstr("its own"));
  EXPECT_THAT(flags.help(), Not(HasSubstr("cap on prompt + output tokens")));
}
