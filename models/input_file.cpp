#include "models/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "runtime/check.h"

namespace tessera {
namespace {

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a named pipe";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

}  // namespace

InputFile open_input_file(const std::string& path, const char* what) {
  // O_NONBLOCK: opening a named pipe for reading would otherwise wait for a writer.
  const int descriptor = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  TESSERA_REQUIRE(descriptor >= 0, "{}: cannot open the {}: {}", path, what, std::strerror(errno));
  struct stat info {};
  if (::fstat(descriptor, &info) != 0) {
    const int error = errno;
    ::close(descriptor);
    throw Error(fmt::format("{}: cannot stat the {}: {}", path, what, std::strerror(error)));
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(descriptor);
    throw Error(
        fmt::format("{}: is {}; the {} must be a regular file", path, kind_of(info.st_mode), what));
  }
  // Regular files ignore O_NONBLOCK, but clear it so that nothing downstream sees EAGAIN.
  const int flags = ::fcntl(descriptor, F_GETFL);
  if (flags >= 0) ::fcntl(descriptor, F_SETFL, flags & ~O_NONBLOCK);
  return InputFile{descriptor, static_cast<size_t>(info.st_size)};
}

std::string read_input_file(const std::string& path, const char* what, size_t max_bytes) {
  const InputFile file = open_input_file(path, what);
  if (file.size > max_bytes) {
    ::close(file.descriptor);
    throw Error(fmt::format("{}: the {} holds {} bytes, more than the {} this reader accepts", path,
                            what, file.size, max_bytes));
  }
  std::string contents(file.size, '\0');
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t count = ::read(file.descriptor, contents.data() + done, contents.size() - done);
    if (count < 0 && errno == EINTR) continue;
    if (count <= 0) {
      const int error = errno;
      ::close(file.descriptor);
      throw Error(fmt::format("{}: reading the {} stopped after {} of {} bytes{}{}", path, what,
                              done, contents.size(), count < 0 ? ": " : "",
                              count < 0 ? std::strerror(error) : ""));
    }
    done += static_cast<size_t>(count);
  }
  ::close(file.descriptor);
  return contents;
}

}  // namespace tessera
