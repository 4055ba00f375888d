#!/usr/bin/env bash
# P2 — generated tokens/s with S concurrent streams (default 4), mmserve against llama-server from
# the same bundle: same model, same threads, S slots each (-np S), greedy, 32 tokens per request,
# one after the other in one run. Each answer is checked to hold exactly 32 generated tokens.
# Then the same clients stream (/v1/completions with stream: true, on both servers): time
# to the first event and the gaps between events (inter-token latency), and mmserve's streams
# once more over gRPC (ModelStreamInfer; llama-server has no gRPC). Last, one stream alone
# against the engine's own loop (bench/raw_generate_loop.cc: llama.h, greedy, no server), in
# BENCH_ROUNDS alternating rounds (mmserve idle while the loop runs): back-to-back runs of the
# same program differ by up to 5 % here, so the table gives the median of the rounds' ratios.
# mmserve runs with huge_pages: true, as the raw loop's mmap of the file gets the page cache's
# huge folios (a load-time trade on this VM; see src/backend/llama/llama_backend.h).
#   bench/generate.sh [tiny|base]    (BENCH_SECONDS=30 BENCH_STREAMS=4 BENCH_ROUNDS=3)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SIZE="${1:-tiny}"
SECS="${BENCH_SECONDS:-30}"
S="${BENCH_STREAMS:-4}"
ROUNDS="${BENCH_ROUNDS:-3}"
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
    params: {n_parallel: $S, n_ctx: 512, n_batch: 512, n_threads: $THREADS, huge_pages: true}
YAML
G1="$(free_port)"
"$MMSERVE" --log-level warn serve "$TMP/m.yaml" --port "$P1" --grpc-port "$G1" --lock-dir "$TMP/locks" &
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
python3 - "$PROMPT" "$N" >"$TMP/grpc-stream.json" <<'PY'
import base64, json, sys
print(json.dumps({"model_name": "llm", "parameters": {"max_tokens": {"int64_param": int(sys.argv[2])}},
                  "inputs": [{"name": "PROMPT", "datatype": "BYTES", "shape": [1],
                              "contents": {"bytes_contents": [base64.b64encode(sys.argv[1].encode()).decode()]}}]}))
PY
MM_G="$("$LOAD" --grpc --stream --port "$G1" --body-file "$TMP/grpc-stream.json" \
        --expect completion_tokens --concurrency "$S" --seconds "$SECS" --warmup 3)"
ONE=()  # mmserve's and the raw loop's answer per round, alternating
for _ in $(seq 1 "$ROUNDS"); do
  ONE+=("$("$LOAD" --port "$P1" --path /v2/models/llm/infer --body-file "$TMP/kserve.json" \
           --expect "\"completion_tokens\":$N" --concurrency 1 --seconds "$SECS" --warmup 3)")
  ONE+=("$("$(peer raw_generate_loop)" --model "$MODEL" --prompt "$PROMPT" --tokens "$N" \
           --threads "$THREADS" --seconds "$SECS" --warmup 3)")
done
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

python3 - "$SIZE" "$S" "$N" "$MM" "$LS" "$MM_S" "$LS_S" "$MM_G" "${ONE[@]}" <<'PY'
import json, statistics, sys
size, s, n, mm, ls = sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4]), json.loads(sys.argv[5])
mms, lss, mmg = json.loads(sys.argv[6]), json.loads(sys.argv[7]), json.loads(sys.argv[8])
one = [json.loads(a) for a in sys.argv[9:]]
rounds = [(m["rps"] * n, r["tokens_per_s"]) for m, r in zip(one[::2], one[1::2])]
print(f"| llama-{size}, {s} streams, {n} tokens each | mmserve | llama-server | ratio |")
print("|---|---|---|---|")
print(f"| generated tokens/s | {mm['rps']*n:.1f} | {ls['rps']*n:.1f} | {mm['rps']/ls['rps']:.2f}x |")
print(f"| p50 request latency (ms) | {mm['p50_us']/1000:.0f} | {ls['p50_us']/1000:.0f} | {mm['p50_us']/max(ls['p50_us'],1):.2f}x |")
for key, label in (("ttft_p50_us", "streamed: time to first event p50"), ("ttft_p99_us", "streamed: time to first event p99"),
                   ("itl_p50_us", "streamed: inter-event gap p50"), ("itl_p99_us", "streamed: inter-event gap p99")):
    print(f"| {label} (ms) | {mms[key]/1000:.1f} | {lss[key]/1000:.1f} | {mms[key]/max(lss[key],1):.2f}x |")
print(f"| streamed: events per answer | {mms['events_per_request']:.1f} | {lss['events_per_request']:.1f} | |")
print(f"| errors | {mm['errors'] + mms['errors'] + mmg['errors'] + sum(m['errors'] for m in one[::2])} | {ls['errors'] + lss['errors']} | |")
print()
print(f"| llama-{size}, {s} streams, mmserve | HTTP /v1/completions (SSE) | gRPC ModelStreamInfer | ratio |")
print("|---|---|---|---|")
print(f"| generated tokens/s | {mms['rps']*n:.1f} | {mmg['rps']*n:.1f} | {mmg['rps']/mms['rps']:.2f}x |")
for key, label in (("ttft_p50_us", "time to first part p50"), ("itl_p50_us", "gap between parts p50"), ("itl_p99_us", "gap between parts p99")):
    print(f"| {label} (ms) | {mms[key]/1000:.1f} | {mmg[key]/1000:.1f} | {mmg[key]/max(mms[key],1):.2f}x |")
print(f"| parts per answer | {mms['events_per_request']:.1f} | {mmg['events_per_request']:.1f} | |")
print()
print(f"| llama-{size}, one stream, {n} tokens each | mmserve | raw llama.h loop | ratio |")
print("|---|---|---|---|")
for i, (m, r) in enumerate(rounds, 1):
    print(f"| round {i}: generated tokens/s | {m:.1f} | {r:.1f} | {m/r:.3f}x |")
print(f"| median of {len(rounds)} rounds | | | **{statistics.median(m/r for m, r in rounds):.3f}x** |")
PY
