// A read-only memory map of a whole file. Loaders read tensor bytes straight from the map, so a
// checkpoint is never held twice in anonymous memory (the mapped pages are page cache).
#pragma once

#include <cstddef>
#include <string>

namespace tessera::loaders {

class MappedFile {
 public:
  // Throws naming the path and the system error when the file cannot be opened or mapped, or is
  // not a regular file (input_file.h); `what` names its role in those messages.
  explicit MappedFile(std::string path, const char* what = "model file");
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tessera::loaders
