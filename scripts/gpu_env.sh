# Sourced ON THE GPU MACHINE by scripts/gpu_check.sh and scripts/gpu_sweep.sh, from the repo root,
# with .gpu-deps carried (made here by scripts/fetch_gpu_deps.sh): unpacks the Debian libraries
# into $TESSERA_DEPS_PREFIX (/tmp/tessera-deps), links ../shared to the copy in .gpu-deps, exports
# the build environment, and defines configure_cuda_build. The caller defines say(); a missing or
# broken .gpu-deps exits with status 2.
prefix=${TESSERA_DEPS_PREFIX:-/tmp/tessera-deps}
arch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)

# --- Unpack the .deb files into the prefix (dpkg -x keeps their usr/ layout). ---
shopt -s nullglob
debs=(.gpu-deps/*.deb)
if ((${#debs[@]} == 0)); then
  say "no .deb files in .gpu-deps/: run scripts/fetch_gpu_deps.sh where apt works, then carry .gpu-deps"
  exit 2
fi
rm -rf "$prefix"
mkdir -p "$prefix"
for deb in "${debs[@]}"; do dpkg -x "$deb" "$prefix" || { say "cannot unpack $deb"; exit 2; }; done
# Links that point to /usr/... or /lib/... would leave the prefix: point them into it.
while IFS= read -r link; do
  ln -sfn "$prefix$(readlink "$link")" "$link"
done < <(find "$prefix" -type l -lname '/*')
# pkg-config files say prefix=/usr (or libdir=/usr/...): rewrite them to the prefix.
for pc in "$prefix"/usr/lib/"$arch"/pkgconfig/*.pc "$prefix"/usr/share/pkgconfig/*.pc; do
  sed -i -E "s#^([A-Za-z_]+)=/usr#\1=$prefix/usr#" "$pc"
done
say "unpacked ${#debs[@]} packages into $prefix"

# The tests read ../shared (TESSERA_SHARED_DIR), which the device tool does not send: link the
# copy that fetch_gpu_deps.sh put in .gpu-deps/shared.
if [[ ! -e ../shared && -d .gpu-deps/shared ]]; then
  ln -s "$PWD/.gpu-deps/shared" ../shared && say "linked ../shared to .gpu-deps/shared"
fi
[[ -e ../shared ]] || say "no ../shared: tests that read its models will fail"

libraries="$prefix/usr/lib/$arch:$prefix/lib/$arch"
export CMAKE_PREFIX_PATH="$prefix/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
export CMAKE_INCLUDE_PATH="$prefix/usr/include"
export CMAKE_LIBRARY_PATH="$prefix/usr/lib/$arch"
export PKG_CONFIG_PATH="$prefix/usr/lib/$arch/pkgconfig:$prefix/usr/share/pkgconfig"
export LD_LIBRARY_PATH="$libraries${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# CMake finds the prefix's pkg-config through CMAKE_PREFIX_PATH; on PATH the prefix comes last.
export PATH="$PATH:$prefix/usr/bin"

# configure_cuda_build DIR LOG [cmake arguments]: configures DIR with CUDA for sm_90 against the
# prefix (Ninja, RelWithDebInfo), the output also in LOG; returns cmake's status.
configure_cuda_build() {
  local dir=$1 log=$2
  shift 2
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$CMAKE_PREFIX_PATH" "$@" 2>&1 | tee "$log"
  return "${PIPESTATUS[0]}"
}

# run_test_binaries BUILD_DIR LOG_DIR SCRIPT TEST...: runs each test binary with its output in
# LOG_DIR/TEST.log and prints its summary line. A skipped gpu test means no GPU was seen: on a GPU
# machine that is a failure, not a pass. Returns 1 when any test failed or skipped.
run_test_binaries() {
  local build=$1 logs=$2 script=$3 status=0 test rc
  shift 3
  for test in "$@"; do
    "$build/tests/$test" >"$logs/$test.log" 2>&1
    rc=$?
    if grep -q "SKIPPED.*Gpu" "$logs/$test.log"; then
      echo "$script: $test: gpu tests SKIPPED (no GPU seen?)"
      status=1
    fi
    echo "$script: $test: $(grep -E '^\[  (PASSED|FAILED)' "$logs/$test.log" | tr '\n' ' ') (exit $rc)"
    [[ $rc -eq 0 ]] || status=1
  done
  return $status
}
