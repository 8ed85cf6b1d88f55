#!/usr/bin/env bash
# Run ON THE GPU MACHINE with .gpu-deps carried: builds the tessera binary with CUDA when build/
# has none, serves synthetic:llama-1b with Qwen3's tokenizer (151k tokens, as masks of a 128k-class
# vocabulary cost) on the GPU, and measures structured output's serving cost: output tokens/s at
# 1, 16 and 64 streaming clients (random 256-token prompts, 128 generated, ignore_eos) without a
# constraint, with guided_regex "[a-z ]+" (one grammar state: the steady cost of masks), with a
# JSON schema (an object with one string of lowercase letters and spaces), and with the same schema
# whose string may only end in six digits (json_long). The random-weight model closes the free
# string before 128 tokens in about a fifth of the requests, which ends them; it rarely picks a
# digit among the letters, so json_long's requests are as long as the free ones and its tokens/s
# compare like for like. (A fixed length, "[a-z ]{400}", ends them sooner still: 400 characters
# are about 73 of its tokens.) Outputs under $OUT (else build/gpu-structured): serve.err,
# bench_*.txt/.json, structured_summary.txt.
# Settings: TESSERA_STRUCTURED_PROMPTS (64 per level), TESSERA_SERVE_ARGS.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
out=${OUT:-build/gpu-structured}
mkdir -p "$out"
say() { echo "gpu_structured_bench: $*"; }
source scripts/gpu_env.sh
if [[ ! -x build/tessera || ! -f build/libtessera-cuda.so ]]; then
  configure_cuda_build build "$out/configure.log" -DTESSERA_HIP=OFF >/dev/null || exit 1
  cmake --build build -j"${TESSERA_JOBS:-16}" --target tessera tessera-cuda >"$out/build.log" 2>&1 ||
    { say "build failed"; grep -E "error" "$out/build.log" | head; exit 1; }
fi
prompts=${TESSERA_STRUCTURED_PROMPTS:-64}
summary="$out/structured_summary.txt"
: >"$summary"
source scripts/start_server.sh
# shellcheck disable=SC2086
start_server "$out" --model synthetic:llama-1b --tokenizer ../shared/models/tokenizers/qwen3 \
  --served-model-name served -O engine.device=cuda -O engine.max_model_len=4096 \
  ${TESSERA_SERVE_ARGS:-} || exit 1
say "serving synthetic:llama-1b with the qwen3 tokenizer at $url" | tee -a "$summary"

run() {  # NAME [--extra-body JSON]
  local name=$1
  shift
  say "$name" | tee -a "$summary"
  build/tessera bench serve --url "$url" --model served --concurrency 1,16,64 \
    --num-prompts "$prompts" --input-len 256 --output-len 128 --vocab-size 128000 --ignore-eos \
    --json "$out/bench_$name.json" "$@" 2>&1 | tee "$out/bench_$name.txt" | tee -a "$summary"
}
run unconstrained
run regex --extra-body '{"guided_regex": "[a-z ]+"}'
run json_schema --extra-body '{"response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": {"type": "object", "properties": {"story": {"type": "string", "pattern": "[a-z ]*"}}, "required": ["story"], "additionalProperties": false}}}}'
run json_long --extra-body '{"response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": {"type": "object", "properties": {"story": {"type": "string", "pattern": "^[a-z ]*[0-9]{6}$"}}, "required": ["story"], "additionalProperties": false}}}}'
curl -s "$url/metrics" | grep -E "^tessera:grammar_(mask|compile)_seconds_(sum|count)" | tee -a "$summary"
python3 - "$out" <<'PY' | tee -a "$summary"
import json, sys
out = sys.argv[1]
runs = {name: json.load(open(f"{out}/bench_{name}.json")) for name in ("unconstrained", "regex", "json_schema", "json_long")}
base = {level["concurrency"]: level for level in runs["unconstrained"]["levels"]}
print(f"{'run':<14} {'clients':>7} {'out tok/s':>10} {'vs free':>8} {'tokens/req':>10} {'TPOT ms':>8} {'vs free':>8}")
for name, report in runs.items():
    for level in report["levels"]:
        c = level["concurrency"]
        tps = level["output_throughput"]
        per_request = level["output_tokens"] / max(level["completed"], 1)
        tpot = level["tpot_ms"]["median"]
        print(f"{name:<14} {c:>7} {tps:>10.1f} {tps / base[c]['output_throughput']:>8.3f} {per_request:>10.1f} "
              f"{tpot:>8.2f} {tpot / base[c]['tpot_ms']['median']:>8.3f}")
PY
kill -TERM $server
wait $server
say "SIGTERM: server exit $?" | tee -a "$summary"
