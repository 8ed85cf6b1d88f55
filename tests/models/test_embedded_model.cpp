// The embedded default model (models/embedded/stories260K.gguf): found beside the libraries,
// named by embedded:NAME, and what a newcomer's first command runs.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "engine/config.h"
#include "models/embedded_model.h"
#include "runtime/check.h"
#include "support/loader_files.h"
#include "support/server_process.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(EmbeddedModel, IsTheDefaultModel) {
  EXPECT_EQ(EngineConfig{}.model.model, "embedded:stories260K");
  EXPECT_EQ(load_run_config("").model.model, "embedded:stories260K");
}

TEST(EmbeddedModel, ResolvesToTheCopyBesideTheLibraries) {
  const std::string path = resolve_model_path("embedded:stories260K");
  EXPECT_THAT(path, HasSubstr("/models/stories260K.gguf"));
  EXPECT_TRUE(std::filesystem::is_regular_file(path)) << path;
  EXPECT_EQ(std::filesystem::file_size(path),
            std::filesystem::file_size(std::string(TESSERA_SOURCE_DIR) +
                                       "/models/embedded/stories260K.gguf"));
  EXPECT_EQ(resolve_model_path("some/folder"), "some/folder");  // other strings pass through
}

TEST(EmbeddedModel, AnUnknownOrMalformedNameIsAnErrorNamingIt) {
  try {
    resolve_model_path("embedded:stories15M");
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("embedded:stories15M"));
    EXPECT_THAT(error.what(), HasSubstr("stories15M.gguf"));
    EXPECT_THAT(error.what(), HasSubstr("--model PATH"));
  }
  for (const char* bad : {"embedded:", "embedded:../stories260K", "embedded:a/b"})
    EXPECT_THROW(resolve_model_path(bad), Error) << bad;
}

TEST(EmbeddedModel, TheFirstCommandPrintsTheStory) {
  const testing::CommandResult result = testing::run_shell(
      fmt::format("'{}' generate --prompt 'Once upon a time' -n 40", TESSERA_BINARY));
  ASSERT_EQ(result.status, 0) << result.output;
  EXPECT_THAT(result.output, StartsWith(testing::kStoriesGreedy));
}

}  // namespace
}  // namespace tessera
