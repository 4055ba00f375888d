#!/usr/bin/env bash
# P6b — what registered, unloaded models cost: mmserve started with 1, then BENCH_MODELS (100)
# `load: on_demand` embedders, each its own path (symbolic links to one GGUF, so each header is
# read as a distinct file's), none asked: the time from start to ready (every header read and
# checked, the memory plan made) and the resident memory once ready. Alternating rounds.
#   bench/registry.sh [tiny|base]   (BENCH_MODELS=100 BENCH_ROUNDS=3)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SIZE="${1:-tiny}"
N="${BENCH_MODELS:-100}"
ROUNDS="${BENCH_ROUNDS:-3}"
EMB="$ROOT/models/generated/bert-$SIZE.gguf"
source "$ROOT/bench/lib.sh"
ensure_model "$EMB" "$SIZE"
mkdir -p "$TMP/files"
# config COUNT: COUNT on-demand embedders, each from its own link.
config() {
  echo "models:"
  for i in $(seq 1 "$1"); do
    ln -sf "$EMB" "$TMP/files/m$i.gguf"
    echo "  - {name: m$i, path: $TMP/files/m$i.gguf, load: on_demand, keep_alive: 5m}"
  done
}
config 1 >"$TMP/one.yaml"
config "$N" >"$TMP/many.yaml"
# start YAML: prints "seconds-to-ready rss-KiB".
start() {
  local port t0 pid
  port="$(free_port)"
  t0=$(date +%s%N)
  "$MMSERVE" --log-level warn serve "$1" --port "$port" --grpc-port -1 --lock-dir "$TMP/locks" &
  pid=$!
  until curl -sf -o /dev/null "127.0.0.1:$port/v2/health/ready"; do
    kill -0 "$pid" 2>/dev/null || { echo "mmserve exited" >&2; exit 1; }
    sleep 0.01
  done
  echo "$(( ($(date +%s%N) - t0) / 1000 )) $(awk '/VmRSS/ {print $2}' "/proc/$pid/status")"
  stop "$pid"
}
RUNS=()
for _ in $(seq 1 "$ROUNDS"); do RUNS+=("$(start "$TMP/one.yaml")" "$(start "$TMP/many.yaml")"); done
python3 - "$N" "$SIZE" "${RUNS[@]}" <<'PY'
import statistics, sys
n, size = int(sys.argv[1]), sys.argv[2]
runs = [tuple(int(x) for x in r.split()) for r in sys.argv[3:]]
one, many = runs[0::2], runs[1::2]
med = lambda rs, i: statistics.median(r[i] for r in rs)
print(f"P6b — {n} registered on-demand models (bert-{size}, none loaded) against 1, {len(one)} alternating rounds")
print(f"| | 1 model | {n} models | difference | goal |")
print("|---|---|---|---|---|")
print(f"| start to ready (s), median | {med(one, 0)/1e6:.2f} | {med(many, 0)/1e6:.2f} | {(med(many, 0) - med(one, 0))/1e6:+.2f} | {n} models < 1 s |")
print(f"| RSS when ready (MiB), median | {med(one, 1)/1024:.1f} | {med(many, 1)/1024:.1f} | {(med(many, 1) - med(one, 1))/1024:+.1f} | ≤ 50 MiB for {n} |")
PY
