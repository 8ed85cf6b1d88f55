#!/usr/bin/env bash
# The HTTP front end of two `tessera serve` builds side by side (issue 36): requests/s and p99
# latency at 256 concurrent streaming clients (`tessera bench serve`, NEW's client for both; the
# servers alternate, fresh each run), then each server's resident memory under 1,000 hostile
# requests (bench/http_hostile_clients.py). stories260K from ../shared; prints one line per run.
# Usage: bench/http_front_end.sh OLD_BINARY NEW_BINARY [ROUNDS (3)] [HOSTILE_REQUESTS (1000)]
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
old=$1
new=$2
rounds=${3:-3}
hostile=${4:-1000}
models=$repo/../shared/models/stories260K
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

serve() {  # BINARY PORT: starts a server, waits until it listens
  "$1" serve --model "$models/stories260K.bin" --tokenizer "$models/tok512.bin" \
    --served-model-name stories --port "$2" --max-waiting-requests 4096 >"$work/out" 2>/dev/null &
  server=$!
  until grep -q listening "$work/out" 2>/dev/null; do sleep 0.1; done
}

for ((round = 1; round <= rounds; ++round)); do
  for side in old new; do
    binary=$old
    [[ $side == new ]] && binary=$new
    serve "$binary" 18941
    "$new" bench serve --url http://127.0.0.1:18941 --model stories --concurrency 256 \
      --num-prompts 1024 --input-len 32 --output-len 32 --vocab-size 512 --ignore-eos \
      --json "$work/report.json" >/dev/null 2>&1
    kill "$server"
    wait "$server" || true
    python3 - "$side" "$round" "$work/report.json" <<'PY'
import json, sys
side, run, path = sys.argv[1:]
level = json.load(open(path))["levels"][0]
print(f"{side} round {run}: {level['request_throughput']:.1f} requests/s, e2e p99 "
      f"{level['e2e_ms']['p99']:.0f} ms, ttft p99 {level['ttft_ms']['p99']:.0f} ms, "
      f"{level['completed']} completed, {level['failed']} failed")
PY
  done
done
for side in old new; do
  binary=$old
  [[ $side == new ]] && binary=$new
  python3 "$repo/bench/http_hostile_clients.py" --binary "$binary" --requests "$hostile"
done
