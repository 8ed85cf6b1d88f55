// The rule by which a timed skinny GEMM kernel replaces the path it competes with
// (kernels/cuda/gemm/skinny_choice.h, which defines its constants): behind a lead kernel it may be
// slower than the library's GEMM by less than its credit, for what its programmatic launch
// overlaps in a step; after a splitting op, and against paths that overlap alike, it must be
// faster by its margin. The cases below assume the constants' present values.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/cuda/gemm/skinny_choice.h"

namespace tessera::gpu {
namespace {

constexpr float kMsPerUs = 1e-3f;  // the rule's times are in ms, the examples in us

TEST(SkinnyChoice, BehindALeadKernelASkinnyKernelLessThanTwoMicrosecondsSlowerIsTaken) {
  // The 1B shape's 8-row gate_up on the H100: mma_t1 26.5 us against cuBLASLt's 25.8.
  EXPECT_TRUE(
      rule_against_library(25.8f * kMsPerUs, TimedAfter::lead_kernel).replaces(26.5f * kMsPerUs));
  // The 32-row qkv: mma_t4 8.6 against 8.1.
  EXPECT_TRUE(
      rule_against_library(8.1f * kMsPerUs, TimedAfter::lead_kernel).replaces(8.6f * kMsPerUs));
  EXPECT_TRUE(
      rule_against_library(10.0f * kMsPerUs, TimedAfter::lead_kernel).replaces(11.9f * kMsPerUs));
  EXPECT_FALSE(
      rule_against_library(10.0f * kMsPerUs, TimedAfter::lead_kernel).replaces(12.1f * kMsPerUs));
}

TEST(SkinnyChoice, ALongGemmIsCreditedFivePercentOfItsTime) {
  // The 1B shape's LM head behind the final norm: mma_t4 192.2 us against 184.3 at 32 rows,
  // mma_t2 186.9 against 180.6 at 16.
  EXPECT_TRUE(
      rule_against_library(184.3f * kMsPerUs, TimedAfter::lead_kernel).replaces(192.2f * kMsPerUs));
  EXPECT_TRUE(
      rule_against_library(180.6f * kMsPerUs, TimedAfter::lead_kernel).replaces(186.9f * kMsPerUs));
  EXPECT_FALSE(
      rule_against_library(180.0f * kMsPerUs, TimedAfter::lead_kernel).replaces(189.1f * kMsPerUs));
  // The 8B shape's 8-row gate_up: mma_t1 88.3 us against 82.5 (7% slower) stays on the library.
  EXPECT_FALSE(
      rule_against_library(82.5f * kMsPerUs, TimedAfter::lead_kernel).replaces(88.3f * kMsPerUs));
  EXPECT_TRUE(
      rule_against_library(82.5f * kMsPerUs, TimedAfter::lead_kernel).replaces(86.5f * kMsPerUs));
  // Below 40 us the 2 us are the larger credit (5% of 20 us would be 1 us).
  EXPECT_TRUE(
      rule_against_library(20.0f * kMsPerUs, TimedAfter::lead_kernel).replaces(21.9f * kMsPerUs));
  EXPECT_FALSE(
      rule_against_library(20.0f * kMsPerUs, TimedAfter::lead_kernel).replaces(22.1f * kMsPerUs));
}

TEST(SkinnyChoice, AfterASplittingOpASkinnyKernelMustBeFaster) {
  // The 32-row o projection after the attention: mma_t2 10.2 us against cuBLASLt's 9.1.
  EXPECT_FALSE(
      rule_against_library(9.1f * kMsPerUs, TimedAfter::nothing).replaces(10.2f * kMsPerUs));
  EXPECT_FALSE(
      rule_against_library(10.0f * kMsPerUs, TimedAfter::nothing).replaces(9.9f * kMsPerUs));
  EXPECT_TRUE(
      rule_against_library(10.0f * kMsPerUs, TimedAfter::nothing).replaces(9.6f * kMsPerUs));
}

TEST(SkinnyChoice, PathsThatOverlapAlikeNeedTheMargin) {
  EXPECT_FALSE(SkinnyRule{10.0f * kMsPerUs}.replaces(9.9f * kMsPerUs));
  EXPECT_TRUE(SkinnyRule{10.0f * kMsPerUs}.replaces(9.6f * kMsPerUs));
}

TEST(SkinnyChoice, NothingToReplaceTakesAnySkinnyKernel) {
  for (const TimedAfter after : {TimedAfter::lead_kernel, TimedAfter::nothing})
    EXPECT_TRUE(rule_against_library(INFINITY, after).replaces(1000.0f));
  EXPECT_TRUE(SkinnyRule{INFINITY}.replaces(1000.0f));
  EXPECT_FALSE(SkinnyRule{INFINITY}.replaces(INFINITY));
}

}  // namespace
}  // namespace tessera::gpu
