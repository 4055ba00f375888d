#!/usr/bin/env bash
# P2 — generated tokens/s with S concurrent streams (default 4), mmserve against llama-server from
# the same bundle: same model, same threads, S slots each (-np S), greedy, 32 tokens per request,
# one after the other in one run. Each answer is checked to hold exactly 32 generated tokens.
# Then the same clients stream (/v1/completions with stream: true, on both servers): time
# to the first event and the gaps between events (inter-token latency). Last, one stream alone
# against the engine's own loop (bench/raw_generate_loop.cc: llama.h, greedy, no server).
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
# Streamed: /v1/completions on both (llama-server's chat endpoint fails some random-weight
# outputs in its own output parser); llama-server told not to reuse the cached prompt.
printf '{"model":"llm","prompt":"%s","max_tokens":%d,"temperature":0,"stream":true}' \
  "$PROMPT" "$N" >"$TMP/stream.json"
printf '{"model":"llm","prompt":"%s","max_tokens":%d,"temperature":0,"stream":true,"cache_prompt":false}' \
  "$PROMPT" "$N" >"$TMP/stream-ls.json"
stream() {  # stream PORT BODY: the streamed load
  "$LOAD" --port "$1" --path /v1/completions --body-file "$2" --stream \
    --expect "[DONE]" --concurrency "$S" --seconds "$SECS" --warmup 3
}
MM_S="$(stream "$P1" "$TMP/stream.json")"
MM_1="$("$LOAD" --port "$P1" --path /v2/models/llm/infer --body-file "$TMP/kserve.json" \
        --expect "\"completion_tokens\":$N" --concurrency 1 --seconds "$SECS" --warmup 3)"
stop "$MM_PID"

P2="$(free_port)"
"$SERVER" -m "$MODEL" -np "$S" -c $((S * 512)) -b 512 -ub 512 -t "$THREADS" --no-warmup \
  --host 127.0.0.1 --port "$P2" >"$TMP/llama-server.log" 2>&1 &
LS_PID=$!
wait_ok "127.0.0.1:$P2/health"
printf '{"prompt":"%s","n_predict":%d,"temperature":0,"cache_prompt":false}' "$PROMPT" "$N" >"$TMP/native.json"
LS="$("$LOAD" --port "$P2" --path /completion --body-file "$TMP/native.json" \
      --expect "\"tokens_predicted\":$N" --concurrency "$S" --seconds "$SECS" --warmup 3)"
LS_S="$(stream "$P2" "$TMP/stream-ls.json")"
stop "$LS_PID"
RAW_1="$("$ROOT/build/bench/raw_generate_loop" --model "$MODEL" --prompt "$PROMPT" --tokens "$N" \
         --threads "$THREADS" --seconds "$SECS" --warmup 3)"

python3 - "$SIZE" "$S" "$N" "$MM" "$LS" "$MM_S" "$LS_S" "$MM_1" "$RAW_1" <<'PY'
import json, sys
size, s, n, mm, ls = sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4]), json.loads(sys.argv[5])
mms, lss, mm1, raw1 = (json.loads(a) for a in sys.argv[6:10])
print(f"| llama-{size}, {s} streams, {n} tokens each | mmserve | llama-server | ratio |")
print("|---|---|---|---|")
print(f"| generated tokens/s | {mm['rps']*n:.1f} | {ls['rps']*n:.1f} | {mm['rps']/ls['rps']:.2f}x |")
print(f"| p50 request latency (ms) | {mm['p50_us']/1000:.0f} | {ls['p50_us']/1000:.0f} | {mm['p50_us']/max(ls['p50_us'],1):.2f}x |")
for key, label in (("ttft_p50_us", "streamed: time to first event p50"), ("ttft_p99_us", "streamed: time to first event p99"),
                   ("itl_p50_us", "streamed: inter-event gap p50"), ("itl_p99_us", "streamed: inter-event gap p99")):
    print(f"| {label} (ms) | {mms[key]/1000:.1f} | {lss[key]/1000:.1f} | {mms[key]/max(lss[key],1):.2f}x |")
print(f"| streamed: events per answer | {mms['events_per_request']:.1f} | {lss['events_per_request']:.1f} | |")
print(f"| errors | {mm['errors'] + mms['errors'] + mm1['errors']} | {ls['errors'] + lss['errors']} | |")
print()
print(f"| llama-{size}, one stream, {n} tokens each | mmserve | raw llama.h loop | ratio |")
print("|---|---|---|---|")
print(f"| generated tokens/s | {mm1['rps']*n:.1f} | {raw1['tokens_per_s']:.1f} | {mm1['rps']*n/raw1['tokens_per_s']:.3f}x |")
PY
