#!/usr/bin/env bash
# Run ON THE GPU MACHINE, from the repo root, with .gpu-deps carried: builds tessera, the CUDA
# module and test_speculative_decoding, runs the test (its GPU case must run, not skip), then
# measures prompt lookup on the GPU: stories260K (a real model whose stories repeat), greedy, 256
# tokens after a repetitive prompt, `tessera generate --device cuda` (compiled, full and piecewise graphs)
# without speculation and with 1, 3 and 5 proposed tokens, TESSERA_SPEC_ROUNDS rounds (3)
# alternating, in TESSERA_SPEC_DTYPE (f32; in bf16 the verifying forward's kernels round
# differently from a decode step's, so near-ties can go the other way); prints each run's decode
# tokens/s, whether its text equals the plain run's, and what was accepted.
# Outputs under $OUT (else build/gpu-speculative). Exits non-zero when the build or the test
# fails, or a text differs.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
out=${OUT:-build/gpu-speculative}
mkdir -p "$out"
say() { echo "gpu_speculative: $*"; }
source scripts/gpu_env.sh
configure_cuda_build build "$out/configure.log" -DTESSERA_HIP=OFF >/dev/null ||
  { say "configure failed (see $out/configure.log)"; exit 1; }
cmake --build build -j"${TESSERA_JOBS:-16}" --target tessera tessera-cuda \
  test_speculative_decoding >"$out/build.log" 2>&1 ||
  { say "build failed"; grep -E "error" "$out/build.log" | head -20; exit 1; }
status=0
run_test_binaries build "$out" gpu_speculative test_speculative_decoding || status=1
# A story told twice and begun a third time: its continuation copies spans of the prompt, and the
# model's own repetitions later on, the workload prompt lookup is for.
prompt="Lily and Tom went to the park. They played on the swings and the slide. Then they ate cake."
prompt="$prompt $prompt Lily and Tom went to the park."
spec='{"method": "ngram", "num_speculative_tokens": K, "prompt_lookup_min": 1, "prompt_lookup_max": 3}'
for round in $(seq "${TESSERA_SPEC_ROUNDS:-3}"); do
  for k in 0 1 3 5; do
    args=()
    ((k > 0)) && args=(--speculative-config "${spec/K/$k}")
    build/tessera generate --device cuda --dtype "${TESSERA_SPEC_DTYPE:-f32}" --prompt "$prompt" \
      -n 256 --temperature 0 "${args[@]}" \
      >"$out/text_k$k.txt" 2>"$out/log_k${k}_r$round.txt" ||
      { say "generate with k=$k failed"; tail -5 "$out/log_k${k}_r$round.txt"; status=1; }
    same=yes
    cmp -s "$out/text_k$k.txt" "$out/text_k0.txt" || { same=no; status=1; }
    say "round $round k=$k $(grep -o 'decode [0-9.]* tokens/s' "$out/log_k${k}_r$round.txt")" \
      "same text: $same $(grep -o '[0-9]* of [0-9]* proposed tokens accepted.*' \
        "$out/log_k${k}_r$round.txt")"
  done
done
exit $status
