#!/usr/bin/env bash
# RAG mix — embed + rerank + generate traffic at the same time against mmserve serving the three
# models in one process, and against llama-server's router mode from the same bundle (a router
# process forwarding to one llama-server child per model, configured by a presets file). Same
# model files, same threads per model, the same OpenAI-style request bodies (/v1/embeddings,
# /v1/rerank; generation below), the same closed-loop clients per model, one
# server after the other. Reports per model requests/s and p99 side by side, and the resident
# memory of each side (mmserve's process; the router plus its children).
#
# The router is tuned for sharing cores: its children run with OMP_WAIT_POLICY=passive
# (BENCH_ROUTER_ENV). With OpenMP's default, each of three processes spins its idle compute
# threads on cores the others need, and the router side collapses (measured: 40-80x slower;
# docs/BENCHMARKS.md). In one process libgomp sees the oversubscription itself.
#   bench/rag_mix.sh [tiny|base]    (BENCH_SECONDS=20; clients per model: BENCH_EMBED=8,
#                                    BENCH_RERANK=4, BENCH_CHAT=2; 16 tokens per answer;
#                                    BENCH_ROUTER_ENV="OMP_WAIT_POLICY=passive";
#                                    BENCH_ISOLATION=process: mmserve's models each in a worker
#                                    process, as the router's are)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SIZE="${1:-tiny}"
SECS="${BENCH_SECONDS:-20}"
CE="${BENCH_EMBED:-8}"
CR="${BENCH_RERANK:-4}"
CC="${BENCH_CHAT:-2}"
N=16
EMB="$ROOT/models/generated/bert-$SIZE.gguf"
RR="$ROOT/models/generated/rerank-$SIZE.gguf"
LLM="$ROOT/models/generated/llama-$SIZE.gguf"
source "$ROOT/bench/lib.sh"
ensure_model "$EMB" "$SIZE"

cat >"$TMP/embed.json" <<'JSON'
{"model":"embedder","input":"The quick brown fox jumps over the lazy dog near the river bank."}
JSON
cat >"$TMP/rerank.json" <<'JSON'
{"model":"reranker","query":"where does the fox jump?","documents":["The fox jumps over the dog.","Rivers flow to the sea.","A lazy dog sleeps by the bank.","Foxes are quick animals."]}
JSON
# Generation: mmserve's /v1/completions; llama-server's native /completion (its OpenAI
# endpoints run random-weight outputs through an output parser that rejects some of them with a
# 500), told not to reuse cached prompts (mmserve does not).
printf '{"model":"llm","prompt":"Tell me a story about a fox.","max_tokens":%d,"temperature":0}' \
  "$N" >"$TMP/chat.json"
printf '{"model":"llm","prompt":"Tell me a story about a fox.","n_predict":%d,"temperature":0,"cache_prompt":false}' \
  "$N" >"$TMP/chat-ls.json"


# mix PORT LABEL GENERATE_BODY GENERATE_PATH GENERATE_EXPECT: runs the three loads at once; prints their three JSON lines.
mix() {
  local port=$1
  "$LOAD" --port "$port" --path /v1/embeddings --body-file "$TMP/embed.json" --expect '"embedding"' \
    --concurrency "$CE" --seconds "$SECS" --warmup 2 >"$TMP/$2.embed" &
  local a=$!
  "$LOAD" --port "$port" --path /v1/rerank --body-file "$TMP/rerank.json" --expect '"relevance_score"' \
    --concurrency "$CR" --seconds "$SECS" --warmup 2 >"$TMP/$2.rerank" &
  local b=$!
  "$LOAD" --port "$port" --path "$4" --body-file "$3" \
    --expect "$5" --concurrency "$CC" --seconds "$SECS" --warmup 2 >"$TMP/$2.chat" &
  local c=$!
  local failed=0
  wait "$a" || failed=1
  wait "$b" || failed=1
  wait "$c" || failed=1
  cat "$TMP/$2.embed" "$TMP/$2.rerank" "$TMP/$2.chat" >&2
  return "$failed"
}

# every model answers once before the clock starts (the router loads its children lazily)
warm() {
  for kind in embed:/v1/embeddings rerank:/v1/rerank "$2:$3"; do
    local body="$TMP/${kind%%:*}.json" route="${kind#*:}"
    for _ in $(seq 1 600); do
      curl -sf -o /dev/null -H 'Content-Type: application/json' --data @"$body" "127.0.0.1:$1$route" && break
      sleep 0.2
    done
  done
}

# mmserve: the three models in one process
P1="$(free_port)"
cat >"$TMP/m.yaml" <<YAML
global: {isolation: ${BENCH_ISOLATION:-none}}
models:
  - name: embedder
    path: $EMB
    task: embed
    max_batch: 64
    max_queue_delay_ms: 2
    params: {n_parallel: 16, n_batch: 2048, n_threads: $THREADS}
  - name: reranker
    path: $RR
    task: rerank
    max_batch: 16
    params: {n_parallel: 16, n_batch: 2048, n_threads: $THREADS}
  - name: llm
    path: $LLM
    task: generate
    timeout_ms: 600000
    params: {n_parallel: $CC, n_ctx: 1024, n_batch: 512, n_threads: $THREADS}
YAML
"$MMSERVE" --log-level warn serve "$TMP/m.yaml" --port "$P1" --lock-dir "$TMP/locks" &
MM_PID=$!
wait_ok "127.0.0.1:$P1/v2/health/ready"
warm "$P1" chat /v1/completions
mix "$P1" mm "$TMP/chat.json" /v1/completions "\"completion_tokens\":$N"
MM_RSS="$(rss_kib "$MM_PID" $(pgrep -P "$MM_PID" || true))"  # with its workers, if isolated
stop "$MM_PID"

# llama-server router: one child per model, the same per-model settings
P2="$(free_port)"
cat >"$TMP/presets.ini" <<INI
version = 1
[*]
t = $THREADS
load-on-startup = true
[embedder]
model = $EMB
embedding = true
np = 16
c = $((16 * 512))
b = 2048
ub = 2048
[reranker]
model = $RR
rerank = true
np = 16
c = $((16 * 512))
b = 2048
ub = 2048
[llm]
model = $LLM
np = $CC
c = $((CC * 1024))
b = 512
ub = 512
INI
env ${BENCH_ROUTER_ENV-OMP_WAIT_POLICY=passive} \
  "$SERVER" --models-preset "$TMP/presets.ini" --host 127.0.0.1 --port "$P2" --no-webui \
  >"$TMP/router.log" 2>&1 &
LS_PID=$!
wait_ok "127.0.0.1:$P2/health"
warm "$P2" chat-ls /completion
mix "$P2" ls "$TMP/chat-ls.json" /completion "\"tokens_predicted\":$N"
LS_RSS="$(rss_kib "$LS_PID" $(pgrep -P "$LS_PID" || true))"
stop "$LS_PID"

python3 - "$SIZE" "$MM_RSS" "$LS_RSS" "$TMP" "${BENCH_ISOLATION:-none}" <<'PY'
import json, sys
size, mm_rss, ls_rss, tmp, isolation = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
mm_side = "mmserve (1 + 3 processes, isolated)" if isolation == "process" else "mmserve (1 process)"
load = lambda side, kind: json.loads(open(f"{tmp}/{side}.{kind}").read())
print(f"| RAG mix, {size} models | {mm_side} | llama-server router (1 + 3 processes) | ratio |")
print("|---|---|---|---|")
for kind, label in (("embed", "embeddings"), ("rerank", "rerank (4 documents)"), ("chat", "generate (16 tokens)")):
    m, l = load("mm", kind), load("ls", kind)
    print(f"| {label}: requests/s ({m['concurrency']} clients) | {m['rps']:.1f} | {l['rps']:.1f} | {m['rps']/max(l['rps'],1e-9):.2f}x |")
    print(f"| {label}: p99 latency (ms) | {m['p99_us']/1000:.1f} | {l['p99_us']/1000:.1f} | {m['p99_us']/max(l['p99_us'],1):.2f}x |")
errs = lambda side: sum(load(side, k)['errors'] for k in ("embed", "rerank", "chat"))
print(f"| errors | {errs('mm')} | {errs('ls')} | |")
print(f"| resident memory (MiB) | {mm_rss/1024:.0f} | {ls_rss/1024:.0f} | {mm_rss/max(ls_rss,1):.2f}x |")
PY
