#!/usr/bin/env bash
# P6 — memory. (1) Resident memory per idle loaded model beyond its weights: mmserve serving one
# embedder, then 1 + K copies of it (the same file under K more names), each asked once and then
# idle; the growth per extra model minus the file's size (its weights); beside it the engine's
# own cost, bench/raw_cold_start --copies: llama.cpp loading 1 + K copies the same way, each
# with an embedding context like mmserve's default that embedded one text. (2) RSS growth over a
# mixed soak: embed, rerank, generate and identity traffic at once for BENCH_SOAK seconds; RSS
# sampled after the first tenth (warm) and at the end. Fails (exit 1) when RSS grew more than
# BENCH_RSS_GROWTH_PCT (1 %) from warm to end, or any request failed.
#   bench/memory.sh [tiny|base]    (BENCH_COPIES=4, BENCH_SOAK=600)
# The long variant, hours of soak, also samples device memory (nvidia-smi or npu-smi, where
# either exists):
#   BENCH_SOAK=14400 bench/memory.sh base
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SIZE="${1:-tiny}"
K="${BENCH_COPIES:-4}"
SOAK="${BENCH_SOAK:-600}"
EMB="$ROOT/models/generated/bert-$SIZE.gguf"
RR="$ROOT/models/generated/rerank-$SIZE.gguf"
LLM="$ROOT/models/generated/llama-$SIZE.gguf"
source "$ROOT/bench/lib.sh"
ensure_model "$EMB" "$SIZE"
# device_mib: device memory in use (MiB) where a device tool exists, else "-".
device_mib() {
  if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | awk '{s += $1} END {print s}'
  elif command -v npu-smi >/dev/null 2>&1; then
    npu-smi info -t usages -i 0 2>/dev/null | awk -F: '/HBM Usage|DDR Usage/ {gsub(/ /, "", $2); print $2; exit}'
  else
    echo "-"
  fi
}
printf '{"inputs":[{"name":"TEXT","datatype":"BYTES","shape":[1],"data":["an idle model"]}]}' >"$TMP/embed.json"

# idle_rss COPIES IDLE_MS: RSS (KiB) of mmserve serving COPIES embedders, each asked once, then
# idle for a second past IDLE_MS, their params.idle_context_ms (-1: each keeps its context).
idle_rss() {
  {
    echo "models:"
    for i in $(seq 1 "$1"); do
      printf '  - name: e%d\n    path: %s\n    task: embed\n    params: {n_threads: %d, idle_context_ms: %d}\n' \
        "$i" "$EMB" "$THREADS" "$2"
    done
  } >"$TMP/idle.yaml"
  local port pid
  port="$(free_port)"
  "$MMSERVE" --log-level warn serve "$TMP/idle.yaml" --port "$port" --lock-dir "$TMP/locks" &
  pid=$!
  wait_ok "127.0.0.1:$port/v2/health/ready"
  for i in $(seq 1 "$1"); do
    curl -sf -o /dev/null -H 'Content-Type: application/json' --data @"$TMP/embed.json" "127.0.0.1:$port/v2/models/e$i/infer"
  done
  sleep $(( $2 > 0 ? 1 + $2 / 1000 : 1 ))
  rss_kib "$pid"
  stop "$pid"
}
ONE_KEPT="$(idle_rss 1 -1)"
MANY_KEPT="$(idle_rss $((K + 1)) -1)"
ONE="$(idle_rss 1 1000)"
MANY="$(idle_rss $((K + 1)) 1000)"
WEIGHTS_KIB=$(( $(stat -c %s "$EMB") / 1024 ))
RAW="$("$(peer raw_cold_start)" --model "$EMB" --text "an idle model" --threads "$THREADS" \
        --rounds 0 --copies "$K")"

# The soak: every task at once.
PORT="$(free_port)"
cat >"$TMP/soak.yaml" <<YAML
models:
  - {name: embedder, path: $EMB, task: embed, max_batch: 16, params: {n_threads: $THREADS}}
  - {name: reranker, path: $RR, task: rerank, max_batch: 8, params: {n_threads: $THREADS}}
  - {name: llm, path: $LLM, task: generate, timeout_ms: 600000, params: {n_parallel: 2, n_ctx: 1024, n_threads: $THREADS}}
  - name: echo
    backend: identity
    params: {tensors: [{input: X, output: Y, datatype: INT32, shape: [-1]}]}
YAML
"$MMSERVE" --log-level warn serve "$TMP/soak.yaml" --port "$PORT" --lock-dir "$TMP/locks" &
PID=$!
wait_ok "127.0.0.1:$PORT/v2/health/ready"
printf '{"model":"reranker","query":"q","documents":["a b","c d","e f"]}' >"$TMP/rerank.json"
printf '{"model":"llm","messages":[{"role":"user","content":"hello"}],"max_tokens":8,"temperature":0}' >"$TMP/chat.json"
printf '{"inputs":[{"name":"X","datatype":"INT32","shape":[4],"data":[1,2,3,4]}]}' >"$TMP/echo.json"
WARM=$(( SOAK / 10 > 1 ? SOAK / 10 : 1 ))
run() { "$LOAD" --port "$PORT" --seconds "$((SOAK - WARM))" --warmup "$WARM" "$@"; }
run --path /v2/models/embedder/infer --body-file "$TMP/embed.json" --expect EMBEDDING --concurrency 2 >"$TMP/s.embed" &
A=$!
run --path /v1/rerank --body-file "$TMP/rerank.json" --expect relevance_score --concurrency 1 >"$TMP/s.rerank" &
B=$!
run --path /v1/chat/completions --body-file "$TMP/chat.json" --expect completion_tokens --concurrency 1 >"$TMP/s.chat" &
C=$!
run --path /v2/models/echo/infer --body-file "$TMP/echo.json" --expect '"Y"' --concurrency 1 >"$TMP/s.echo" &
D=$!
sleep "$WARM"
START_RSS="$(rss_kib "$PID")"
START_DEV="$(device_mib)"
FAILED=0
for p in $A $B $C $D; do wait "$p" || FAILED=1; done
END_RSS="$(rss_kib "$PID")"
END_DEV="$(device_mib)"
stop "$PID"
cat "$TMP"/s.* >&2

python3 - "$SIZE" "$K" "$ONE" "$MANY" "$WEIGHTS_KIB" "$SOAK" "$START_RSS" "$END_RSS" "$TMP" "$RAW" \
    "${BENCH_RSS_GROWTH_PCT:-1}" "$START_DEV" "$END_DEV" "$ONE_KEPT" "$MANY_KEPT" <<'PY' || FAILED=1
import json, sys
size, k, one, many, weights, soak, start, end, tmp = sys.argv[1], int(sys.argv[2]), *map(int, sys.argv[3:9]), sys.argv[9]
raw = json.loads(sys.argv[10])["rss_per_copy_kib"]
bound, dev_start, dev_end = float(sys.argv[11]), sys.argv[12], sys.argv[13]
one_kept, many_kept = int(sys.argv[14]), int(sys.argv[15])
print(f"| P6, bert-{size} | mmserve | raw llama.cpp | ratio | goal |")
print("|---|---|---|---|---|")
for label, lo, hi in (("context kept (idle_context_ms: -1)", one_kept, many_kept),
                      ("context freed (idle_context_ms: 1000)", one, many)):
    per = (hi - lo) / k
    print(f"| {label}: RSS, 1 / {k + 1} idle embedders (MiB) | {lo/1024:.1f} / {hi/1024:.1f} | | | |")
    print(f"| ... per extra idle model (MiB) | {per/1024:.2f} | {raw/1024:.2f} | {per/raw:.3f}x | |")
    print(f"| ... of which beyond its weights ({weights/1024:.1f} MiB file) (MiB) | {(per - weights)/1024:.2f} | {(raw - weights)/1024:.2f} | {(per - weights)/max(raw - weights, 1):.2f}x | ≤ 5 |")
reqs = sum(json.loads(open(f'{tmp}/s.{k}').read())['requests'] for k in ('embed', 'rerank', 'chat', 'echo'))
growth = (end - start) / start * 100
print(f"| soak {soak} s, {reqs} mixed requests: RSS warm → end (MiB) | {start/1024:.1f} → {end/1024:.1f} ({growth:+.2f} %) | | | ≤ +{bound:g} % |")
if dev_start != "-":
    print(f"| soak {soak} s: device memory in use warm → end (MiB) | {dev_start} → {dev_end} | | | |")
if growth > bound:
    print(f"FAIL: RSS grew {growth:+.2f} % from warm to end (bound {bound:g} %)", file=sys.stderr)
    sys.exit(1)
PY
exit "$FAILED"
