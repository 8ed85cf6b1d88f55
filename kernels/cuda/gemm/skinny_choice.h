// When a timed skinny kernel (skinny_gemm.h) replaces the path it competes with: the library's
// GEMM in a linear's measured paths (gemm.cpp), or the activation kernel and linear of a gated
// linear (activation_and_mul_linear.cpp). Host-only and free of the GPU runtime, so the CPU tests
// check the rule (tests/kernels/test_skinny_choice.cpp).
#pragma once

namespace tessera::gpu {

// What a timed launch follows in its graph (ColdTimer::median_graph_ms): a short lead kernel on
// one SM, as a GEMM follows a norm or an activation in a decode step (a programmatic launch loads
// its weights beside it), or nothing, as a GEMM follows the attention, whose kernels spread over
// the SMs (the GEMM's blocks find little room beside them; see gemm.cpp).
enum class TimedAfter { lead_kernel, nothing };

// Where neither path gets the credit below, the new one must be faster by this factor: single cold
// runs vary by a few percent, and a tie is not worth a change. That is another cuBLASLt algorithm
// against the heuristic's first; a skinny kernel right after a splitting op, which overlaps nothing
// before it; and a gated linear's fused kernel against its two steps. (The two steps' linear is
// usually a skinny kernel itself, so both overlap alike; where it is cuBLASLt the fused kernel is
// owed the credit and does not get it. The linear-prologue pass that makes gated linears is off by
// default.)
inline constexpr float kSkinnyMargin = 0.97f;

// Against the library's GEMM behind a lead kernel, a skinny kernel is taken unless the library is
// faster by at least the larger of a time and a share of its own time. A decode step replays the
// skinny kernel launched programmatically between other programmatic kernels: its first weight
// loads overlap the kernel before it, its tail the kernel after it, and it asks for the next
// GEMM's weight into L2, none of which a timing of one launch sees, and none of which cuBLASLt's
// kernels do. A time, because what the overlap saves is about the same at every kernel boundary
// whatever the GEMM's size (a factor credited the 8B shape's large GEMMs too much); a share,
// because long GEMMs (the LM head) a few percent slower alone still ran the step faster
// (docs/performance.md "The skinny-kernel credit").
inline constexpr float kSkinnyOverlapCreditMs = 0.002f;
inline constexpr float kSkinnyOverlapCreditShare = 0.05f;

// When a skinny kernel taking `ms` replaces the path it competes with: ms < margin x replaced_ms
// + credit_ms.
struct SkinnyRule {
  float replaced_ms;  // the path's time; INFINITY when there is none
  float margin = kSkinnyMargin;
  float credit_ms = 0.0f;
  constexpr bool replaces(float ms) const { return ms < margin * replaced_ms + credit_ms; }
};

// The rule against the library's GEMM taking `library_ms`, timed behind `after`.
constexpr SkinnyRule rule_against_library(float library_ms, TimedAfter after) {
  if (after == TimedAfter::nothing) return SkinnyRule{.replaced_ms = library_ms};
  const float share = kSkinnyOverlapCreditShare * library_ms;  // INFINITY with no library path
  return SkinnyRule{.replaced_ms = library_ms,
                    .margin = 1.0f,
                    .credit_ms = share > kSkinnyOverlapCreditMs ? share : kSkinnyOverlapCreditMs};
}

}  // namespace tessera::gpu
