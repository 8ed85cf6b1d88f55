#!/usr/bin/env bash
# Run ON THE GPU MACHINE, from the repo root, with .gpu-deps carried (made here by
# scripts/fetch_gpu_deps.sh), like scripts/gpu_check.sh: builds with CUDA for sm_90 only the
# targets of FP8, runs their tests (the gpu ones must run, not skip: no GPU is a failure here),
# then the torch reference of FP8 checkpoints (tests/hf_reference/compare_fp8.py, fp8_compare.txt),
# the FP8 linear lab (checks against the CPU kernel, then times beside bf16), the decode sweep of
# the 1B and 8B shapes in bf16, FP8 per channel (--quantization fp8) and FP8 per 128x128 block
# (synthetic:NAME:fp8_block) at batch 1, 8, 32 and 128 (sweep.txt), and the same shapes' decode at
# a 2048-token context with a bf16 and an FP8 KV cache (kv_sweep.txt). TESSERA_FP8_STEPS picks
# stages ("tests reference lab sweep kv_sweep"). Logs go to $OUT when set, else build/gpu-fp8/.
# Arguments go to the configure step. Exits non-zero when the build, a test, the reference, the
# lab's checks or a sweep fail.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
jobs=${TESSERA_JOBS:-16}
build_dir=build
log_dir=${OUT:-$build_dir/gpu-fp8}
mkdir -p "$log_dir"
say() { echo "gpu_fp8: $*"; }

source scripts/gpu_env.sh

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
configure_cuda_build "$build_dir" "$log_dir/configure.log" -DTESSERA_HIP=OFF "$@" >/dev/null ||
  { say "configure failed (see $log_dir/configure.log)"; tail -20 "$log_dir/configure.log"; exit 1; }
targets=(tessera tessera-cuda test_fp8 test_fp8_kv_cache test_op_conformance test_attention
  fp8_linear_lab logits_dump)
cmake --build "$build_dir" -j "$jobs" --target "${targets[@]}" >"$log_dir/build.log" 2>&1 ||
  { say "build failed (see $log_dir/build.log)"; grep -E "error" "$log_dir/build.log" | head -20; exit 1; }

steps=" ${TESSERA_FP8_STEPS:-tests reference lab sweep kv_sweep} "
status=0
if [[ $steps == *" tests "* ]]; then
  run_test_binaries "$build_dir" "$log_dir" gpu_fp8 test_fp8 test_fp8_kv_cache test_op_conformance \
    test_attention || status=1
  grep -hE "FAILED|GPU against CPU|op conformance on" \
    "$log_dir"/test_{fp8,fp8_kv_cache,op_conformance,attention}.log | head -20
fi

if [[ $steps == *" reference "* ]]; then
  OUT="$log_dir" timeout 900 python3 tests/hf_reference/compare_fp8.py \
    --binary "$build_dir/bench/logits_dump" >"$log_dir/fp8_compare.log" 2>&1 ||
    { say "compare_fp8.py failed (see $log_dir/fp8_compare.log)"; status=1; }
  tail -40 "$log_dir/fp8_compare.log"
fi

if [[ $steps == *" lab "* ]]; then
  "$build_dir/bench/fp8_linear_lab" ${TESSERA_FP8_LAB_ARGS:-} >"$log_dir/fp8_linear_lab.log" 2>&1 ||
    status=1
  cat "$log_dir/fp8_linear_lab.log"
fi

if [[ $steps == *" sweep "* ]]; then
  : >"$log_dir/sweep.txt"
  # bf16, FP8 per channel (--quantization fp8), FP8 per 128x128 block (synthetic's fp8_block)
  for model in llama-1b llama-8b; do
    for weights in none fp8 fp8_block; do
      name="synthetic:$model" quantization=$weights
      [[ $weights == fp8_block ]] && name="synthetic:$model:fp8_block" quantization=none
      echo "## $name --quantization $quantization" >>"$log_dir/sweep.txt"
      timeout 300 "$build_dir/tessera" bench sweep --model "$name" --device cuda \
        --quantization "$quantization" --modes compiled --cudagraph-modes full_and_piecewise \
        --batch-sizes 1,8,32,128 --context 128 --steps 64 >>"$log_dir/sweep.txt" 2>&1 ||
        { say "sweep of $name failed"; status=1; }
    done
  done
  cat "$log_dir/sweep.txt"
fi
if [[ $steps == *" kv_sweep "* ]]; then
  : >"$log_dir/kv_sweep.txt"
  for model in llama-1b llama-8b; do
    for kv_cache_dtype in auto fp8; do
      echo "## synthetic:$model --kv-cache-dtype $kv_cache_dtype" >>"$log_dir/kv_sweep.txt"
      timeout 300 "$build_dir/tessera" bench sweep --model "synthetic:$model" --device cuda \
        --kv-cache-dtype "$kv_cache_dtype" --modes compiled --cudagraph-modes full_and_piecewise \
        --batch-sizes 1,8,32,128 --context 2048 --steps 64 >>"$log_dir/kv_sweep.txt" 2>&1 ||
        { say "sweep of $model with the $kv_cache_dtype KV cache failed"; status=1; }
    done
  done
  grep -E "^compiled|^##|KV cache:" "$log_dir/kv_sweep.txt"
fi
say "done (exit $status); logs in $log_dir"
exit $status
