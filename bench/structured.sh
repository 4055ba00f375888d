#!/usr/bin/env bash
# P11 — structured output: generated tokens/s with a JSON schema (a grammar-constrained answer)
# against the same requests without one, and against llama-server from the same bundle with the
# same schema on the same GGUF. Same model, threads and slots (-np S), greedy, N tokens per
# answer: greedy, the random-weight model stays inside the schema's string past N tokens, so every
# answer is exactly N tokens (checked). Rounds alternate mmserve (schema, none) and
# llama-server (schema); the table gives each round and the median of the ratios.
#   bench/structured.sh [tiny|base]    (BENCH_SECONDS=20 BENCH_STREAMS=4 BENCH_ROUNDS=3)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SIZE="${1:-tiny}"
SECS="${BENCH_SECONDS:-20}"
S="${BENCH_STREAMS:-4}"
ROUNDS="${BENCH_ROUNDS:-3}"
N=64
MODEL="$ROOT/models/generated/llama-$SIZE.gguf"
source "$ROOT/bench/lib.sh"
ensure_model "$MODEL" "$SIZE"
PROMPT="Describe the weather in JSON:"
SCHEMA='{"type":"object","properties":{"report":{"type":"string"}},"required":["report"],"additionalProperties":false}'

P1="$(free_port)"
cat >"$TMP/m.yaml" <<YAML
models:
  - name: llm
    path: $MODEL
    task: generate
    timeout_ms: 600000
    params: {n_parallel: $S, n_ctx: 512, n_batch: 512, n_threads: $THREADS}
YAML
printf '{"model":"llm","prompt":"%s","max_tokens":%d,"temperature":0,"response_format":{"type":"json_schema","json_schema":{"name":"r","schema":%s}}}' \
  "$PROMPT" "$N" "$SCHEMA" >"$TMP/schema.json"
printf '{"model":"llm","prompt":"%s","max_tokens":%d,"temperature":0}' "$PROMPT" "$N" >"$TMP/plain.json"
printf '{"prompt":"%s","n_predict":%d,"temperature":0,"cache_prompt":false,"json_schema":%s}' \
  "$PROMPT" "$N" "$SCHEMA" >"$TMP/native.json"
run() {  # run PORT PATH BODY EXPECT
  "$LOAD" --port "$1" --path "$2" --body-file "$3" --expect "$4" --concurrency "$S" \
    --seconds "$SECS" --warmup 2
}
RESULTS=()
for _ in $(seq 1 "$ROUNDS"); do
  "$MMSERVE" --log-level warn serve "$TMP/m.yaml" --port "$P1" --grpc-port -1 --lock-dir "$TMP/locks" &
  MM_PID=$!
  wait_ok "127.0.0.1:$P1/v2/health/ready"
  RESULTS+=("$(run "$P1" /v1/completions "$TMP/schema.json" "\"completion_tokens\":$N")")
  RESULTS+=("$(run "$P1" /v1/completions "$TMP/plain.json" "\"completion_tokens\":$N")")
  stop "$MM_PID"
  P2="$(free_port)"
  "$SERVER" -m "$MODEL" -np "$S" -c $((S * 512)) -b 512 -ub 512 -t "$THREADS" --no-warmup \
    --host 127.0.0.1 --port "$P2" >"$TMP/llama-server.log" 2>&1 &
  LS_PID=$!
  wait_ok "127.0.0.1:$P2/health"
  RESULTS+=("$(run "$P2" /completion "$TMP/native.json" "\"tokens_predicted\":$N")")
  stop "$LS_PID"
done

python3 - "$SIZE" "$S" "$N" "${RESULTS[@]}" <<'PY'
import json, statistics, sys
size, s, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
r = [json.loads(a) for a in sys.argv[4:]]
rounds = [(a["rps"] * n, b["rps"] * n, c["rps"] * n, a["errors"] + b["errors"] + c["errors"])
          for a, b, c in zip(r[0::3], r[1::3], r[2::3])]
print(f"| llama-{size}, {s} streams, {n} tokens each | mmserve, json_schema | mmserve, no schema | llama-server, json_schema | schema / none | mmserve / llama-server |")
print("|---|---|---|---|---|---|")
for i, (sch, plain, ls, err) in enumerate(rounds, 1):
    print(f"| round {i}: generated tokens/s (errors {err}) | {sch:.1f} | {plain:.1f} | {ls:.1f} | {sch/plain:.2f}x | {sch/ls:.2f}x |")
print(f"| median of {len(rounds)} rounds | | | | **{statistics.median(a/b for a, b, _, _ in rounds):.2f}x** | **{statistics.median(a/c for a, _, c, _ in rounds):.2f}x** |")
PY
