// The compiler settings the compile tests share: a fresh kernel cache, plans sized for 64 tokens,
// and pass dumps under $TESSERA_TEST_DUMP when it is set.
#pragma once

#include <string>

#include "compile/compiler.h"

namespace tessera::testing {

CompilerOptions test_compiler_options(const std::string& cache_dir);

}  // namespace tessera::testing
