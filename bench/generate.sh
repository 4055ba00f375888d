#!/usr/bin/env bash
# P2 — generated tokens/s with S concurrent streams (default 4), mmserve against llama-server from
# the same bundle: same model, same threads, S slots each (-np S), greedy, 32 tokens per request,
# one after the other in one run. Each answer is checked to hold exactly 32 generated tokens.
#   bench/generate.sh [tiny|base]    (BENCH_SECONDS=30 BENCH_STREAMS=4)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SIZE="${1:-tiny}"
SECS="${BENCH_SECONDS:-30}"
S="${BENCH_STREAMS:-4}"
N=32
MODEL="$ROOT/models/generated/llama-$SIZE.gguf"
source "$ROOT/bench/lib.sh"
ensure_model "$MODEL" "$SIZE"
PROMPT="Once upon a time, in a land far away, there lived"

P1="$(free_port)"
cat >"$TMP/m.yaml" <<YAML
models:
  - name: llm
    path: $MODEL
    task: generate
    timeout_ms: 600000
    params: {n_parallel: $S, n_ctx: 512, n_batch: 512, n_threads: $THREADS}
YAML
"$MMSERVE" --log-level warn serve "$TMP/m.yaml" --port "$P1" --lock-dir "$TMP/locks" &
MM_PID=$!
wait_ok "127.0.0.1:$P1/v2/health/ready"
printf '{"parameters":{"max_tokens":%d},"inputs":[{"name":"PROMPT","datatype":"BYTES","shape":[1],"data":["%s"]}]}' \
  "$N" "$PROMPT" >"$TMP/kserve.json"
MM="$("$LOAD" --port "$P1" --path /v2/models/llm/infer --body-file "$TMP/kserve.json" \
      --expect "\"completion_tokens\":$N" --concurrency "$S" --seconds "$SECS" --warmup 3)"
stop "$MM_PID"

P2="$(free_port)"
"$SERVER" -m "$MODEL" -np "$S" -c $((S * 512)) -b 512 -ub 512 -t "$THREADS" --no-warmup \
  --host 127.0.0.1 --port "$P2" >"$TMP/llama-server.log" 2>&1 &
LS_PID=$!
wait_ok "127.0.0.1:$P2/health"
printf '{"prompt":"%s","n_predict":%d,"temperature":0,"cache_prompt":false}' "$PROMPT" "$N" >"$TMP/native.json"
LS="$("$LOAD" --port "$P2" --path /completion --body-file "$TMP/native.json" \
      --expect "\"tokens_predicted\":$N" --concurrency "$S" --seconds "$SECS" --warmup 3)"

python3 - "$SIZE" "$S" "$N" "$MM" "$LS" <<'PY'
import json, sys
size, s, n, mm, ls = sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4]), json.loads(sys.argv[5])
print(f"| llama-{size}, {s} streams, {n} tokens each | mmserve | llama-server | ratio |")
print("|---|---|---|---|")
print(f"| generated tokens/s | {mm['rps']*n:.1f} | {ls['rps']*n:.1f} | {mm['rps']/ls['rps']:.2f}x |")
print(f"| p50 request latency (ms) | {mm['p50_us']/1000:.0f} | {ls['p50_us']/1000:.0f} | {mm['p50_us']/max(ls['p50_us'],1):.2f}x |")
print(f"| errors | {mm['errors']} | {ls['errors']} | |")
PY
