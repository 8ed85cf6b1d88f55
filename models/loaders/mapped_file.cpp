#include "models/loaders/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "kernels/check.h"

namespace tessera::loaders {

MappedFile::MappedFile(std::string path) : path_(std::move(path)) {
  int descriptor = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  TESSERA_REQUIRE(descriptor >= 0, "{}: cannot open: {}", path_, std::strerror(errno));
  struct stat info {};
  if (::fstat(descriptor, &info) != 0) {
    int error = errno;
    ::close(descriptor);
    throw Error(fmt::format("{}: cannot stat: {}", path_, std::strerror(error)));
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(descriptor);
    throw Error(fmt::format("{}: not a regular file", path_));
  }
  size_ = static_cast<size_t>(info.st_size);
  if (size_ > 0) {  // mmap of zero bytes fails; an empty file maps to nothing
    void* address = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, descriptor, 0);
    if (address == MAP_FAILED) {
      int error = errno;
      ::close(descriptor);
      throw Error(fmt::format("{}: cannot map {} bytes: {}", path_, size_, std::strerror(error)));
    }
    data_ = static_cast<std::byte*>(address);
  }
  ::close(descriptor);  // the mapping stays valid without the descriptor
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(data_, size_);
}

}  // namespace tessera::loaders
