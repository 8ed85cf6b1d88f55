#include "models/loaders/mapped_file.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "models/input_file.h"
#include "runtime/check.h"

namespace tessera::loaders {

MappedFile::MappedFile(std::string path, const char* what) : path_(std::move(path)) {
  const InputFile file = open_input_file(path_, what);
  size_ = file.size;
  if (size_ > 0) {  // mmap of zero bytes fails; an empty file maps to nothing
    void* address = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, file.descriptor, 0);
    if (address == MAP_FAILED) {
      const int error = errno;
      ::close(file.descriptor);
      throw Error(fmt::format("{}: cannot map the {} ({} bytes): {}", path_, what, size_,
                              std::strerror(error)));
    }
    data_ = static_cast<std::byte*>(address);
  }
  ::close(file.descriptor);  // the mapping stays valid without the descriptor
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(data_, size_);
}

}  // namespace tessera::loaders
