// Files a user names as a model, tokenizer or config are opened here, and only when they are
// regular files: a named pipe would block the open (or the read) forever, and a directory or a
// device reads as garbage or as an error with no file named. Whole-file reads are bounded, so a
// huge file is an error naming it rather than an allocation failure.
#pragma once

#include <cstddef>
#include <string>

namespace tessera {

// The most bytes read_input_file() reads by default: far above any config or tokenizer file.
inline constexpr size_t kMaxInputFileBytes = size_t{1} << 30;

struct InputFile {
  int descriptor = -1;  // open read-only, close-on-exec; the caller closes it
  size_t size = 0;
};

// Opens `path` without blocking and checks that it is a regular file. Throws tessera::Error
// naming the path and saying what it is instead (a directory, a named pipe, ...); `what` names
// the role ("model", "tokenizer", "config file") in that message.
InputFile open_input_file(const std::string& path, const char* what);

// The whole contents of the regular file `path`; throws naming it when it cannot be read or holds
// more than `max_bytes`.
std::string read_input_file(const std::string& path, const char* what,
                            size_t max_bytes = kMaxInputFileBytes);

}  // namespace tessera
