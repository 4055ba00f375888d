# Shared by the bench/*.sh scripts (sourced): a temp dir cleaned on exit with every server the
# script started, a free loopback port, and waiting for a URL to answer 200.
TMP="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$TMP"' EXIT
THREADS="$(nproc)"
LOAD="$ROOT/build/bench/loadgen"
SERVER="$ROOT/.deps/llama-cpu-build/bin/llama-server"
MMSERVE="${MMSERVE:-$ROOT/build/src/app/mmserve}"  # MMSERVE=... runs another build (A/B)

# BENCH_PIN=1: the load tool on core 0, everything it measures (mmserve and its workers,
# llama-server, the raw loops and bare servers, through `peer`) on the other cores, with THREADS
# set to their count: the client cannot take the measured side's cycles (issue #45). Each
# command runs through a wrapper in $TMP that calls taskset; the load tool reports its own CPU
# either way (client_cpu_cores).
pin_to() {  # pin_to CPUS BINARY: prints the path of a wrapper that runs BINARY on CPUS
  local wrapper="$TMP/pinned-$(basename "$2")"
  if [[ ! -x "$wrapper" ]]; then
    printf '#!/bin/sh\nexec taskset -c %s %s "$@"\n' "$1" "$2" >"$wrapper"
    chmod +x "$wrapper"
  fi
  echo "$wrapper"
}
if [[ "${BENCH_PIN:-0}" == 1 ]]; then
  (( THREADS >= 2 )) || { echo "BENCH_PIN=1 needs two cores or more" >&2; exit 1; }
  SERVER_CPUS="1-$((THREADS - 1))"
  THREADS=$((THREADS - 1))
  LOAD="$(pin_to 0 "$LOAD")"
  SERVER="$(pin_to "$SERVER_CPUS" "$SERVER")"
  MMSERVE="$(pin_to "$SERVER_CPUS" "$MMSERVE")"
fi
# peer NAME: how to run build/bench/NAME, a measured peer (a raw loop, a bare server): on the
# server's cores under BENCH_PIN=1.
peer() {
  if [[ "${BENCH_PIN:-0}" == 1 ]]; then
    pin_to "$SERVER_CPUS" "$ROOT/build/bench/$1"
  else
    echo "$ROOT/build/bench/$1"
  fi
}
PIN_NOTE="shared cores (client and server on all $(nproc))"
[[ "${BENCH_PIN:-0}" == 1 ]] && PIN_NOTE="pinned (client on core 0, the measured side on $SERVER_CPUS)"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_ok() { for _ in $(seq 1 900); do curl -sf -o /dev/null "$1" && return 0; sleep 0.1; done; return 1; }
# ensure_model FILE SIZE: generates the SIZE models when FILE is missing.
ensure_model() { [[ -f "$1" ]] || MMSERVE_MODEL_SIZES="$2" bash "$ROOT/scripts/setup.sh" >/dev/null; }
# rss_kib PID...: the resident memory of these processes together, in KiB (a process gone counts 0).
rss_kib() {
  local total=0 kib
  for p in "$@"; do
    kib=$(awk '/VmRSS/ {print $2}' "/proc/$p/status" 2>/dev/null || true)
    total=$((total + ${kib:-0}))
  done
  echo "$total"
}
# echo_and_embed_bodies: $TMP/echo.json (140 INT32s in X, about 1 KB of JSON, for an identity
# model) and $TMP/embed.json (one sentence in TEXT, for an embedder).
echo_and_embed_bodies() {
  python3 - "$TMP/echo.json" <<'PY'
import json, sys
data = list(range(100000, 100140))
body = {"inputs": [{"name": "X", "datatype": "INT32", "shape": [len(data)], "data": data}]}
open(sys.argv[1], "w").write(json.dumps(body, separators=(",", ":")))
PY
  printf '{"inputs":[{"name":"TEXT","datatype":"BYTES","shape":[1],"data":["%s"]}]}' \
    "The quick brown fox jumps over the lazy dog near the river bank." >"$TMP/embed.json"
}
# stop PID: stops a server started in the background and waits for it.
stop() { kill "$1"; wait "$1" 2>/dev/null || true; }
