#!/usr/bin/env bash
# Builds llama_reference (llama_reference.c) against the llama.cpp libraries node-llama-cpp ships,
# into LLAMA_REF_DIR, and prints its path. LLAMA_REF_DIR (default /work/quant-ref) must hold
# `npm install node-llama-cpp`; the headers come from the llama.cpp git bundle in that package.
# Run the tool with LLAMA_LIB_DIR set to the printed library folder (second line).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ref_dir=${1:-${LLAMA_REF_DIR:-/work/quant-ref}}
lib_dir=$ref_dir/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
[[ -f $lib_dir/libllama.v0.5.0.so ]] ||
  { echo "no node-llama-cpp v0.5.0 libraries in $lib_dir: run 'npm install node-llama-cpp' in $ref_dir" >&2; exit 2; }
source_dir=$ref_dir/llama-src
[[ -d $source_dir ]] ||
  git clone -q "$ref_dir/node_modules/node-llama-cpp/llama/gitRelease.bundle" "$source_dir"
gcc -O2 -Wall -Wextra -o "$ref_dir/llama_reference" "$repo/tests/quant_reference/llama_reference.c" \
  -I"$source_dir/include" -I"$source_dir/ggml/include" -L"$lib_dir" -l:libllama.v0.5.0.so \
  -l:libggml-base.so -l:libggml.v0.5.0.so -lm -Wl,-rpath,"$lib_dir"
echo "$ref_dir/llama_reference"
echo "$lib_dir"
