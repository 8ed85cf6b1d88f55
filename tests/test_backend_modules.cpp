// The GPU backends are modules loaded on first use (kernels/backend_modules.h). Checked on the
// tessera binary itself: a CPU run on stories260K maps no GPU library (the dynamic loader's own
// record of every file it loads, LD_DEBUG=files) and stays under 40 MiB resident; `tessera
// devices` loads each module this build made and says why one is missing.
#include <fcntl.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "support/test_tensors.h"

using namespace tessera;
using namespace tessera::testing;
using ::testing::HasSubstr;
using ::testing::Not;

namespace fs = std::filesystem;

namespace {

// Files whose loading means a GPU runtime came in: the modules and the vendor libraries.
constexpr std::array kGpuLibraries = {"libtessera-cuda", "libtessera-hip", "libcuda.",
                                      "libcudart",       "libcublas",      "libnvrtc",
                                      "libamdhip64",     "libhsa-runtime", "libamd_comgr"};

struct Outcome {
  int status = -1;
  std::string out, err;
  std::string loader_log;  // LD_DEBUG=files output, when asked for
  long peak_rss_kib = 0;   // of the process and the children it waited for
};

std::string read_all(const fs::path& path) {
  std::stringstream text;
  text << std::ifstream(path, std::ios::binary).rdbuf();
  return text.str();
}

// Runs the tessera binary with `args` and extra environment entries ("NAME=value"), stdout and
// stderr captured apart. With `trace_loads`, the dynamic loader logs every file it maps.
Outcome run_tessera(const std::vector<std::string>& args, std::vector<std::string> environment,
                    bool trace_loads) {
  const fs::path directory = fresh_temp_dir("backend_modules");
  fs::create_directories(directory);
  const std::string out_path = directory / "stdout.txt", err_path = directory / "stderr.txt";
  if (trace_loads) {
    environment.push_back("LD_DEBUG=files");
    environment.push_back("LD_DEBUG_OUTPUT=" + (directory / "loader").string());
  }
  for (char** entry = environ; *entry != nullptr; ++entry) environment.push_back(*entry);
  // Everything the child needs is built before fork: only async-signal-safe calls follow it.
  std::vector<char*> envp, argv;
  for (std::string& entry : environment) envp.push_back(entry.data());
  envp.push_back(nullptr);
  std::string binary = TESSERA_BINARY;
  std::vector<std::string> words = args;
  argv.push_back(binary.data());
  for (std::string& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  const int out_fd = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const int err_fd = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  Outcome run;
  if (out_fd < 0 || err_fd < 0) return run;
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out_fd, STDOUT_FILENO);
    dup2(err_fd, STDERR_FILENO);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  close(out_fd);
  close(err_fd);
  int status = 0;
  rusage usage{};
  if (pid < 0 || wait4(pid, &status, 0, &usage) != pid) return run;
  run.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.peak_rss_kib = usage.ru_maxrss;
  run.out = read_all(out_path);
  run.err = read_all(err_path);
  for (const fs::directory_entry& entry : fs::directory_iterator(directory))
    if (entry.path().filename().string().starts_with("loader")) run.loader_log += read_all(entry);
  return run;
}

std::vector<std::string> stories260k_generate(const std::string& cache_dir) {
  const std::string models = std::string(TESSERA_SHARED_DIR) + "/models/stories260K";
  return {"generate",
          "--model",
          models + "/stories260K.bin",
          "--tokenizer",
          models + "/tok512.bin",
          "--prompt",
          "Once upon a time",
          "-n",
          "256",
          "-O",
          "compilation.cache_dir=" + cache_dir};
}

std::string module_path(DeviceType type) {
  return (fs::path(TESSERA_MODULE_BUILD_DIR) /
          fmt::format("libtessera-{}.so", device_type_name(type)))
      .string();
}

}  // namespace

TEST(BackendModules, CpuGenerateOnStories260KMapsNoGpuLibrary) {
  ASSERT_TRUE(fs::exists(std::string(TESSERA_SHARED_DIR) + "/models/stories260K/stories260K.bin"))
      << "the tests need ../shared/models";
  const std::string cache = fresh_temp_dir("backend_modules_cache");
  Outcome traced = run_tessera(stories260k_generate(cache), {}, /*trace_loads=*/true);
  ASSERT_EQ(traced.status, 0) << traced.err;
  EXPECT_THAT(traced.out, HasSubstr("Once upon a time"));
  // The log is real: it records the core library.
  ASSERT_THAT(traced.loader_log, HasSubstr("libtessera_kernels.so"));
  for (const char* library : kGpuLibraries)
    EXPECT_THAT(traced.loader_log, Not(HasSubstr(library))) << library << " was loaded";
}

TEST(BackendModules, CpuGenerateOnStories260KStaysUnder40MiBResident) {
  const std::string cache = fresh_temp_dir("backend_modules_rss_cache");
  // The first run compiles the generated kernels (the compiler's memory would count as the
  // process's children's); the second starts warm.
  ASSERT_EQ(run_tessera(stories260k_generate(cache), {}, false).status, 0);
  Outcome warm = run_tessera(stories260k_generate(cache), {}, false);
  ASSERT_EQ(warm.status, 0) << warm.err;
  std::printf("peak resident memory of a warm CPU run on stories260K: %.1f MiB\n",
              warm.peak_rss_kib / 1024.0);
  EXPECT_LT(warm.peak_rss_kib, 40 * 1024);
}

TEST(BackendModules, DevicesLoadsEachBuiltModuleAndSaysWhyOneIsMissing) {
  Outcome run = run_tessera({"devices"}, {}, /*trace_loads=*/true);
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("module   state"));
  struct Expected {
    DeviceType type;
    bool built;
  };
#ifdef TESSERA_CUDA
  constexpr bool kCudaBuilt = true;
#else
  constexpr bool kCudaBuilt = false;
#endif
#ifdef TESSERA_HIP
  constexpr bool kHipBuilt = true;
#else
  constexpr bool kHipBuilt = false;
#endif
  for (Expected expected : {Expected{DeviceType::cuda, kCudaBuilt}, {DeviceType::hip, kHipBuilt}}) {
    const std::string name = device_type_name(expected.type);
    SCOPED_TRACE(name);
    const std::string path = module_path(expected.type);
    if (expected.built) {
      // Found next to the core library and loaded at run time (dlopen), not linked.
      EXPECT_THAT(run.out, HasSubstr(fmt::format("{:<8} loaded from {}", name, path)));
      EXPECT_THAT(run.loader_log, HasSubstr(fmt::format("file={} [0];  dynamically loaded", path)));
    } else {
      EXPECT_THAT(run.out,
                  HasSubstr(fmt::format("{:<8} not loaded: {} not found: this build has no "
                                        "{} module",
                                        name, path, name)));
    }
  }
}

TEST(BackendModules, AMissingModuleIsExplainedWhereverADeviceIsAskedFor) {
  const std::string empty = fresh_temp_dir("backend_modules_empty");
  fs::create_directories(empty);
  const std::string environment = "TESSERA_MODULE_DIR=" + empty;
  Outcome devices = run_tessera({"devices"}, {environment}, false);
  ASSERT_EQ(devices.status, 0) << devices.err;
  EXPECT_THAT(devices.out, HasSubstr("cuda     no cuda module (below)"));
  EXPECT_THAT(devices.out,
              HasSubstr(fmt::format("cuda     not loaded: {}/libtessera-cuda.so not found: this "
                                    "build has no cuda module (configure with -DTESSERA_CUDA=ON",
                                    empty)));
  EXPECT_THAT(devices.out,
              HasSubstr(fmt::format("hip      not loaded: {}/libtessera-hip.so not found: this "
                                    "build has no hip module (configure with -DTESSERA_HIP=ON",
                                    empty)));

  Outcome generate = run_tessera({"generate", "--device", "cuda", "-n", "1"}, {environment}, false);
  EXPECT_EQ(generate.status, 1);
  EXPECT_THAT(generate.err,
              HasSubstr(fmt::format("device cuda:0 is not available: {}/libtessera-cuda.so not "
                                    "found",
                                    empty)));
}

TEST(BackendModules, VersionNamesTheModulesOfThisBuild) {
  Outcome run = run_tessera({"--version"}, {}, /*trace_loads=*/true);
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("GPU modules built: "));
#ifdef TESSERA_CUDA
  EXPECT_THAT(run.out, HasSubstr("cuda (sm_"));
#endif
#ifdef TESSERA_HIP
  EXPECT_THAT(run.out, HasSubstr("hip (gfx"));
#endif
  for (const char* library : kGpuLibraries)
    EXPECT_THAT(run.loader_log, Not(HasSubstr(library))) << library << " was loaded";
}
