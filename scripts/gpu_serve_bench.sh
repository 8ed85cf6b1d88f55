#!/usr/bin/env bash
# Run ON THE GPU MACHINE after scripts/gpu_check.sh (or scripts/gpu_sweep.sh) has built build/:
# serves a model on the GPU as users would and measures it:
#   1. streaming output tokens/s at 1, 16 and 64 concurrent clients (tessera bench serve,
#      random prompts of 256 tokens, 128 generated);
#   2. a shared-prefix workload (64 prompts: one 1024-token prefix, then 16 tokens of their own)
#      and its prefix-cache hit rate, read off /metrics before and after;
#   3. when node is on PATH and tests/node/node_modules is there, the OpenAI client's tests
#      (tests/node/openai_client.mjs) against the same server;
#   4. SIGTERM, which must exit 0.
# Outputs under $OUT (else build/gpu-serve): serve.err, bench_serve.txt/.json, prefix.txt/.json,
# openai_client.txt, serve_summary.txt. Settings: TESSERA_SERVE_MODEL (synthetic:llama-1b),
# TESSERA_SERVE_ARGS (extra serve arguments), TESSERA_SERVE_PROMPTS (128).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
out=${OUT:-build/gpu-serve}
mkdir -p "$out"
prefix=${TESSERA_DEPS_PREFIX:-/tmp/tessera-deps}
arch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
export LD_LIBRARY_PATH="$prefix/usr/lib/$arch:$prefix/lib/$arch${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
model=${TESSERA_SERVE_MODEL:-synthetic:llama-1b}
prompts=${TESSERA_SERVE_PROMPTS:-128}
say() { echo "gpu_serve_bench: $*"; }
summary="$out/serve_summary.txt"
: >"$summary"

source scripts/start_server.sh
# shellcheck disable=SC2086
start_server "$out" --model "$model" --served-model-name served --api-key gpu-key \
  -O engine.device=cuda -O engine.max_model_len=4096 ${TESSERA_SERVE_ARGS:-} || exit 1
say "serving $model at $url"
grep -E "memory|KV cache|captured|engine:" "$out/serve.err" | sed 's/^/  /' | tee -a "$summary"

metric() { curl -s "$url/metrics" | sed -n "s/^tessera:$1{[^}]*} //p"; }

say "streaming clients: 1, 16, 64" | tee -a "$summary"
build/tessera bench serve --url "$url" --model served --api-key gpu-key --concurrency 1,16,64 \
  --num-prompts "$prompts" --input-len 256 --output-len 128 --ignore-eos \
  --json "$out/bench_serve.json" 2>&1 | tee "$out/bench_serve.txt" | tee -a "$summary"

python3 - "$out/prefix.jsonl" <<'PY'
import json, random, sys
random.seed(7)
shared = [random.randrange(1, 256) for _ in range(1024)]
with open(sys.argv[1], "w") as f:
    for i in range(64):
        own = [random.randrange(1, 256) for _ in range(16)]
        f.write(json.dumps({"prompt": shared + own, "max_tokens": 32}) + "\n")
PY
queries_before=$(metric prefix_cache_queries_total)
hits_before=$(metric prefix_cache_hits_total)
say "shared-prefix workload: 64 prompts, 1024 shared tokens + 16 own" | tee -a "$summary"
build/tessera bench serve --url "$url" --model served --api-key gpu-key --concurrency 16 --num-prompts 64 \
  --dataset "$out/prefix.jsonl" --ignore-eos --json "$out/prefix.json" 2>&1 |
  tee "$out/prefix.txt" | tee -a "$summary"
queries=$(($(metric prefix_cache_queries_total) - queries_before))
hits=$(($(metric prefix_cache_hits_total) - hits_before))
python3 -c "print(f'gpu_serve_bench: prefix cache: {$hits} of {$queries} prompt tokens hit ({100*$hits/max($queries,1):.1f}%)')" |
  tee -a "$summary"

if command -v node >/dev/null && [[ -d tests/node/node_modules/openai ]]; then
  say "OpenAI client tests against the GPU server" | tee -a "$summary"
  timeout 300 node tests/node/openai_client.mjs "$url" served gpu-key >"$out/openai_client.txt" 2>&1
  echo "openai_client.mjs: exit $? ($(grep -c '^ok:' "$out/openai_client.txt") checks passed)" |
    tee -a "$summary"
  grep FAILED "$out/openai_client.txt" | tee -a "$summary"
else
  say "node or tests/node/node_modules missing: OpenAI client tests not run" | tee -a "$summary"
fi

kill -TERM $server
wait $server
status=$?
say "SIGTERM: server exit $status" | tee -a "$summary"
((status == 0))
