#!/usr/bin/env bash
# Scheduler benchmarks, each side by side in one run on one mmserve process:
#
#   S1 dynamic batching on vs off — the base embedder, 64 concurrent single-text clients:
#      max_batch 64 + max_queue_delay_ms 5 against max_batch 1 (one text per execution, what a
#      server without a batcher does). Two models from the same file in one server, measured in
#      alternating rounds (BENCH_ROUNDS, default 2) so that drift hits both.
#   S2 priority isolation — model A (tiny embedder, priority high, BENCH_A_CLIENTS closed-loop
#      clients) alone, then while model B (base embedder, priority low) is saturated by 64
#      clients; and, as the control, the same with A and B at equal priority (no renicing).
#
#   bench/scheduling.sh    (BENCH_SECONDS=15 BENCH_ROUNDS=2 BENCH_A_CLIENTS=2)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SECS="${BENCH_SECONDS:-15}"
ROUNDS="${BENCH_ROUNDS:-2}"
A_CLIENTS="${BENCH_A_CLIENTS:-2}"
BASE="$ROOT/models/generated/bert-base.gguf"
TINY="$ROOT/models/generated/bert-tiny.gguf"
source "$ROOT/bench/lib.sh"
ensure_model "$BASE" base
ensure_model "$TINY" tiny
TEXT="The quick brown fox jumps over the lazy dog near the river bank."
printf '{"inputs":[{"name":"TEXT","datatype":"BYTES","shape":[1],"data":["%s"]}]}' "$TEXT" \
  >"$TMP/embed.json"

# serve YAML_FILE: starts mmserve, sets PORT and PID.
serve() {
  PORT="$(free_port)"
  "$MMSERVE" --log-level warn serve "$1" --port "$PORT" --lock-dir "$TMP/locks" &
  PID=$!
  wait_ok "127.0.0.1:$PORT/v2/health/ready"
}
# load MODEL CLIENTS SECONDS: one closed-loop run against the server on $PORT.
load() {
  "$LOAD" --port "$PORT" --path "/v2/models/$1/infer" --body-file "$TMP/embed.json" \
    --expect EMBEDDING --concurrency "$2" --seconds "$3" --warmup 2
}

# ---- S1 ----
cat >"$TMP/s1.yaml" <<YAML
models:
  - name: batched
    path: $BASE
    task: embed
    max_batch: 64
    max_queue_delay_ms: 5
    queue: {max_size: 100000}
    params: {n_parallel: 64, n_batch: 2048, n_threads: $THREADS}
  - name: unbatched
    path: $BASE
    task: embed
    max_batch: 1
    queue: {max_size: 100000}
    params: {n_parallel: 64, n_batch: 2048, n_threads: $THREADS}
YAML
serve "$TMP/s1.yaml"
ON=(); OFF=()
for _ in $(seq 1 "$ROUNDS"); do
  ON+=("$(load batched 64 "$SECS")")
  OFF+=("$(load unbatched 64 "$SECS")")
done
stop "$PID"

# ---- S2 ----
# two_models PRIORITY_OF_B: A high, B as given.
two_models() {
  cat <<YAML
models:
  - name: a
    path: $TINY
    task: embed
    priority: high
    max_batch: 16
    params: {n_parallel: 16, n_threads: $THREADS}
  - name: b
    path: $BASE
    task: embed
    priority: $1
    max_batch: 64
    max_queue_delay_ms: 5
    queue: {max_size: 100000}
    params: {n_parallel: 64, n_batch: 2048, n_threads: $THREADS}
YAML
}
# a_under_load: A's latency while B is saturated by 64 clients (B's own run is longer).
a_under_load() {
  load b 64 $((SECS + 4)) >"$TMP/b.json" &
  local bpid=$!
  sleep 2
  load a "$A_CLIENTS" "$SECS"
  wait "$bpid" || true
}
two_models low >"$TMP/s2.yaml"
serve "$TMP/s2.yaml"
ALONE="$(load a "$A_CLIENTS" "$SECS")"
LOADED="$(a_under_load)"
B_LOADED="$(cat "$TMP/b.json")"
stop "$PID"
two_models high >"$TMP/s2-equal.yaml"
serve "$TMP/s2-equal.yaml"
EQUAL="$(a_under_load)"
B_EQUAL="$(cat "$TMP/b.json")"
stop "$PID"

python3 - "$ROUNDS" "$A_CLIENTS" "$ALONE" "$LOADED" "$EQUAL" "$B_LOADED" "$B_EQUAL" \
  "${ON[@]}" "${OFF[@]}" <<'PY'
import json, statistics, sys
rounds, a_clients = int(sys.argv[1]), sys.argv[2]
alone, loaded, equal, b_loaded, b_equal = (json.loads(a) for a in sys.argv[3:8])
runs = [json.loads(a) for a in sys.argv[8:]]
on, off = runs[:rounds], runs[rounds:]
print("S1 — dynamic batching, bert-base, 64 clients")
print("| round | batching on (emb/s) | off (emb/s) | on/off |")
print("|---|---|---|---|")
for i, (a, b) in enumerate(zip(on, off), 1):
    print(f"| {i} | {a['rps']:.1f} | {b['rps']:.1f} | {a['rps']/b['rps']:.2f}x |")
m_on = statistics.median(r['rps'] for r in on); m_off = statistics.median(r['rps'] for r in off)
print(f"| median | {m_on:.1f} | {m_off:.1f} | {m_on/m_off:.2f}x |")
print(f"| p99 latency (ms), median | {statistics.median(r['p99_us'] for r in on)/1000:.0f} | "
      f"{statistics.median(r['p99_us'] for r in off)/1000:.0f} | |")
print(f"| errors | {sum(r['errors'] for r in on)} | {sum(r['errors'] for r in off)} | |")
print()
print(f"S2 — model A (bert-tiny, priority high, {a_clients} clients) while model B (bert-base, 64 clients) is saturated")
print("| A's latency | A alone | B saturated, B low priority | ratio | B saturated, equal priority | ratio |")
print("|---|---|---|---|---|---|")
for p in ("p50_us", "p90_us", "p99_us"):
    print(f"| {p[:-3]} (ms) | {alone[p]/1000:.2f} | {loaded[p]/1000:.2f} | {loaded[p]/alone[p]:.2f}x | "
          f"{equal[p]/1000:.2f} | {equal[p]/alone[p]:.2f}x |")
print(f"| A requests/s | {alone['rps']:.0f} | {loaded['rps']:.0f} | | {equal['rps']:.0f} | |")
print(f"| B embeddings/s meanwhile | | {b_loaded['rps']:.1f} | | {b_equal['rps']:.1f} | |")
print(f"| errors (A / B) | {alone['errors']} | {loaded['errors']} / {b_loaded['errors']} | | "
      f"{equal['errors']} / {b_equal['errors']} | |")
PY
