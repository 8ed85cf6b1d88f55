#!/usr/bin/env bash
# Run HERE (Debian, apt works): downloads into .gpu-deps/ the .deb files of the libraries the build
# needs that the GPU machine's Ubuntu image lacks: the -dev packages and the shared libraries they
# point to. scripts/gpu_check.sh unpacks them there (no network, no apt on that machine). The test
# data in ../shared/models, which the device tool does not send, is copied to .gpu-deps/shared/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# What the build finds with find_package / pkg-config.
roots=(libfmt-dev libspdlog-dev libgtest-dev libgmock-dev libyaml-cpp-dev nlohmann-json3-dev
  libcpp-httplib-dev libpcre2-dev
  pkgconf)  # pkg-config itself, used there only when the image has none
# Never followed: the C/C++ toolchain and libc the GPU machine has (unpacking Debian's libc
# headers into the prefix would shadow Ubuntu's), and packages the build does not use
# (spdlog's tests need catch2; googletest is the gtest source tree).
stop=(libc6 libc6-dev libc-dev-bin linux-libc-dev libcrypt1 libcrypt-dev libnsl2 libnsl-dev
  libtirpc3 libtirpc-dev libtirpc-common rpcsvc-proto libgcc-s1 libstdc++6 gcc-12-base catch2
  googletest debconf)

if [[ "${1:-}" != --no-update ]]; then
  sudo=()
  ((EUID == 0)) || sudo=(sudo)
  "${sudo[@]}" apt-get update -qq
fi

is_stopped() {
  local name
  for name in "${stop[@]}"; do [[ "$1" == "$name" ]] && return 0; done
  return 1
}

# Breadth-first walk over Depends, resolved with apt-cache; virtual names (<libc-dev>) are skipped.
declare -A seen=()
queue=("${roots[@]}")
selected=()
while ((${#queue[@]} > 0)); do
  package=${queue[0]}
  queue=("${queue[@]:1}")
  [[ -n "${seen[$package]:-}" ]] && continue
  seen[$package]=1
  is_stopped "$package" && continue
  apt-cache show "$package" >/dev/null 2>&1 || { echo "fetch: no package '$package'" >&2; exit 1; }
  selected+=("$package")
  while read -r dependency; do
    [[ "$dependency" == \<* ]] || queue+=("$dependency")
  done < <(apt-cache depends --no-recommends --no-suggests --no-conflicts --no-breaks \
    --no-replaces --no-enhances "$package" | sed -n 's/^ *|\{0,1\}\(Pre\)\{0,1\}Depends: //p')
done

rm -rf .gpu-deps
mkdir -p .gpu-deps
# As root, apt would hand the download to its _apt user, who cannot write here.
sandbox=()
((EUID == 0)) && sandbox=(-o APT::Sandbox::User=root)
(cd .gpu-deps && apt-get download "${sandbox[@]}" "${selected[@]}" >/dev/null)
# Epochs are written %3a in the file names; keep the names plain for the device tool's copy.
shopt -s nullglob
for deb in .gpu-deps/*%3a*; do mv "$deb" "${deb//%3a/_}"; done
if [[ -d ../shared/models ]]; then
  mkdir -p .gpu-deps/shared
  cp -r ../shared/models .gpu-deps/shared/
  chmod -R u+w .gpu-deps/shared  # ../shared is read-only; the copy must stay removable
else
  echo "fetch: no ../shared/models here; tests that read it will fail on the GPU machine" >&2
fi
count=$(find .gpu-deps -name '*.deb' | wc -l)
echo "fetch: ${count} packages and ../shared/models into .gpu-deps/ ($(du -sh .gpu-deps | cut -f1)):"
find .gpu-deps -name '*.deb' -printf '  %f\n' | sort
echo "next: the device call 'bash scripts/gpu_check.sh' carrying .gpu-deps"
