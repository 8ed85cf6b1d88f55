#include "support/compile_options.h"

#include <cstdlib>

namespace tessera::testing {

CompilerOptions test_compiler_options(const std::string& cache_dir) {
  CompilerOptions compiler;
  compiler.config.cache_dir = cache_dir;
  compiler.max_dynamic_size = 64;
  const char* dump_dir = std::getenv("TESSERA_TEST_DUMP");
  compiler.config.dump_dir = dump_dir != nullptr ? dump_dir : "";
  return compiler;
}

}  // namespace tessera::testing
