#!/usr/bin/env bash
# WIP probe (not for merge): quantized lab q4_k timing, Nsight Compute of the q4_k gate_up M=1
# gemv kernels, and the decode sweep of 1B/8B bf16 and q4_k_m. Logs to $OUT.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
source scripts/gpu_env.sh
configure_cuda_build build "$OUT/configure.log" -DTESSERA_HIP=OFF >/dev/null || { tail "$OUT/configure.log"; exit 1; }
cmake --build build -j 16 --target tessera quantized_gemm_lab >"$OUT/build.log" 2>&1 || { grep -E "error" "$OUT/build.log" | head -20; exit 1; }
echo "built at $SECONDS s"
build/bench/quantized_gemm_lab --only q4_k --skip-checks >"$OUT/lab.log" 2>&1
grep -E "q4_k|copy" "$OUT/lab.log"
echo "lab done at $SECONDS s"
ncu=/usr/local/cuda/bin/ncu
for kernel in dp4a_gemv staged_gemv; do
  $ncu --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats \
    --section MemoryWorkloadAnalysis -k "regex:$kernel" --launch-skip 5 --launch-count 1 \
    build/bench/quantized_gemm_lab --only "q4_k gate_up" --skip-checks --quick >"$OUT/ncu_$kernel.txt" 2>&1
  grep -E "Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Grid Size|Stall|Warp Cycles Per Issued|Issued Warp|L1/TEX Hit|L2 Hit" "$OUT/ncu_$kernel.txt" | head -40
done
echo "ncu done at $SECONDS s"
: >"$OUT/sweep.txt"
for model in llama-1b llama-1b:q4_k_m llama-8b llama-8b:q4_k_m; do
  echo "## synthetic:$model" >>"$OUT/sweep.txt"
  timeout 200 build/tessera bench sweep --model "synthetic:$model" --device cuda --modes compiled \
    --cudagraph-modes full_and_piecewise --batch-sizes 1,8,32 --context 128 --steps 64 \
    >>"$OUT/sweep.txt" 2>&1 || echo "sweep of $model failed"
done
grep -vE "^\[|^$" "$OUT/sweep.txt" | tail -40
echo "done at $SECONDS s"
