// The message of the error a call throws, for tests that check what errors say.
#pragma once

#include <functional>
#include <string>

namespace tessera::testing {

// The message of the tessera::Error `call` throws; records a test failure (and returns "") when
// it throws nothing or another exception.
std::string error_of(const std::function<void()>& call);

}  // namespace tessera::testing
