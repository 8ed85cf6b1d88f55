// Errors: `Error` is for problems a user can fix (bad shapes, bad config); its message names the
// input and the fix. `TESSERA_CHECK` guards internal invariants and reports file:line.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace tessera {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

[[noreturn]] void throw_internal_error(const char* file, int line, const char* condition,
                                       const std::string& message);

}  // namespace tessera

#define TESSERA_CHECK(condition, ...)                                 \
  do {                                                                \
    if (!(condition))                                                 \
      ::tessera::throw_internal_error(__FILE__, __LINE__, #condition, \
                                      ::fmt::format("" __VA_ARGS__)); \
  } while (0)

// Throws a user-facing tessera::Error with a formatted message when `condition` is false.
#define TESSERA_REQUIRE(condition, ...)                                   \
  do {                                                                    \
    if (!(condition)) throw ::tessera::Error(::fmt::format(__VA_ARGS__)); \
  } while (0)
