# Sourced by the GPU serving scripts: start_server OUT_DIR ARGS... runs `build/tessera serve
# --port 0 ARGS...` in the background (stdout to OUT_DIR/serve.out, stderr to OUT_DIR/serve.err),
# waits until it prints the address it listens on (at most 120 s), and sets `server` (its pid)
# and `url`. Returns 1, with the end of serve.err printed, when it exits or never listens.
start_server() {
  local out=$1
  shift
  build/tessera serve --port 0 "$@" >"$out/serve.out" 2>"$out/serve.err" &
  server=$!
  url=""
  for _ in $(seq 1 600); do
    url=$(sed -n 's/^listening on //p' "$out/serve.out")
    [[ -n $url ]] && return 0
    kill -0 "$server" 2>/dev/null || break
    sleep 0.2
  done
  echo "the server did not start:"
  tail -20 "$out/serve.err"
  return 1
}
