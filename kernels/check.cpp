#include "runtime/check.h"

namespace tessera {

void throw_internal_error(const char* file, int line, const char* condition,
                          const std::string& message) {
  throw InternalError(fmt::format("internal error at {}:{}: check '{}' failed{}{}", file, line,
                                  condition, message.empty() ? "" : ": ", message));
}

}  // namespace tessera
