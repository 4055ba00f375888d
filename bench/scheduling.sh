#!/usr/bin/env bash
# Scheduler benchmarks, each side by side in one run on one mmserve process:
#
#   S1 dynamic batching on vs off — the base embedder, 64 concurrent single-text clients:
#      max_batch 64 + max_queue_delay_ms 5 against max_batch 1 (one text per execution, what a
#      server without a batcher does). Two models from the same file in one server, measured in
#      alternating rounds (BENCH_ROUNDS, default 2) so that drift hits both.
#   S2 priority isolation — model A (tiny embedder, priority high, BENCH_A_CLIENTS closed-loop
#      clients) alone, then while model B (base embedder, priority low, nice 10) is saturated by
#      64 clients; and the same with A and B at equal priority and nice 0.
#
#      Control: B replaced by an identity model that answers its 64 clients every 1.5 s without
#      computing — what B's HTTP traffic alone (64 client threads on this machine, the shared
#      I/O threads) does to A.
#
#   bench/scheduling.sh    (BENCH_SECONDS=15 BENCH_ROUNDS=2 BENCH_A_CLIENTS=2; BENCH_ONLY=s1|s2;
#                           BENCH_A_THREADS, BENCH_B_CLIENT_NICE for experiments)
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

ON=(); OFF=()
# ---- S1 ----
if [[ "${BENCH_ONLY:-s1,s2}" == *s1* ]]; then
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
for _ in $(seq 1 "$ROUNDS"); do
  ON+=("$(load batched 64 "$SECS")")
  OFF+=("$(load unbatched 64 "$SECS")")
done
stop "$PID"
# What the engine itself gains from batching: the raw llama.h loop at batch 64 and at batch 1.
RAW64="$("$(peer raw_embed_loop)" --model "$BASE" --text "$TEXT" --batch 64 \
         --threads "$THREADS" --seconds "$SECS" --warmup 2)"
RAW1="$("$(peer raw_embed_loop)" --model "$BASE" --text "$TEXT" --batch 1 \
        --threads "$THREADS" --seconds "$SECS" --warmup 2)"
fi

# ---- S2 ----
# two_models PRIORITY_OF_B [identity]: A high, B as given; with "identity", B is an identity
# model that answers batches of 64 after 1.5 s without computing (the HTTP traffic alone).
two_models() {
  local engine="path: $BASE
    task: embed
    max_queue_delay_ms: 5
    params: {n_parallel: 64, n_batch: 2048, n_threads: $THREADS}"
  if [[ "${2:-}" == identity ]]; then
    engine="backend: identity
    params: {latency_ms: 1500, tensors: [{input: TEXT, output: EMBEDDING, datatype: BYTES}]}"
  fi
  cat <<YAML
models:
  - name: a
    path: $TINY
    task: embed
    priority: high
    max_batch: 16
    params: {n_parallel: 16, n_threads: ${BENCH_A_THREADS:-$THREADS}}
  - name: b
    priority: $1
    nice: $([[ $1 == low ]] && echo 10 || echo 0)
    max_batch: 64
    queue: {max_size: 100000}
    $engine
YAML
}
# a_under_load: A's latency while B is saturated by 64 clients (B's own run is longer).
a_under_load() {
  nice -n "${BENCH_B_CLIENT_NICE:-0}" "$LOAD" --port "$PORT" --path /v2/models/b/infer \
    --body-file "$TMP/embed.json" --expect EMBEDDING --concurrency 64 --seconds $((SECS + 4)) \
    --warmup 2 >"$TMP/b.json" &
  local bpid=$!
  sleep 2
  load a "$A_CLIENTS" "$SECS"
  wait "$bpid" || true
}
if [[ "${BENCH_ONLY:-s1,s2}" == *s2* ]]; then
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
two_models low identity >"$TMP/s2-http.yaml"
serve "$TMP/s2-http.yaml"
HTTP_ONLY="$(a_under_load)"
stop "$PID"
fi

E='{}'
python3 - "$ROUNDS" "$A_CLIENTS" "${ALONE:-$E}" "${LOADED:-$E}" "${EQUAL:-$E}" "${B_LOADED:-$E}" \
  "${B_EQUAL:-$E}" "${HTTP_ONLY:-$E}" "${RAW64:-$E}" "${RAW1:-$E}" "${ON[@]}" "${OFF[@]}" <<'PY'
import json, statistics, sys
rounds, a_clients = int(sys.argv[1]), sys.argv[2]
alone, loaded, equal, b_loaded, b_equal, http_only, raw64, raw1 = (json.loads(a) for a in sys.argv[3:11])
runs = [json.loads(a) for a in sys.argv[11:]]
on, off = runs[:rounds], runs[rounds:]
if on:
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
    print(f"| the engine alone: raw llama.h loop, batch 64 vs batch 1 | {raw64['rps']:.1f} | {raw1['rps']:.1f} | {raw64['rps']/raw1['rps']:.2f}x |")
if alone:
    print()
    print(f"S2 — model A (bert-tiny, priority high, {a_clients} clients) while model B (bert-base, 64 clients) is saturated")
    print("| A's latency | A alone | B saturated, B low priority | ratio | B saturated, equal priority | ratio | control: B's HTTP traffic only (identity, no compute) | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for p in ("p50_us", "p90_us", "p99_us"):
        print(f"| {p[:-3]} (ms) | {alone[p]/1000:.2f} | {loaded[p]/1000:.2f} | {loaded[p]/alone[p]:.2f}x | "
              f"{equal[p]/1000:.2f} | {equal[p]/alone[p]:.2f}x | {http_only[p]/1000:.2f} | {http_only[p]/alone[p]:.2f}x |")
    print(f"| A requests/s | {alone['rps']:.0f} | {loaded['rps']:.0f} | | {equal['rps']:.0f} | | {http_only['rps']:.0f} | |")
    print(f"| B embeddings/s meanwhile | | {b_loaded['rps']:.1f} | | {b_equal['rps']:.1f} | |")
    print(f"| errors (A / B) | {alone['errors']} | {loaded['errors']} / {b_loaded['errors']} | | "
          f"{equal['errors']} / {b_equal['errors']} | |")
PY
