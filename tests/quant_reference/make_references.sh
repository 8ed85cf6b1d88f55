#!/usr/bin/env bash
# Regenerates tests/data/quant/ from llama.cpp: the prebuilt libraries of the npm package
# node-llama-cpp (installed outside the repo: `npm install node-llama-cpp` in LLAMA_REF_DIR) and
# the llama.cpp headers of the same release (the git bundle the package ships). Writes per type
# random blocks with edge scales and llama.cpp's dequantization of them; stories260K quantized to
# Q8_0 and a small synthetic llama (rows of 256) quantized to each K mixture, with llama.cpp's
# greedy tokens for a fixed prompt; and small mixtures of experts (F32, Q8_0, Q4_K_M) with their
# greedy tokens.
# Tests read these files; they never run llama.cpp.
# Usage: tests/quant_reference/make_references.sh [LLAMA_REF_DIR (default /work/quant-ref)]
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mapfile -t built < <("$repo/tests/quant_reference/build_llama_reference.sh" "${1:-/work/quant-ref}")
tool=${built[0]}
lib_dir=${built[1]}
export LLAMA_LIB_DIR=$lib_dir

out=$repo/tests/data/quant
mkdir -p "$out/formats" "$out/models"
"$tool" dequantize "$out/formats"

stories=$repo/models/embedded/stories260K.gguf
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Greedy references, one line per model: "FILE: PROMPT IDS -> GENERATED IDS | EACH STEP'S
# RUNNER-UP | EACH STEP'S GAP BETWEEN THE TOP TWO LOGITS".
prompt="1 200 40 100"
steps=24
greedy=$out/models/greedy.txt
: >"$greedy"
reference() {  # FILE (under models/)
  local lines
  mapfile -t lines < <("$tool" generate "$out/models/$1" 1 "$steps" $prompt 2>/dev/null)
  echo "$1: $prompt -> ${lines[0]} | ${lines[1]} | ${lines[2]}" >>"$greedy"
}
"$tool" quantize "$stories" "$out/models/stories260K-q8_0.gguf" 7 2>/dev/null
reference stories260K-q8_0.gguf
# vocab 260, dim 256, 1 layer, 2 heads and 1 kv head of 32, feed-forward 64, seed 10 (the most
# varied greedy text of seeds 1..40).
"$tool" synthetic "$work/synthetic-f32.gguf" "$stories" 260 256 1 2 1 32 64 10
for mixture in 14:q4_k_s 15:q4_k_m 16:q5_k_s 17:q5_k_m 18:q6_k; do
  file=synthetic-${mixture#*:}.gguf
  "$tool" quantize "$work/synthetic-f32.gguf" "$out/models/$file" "${mixture%%:*}" 2>/dev/null
  reference "$file"
done
# A Mixtral-style mixture of experts in F32 (llama with 8 experts of 32 per layer, 2 per token):
# vocab 260, dim 64, 2 layers, 2 heads and 1 kv head of 32, seed 1.
"$tool" synthetic "$out/models/synthetic-moe-f32.gguf" "$stories" 260 64 2 2 1 32 32 1 8 2
reference synthetic-moe-f32.gguf
# The same shape as Qwen3-MoE (qwen3moe: per-head q/k norms, expert_feed_forward_length).
"$tool" synthetic "$out/models/synthetic-qwen3moe-f32.gguf" "$stories" 260 64 2 2 1 32 32 1 8 2 \
  qwen3moe
reference synthetic-qwen3moe-f32.gguf
# Quantized experts: the Mixtral-style mixture in Q8_0 (blocks of 32 fit its rows of 64 and 32),
# and a Qwen3-MoE with rows of 256 (4 experts of 256, 2 per token, 1 layer, seed 3) in Q4_K_M,
# whose stacked down projections llama.cpp writes as Q6_K and gate and up as Q4_K.
"$tool" quantize "$out/models/synthetic-moe-f32.gguf" "$out/models/synthetic-moe-q8_0.gguf" 7 \
  2>/dev/null
reference synthetic-moe-q8_0.gguf
"$tool" synthetic "$work/synthetic-qwen3moe-f32.gguf" "$stories" 260 256 1 2 1 32 256 3 4 2 qwen3moe
"$tool" quantize "$work/synthetic-qwen3moe-f32.gguf" "$out/models/synthetic-qwen3moe-q4_k_m.gguf" \
  15 2>/dev/null
reference synthetic-qwen3moe-q4_k_m.gguf
cat "$greedy"
