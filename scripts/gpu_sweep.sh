#!/usr/bin/env bash
# Run ON THE GPU MACHINE, from the repo root, with .gpu-deps carried (scripts/fetch_gpu_deps.sh):
# the batch-size sweep of Tessera against PyTorch on the same weights, with plots, in one call.
# Stages, each under its own timeout and all inside one deadline (the device tool stops a command
# at 600 s), each printing what it does:
#   build    configure with CUDA for sm_90 (scripts/gpu_env.sh), build the tessera binary and the
#            CUDA module it loads at run time (nothing else)
#   model    save the Llama-3.2-1B shape with seeded random weights in bf16 to $model_dir
#            (bench/compare_torch.py --make-model; kept when already there)
#   tessera  build/tessera bench sweep on that folder (synthetic:llama-1b when there is none)
#   torch    bench/compare_torch.py on the same folder: transformers eager and torch.compile
#   plot     bench/plot_sweep.py: sweep.png and startup.png from both JSON files
# Everything is written to build/gpu-sweep (kept on a warm machine between calls) and copied to
# $OUT at the end when it is set (the device tool brings that back): build.log,
# tessera_sweep.{json,csv,txt,log}, torch_sweep.{json,csv,log}, sweep.png, startup.png,
# summary.txt. JSON files are rewritten after every row, so a stage cut short still leaves what
# it measured, and the plot stage runs on it. A second call on the warm machine can run later
# stages alone: the build, the model folder and the first call's JSON stay, so its plots hold both.
#
# Settings (environment): TESSERA_SWEEP_STAGES (build,model,tessera,torch,plot),
# TESSERA_SWEEP_DEADLINE (seconds for the whole call, 570), TESSERA_SWEEP_BUILD_TIMEOUT (360),
# TESSERA_SWEEP_TESSERA_TIMEOUT (300), TESSERA_SWEEP_TORCH_TIMEOUT (400),
# TESSERA_SWEEP_BATCH_SIZES (1,2,4,8,16,32,64,128,256), TESSERA_SWEEP_CONTEXT (128),
# TESSERA_SWEEP_STEPS (64), TESSERA_SWEEP_PROMPT_LEN (512), TESSERA_SWEEP_MODEL_DIR
# (/tmp/hf_models/llama-1b-sweep), TESSERA_COMMIT (the commit the reports name; the copy on the
# GPU machine has no .git), TESSERA_JOBS (16). Arguments go to the tessera sweep.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2

started=$(date +%s)
stages=${TESSERA_SWEEP_STAGES:-build,model,tessera,torch,plot}
deadline=${TESSERA_SWEEP_DEADLINE:-570}
batch_sizes=${TESSERA_SWEEP_BATCH_SIZES:-1,2,4,8,16,32,64,128,256}
context=${TESSERA_SWEEP_CONTEXT:-128}
steps=${TESSERA_SWEEP_STEPS:-64}
prompt_len=${TESSERA_SWEEP_PROMPT_LEN:-512}
model_dir=${TESSERA_SWEEP_MODEL_DIR:-/tmp/hf_models/llama-1b-sweep}
jobs=${TESSERA_JOBS:-16}
build_dir=build
out=$build_dir/gpu-sweep
mkdir -p "$out"
# $OUT gets a copy of everything, however the call ends.
[[ -n ${OUT:-} ]] && trap 'cp -r "$out"/. "$OUT"/' EXIT
plot_reserve=45  # seconds kept for the plot stage and the summary

say() { echo "gpu_sweep: $*"; }
wants() { [[ ",$stages," == *",$1,"* ]]; }
elapsed() { echo $(($(date +%s) - started)); }

# The seconds a stage may run: its own limit, within what the deadline leaves (less the reserve
# for the plots when they are still to come).
budget_for() {
  local limit=$1 left
  left=$((deadline - $(elapsed)))
  wants plot && left=$((left - plot_reserve))
  ((left < limit)) && limit=$left
  echo $((limit > 0 ? limit : 0))
}

rows=()
failed=0
# run_stage NAME LIMIT LOG command...: the command (a program or an exported function) under
# `timeout`, its output in LOG and on stdout; a row for the summary.
run_stage() {
  local name=$1 limit=$2 log=$3 stage_start status result
  shift 3
  if ((limit <= 0)); then
    rows+=("$(printf '%-10s %-34s' "$name" "skipped: the deadline has passed")")
    failed=1
    return 1
  fi
  say "stage $name (at most ${limit} s, $(elapsed) s in): $*"
  stage_start=$(date +%s)
  timeout "$limit" bash -c '"$@"' stage "$@" 2>&1 | tee "$log"
  status=${PIPESTATUS[0]}
  result=ok
  ((status == 124)) && result="timed out after ${limit} s"
  ((status != 0 && status != 124)) && result="failed (exit $status)"
  [[ $result == ok ]] || failed=1
  rows+=("$(printf '%-10s %-34s %5d s' "$name" "$result" $(($(date +%s) - stage_start)))")
  return "$status"
}

source scripts/gpu_env.sh
command -v nvidia-smi >/dev/null &&
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader |
  sed 's/^/gpu_sweep: GPU: /'

if wants build; then
  build_and_configure() {
    configure_cuda_build "$build_dir" /dev/null &&
      cmake --build "$build_dir" -j"$jobs" --target tessera tessera-cuda
  }
  export -f configure_cuda_build build_and_configure
  export build_dir jobs
  run_stage build "$(budget_for "${TESSERA_SWEEP_BUILD_TIMEOUT:-360}")" "$out/build.log" \
    build_and_configure
fi

have_torch=0
if python3 -c 'import torch, transformers' 2>/dev/null; then
  have_torch=1
else
  say "python3 cannot import torch and transformers: no model folder, no PyTorch comparison"
fi

if wants model && ((have_torch)); then
  if [[ -f $model_dir/config.json ]]; then
    say "model: $model_dir is already there"
  else
    run_stage model "$(budget_for 300)" "$out/model.log" \
      python3 bench/compare_torch.py --make-model "$model_dir"
  fi
fi
model=$model_dir
if [[ ! -f $model_dir/config.json ]]; then
  model=synthetic:llama-1b
  say "no $model_dir: the Tessera sweep runs synthetic:llama-1b (same shape, other random weights)"
fi

if wants tessera; then
  if [[ -x $build_dir/tessera ]]; then
    # The table alone in tessera_sweep.txt; the logs in tessera_sweep.log.
    sweep() {
      "$build_dir/tessera" bench sweep --model "$model" --device cuda \
        --batch-sizes "$batch_sizes" --context "$context" --steps "$steps" \
        --prompt-len "$prompt_len" --json "$out/tessera_sweep.json" \
        --csv "$out/tessera_sweep.csv" "$@" >"$out/tessera_sweep.txt"
      local status=$?
      cat "$out/tessera_sweep.txt"
      return $status
    }
    say "tessera: bench sweep --model $model --batch-sizes $batch_sizes --context $context" \
      "--steps $steps --prompt-len $prompt_len $*"
    export -f sweep
    export build_dir model batch_sizes context steps prompt_len out
    rm -f "$out"/tessera_sweep.*  # nothing stale in the plots
    run_stage tessera "$(budget_for "${TESSERA_SWEEP_TESSERA_TIMEOUT:-300}")" \
      "$out/tessera_sweep.log" sweep "$@"
  else
    rows+=("$(printf '%-10s %-34s' tessera "skipped: no $build_dir/tessera")")
    failed=1
  fi
fi

if wants torch; then
  if ((have_torch)) && [[ -f $model_dir/config.json ]]; then
    rm -f "$out"/torch_sweep.*
    run_stage torch "$(budget_for "${TESSERA_SWEEP_TORCH_TIMEOUT:-400}")" "$out/torch_sweep.log" \
      python3 bench/compare_torch.py --model "$model_dir" --batch-sizes "$batch_sizes" \
      --context "$context" --steps "$steps" --prompt-len "$prompt_len" \
      --json "$out/torch_sweep.json" --csv "$out/torch_sweep.csv"
  else
    rows+=("$(printf '%-10s %-34s' torch "skipped: no torch/transformers or model")")
  fi
fi

if wants plot; then
  reports=()
  for report in "$out/tessera_sweep.json" "$out/torch_sweep.json"; do
    [[ -s $report ]] && reports+=("$report")
  done
  plotter=
  for python in python3 /usr/bin/python3; do
    "$python" -c 'import matplotlib' 2>/dev/null && { plotter=$python; break; }
  done
  if ((${#reports[@]} == 0)); then
    rows+=("$(printf '%-10s %-34s' plot "skipped: no sweep JSON")")
  elif [[ -z $plotter ]]; then
    rows+=("$(printf '%-10s %-34s' plot "skipped: no matplotlib (plot here)")")
  else
    plot_limit=$((deadline - $(elapsed)))
    ((plot_limit > 60)) && plot_limit=60
    ((plot_limit < 10)) && plot_limit=10
    run_stage plot "$plot_limit" "$out/plot.log" \
      "$plotter" bench/plot_sweep.py "${reports[@]}" --out-dir "$out"
  fi
fi

{
  echo
  echo "=== gpu_sweep summary ($(elapsed) s) ==="
  printf '  %s\n' "${rows[@]}"
  [[ -f $out/tessera_sweep.txt ]] &&
    sed -n '/^=== tessera bench sweep/,$p' "$out/tessera_sweep.txt" | sed 's/^/  /'
  [[ -f $out/torch_sweep.log ]] &&
    sed -n '/^=== transformers sweep/,$p' "$out/torch_sweep.log" | sed 's/^/  /'
  echo "files: $out${OUT:+ (copied to \$OUT)}"
} | tee "$out/summary.txt"
exit "$failed"
