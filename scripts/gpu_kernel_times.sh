#!/usr/bin/env bash
# Run ON THE GPU MACHINE after scripts/gpu_check.sh built the tree: times every kernel of one
# replayed decode step with Nsight Compute, as the CUDA graph runs them (graph nodes, no launch
# latency), for each batch size, and prints the per-kernel table and the per-class summary
# (scripts/kernel_times.py). ncu runs each kernel alone with the L2 flushed first and the clocks
# left as they are, so the sum is what the step's kernels cost without overlap; compare it with
# the sweep's median step (printed before each table) to see the time between kernels. ncu's
# slower launches can change which path a GEMM shape measures as fastest on its first call: pass
# `--linear library` (or a skinny variant, see `tessera bench --help`) to fix them.
#
# Settings (environment): TESSERA_PROFILE_BATCH_SIZES (1,8,32), TESSERA_PROFILE_MODEL
# (synthetic:llama-1b), TESSERA_PROFILE_CONTEXT (128); extra arguments go to `tessera bench sweep`
# (-O key=value to compare configurations).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
say() { echo "gpu_kernel_times: $*"; }
source scripts/gpu_env.sh
out=${OUT:-build/kernel-times}
mkdir -p "$out"
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
[[ -x $ncu ]] || { say "ncu not found" >&2; exit 2; }
status=0
IFS=, read -ra sizes <<<"${TESSERA_PROFILE_BATCH_SIZES:-1,8,32}"
for batch in "${sizes[@]}"; do
  log="$out/kernels-b$batch.csv"
  # Full graphs only, so that every replay is one decode step: 3 warm-up steps, then 16 timed;
  # the 10th replay is a timed step.
  TESSERA_PROFILE_REPLAY=10 timeout 300 "$ncu" --profile-from-start off --graph-profiling node \
    --clock-control none --metrics gpu__time_duration.sum --csv --print-units base --log-file "$log" \
    build/tessera bench sweep --model "${TESSERA_PROFILE_MODEL:-synthetic:llama-1b}" --device cuda \
    --modes compiled --cudagraph-modes full --batch-sizes "$batch" \
    --context "${TESSERA_PROFILE_CONTEXT:-128}" --warmup 3 --steps 16 "$@" \
    >"$out/sweep-b$batch.txt" 2>"$out/sweep-b$batch.log" || status=1
  echo "== batch $batch: the sweep (under ncu) =="
  tail -n 12 "$out/sweep-b$batch.txt"
  echo "== batch $batch: kernels of one replayed step =="
  python3 scripts/kernel_times.py "$log" | tee "$out/kernels-b$batch.txt" || status=1
done
exit $status
