#!/usr/bin/env bash
# CPU decode speed of quantized GGUF files, Tessera against llama.cpp (the prebuilt libraries of
# node-llama-cpp, through tests/quant_reference/llama_reference.c), alternating in one run on the
# same files: an 85M-parameter llama (dim 768, 12 layers, 12 heads of 64, feed-forward 2048, the
# stories260K tokenizer's 512 tokens, random weights) written as F32 GGUF, and llama.cpp's own
# Q8_0, Q6_K and Q4_K_M of it. Both run greedy from BOS on 2 threads; prints the median decode
# tokens/s of each and whether both generated the same text.
# Usage: bench/quantized_cpu_decode.sh [RUNS (5)] [TOKENS (128)] [WORK_DIR (/tmp/tessera-quant-bench)]
# Needs build/tessera and `npm install node-llama-cpp` in LLAMA_REF_DIR (default /work/quant-ref).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
runs=${1:-5}
tokens=${2:-128}
work=${3:-/tmp/tessera-quant-bench}
mapfile -t built < <("$repo/tests/quant_reference/build_llama_reference.sh")
tool=${built[0]}
export LLAMA_LIB_DIR=${built[1]}
tessera=$repo/build/tessera
mkdir -p "$work"
f32=$work/llama-85m-f32.gguf
[[ -f $f32 ]] || "$tool" synthetic "$f32" "$repo/models/embedded/stories260K.gguf" 0 768 12 12 12 64 2048 1
for mixture in 7:q8_0 18:q6_k 15:q4_k_m; do
  file=$work/llama-85m-${mixture#*:}.gguf
  [[ -f $file ]] || "$tool" quantize "$f32" "$file" "${mixture%%:*}" 2>/dev/null
done

median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
printf '| file | Tessera tokens/s | llama.cpp tokens/s | ratio | same text |\n|---|---|---|---|---|\n'
for name in f32 q8_0 q6_k q4_k_m; do
  file=$work/llama-85m-$name.gguf
  : >"$work/tessera.speed"
  : >"$work/llama.speed"
  for ((run = 0; run < runs; ++run)); do
    TESSERA_NUM_THREADS=2 "$tessera" generate -m "$file" -n "$tokens" -q >"$work/tessera.text" \
      2>"$work/tessera.log"
    sed -n 's/.*decode \([0-9.]*\) tokens\/s.*/\1/p' "$work/tessera.log" >>"$work/tessera.speed"
    "$tool" generate "$file" 2 "$tokens" 1 >"$work/llama.out" 2>/dev/null
    sed -n 's/^decode tokens\/s //p' "$work/llama.out" >>"$work/llama.speed"
  done
  tessera_speed=$(median <"$work/tessera.speed")
  llama_speed=$(median <"$work/llama.speed")
  # The texts without leading/trailing spaces (llama.cpp's first piece starts with one), llama.cpp's
  # raw bytes made valid UTF-8 as Tessera prints them (each invalid sequence one U+FFFD).
  same=$(python3 - "$work/tessera.text" "$work/llama.out" <<'PY'
import sys
tessera = open(sys.argv[1], "rb").read().decode("utf-8", "replace")
llama = open(sys.argv[2], "rb").read().split(b"\ntext: ", 1)[-1]
if llama.startswith(b"text: "):
    llama = llama[len(b"text: "):]
llama = llama.decode("utf-8", "replace")
print("yes" if tessera.strip(" \n") == llama.strip(" \n") else "no")
PY
)
  printf '| %s | %.1f | %.1f | %.2f | %s |\n' "$name" "$tessera_speed" "$llama_speed" \
    "$(echo "$tessera_speed / $llama_speed" | bc -l)" "$same"
done
