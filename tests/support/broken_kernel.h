// What every GPU run-time compiler's error must say about a kernel that does not compile: its
// name, the saved source file, the compiler's log and the target option it compiled for.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "compile/codegen/gpu_kernel_cache.h"
#include "runtime/check.h"

namespace tessera::testing {

inline void expect_broken_kernel_error(GpuKernelCache& cache, const std::string& source_extension,
                                       const std::string& target_option) {
  try {
    cache.image("extern \"C\" __global__ void tessera_kernel() { undeclared_name = 1; }\n",
                "broken_kernel");
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), ::testing::HasSubstr("broken_kernel"));
    EXPECT_THAT(error.what(), ::testing::HasSubstr(source_extension));
    EXPECT_THAT(error.what(), ::testing::HasSubstr("undeclared_name"));  // the compiler's log
    EXPECT_THAT(error.what(), ::testing::HasSubstr(target_option));
  }
}

}  // namespace tessera::testing
