#!/usr/bin/env bash
# Run ON THE GPU MACHINE, from the repo root, with .gpu-deps carried (made here by
# scripts/fetch_gpu_deps.sh): unpacks the Debian libraries into a prefix, builds with CUDA for
# sm_90, runs the gpu tests, then the cpu tests, then every benchmark binary in build/bench, and
# prints a summary table last. Logs go to $OUT when it is set (the device tool brings them back),
# otherwise to build/gpu-check/. A file that fails to compile does not stop the rest: what built is
# still tested and benchmarked. Last come the model checks: logits against transformers
# (compare_gpu.py), a short batch-size sweep (tessera bench sweep) and the step profile of compiled
# mode with full_and_piecewise graphs at batch 1 and 128 (--profile). Exits non-zero when the
# build, a test, a benchmark or a model check fails. (The full sweep against PyTorch, with plots:
# scripts/gpu_sweep.sh.)
#
# Settings (environment): TESSERA_DEPS_PREFIX (/tmp/tessera-deps), TESSERA_JOBS (16),
# TESSERA_BENCH_TIMEOUT (seconds per benchmark, 120), TESSERA_COMPARE_TIMEOUT (600),
# TESSERA_SWEEP_TIMEOUT (300), TESSERA_PROFILE_TIMEOUT (180), TESSERA_STEPS (tests,bench,models;
# add sanitizer for the gpu tests under compute-sanitizer, see its section),
# TESSERA_SANITIZER_TIMEOUT (seconds per sanitizer run, 1200), TESSERA_SANITIZER_API_ERROR_TESTS,
# TESSERA_TEST_LABELS (the ctest labels the tests step runs, "gpu cpu").
# Arguments go to the configure step.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2

# Which stages run after the build: any of tests, bench, models (all by default) and sanitizer
# (only when named: it is slow), so that one call can build and test and a second call on the
# warm machine can benchmark or run the sanitizer.
steps=${TESSERA_STEPS:-tests,bench,models}
jobs=${TESSERA_JOBS:-16}
bench_timeout=${TESSERA_BENCH_TIMEOUT:-120}
build_dir=build
log_dir=${OUT:-$build_dir/gpu-check}
mkdir -p "$log_dir"

say() { echo "gpu_check: $*"; }

# The Debian libraries unpacked into a prefix, ../shared linked, the build environment exported.
source scripts/gpu_env.sh

if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader |
    sed 's/^/gpu_check: GPU: /'
else
  say "nvidia-smi not found; gpu tests will report skipped"
fi

# --- Configure and build. The build keeps going past a failing file (-k 0), so that one broken
# target still leaves the tests and benchmarks that did build to run in this same call. ---
build_log="$log_dir/build.log"
start=$(date +%s)
configure_cuda_build "$build_dir" "$build_log" "$@"
configure_status=$?
build_status=$configure_status
if ((configure_status == 0)); then
  cmake --build "$build_dir" -j"$jobs" -- -k 0 2>&1 | tee -a "$build_log"
  build_status=${PIPESTATUS[0]}
fi
build_seconds=$(($(date +%s) - start))

# The GPU backend is a module the binary loads at run time: `tessera devices` shows the file it
# loaded and the GPUs it found (devices.txt, and in the summary).
rm -f "$log_dir/devices.txt"
[[ -x $build_dir/tessera ]] && "$build_dir/tessera" devices 2>&1 | tee "$log_dir/devices.txt"

# --- Tests: gpu first (one at a time: they share the device), then cpu. ---
# Prints "passed failed skipped" read off a ctest log.
count_tests() {
  local total passed skipped
  total=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#[0-9]+: ' "$1")
  passed=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#[0-9]+: .* Passed +[0-9.]+ sec' "$1")
  skipped=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#[0-9]+: .*\*\*\*Skipped' "$1")
  echo "$passed $((total - passed - skipped)) $skipped"
}

declare -A test_counts=()
declare -A test_status=()
bench_rows=()
bench_failed=0
if ((configure_status == 0)); then
  for label in ${TESSERA_TEST_LABELS:-gpu cpu}; do
    [[ $steps == *tests* ]] || continue
    log="$log_dir/ctest-$label.log"
    parallel=1
    [[ $label == cpu ]] && parallel=$jobs
    say "ctest -L $label"
    ctest --test-dir "$build_dir" -L "$label" --output-on-failure -j"$parallel" --timeout 600 \
      2>&1 | tee "$log"
    test_status[$label]=${PIPESTATUS[0]}
    test_counts[$label]=$(count_tests "$log")
  done

  # --- Benchmarks: every executable directly in build/bench, except the model-level tools that
  # need arguments: they run in the model checks section below. ---
  bench_log="$log_dir/bench.log"
  : >"$bench_log"
  while IFS= read -r bench; do
    name=$(basename "$bench")
    [[ $name == logits_dump ]] && continue
    [[ $steps == *bench* ]] || continue
    say "benchmark $name" | tee -a "$bench_log"
    bench_start=$(date +%s)
    timeout "$bench_timeout" "$bench" 2>&1 | tee -a "$bench_log"
    status=${PIPESTATUS[0]}
    result=ok
    ((status == 124)) && result="timed out after ${bench_timeout} s"
    ((status != 0 && status != 124)) && result="failed (exit $status)"
    [[ $result == ok ]] || bench_failed=1
    bench_rows+=("$(printf '%-24s %-28s %5d s' "$name" "$result" $(($(date +%s) - bench_start)))")
  done < <(find "$build_dir/bench" -maxdepth 1 -type f -perm -u+x 2>/dev/null | sort)
fi

# =================================================================================================
# Model checks: Tessera's logits against transformers (tests/hf_reference/compare_gpu.py, through
# build/bench/logits_dump), a batch-size sweep (build/tessera bench sweep) and a profiled one
# (--profile: the launches and per-kernel times of a decode step), each run when its binary
# built. Outputs: hf_compare.log and hf_compare.txt (the table), sweep.txt and sweep.json,
# sweep_profile.txt. Settings: TESSERA_COMPARE_TIMEOUT (seconds, 600), TESSERA_SWEEP_TIMEOUT
# (seconds, 300), TESSERA_PROFILE_TIMEOUT (seconds, 180).
# =================================================================================================
model_rows=()
model_failed=0
# No stale tables in the summary or the logs.
rm -f "$log_dir/hf_compare.txt" "$log_dir/sweep.txt" "$log_dir/sweep_profile.txt"
# Runs "NAME TIMEOUT LOG command..." and adds its row to the summary.
run_model_check() {
  local name=$1 limit=$2 log=$3 started status result
  shift 3
  say "$name" | tee "$log"
  started=$(date +%s)
  timeout "$limit" "$@" 2>&1 | tee -a "$log"
  status=${PIPESTATUS[0]}
  result=ok
  ((status == 124)) && result="timed out after ${limit} s"
  ((status != 0 && status != 124)) && result="failed (exit $status)"
  [[ $result == ok ]] || model_failed=1
  model_rows+=("$(printf '%-24s %-28s %5d s' "$name" "$result" $(($(date +%s) - started)))")
}
if ((configure_status == 0)) && [[ $steps == *models* ]]; then
  if [[ -x $build_dir/bench/logits_dump ]]; then
    if import_error=$(python3 -c 'import torch, transformers' 2>&1); then
      OUT="$log_dir" run_model_check compare_gpu.py "${TESSERA_COMPARE_TIMEOUT:-600}" \
        "$log_dir/hf_compare.log" python3 tests/hf_reference/compare_gpu.py \
        --binary "$build_dir/bench/logits_dump"
    else
      model_rows+=("$(printf '%-24s %-28s' compare_gpu.py 'skipped: no torch/transformers')")
      say "compare_gpu.py skipped: $(tail -1 <<<"$import_error")"
    fi
  fi
  if [[ -x $build_dir/tessera ]]; then
    run_model_check "bench sweep" "${TESSERA_SWEEP_TIMEOUT:-300}" "$log_dir/sweep.txt" \
      "$build_dir/tessera" bench sweep --model synthetic:llama-1b --device cuda \
      --batch-sizes 1,8,32,128 --context 128 --steps 64 --json "$log_dir/sweep.json"
    # Where a decode step's time goes, in the fastest mode: one runner, few timed steps.
    run_model_check "bench sweep --profile" "${TESSERA_PROFILE_TIMEOUT:-180}" \
      "$log_dir/sweep_profile.txt" "$build_dir/tessera" bench sweep --model synthetic:llama-1b \
      --device cuda --modes compiled --cudagraph-modes full_and_piecewise --batch-sizes 1,128 \
      --context 128 --steps 16 --profile
  fi
fi

# =================================================================================================
# Sanitizer (TESSERA_STEPS with sanitizer): every test binary's gpu tests under compute-sanitizer
# --tool memcheck, and the attention and reduction kernels under --tool racecheck (GpuAttention;
# GpuOpConformance, which runs every reduction and norm; the fused row kernels, whose reductions
# go through shared memory). Tests that provoke a CUDA API error on purpose (a deliberately corrupt
# cubin handed to the driver: TESSERA_SANITIZER_API_ERROR_TESTS, a gtest filter) run apart with
# --report-api-errors no, so that the intended error stays out of the count while their memory
# accesses are still checked. A run fails on any reported error or a failing test. Logs:
# sanitizer-TOOL-BINARY.log.
# =================================================================================================
sanitizer_rows=()
sanitizer_failed=0
intended_api_errors=${TESSERA_SANITIZER_API_ERROR_TESTS:-GpuCompiledMode.WarmStartLoadsAndBadCubinsAreRebuilt}
# Runs "TOOL BINARY FILTER [compute-sanitizer options...]" and adds its row to the summary.
run_sanitizer() {
  local tool=$1 binary=$2 filter=$3 name log started status errors result
  shift 3
  name=$(basename "$binary")
  log="$log_dir/sanitizer-$tool-$name${SANITIZER_LOG_SUFFIX:-}.log"
  say "compute-sanitizer --tool $tool $name --gtest_filter=$filter" | tee "$log"
  started=$(date +%s)
  timeout "${TESSERA_SANITIZER_TIMEOUT:-1200}" "$sanitizer" --tool "$tool" --error-exitcode 86     --print-limit 100 "$@" "$binary" --gtest_filter="$filter" 2>&1 | tee -a "$log"
  status=${PIPESTATUS[0]}
  errors=$(grep -oE 'ERROR SUMMARY: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+$')
  result="ok, ${errors:-?} errors"
  ((status == 86)) && result="${errors:-some} errors reported"
  ((status == 124)) && result="timed out"
  ((status != 0 && status != 86 && status != 124)) && result="test failed (exit $status)"
  ((status == 0)) || sanitizer_failed=1
  sanitizer_rows+=("$(printf '%-10s %-22s %-26s %5d s' "$tool" "$name" "$result" \
    $(($(date +%s) - started)))")
}
if ((configure_status == 0)) && [[ $steps == *sanitizer* ]]; then
  sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  if [[ ! -x $sanitizer ]]; then
    say "compute-sanitizer not found (looked on PATH and in /usr/local/cuda/bin)"
    sanitizer_rows+=("compute-sanitizer not found")
    sanitizer_failed=1
  else
    while IFS= read -r binary; do
      # Only binaries with gpu tests; those listing none are skipped.
      "$binary" --gtest_list_tests --gtest_filter='*Gpu*' 2>/dev/null | grep -q '^  ' || continue
      run_sanitizer memcheck "$binary" "*Gpu*:-$intended_api_errors"
      if "$binary" --gtest_list_tests --gtest_filter="$intended_api_errors" 2>/dev/null |
        grep -q '^  '; then
        SANITIZER_LOG_SUFFIX=-intended-api-errors run_sanitizer memcheck "$binary" \
          "$intended_api_errors" --report-api-errors no
      fi
    done < <(find "$build_dir/tests" -maxdepth 1 -type f -name 'test_*' -perm -u+x | sort)
    for racecheck in "test_attention GpuAttention.*" "test_op_conformance GpuOpConformance.*" \
      "test_cuda_codegen GpuCompiledMode.FusedRowKernelsMatchEager:GpuCompiledMode.VectorAndScalarRowLoopsMatchEager"; do
      read -r name filter <<<"$racecheck"
      [[ -x $build_dir/tests/$name ]] && run_sanitizer racecheck "$build_dir/tests/$name" "$filter"
    done
  fi
fi

# --- Summary, last. ---
{
  echo
  echo "=== gpu_check summary ==="
  if ((build_status == 0)); then
    echo "build: ok in ${build_seconds} s (-j$jobs, sm_90)"
  else
    echo "build: FAILED after ${build_seconds} s (exit $build_status); see build.log:"
    grep -E '^FAILED: |CMake Error' "$build_log" | head -10 | sed 's/^/  /'
  fi
  printf '%-6s %7s %7s %8s  %s\n' label passed failed skipped ctest
  for label in gpu cpu; do
    if [[ -n "${test_counts[$label]:-}" ]]; then
      read -r passed failed skipped <<<"${test_counts[$label]}"
      status="exit ${test_status[$label]}"
      ((passed + failed + skipped == 0)) && status="no tests with this label"
      printf '%-6s %7d %7d %8d  %s\n' "$label" "$passed" "$failed" "$skipped" "$status"
    else
      printf '%-6s %7s %7s %8s  %s\n' "$label" - - - "not run"
    fi
  done
  if ((${#bench_rows[@]} > 0)); then
    echo "benchmarks:"
    printf '  %s\n' "${bench_rows[@]}"
  elif ((configure_status == 0)); then
    echo "benchmarks: none in $build_dir/bench"
  fi
  if ((${#sanitizer_rows[@]} > 0)); then
    echo "compute-sanitizer:"
    printf '  %s\n' "${sanitizer_rows[@]}"
  fi
  if ((${#model_rows[@]} > 0)); then
    echo "model checks:"
    printf '  %s\n' "${model_rows[@]}"
    [[ -f $log_dir/hf_compare.txt ]] && sed 's/^/  /' "$log_dir/hf_compare.txt"
    [[ -f $log_dir/sweep.txt ]] &&
      sed -n '/^=== tessera bench sweep/,$p' "$log_dir/sweep.txt" | sed 's/^/  /'
  fi
  [[ -f $log_dir/devices.txt ]] && echo "tessera devices:" && sed 's/^/  /' "$log_dir/devices.txt"
  echo "logs: $log_dir"
} | tee "$log_dir/summary.txt"

((build_status == 0)) || exit 1
for label in gpu cpu; do
  [[ -n "${test_counts[$label]:-}" ]] || continue  # not run in this call (TESSERA_STEPS)
  read -r _ failed _ <<<"${test_counts[$label]}"
  ((test_status[$label] == 0 && failed == 0)) || exit 1
done
((bench_failed == 0 && model_failed == 0 && sanitizer_failed == 0)) || exit 1
exit 0
