#include "fuzz/fuzz_support.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <typeinfo>

#include "runtime/check.h"

namespace tessera::fuzz {
namespace fs = std::filesystem;

const std::string& scratch_dir() {
  // Never destroyed: the exit handler that removes the directory runs after static destructors.
  static const std::string* const dir = [] {
    const fs::path base =
        fs::is_directory("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    const fs::path path = base / ("tessera-fuzz-" + std::to_string(getpid()));
    fs::create_directories(path);
    std::atexit([] {
      std::error_code ignored;
      fs::remove_all(scratch_dir(), ignored);
    });
    return new std::string(path.string());
  }();
  return *dir;
}

std::string write_scratch_file(const std::string& relative_path, std::string_view bytes) {
  const fs::path path = fs::path(scratch_dir()) / relative_path;
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  require(out.good(), "cannot write a scratch file");
  return path.string();
}

void quiet_logs() {
  spdlog::set_level(spdlog::level::off);
}

void require(bool condition, std::string_view message) {
  if (condition) return;
  std::fprintf(stderr, "fuzz property violated: %.*s\n", static_cast<int>(message.size()),
               message.data());
  std::abort();
}

void expect_clean_failure(const std::function<void()>& body,
                          std::initializer_list<std::string_view> names) {
  try {
    body();
  } catch (const Error& error) {
    const std::string_view message = error.what();
    for (std::string_view name : names)
      if (message.find(name) != std::string_view::npos) return;
    std::fprintf(stderr, "fuzz: an error names none of the inputs:\n%s\n", error.what());
    std::abort();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "fuzz: not a tessera::Error (%s): %s\n", typeid(error).name(),
                 error.what());
    std::abort();
  }
}

uint64_t interesting_number(std::minstd_rand& random, uint64_t near) {
  switch (random() % 4) {
    case 0:
      return near + (random() % 17) - 8;
    case 1:
      return random() % 64;
    default: {
      const unsigned bit = random() % 64;
      const uint64_t power = uint64_t{1} << bit;
      return power + (random() % 3) - 1;  // 2^k - 1, 2^k, 2^k + 1
    }
  }
}

size_t store_mutation(const std::string& bytes, uint8_t* data, size_t size, size_t max_size) {
  if (bytes.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, bytes.data(), bytes.size());
  return bytes.size();
}

}  // namespace tessera::fuzz

extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int*, char***) {
  tessera::fuzz::quiet_logs();
  return 0;
}
