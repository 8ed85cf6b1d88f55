#!/usr/bin/env bash
# Installs the Debian build dependencies (when any is missing), then configures and builds Tessera
# in build/ (Ninja, RelWithDebInfo): the tessera binary, the GPU modules this machine can build and
# the embedded model; with --all also the tests, the benchmarks and the Node packages the server
# tests use. Other arguments go to the configure step, e.g.
#   scripts/setup.sh -DTESSERA_CUDA=OFF
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build_all=false
configure_arguments=()
for argument in "$@"; do
  if [[ "$argument" == --all ]]; then
    build_all=true
  else
    configure_arguments+=("$argument")
  fi
done

packages=(cmake ninja-build g++ pkg-config libfmt-dev libspdlog-dev libgtest-dev libgmock-dev
  libyaml-cpp-dev nlohmann-json3-dev libcpp-httplib-dev libpcre2-dev clang-format curl
  python3-matplotlib)  # python3-matplotlib: bench/plot_sweep.py and its test

missing=()
for package in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$package" 2>/dev/null || true)
  [[ "$status" == installed ]] || missing+=("$package")
done

if ((${#missing[@]} > 0)); then
  sudo=()
  ((EUID == 0)) || sudo=(sudo)
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update
  "${sudo[@]}" apt-get install -y --no-install-recommends "${packages[@]}"
else
  echo "setup: build dependencies already installed"
fi

# The server tests drive `tessera serve` with the official OpenAI client for Node, pinned in
# tests/node/package-lock.json.
if [[ "$build_all" == true && ! -d tests/node/node_modules/openai ]]; then
  command -v npm > /dev/null || { echo "setup: npm is needed for the server tests (Node 20)" >&2; exit 1; }
  echo "setup: npm ci in tests/node"
  npm ci --prefix tests/node --no-audit --no-fund
fi

nvcc=/usr/local/cuda/bin/nvcc
start=$(date +%s)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${configure_arguments[@]}"
if [[ "$build_all" == true ]]; then
  cmake --build build -j2
  what="everything"
else
  cmake --build build -j2 --target tessera_runnable
  what="the tessera binary, its GPU modules and the embedded model (--all builds the tests too)"
fi
seconds=$(($(date +%s) - start))

cuda_on=$(sed -n 's/^TESSERA_CUDA:BOOL=//p' build/CMakeCache.txt)
hip_on=$(sed -n 's/^TESSERA_HIP:BOOL=//p' build/CMakeCache.txt)
if [[ "$cuda_on" == ON ]]; then
  cuda_note="CUDA module build/libtessera-cuda.so (nvcc $nvcc)"
elif [[ -x "$nvcc" ]]; then
  cuda_note="no CUDA module (TESSERA_CUDA=OFF), although $nvcc exists"
else
  cuda_note="no CUDA module: no nvcc at $nvcc"
fi
if [[ "$hip_on" == ON ]]; then
  hip_note="HIP module build/libtessera-hip.so"
else
  hip_note="no HIP module (needs hipcc: apt-get install hipcc libamdhip64-dev)"
fi
echo "setup: configure + build of $what took ${seconds} s in build/ (-j2); $cuda_note; $hip_note"
