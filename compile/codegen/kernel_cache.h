// The on-disk kernel cache: compiled artifacts keyed by a hash of (source, target, compiler
// version, flags). A warm start compiles nothing; identical kernels (the middle layers' pieces)
// compile once per process; entries are written whole under a temporary name and renamed, and
// checked when read (cache_entry.h), so neither a concurrent process nor one killed while writing
// leaves an entry that is used half-written; an entry that fails the check or to load is rebuilt.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace tessera {

struct KernelCacheStats {
  size_t compiled = 0;     // compiler runs
  size_t disk_hits = 0;    // loaded from the cache directory
  size_t memory_hits = 0;  // shared with an identical kernel already loaded
  size_t rebuilt = 0;      // corrupt entries replaced
};

// $XDG_CACHE_HOME/tessera, else ~/.cache/tessera, unless `configured` is set.
std::string resolve_cache_dir(const std::string& configured);

class CpuKernelCache {
 public:
  explicit CpuKernelCache(std::string cache_dir);
  // The loaded `tessera_kernel` symbol of `source`; compiles when needed. Compiler failures throw
  // an Error with the source's path and the compiler's message.
  void* load(const std::string& source, const std::string& name);
  const KernelCacheStats& stats() const { return stats_; }
  const std::string& directory() const { return directory_; }
  static std::string compiler_identity();  // "c++ (Debian 12.2.0-14) 12.2.0 -O3 -march=native"

 private:
  std::string directory_;
  KernelCacheStats stats_;
};

}  // namespace tessera
