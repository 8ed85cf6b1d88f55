// The on-disk form of a kernel cache entry, shared by the CPU and NVRTC caches: the compiled bytes
// followed by a 24-byte trailer (their length, their FNV-1a hash, a magic), written under a
// temporary name in the cache directory and renamed into place. A process killed at any moment
// leaves no entry or a whole one (and perhaps a temporary file, removed once stale); a reader
// checks the trailer, so a truncated, foreign or older-format file is rebuilt, never used. A
// shared object stays loadable with the trailer after it: dlopen() reads only what its headers
// point at.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tessera {

// A new, empty file next to `path` whose name is unique to this call (ending in ".tmp"), for a
// writer (or a compiler) to fill before seal_cache_entry().
std::string create_temporary_entry(const std::string& path);
// Appends the trailer to `temporary` (holding the entry's bytes) and renames it to `path`.
// Throws naming the cache directory setting when it cannot be written.
void seal_cache_entry(const std::string& temporary, const std::string& path);
// Writes `bytes` as the entry at `path`.
void write_cache_entry(const std::string& path, std::string_view bytes);
// Writes a plain file (no trailer) under a temporary name and renames it to `path`: for the
// sources kept next to entries, which error messages point at.
void write_file_atomically(const std::string& path, std::string_view bytes);

// The bytes of the entry at `path`, without its trailer; nullopt when there is no file or it is
// not a whole entry.
std::optional<std::string> read_cache_entry(const std::string& path);
// True when `path` holds a whole entry (for entries used in place, as shared objects are).
bool is_whole_cache_entry(const std::string& path);

// Removes the temporary files of killed writers from `directory`: those untouched for an hour
// (a live writer is never that slow). Once per directory per process.
void remove_stale_temporaries(const std::string& directory);

// Creates a kernel cache's `directory` (an error naming it and compilation.cache_dir when it
// cannot) and removes its stale temporaries; returns it.
std::string prepare_cache_directory(std::string directory);

}  // namespace tessera
