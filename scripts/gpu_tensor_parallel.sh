#!/usr/bin/env bash
# Run ON A GPU MACHINE WITH TWO GPUS OR MORE (the device kind nvidia-h200-x2), from the repo root,
# with .gpu-deps carried: tensor parallelism's checks and benchmark in one call, each stage inside
# one deadline (the device tool stops a command at 600 s):
#   build    configure with CUDA for sm_90, build the tessera binary, the CUDA module (a missing
#            module fails the script) and test_tensor_parallel
#   test     test_tensor_parallel's gpu tests (TP=2 bf16 logits against TP=1, graphs replayed,
#            from an empty kernel cache) and its cpu tests; a hang dumps every thread's stack
#   serve    the server tests (curl and the OpenAI Node client) against `tessera serve -tp 2`
#   bench    `tessera bench sweep --profile` of the decode step at batch 1, 32 and 128, compiled
#            with full_and_piecewise graphs, TP=1 and TP=2, for each model of
#            TESSERA_TP_MODELS (synthetic:llama-1b,synthetic:llama-8b); the profile's
#            "collectives" row is the all-reduce time per step
# Logs go to $OUT (or build/gpu-tp); summary.txt holds the sweep tables and profile rows.
# Settings: TESSERA_TP_STAGES (build,test,serve,bench), TESSERA_TP_DEADLINE (570),
# TESSERA_TP_MODELS, TESSERA_JOBS (32). NCCL comes from PyTorch's pip install
# (nvidia-nccl-cu13); NCCL_NVLS_ENABLE=0 keeps NVLink multicast off on these shared machines.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
started=$(date +%s)
stages=${TESSERA_TP_STAGES:-build,test,serve,bench}
deadline=${TESSERA_TP_DEADLINE:-570}
models=${TESSERA_TP_MODELS:-synthetic:llama-1b,synthetic:llama-8b}
jobs=${TESSERA_JOBS:-32}
out=${OUT:-build/gpu-tp}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
say() { echo "gpu_tp: $*" | tee -a "$out/summary.txt"; }
left() { echo $((deadline - ($(date +%s) - started))); }
has() { [[ ",$stages," == *",$1,"* ]]; }
source scripts/gpu_env.sh
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader | sed 's/^/gpu_tp: GPU /'
# NCCL from PyTorch's pip install, when the loader cannot find it by name.
if [[ -z ${TESSERA_NCCL_LIBRARY:-} ]]; then
  nccl=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
  [[ -f $nccl ]] && export TESSERA_NCCL_LIBRARY=$nccl && say "NCCL: $nccl"
fi
status=0
if has build; then
  start=$(date +%s)
  configure_cuda_build build "$out/build.log" >/dev/null &&
    timeout "$(left)" cmake --build build -j"$jobs" --target tessera tessera-cuda \
      test_tensor_parallel test_server >>"$out/build.log" 2>&1
  rc=$?
  say "build: exit $rc in $(($(date +%s) - start)) s"
  ((rc == 0)) || { tail -30 "$out/build.log"; exit 1; }
fi
# Without the CUDA module every GPU step would skip or fail: that is an error here, not a pass.
[[ -f build/libtessera-cuda.so ]] || { say "no build/libtessera-cuda.so: the CUDA module is not built"; exit 1; }

# run_watched SECONDS LOG COMMAND...: runs the command with its output in LOG; one still running
# after SECONDS is taken for a hang: every thread's stack goes to LOG.stacks (gdb, when the
# machine has it), then it is killed. Returns the command's status (124 for a hang).
run_watched() {
  local seconds=$1 log=$2
  shift 2
  "$@" >"$log" 2>&1 &
  local pid=$! waited=0
  while kill -0 "$pid" 2>/dev/null && ((waited < seconds)); do
    sleep 1
    waited=$((waited + 1))
  done
  if kill -0 "$pid" 2>/dev/null; then
    say "$1: still running after $seconds s, taken for a hang; stacks in $(basename "$log").stacks"
    if command -v gdb >/dev/null; then
      timeout 60 gdb -p "$pid" -batch -ex "thread apply all bt" >"$log.stacks" 2>&1
    else
      for task in /proc/"$pid"/task/*; do
        echo "== thread $(basename "$task"): $(cat "$task/comm") $(cat "$task/wchan" 2>/dev/null)"
      done >"$log.stacks"
    fi
    kill -9 "$pid"
    wait "$pid" 2>/dev/null
    return 124
  fi
  wait "$pid"
}
if has test; then
  start=$(date +%s)
  # Every test makes its own empty kernel cache where a cold start matters; the whole binary
  # takes under a minute, so three is a hang.
  run_watched "$(($(left) < 180 ? $(left) : 180))" "$out/test.log" build/tests/test_tensor_parallel
  rc=$?
  ((rc == 0)) || status=1
  say "test_tensor_parallel: exit $rc in $(($(date +%s) - start)) s"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |difference|OK \]|FAILED \]" "$out/test.log" | tee -a "$out/summary.txt"
fi
if has serve; then
  start=$(date +%s)
  TESSERA_SERVE_TEST_ARGS="--device cuda -tp 2" timeout "$(left)" \
    build/tests/test_server >"$out/serve.log" 2>&1
  rc=$?
  ((rc == 0)) || status=1
  say "test_server with tessera serve -tp 2: exit $rc in $(($(date +%s) - start)) s"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) " "$out/serve.log" | tee -a "$out/summary.txt"
fi
if has bench; then
  IFS=, read -r -a model_list <<<"$models"
  for model in "${model_list[@]}"; do
    for tp in 1 2; do
      name=$(echo "$model" | tr ':/' '__')_tp$tp
      start=$(date +%s)
      ((($(left)) > 20)) || { say "bench $model TP=$tp: no time left"; continue; }
      timeout "$(left)" build/tessera bench sweep -m "$model" --device cuda -tp "$tp" \
        --modes compiled --cudagraph-modes full_and_piecewise --batch-sizes 1,32,128 \
        --steps 32 --prompt-len 128 --profile --json "$out/$name.json" >"$out/$name.txt" \
        2>"$out/$name.log"
      rc=$?
      ((rc == 0)) || status=1
      say "bench $model TP=$tp: exit $rc in $(($(date +%s) - start)) s"
      grep -E "^ *(compiled|batch|---)|collectives|gemm |attention " "$out/$name.txt" |
        head -40 | tee -a "$out/summary.txt"
    done
  done
fi
say "done in $(($(date +%s) - started)) s, status $status"
exit $status
