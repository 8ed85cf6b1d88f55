#!/usr/bin/env bash
# Run ON THE GPU MACHINE, from the repo root, with .gpu-deps carried (made here by
# scripts/fetch_gpu_deps.sh), like scripts/gpu_check.sh: builds with CUDA for sm_90 only the
# targets of mixtures of experts, runs their tests (the gpu ones must run, not skip: no GPU is a
# failure here: fused_moe's kernels against float64, quantized experts too, the tiny Mixtral and
# Qwen3-MoE checkpoints against transformers eagerly and in captured graphs, op conformance, the
# quantized GGUF fixtures against the CPU), then the lab
# (bench/moe_gpu_lab: the kernels checked and timed at Qwen3-30B-A3B and Mixtral expert shapes,
# moe_gpu_lab.txt) and the decode sweep of the Qwen3-30B-A3B shape (synthetic:qwen3-30b-a3b, bf16,
# batch 1, 8, 32 and 128, sweep.txt). TESSERA_MOE_STEPS picks stages ("tests lab sweep"). Logs go
# to $OUT when set, else build/gpu-moe/. Arguments go to the configure step. Exits non-zero when
# the build, a test, the lab's checks or the sweep fail. The stage "torch" (not run by default)
# measures transformers on the same shape (bench/compare_torch.py --shape qwen3-30b-a3b;
# TESSERA_MOE_EXPERTS_IMPLEMENTATION, TESSERA_MOE_TORCH_TIMEOUT), torch_sweep.{txt,json}.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
jobs=${TESSERA_JOBS:-16}
build_dir=build
log_dir=${OUT:-$build_dir/gpu-moe}
mkdir -p "$log_dir"
say() { echo "gpu_moe: $*"; }

source scripts/gpu_env.sh

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
configure_cuda_build "$build_dir" "$log_dir/configure.log" -DTESSERA_HIP=OFF "$@" >/dev/null ||
  { say "configure failed (see $log_dir/configure.log)"; tail -20 "$log_dir/configure.log"; exit 1; }
targets=(tessera tessera-cuda test_fused_moe_gpu test_mixture_of_experts test_op_conformance
  test_quantized_gpu moe_gpu_lab)
cmake --build "$build_dir" -j "$jobs" --target "${targets[@]}" >"$log_dir/build.log" 2>&1 ||
  { say "build failed (see $log_dir/build.log)"; grep -E "error" "$log_dir/build.log" | head -20; exit 1; }

steps=" ${TESSERA_MOE_STEPS:-tests lab sweep} "
status=0
if [[ $steps == *" tests "* ]]; then
  run_test_binaries "$build_dir" "$log_dir" gpu_moe test_fused_moe_gpu test_mixture_of_experts \
    test_op_conformance test_quantized_gpu || status=1
  grep -hE "FAILED|Failure|error|op conformance on" \
    "$log_dir"/test_{fused_moe_gpu,mixture_of_experts,op_conformance,quantized_gpu}.log | head -30
fi

if [[ $steps == *" lab "* ]]; then
  "$build_dir/bench/moe_gpu_lab" ${TESSERA_MOE_LAB_ARGS:-} >"$log_dir/moe_gpu_lab.txt" 2>&1 ||
    { say "moe_gpu_lab failed"; status=1; }
  cat "$log_dir/moe_gpu_lab.txt"
fi

if [[ $steps == *" sweep "* ]]; then
  timeout 400 "$build_dir/tessera" bench sweep --model synthetic:qwen3-30b-a3b --device cuda \
    --modes compiled --cudagraph-modes full_and_piecewise --batch-sizes 1,8,32,128 --context 128 \
    --steps 64 >"$log_dir/sweep.txt" 2>&1 || { say "sweep of synthetic:qwen3-30b-a3b failed"; status=1; }
  grep -vE "^\[" "$log_dir/sweep.txt" | tail -30
fi
if [[ $steps == *" torch "* ]]; then
  # transformers on the same shape, built in memory (bench/compare_torch.py --shape): eager and
  # torch.compile(mode="reduce-overhead") with the experts backend named (grouped_mm by default:
  # the eager loop over experts cannot be compiled whole).
  timeout "${TESSERA_MOE_TORCH_TIMEOUT:-500}" python3 bench/compare_torch.py --shape qwen3-30b-a3b \
    --experts-implementation "${TESSERA_MOE_EXPERTS_IMPLEMENTATION:-grouped_mm}" \
    --modes eager,compile --batch-sizes 1,8,32,128 --context 128 --steps 32 \
    --json "$log_dir/torch_sweep.json" >"$log_dir/torch_sweep.txt" 2>&1 ||
    { say "transformers on qwen3-30b-a3b failed or ran out of time"; status=1; }
  tail -30 "$log_dir/torch_sweep.txt"
fi
exit $status
