#!/usr/bin/env bash
# P1 — embeddings/s with C concurrent single-text clients (default 64), mmserve against
# llama-server and against a raw batched llama.h loop (bench/raw_embed_loop.cc), all from the same
# llama.cpp bundle, same model file, same thread count, one after the
# other in one run. llama-server is tuned for the load: -np C slots, -ub/-b 2048 (one decode can
# take every waiting text), -c C x the model's context (so each slot keeps the full 512).
#   bench/embeddings.sh [tiny|base]    (BENCH_SECONDS=20 BENCH_CONCURRENCY=64; BENCH_BINARY=true
#   asks mmserve for binary output tensors instead of JSON numbers)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SIZE="${1:-tiny}"
SECS="${BENCH_SECONDS:-20}"
C="${BENCH_CONCURRENCY:-64}"
MODEL="$ROOT/models/generated/bert-$SIZE.gguf"
source "$ROOT/bench/lib.sh"
ensure_model "$MODEL" "$SIZE"
TEXT="The quick brown fox jumps over the lazy dog near the river bank."

# mmserve
P1="$(free_port)"
cat >"$TMP/m.yaml" <<YAML
models:
  - name: embedder
    path: $MODEL
    task: embed
    max_batch: $C
    max_queue_delay_ms: 5
    queue: {max_size: 100000}
    params: {n_parallel: $C, n_batch: 2048, n_threads: $THREADS}
YAML
"$MMSERVE" --log-level warn serve "$TMP/m.yaml" --port "$P1" --lock-dir "$TMP/locks" &
MM_PID=$!
wait_ok "127.0.0.1:$P1/v2/health/ready"
printf '{"parameters":{"binary_data_output":%s},"inputs":[{"name":"TEXT","datatype":"BYTES","shape":[1],"data":["%s"]}]}' \
  "${BENCH_BINARY:-false}" "$TEXT" >"$TMP/kserve.json"
MM="$("$LOAD" --port "$P1" --path /v2/models/embedder/infer --body-file "$TMP/kserve.json" \
      --expect EMBEDDING --concurrency "$C" --seconds "$SECS" --warmup 2)"
stop "$MM_PID"

# llama-server
P2="$(free_port)"
"$SERVER" -m "$MODEL" --embedding -np "$C" -ub 2048 -b 2048 -c $((C * 512)) -t "$THREADS" \
  --host 127.0.0.1 --port "$P2" >"$TMP/llama-server.log" 2>&1 &
LS_PID=$!
wait_ok "127.0.0.1:$P2/health"
printf '{"input":"%s"}' "$TEXT" >"$TMP/openai.json"
LS="$("$LOAD" --port "$P2" --path /v1/embeddings --body-file "$TMP/openai.json" \
      --expect embedding --concurrency "$C" --seconds "$SECS" --warmup 2)"

stop "$LS_PID"

# The engine's limit: llama.cpp called directly, C copies of the text per decode.
RAW="$("$ROOT/build/bench/raw_embed_loop" --model "$MODEL" --text "$TEXT" --batch "$C" \
       --threads "$THREADS" --seconds "$SECS" --warmup 2)"

python3 - "$SIZE" "$C" "$MM" "$LS" "$RAW" <<'PY'
import json, sys
size, c = sys.argv[1], sys.argv[2]
mm, ls, raw = (json.loads(a) for a in sys.argv[3:6])
print(f"| bert-{size}, {c} clients | mmserve | llama-server | ratio |")
print("|---|---|---|---|")
print(f"| embeddings/s | {mm['rps']:.1f} | {ls['rps']:.1f} | {mm['rps']/ls['rps']:.2f}x |")
print(f"| embeddings/s vs the raw batched llama.h loop | {mm['rps']:.1f} | raw {raw['rps']:.1f} | {mm['rps']/raw['rps']:.2f}x |")
for p in ("p50_us", "p99_us"):
    print(f"| {p[:-3]} latency (ms) | {mm[p]/1000:.1f} | {ls[p]/1000:.1f} | {mm[p]/max(ls[p],1):.2f}x |")
print(f"| errors | {mm['errors']} | {ls['errors']} | |")
PY
