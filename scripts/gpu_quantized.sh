#!/usr/bin/env bash
# Run ON THE GPU MACHINE, from the repo root, with .gpu-deps carried (made here by
# scripts/fetch_gpu_deps.sh), like scripts/gpu_check.sh: builds with CUDA for sm_90 only the
# targets of quantized weights, runs their tests (the gpu ones must run, not skip: no GPU is a
# failure here), then the quantized GEMM lab (float64 checks, then times and GB/s of the quantized
# bytes), then the decode sweep of the 1B and 8B shapes in bf16 and quantized by Tessera to Q8_0
# and Q4_K_M (synthetic:NAME:FORMAT) at batch 1, 8 and 32 (sweep.txt: step ms and the weights'
# GB/s against the copy bandwidth). TESSERA_QUANT_STEPS picks stages ("tests lab sweep").
# Logs go to $OUT when set, else build/gpu-quantized/. Arguments go to the configure step.
# Exits non-zero when the build, a test, the lab's checks or a sweep fail.
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

steps=" ${TESSERA_QUANT_STEPS:-tests lab sweep} "
status=0
if [[ $steps == *" tests "* ]]; then
  run_test_binaries "$build_dir" "$log_dir" gpu_quantized test_quantized_kernels \
    test_quantized_gguf test_quantized_gpu || status=1
fi

if [[ $steps == *" lab "* ]]; then
  "$build_dir/bench/quantized_gemm_lab" >"$log_dir/quantized_gemm_lab.log" 2>&1 || status=1
  cat "$log_dir/quantized_gemm_lab.log"
fi

if [[ $steps == *" sweep "* ]]; then
  : >"$log_dir/sweep.txt"
  for model in llama-1b llama-1b:q8_0 llama-1b:q4_k_m llama-8b llama-8b:q8_0 llama-8b:q4_k_m; do
    echo "## synthetic:$model" >>"$log_dir/sweep.txt"
    timeout 300 "$build_dir/tessera" bench sweep --model "synthetic:$model" --device cuda \
      --modes compiled --cudagraph-modes full_and_piecewise --batch-sizes 1,8,32 --context 128 \
      --steps 64 >>"$log_dir/sweep.txt" 2>&1 || { say "sweep of $model failed"; status=1; }
  done
  cat "$log_dir/sweep.txt"
fi
say "done (exit $status); logs in $log_dir"
exit $status
