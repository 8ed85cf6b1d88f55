// The rule by which a timed skinny GEMM kernel replaces the path it competes with
// (kernels/cuda/skinny_choice.h): behind a lead kernel it may be up to 10% slower than the
// library's GEMM, for what its programmatic launch overlaps in a step; after a splitting op, and
// against paths that overlap alike, it must be 3% faster.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/cuda/skinny_choice.h"

namespace tessera::gpu {
namespace {

TEST(SkinnyChoice, BehindALeadKernelASkinnyKernelUpToTenPercentSlowerThanTheLibraryIsTaken) {
  const float margin = skinny_margin_against_library(TimedAfter::lead_kernel);
  // The 32-row qkv projection on the H100: mma_t4 8.5 us against cuBLASLt's 8.2.
  EXPECT_TRUE(skinny_replaces(8.5f, 8.2f, margin));
  EXPECT_TRUE(skinny_replaces(10.9f, 10.0f, margin));
  EXPECT_FALSE(skinny_replaces(11.1f, 10.0f, margin));
  // The 32-row gate_up: mma_t4 30.8 us against 25.2 stays on the library.
  EXPECT_FALSE(skinny_replaces(30.8f, 25.2f, margin));
}

TEST(SkinnyChoice, AfterASplittingOpASkinnyKernelMustBeFaster) {
  const float margin = skinny_margin_against_library(TimedAfter::nothing);
  // The 32-row o projection after the attention: mma_t2 10.0 us against cuBLASLt's 9.0.
  EXPECT_FALSE(skinny_replaces(10.0f, 9.0f, margin));
  EXPECT_FALSE(skinny_replaces(9.9f, 10.0f, margin));
  EXPECT_TRUE(skinny_replaces(9.6f, 10.0f, margin));
}

TEST(SkinnyChoice, NothingToReplaceTakesAnySkinnyKernel) {
  for (const TimedAfter after : {TimedAfter::lead_kernel, TimedAfter::nothing})
    EXPECT_TRUE(skinny_replaces(1000.0f, INFINITY, skinny_margin_against_library(after)));
  EXPECT_TRUE(skinny_replaces(1000.0f, INFINITY, kSkinnyMargin));
  EXPECT_FALSE(skinny_replaces(INFINITY, INFINITY, kSkinnyMargin));
}

}  // namespace
}  // namespace tessera::gpu
