#include "compile/codegen/cache_entry.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>

#include "compile/ir/graph.h"
#include "runtime/check.h"

namespace tessera {
namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'T', 'S', 'R', 'K', 'C', 'E', '0', '1'};
constexpr size_t kTrailerBytes = 24;

void put_u64(std::string& out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

uint64_t get_u64(const char* bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(bytes[i]);
  return value;
}

std::string trailer_of(std::string_view payload) {
  std::string trailer;
  put_u64(trailer, payload.size());
  put_u64(trailer, fnv1a_hash(payload));
  trailer.append(kMagic, sizeof(kMagic));
  return trailer;
}

[[noreturn]] void fail(const std::string& path, const char* doing, int error) {
  throw Error(
      fmt::format("cannot {} the kernel cache entry {}: {} (set compilation.cache_dir to "
                  "a writable directory)",
                  doing, path, std::strerror(error)));
}

// Reads the whole file; nullopt when it cannot be opened.
std::optional<std::string> read_whole(const std::string& path) {
  const int descriptor = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (descriptor < 0) return std::nullopt;
  std::string bytes;
  char buffer[1 << 16];
  while (true) {
    const ssize_t count = ::read(descriptor, buffer, sizeof(buffer));
    if (count < 0 && errno == EINTR) continue;
    if (count <= 0) break;
    bytes.append(buffer, static_cast<size_t>(count));
  }
  ::close(descriptor);
  return bytes;
}

void write_all(int descriptor, std::string_view bytes, const std::string& path) {
  while (!bytes.empty()) {
    const ssize_t count = ::write(descriptor, bytes.data(), bytes.size());
    if (count < 0 && errno == EINTR) continue;
    if (count <= 0) {
      const int error = errno;
      ::close(descriptor);
      ::unlink(path.c_str());
      fail(path, "write", error);
    }
    bytes.remove_prefix(static_cast<size_t>(count));
  }
}

// Renames the finished temporary file into place: readers see the old entry or the new one.
// No fsync: a file cut short by a power loss fails the reader's check and is rebuilt.
void publish(const std::string& temporary, const std::string& path) {
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temporary.c_str());
    fail(path, "rename into place", error);
  }
}

}  // namespace

std::string create_temporary_entry(const std::string& path) {
  std::string name = path + ".XXXXXX.tmp";
  const int descriptor = ::mkstemps(name.data(), 4);
  if (descriptor < 0) fail(path, "create a temporary file for", errno);
  ::close(descriptor);
  return name;
}

void seal_cache_entry(const std::string& temporary, const std::string& path) {
  const std::optional<std::string> payload = read_whole(temporary);
  if (!payload) fail(temporary, "read", errno);
  const int descriptor = ::open(temporary.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (descriptor < 0) fail(temporary, "append to", errno);
  write_all(descriptor, trailer_of(*payload), temporary);
  ::close(descriptor);
  publish(temporary, path);
}

void write_file_atomically(const std::string& path, std::string_view bytes) {
  const std::string temporary = create_temporary_entry(path);
  const int descriptor = ::open(temporary.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (descriptor < 0) fail(temporary, "open", errno);
  write_all(descriptor, bytes, temporary);
  ::close(descriptor);
  publish(temporary, path);
}

void write_cache_entry(const std::string& path, std::string_view bytes) {
  std::string entry(bytes);
  entry += trailer_of(bytes);
  write_file_atomically(path, entry);
}

std::optional<std::string> read_cache_entry(const std::string& path) {
  std::optional<std::string> bytes = read_whole(path);
  if (!bytes || bytes->size() < kTrailerBytes) return std::nullopt;
  const size_t payload_size = bytes->size() - kTrailerBytes;
  const char* trailer = bytes->data() + payload_size;
  if (std::memcmp(trailer + 16, kMagic, sizeof(kMagic)) != 0 || get_u64(trailer) != payload_size ||
      get_u64(trailer + 8) != fnv1a_hash(std::string_view(*bytes).substr(0, payload_size)))
    return std::nullopt;
  bytes->resize(payload_size);
  return bytes;
}

bool is_whole_cache_entry(const std::string& path) {
  return read_cache_entry(path).has_value();
}

void remove_stale_temporaries(const std::string& directory) {
  static std::mutex mutex;
  static std::set<std::string> cleaned;
  std::lock_guard lock(mutex);
  if (!cleaned.insert(directory).second) return;
  const auto stale_before = fs::file_time_type::clock::now() - std::chrono::hours(1);
  std::error_code error;
  for (fs::directory_iterator it(directory, error), end; !error && it != end; it.increment(error)) {
    const fs::path& path = it->path();
    std::error_code ignored;
    if (path.extension() != ".tmp" || !it->is_regular_file(ignored)) continue;
    const auto modified = fs::last_write_time(path, ignored);
    if (!ignored && modified < stale_before) fs::remove(path, ignored);
  }
}

std::string prepare_cache_directory(std::string directory) {
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  TESSERA_REQUIRE(!error,
                  "cannot create the kernel cache directory {}: {} (set compilation.cache_dir)",
                  directory, error.message());
  remove_stale_temporaries(directory);
  return directory;
}

}  // namespace tessera
