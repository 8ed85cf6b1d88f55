#!/usr/bin/env bash
# Run ON THE GPU MACHINE, from the repo root, with .gpu-deps carried: builds this tree and a base
# commit's tree side by side and measures both in one call, so a change's decode speed is compared
# on the same machine in the same run. Made here first:
#   git archive -o .gpu-deps/base.tar BASE_COMMIT     (and scripts/fetch_gpu_deps.sh)
# Stages: build both (tessera and the CUDA module; this tree's tests too when TESSERA_COMPARE_TESTS
# is 1, then its gpu tests run), then TESSERA_COMPARE_ROUNDS (3) rounds, each running the same
# `tessera bench sweep` on the base build and on this build, alternating; last a table of each
# batch's median step time over the rounds' medians for both, with the ratio. Logs and JSON go to
# $OUT (or build/gpu-compare); with TESSERA_COMPARE_PROFILE=1 each sweep also prints every
# row's step profile (--profile) into its .txt. Settings: TESSERA_COMPARE_BATCH_SIZES (1,8,32,128),
# TESSERA_COMPARE_MODEL (synthetic:llama-1b), TESSERA_COMPARE_STEPS (64), TESSERA_JOBS (16).
# Each sweep compiles into a fresh cache directory of its own, so each measures its GEMM paths
# anew; odd rounds run the base first, even rounds this build first.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
say() { echo "gpu_compare: $*"; }
out=${OUT:-build/gpu-compare}
mkdir -p "$out"
rounds=${TESSERA_COMPARE_ROUNDS:-3}
batch_sizes=${TESSERA_COMPARE_BATCH_SIZES:-1,8,32,128}
model=${TESSERA_COMPARE_MODEL:-synthetic:llama-1b}
steps=${TESSERA_COMPARE_STEPS:-64}
jobs=${TESSERA_JOBS:-16}
profile=$([[ ${TESSERA_COMPARE_PROFILE:-0} == 1 ]] && echo 1)
[[ -f .gpu-deps/base.tar ]] || { say "no .gpu-deps/base.tar: git archive -o .gpu-deps/base.tar BASE"; exit 2; }

source scripts/gpu_env.sh
base_src=/tmp/tessera-base
rm -rf "$base_src" && mkdir -p "$base_src" && tar -xf .gpu-deps/base.tar -C "$base_src"
targets=(tessera tessera-cuda)
[[ ${TESSERA_COMPARE_TESTS:-0} == 1 ]] && targets=(all)
start=$(date +%s)
# Both at once, each with half the jobs: the builds' serial tails overlap.
half=$(((jobs + 1) / 2))
(configure_cuda_build build "$out/build-head.log" > /dev/null &&
  cmake --build build -j"$half" --target "${targets[@]}" >> "$out/build-head.log" 2>&1) &
head_build=$!
(cd "$base_src" && configure_cuda_build build "$out/build-base.log" > /dev/null &&
  cmake --build build -j"$half" --target tessera tessera-cuda >> "$out/build-base.log" 2>&1) &
base_build=$!
wait "$head_build" ||
  { say "this tree did not build (build-head.log)"; tail -20 "$out/build-head.log"; exit 1; }
wait "$base_build" ||
  { say "the base did not build (build-base.log)"; tail -20 "$out/build-base.log"; exit 1; }
say "built both in $(($(date +%s) - start)) s"

status=0
if [[ ${TESSERA_COMPARE_TESTS:-0} == 1 ]]; then
  ctest --test-dir build -L gpu --output-on-failure > "$out/ctest-gpu.log" 2>&1 || status=1
  tail -n 3 "$out/ctest-gpu.log" | sed 's/^/gpu_compare: gpu tests: /'
  grep -E '\*\*\*Failed|Skipped' "$out/ctest-gpu.log" | sed 's/^/gpu_compare: /'
fi

for round in $(seq 1 "$rounds"); do
  order=(base head)
  ((round % 2 == 0)) && order=(head base)
  for side in "${order[@]}"; do
    binary=build/tessera
    [[ $side == base ]] && binary=$base_src/build/tessera
    "$binary" bench sweep --model "$model" --device cuda --modes compiled \
      --cudagraph-modes full_and_piecewise --batch-sizes "$batch_sizes" --context 128 \
      --steps "$steps" ${profile:+--profile} --json "$out/$side-$round.json" > "$out/$side-$round.txt" \
      2> "$out/$side-$round.log" || { say "$side round $round failed ($side-$round.log)"; status=1; }
  done
done

python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def medians(side):
    per_batch = {}
    for r in range(1, rounds + 1):
        try:
            rows = json.load(open(f"{out}/{side}-{r}.json"))["rows"]
        except (OSError, ValueError, KeyError):
            continue
        for row in rows:
            per_batch.setdefault(row["batch_size"], []).append(row["step_ms_median"])
    return per_batch
base, head = medians("base"), medians("head")
print("batch  base ms (min-max)        head ms (min-max)        head/base")
for batch in sorted(set(base) & set(head)):
    b, h = base[batch], head[batch]
    print(f"{batch:5d}  {statistics.median(b):.3f} ({min(b):.3f}-{max(b):.3f})  "
          f"{statistics.median(h):.3f} ({min(h):.3f}-{max(h):.3f})  "
          f"{statistics.median(h) / statistics.median(b):.3f}")
PY
exit $status
