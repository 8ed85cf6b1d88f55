#include "support/error_of.h"

#include <gtest/gtest.h>

#include <exception>

#include "runtime/check.h"

namespace tessera::testing {

std::string error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& error) {
    return error.what();
  } catch (const std::exception& other) {
    ADD_FAILURE() << "expected tessera::Error, got another exception: " << other.what();
    return {};
  }
  ADD_FAILURE() << "expected tessera::Error, but the call succeeded";
  return {};
}

}  // namespace tessera::testing
