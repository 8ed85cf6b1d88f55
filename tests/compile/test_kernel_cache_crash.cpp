// Crash safety of the on-disk kernel cache (compile/codegen/cache_entry.h): a process killed
// (SIGKILL, compilers and all) at random moments while it compiles and writes entries never
// leaves an entry that a later process reads half-written; entries are checked whole when read;
// the temporary files of killed writers are removed once stale.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "compile/codegen/cache_entry.h"
#include "compile/codegen/kernel_cache.h"
#include "support/test_tensors.h"
#include "tools/crash_test_kernels.h"

extern char** environ;

namespace tessera {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int kKernels = 3;

// Starts the writer in a process group of its own (so that its compilers die with it).
pid_t start_writer(const std::string& cache_dir, bool verify) {
  std::vector<std::string> args = {TESSERA_KERNEL_CACHE_WRITER, cache_dir,
                                   std::to_string(kKernels)};
  if (verify) args.push_back("--verify");
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);
  pid_t pid = -1;
  const int error = posix_spawn(&pid, argv[0], nullptr, &attributes, argv.data(), environ);
  posix_spawnattr_destroy(&attributes);
  EXPECT_EQ(error, 0) << "cannot start " << argv[0];
  return pid;
}

int wait_for(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

// Every entry in the cache directory is whole and holds one of the test kernels; returns how
// many temporary files killed writers left.
int check_entries(const std::string& directory) {
  int temporaries = 0;
  if (!fs::exists(directory)) return 0;
  for (const auto& item : fs::directory_iterator(directory)) {
    const std::string path = item.path().string();
    const std::string extension = item.path().extension().string();
    if (extension == ".tmp") {
      ++temporaries;
    } else if (extension == ".so") {
      EXPECT_TRUE(is_whole_cache_entry(path)) << path << " is a half-written entry";
      void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      EXPECT_NE(handle, nullptr) << path << ": " << dlerror();
      if (handle == nullptr) continue;
      void* function = dlsym(handle, "tessera_kernel");
      EXPECT_NE(function, nullptr) << path;
      if (function == nullptr) continue;
      const int64_t value = testing::call_crash_test_kernel(function);
      bool known = false;
      for (int k = 0; k < kKernels; ++k) known |= value == testing::crash_test_kernel_value(k);
      EXPECT_TRUE(known) << path << " holds a kernel storing " << value;
    } else if (extension == ".cpp") {
      std::ifstream file(path);
      const std::string text((std::istreambuf_iterator<char>(file)),
                             std::istreambuf_iterator<char>());
      bool known = false;
      for (int k = 0; k < kKernels; ++k) known |= text == testing::crash_test_kernel_source(k);
      EXPECT_TRUE(known) << path << " is a partial source";
    } else {
      ADD_FAILURE() << "unexpected file " << path;
    }
  }
  return temporaries;
}

TEST(KernelCacheCrash, KilledWritersLeaveWholeEntriesOrNone) {
  // A cold run, timed, to spread the kills over one.
  const std::string timed = testing::fresh_temp_dir("cache_crash_timing");
  const auto start = Clock::now();
  ASSERT_EQ(wait_for(start_writer(timed, /*verify=*/true)), 0);
  const auto cold = Clock::now() - start;

  std::mt19937 random(20261123);
  constexpr int kRounds = 10;
  int rounds_with_temporaries = 0;
  for (int round = 0; round < kRounds; ++round) {
    const std::string dir = testing::fresh_temp_dir("cache_crash_" + std::to_string(round));
    // A random moment within the round's tenth of a cold run.
    const double share = (round + std::uniform_real_distribution<double>(0, 1)(random)) / kRounds;
    const pid_t writer = start_writer(dir, false);
    std::this_thread::sleep_for(std::chrono::duration_cast<Clock::duration>(cold * share));
    kill(-writer, SIGKILL);
    wait_for(writer);
    rounds_with_temporaries += check_entries(dir + "/cpu") > 0;
    // A later process finds whatever the killed one left whole, compiles the rest, and needs to
    // rebuild nothing.
    const int status = wait_for(start_writer(dir, /*verify=*/true));
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "round " << round;
  }
  // The kills did land while entries were being written.
  EXPECT_GT(rounds_with_temporaries, 0);
}

TEST(KernelCacheCrash, EntriesAreCheckedWholeWhenRead) {
  const std::string dir = testing::fresh_temp_dir("cache_entry_check");
  fs::create_directories(dir);
  const std::string path = dir + "/entry.bin";
  const std::string payload =
      "\x7f"
      "ELF and the rest of an image";
  write_cache_entry(path, payload);
  EXPECT_EQ(read_cache_entry(path), payload);
  std::string bytes;
  {
    std::ifstream file(path, std::ios::binary);
    bytes.assign((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  }
  // Cut at every length, or one byte changed: never read as an entry.
  for (size_t length = 0; length < bytes.size(); ++length) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes.substr(0, length);
    EXPECT_FALSE(read_cache_entry(path)) << "cut at " << length;
  }
  std::string changed = bytes;
  changed[3] ^= 1;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << changed;
  EXPECT_FALSE(read_cache_entry(path));
  // A file in the old format (the bare image) is not an entry either.
  std::ofstream(path, std::ios::binary | std::ios::trunc) << payload;
  EXPECT_FALSE(read_cache_entry(path));
  EXPECT_FALSE(read_cache_entry(dir + "/missing"));
}

TEST(KernelCacheCrash, StaleTemporariesAreRemoved) {
  const std::string dir = testing::fresh_temp_dir("cache_stale_temporaries");
  fs::create_directories(dir + "/cpu");
  const std::string stale = dir + "/cpu/0123.so.a1b2c3.tmp";
  const std::string fresh = dir + "/cpu/4567.so.d4e5f6.tmp";
  std::ofstream(stale) << "half";
  std::ofstream(fresh) << "being written";
  fs::last_write_time(stale, fs::file_time_type::clock::now() - std::chrono::hours(2));
  CpuKernelCache cache(dir);
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(fresh));  // a live writer's file
}

}  // namespace
}  // namespace tessera
