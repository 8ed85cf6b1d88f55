// When a timed skinny kernel (skinny_gemm.h) replaces the path it competes with: the library's
// GEMM in a linear's measured paths (gemm.cpp), or the activation kernel and linear of a gated
// linear (activation_and_mul_linear.cpp). Host-only and free of the GPU runtime, so the CPU tests
// check the rule (tests/test_skinny_choice.cpp).
#pragma once

namespace tessera::gpu {

// What a timed launch follows in its graph (ColdTimer::median_graph_ms): a short lead kernel on
// one SM, as a GEMM follows a norm or an activation in a decode step (a programmatic launch loads
// its weights beside it), or nothing, as a GEMM follows the attention, whose kernels spread over
// the SMs (the GEMM's blocks find little room beside them; see gemm.cpp).
enum class TimedAfter { lead_kernel, nothing };

// Where both paths overlap their neighbours alike (a gated linear's two steps, whose linear may be
// a skinny kernel itself; another cuBLASLt algorithm against the heuristic's first), the new one
// must be faster by this factor: single cold runs vary by a few percent, and a tie is not worth a
// change.
inline constexpr float kSkinnyMargin = 0.97f;

// Against the library's GEMM behind a lead kernel, a skinny kernel is taken unless the library is
// more than 10% faster. A decode step replays the skinny kernel launched programmatically between
// other programmatic kernels: its first weight loads overlap the kernel before it, its tail the
// kernel after it, and it asks for the next GEMM's weight into L2, none of which a timing of one
// launch sees; cuBLASLt's kernels do none of it. On the H100 (1B shape, context 128, `tessera
// bench sweep ... --cudagraph-modes full_and_piecewise`, two runs per factor in one call) the step
// at batch 4 / 8 / 16 / 32 / 64 took 1.18-1.19 / 1.21 / 1.34 / 1.48-1.52 / 1.62-1.64 ms with 1.10
// and 1.15 against 1.22-1.23 / 1.27-1.33 / 1.45-1.47 / 1.52-1.53 / 1.67-1.68 with 0.97; batch 1
// runs skinny kernels either way, and at 128 rows every shape keeps cuBLASLt. 1.20 made batch 32
// 8% slower than 1.10: the o projection after the attention and the 32-row gate_up then took
// skinny kernels 12-16% slower than the library.
// After a splitting op a skinny kernel overlaps nothing before it, so kSkinnyMargin holds there.
inline constexpr float kSkinnyOverlapMargin = 1.10f;

// The margin (skinny_replaces) a skinny kernel timed behind `after` gets against the library GEMM.
constexpr float skinny_margin_against_library(TimedAfter after) {
  return after == TimedAfter::lead_kernel ? kSkinnyOverlapMargin : kSkinnyMargin;
}

// Whether a skinny kernel taking `skinny_ms` replaces a path taking `replaced_ms`, with `margin`.
constexpr bool skinny_replaces(float skinny_ms, float replaced_ms, float margin) {
  return skinny_ms < margin * replaced_ms;
}

}  // namespace tessera::gpu
