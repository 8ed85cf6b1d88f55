#!/usr/bin/env bash
# Run ON THE GPU MACHINE, from the repo root, with .gpu-deps carried (made here by
# scripts/fetch_gpu_deps.sh), like scripts/gpu_check.sh: builds with CUDA for sm_90 only the
# targets of quantized weights, runs their tests (the gpu ones must run, not skip: no GPU is a
# failure here), then the quantized GEMM lab (float64 checks, then times and GB/s of the quantized
# bytes). Logs go to $OUT when set, else build/gpu-quantized/. Arguments go to the configure step.
# Exits non-zero when the build, a test or the lab's checks fail.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
jobs=${TESSERA_JOBS:-16}
build_dir=build
log_dir=${OUT:-$build_dir/gpu-quantized}
mkdir -p "$log_dir"
say() { echo "gpu_quantized: $*"; }

source scripts/gpu_env.sh

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
configure_cuda_build "$build_dir" "$log_dir/configure.log" -DTESSERA_HIP=OFF "$@" >/dev/null ||
  { say "configure failed (see $log_dir/configure.log)"; tail -20 "$log_dir/configure.log"; exit 1; }
targets=(tessera test_quantized_kernels test_quantized_gguf test_quantized_gpu quantized_gemm_lab)
cmake --build "$build_dir" -j "$jobs" --target "${targets[@]}" >"$log_dir/build.log" 2>&1 ||
  { say "build failed (see $log_dir/build.log)"; grep -E "error" "$log_dir/build.log" | head -20; exit 1; }

status=0
for test in test_quantized_kernels test_quantized_gguf test_quantized_gpu; do
  "$build_dir/tests/$test" >"$log_dir/$test.log" 2>&1
  rc=$?
  # A skipped gpu test means no GPU was seen: on this machine that is a failure, not a pass.
  if grep -q "SKIPPED.*Gpu" "$log_dir/$test.log"; then
    say "$test: gpu tests SKIPPED (no GPU seen?)"
    status=1
  fi
  say "$test: $(grep -E '^\[  (PASSED|FAILED)' "$log_dir/$test.log" | tr '\n' ' ') (exit $rc)"
  [[ $rc -eq 0 ]] || status=1
done

"$build_dir/bench/quantized_gemm_lab" >"$log_dir/quantized_gemm_lab.log" 2>&1 || status=1
cat "$log_dir/quantized_gemm_lab.log"
say "done (exit $status); logs in $log_dir"
exit $status
