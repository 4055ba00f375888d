#!/usr/bin/env bash
# H1 — what mmserve's HTTP path costs over a bare Boost.Beast server (issue #6): requests/s of
# the identity model answering a 1 KB JSON request over keep-alive, against
# bench/bare_beast_server.cc answering the same request with mmserve's own answer (same bytes,
# same I/O thread count, no work). Side by side in one run, same load tool.
#   bench/http_overhead.sh    (BENCH_SECONDS=10, BENCH_CONCURRENCY=16, BENCH_THREADS=2)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SECONDS_RUN="${BENCH_SECONDS:-10}"
CONC="${BENCH_CONCURRENCY:-16}"
IO_THREADS="${BENCH_THREADS:-2}"
source "$ROOT/bench/lib.sh"
BARE="$ROOT/build/bench/bare_beast_server"

# A 1 KB request: 140 INT32 values (1047 bytes of JSON).
python3 - "$TMP/body.json" <<'PY'
import json, sys
data = list(range(100000, 100140))
body = {"inputs": [{"name": "X", "datatype": "INT32", "shape": [len(data)], "data": data}]}
text = json.dumps(body, separators=(",", ":"))
open(sys.argv[1], "w").write(text)
print(f"request body: {len(text)} bytes", file=sys.stderr)
PY

PORT="$(free_port)"
cat >"$TMP/m.yaml" <<YAML
global: {thread_num: $IO_THREADS}
models:
  - name: echo
    backend: identity
    thread_num: 1
    params: {tensors: [{input: X, output: Y, datatype: INT32}]}
YAML
"$MMSERVE" --log-level warn serve "$TMP/m.yaml" --port "$PORT" --lock-dir "$TMP/locks" &
PID=$!
wait_ok "127.0.0.1:$PORT/v2/health/ready"
curl -s -H 'Content-Type: application/json' --data-binary @"$TMP/body.json" \
  "127.0.0.1:$PORT/v2/models/echo/infer" >"$TMP/answer.json"
grep -q '"name":"Y"' "$TMP/answer.json" || { echo "bad answer: $(head -c 200 "$TMP/answer.json")"; exit 1; }
run() {  # run PORT PATH CONCURRENCY
  "$LOAD" --port "$1" --path "$2" --body-file "$TMP/body.json" --expect '"Y"' \
    --concurrency "$3" --seconds "$SECONDS_RUN" --warmup 1
}
MM_C="$(run "$PORT" /v2/models/echo/infer "$CONC")"
MM_1="$(run "$PORT" /v2/models/echo/infer 1)"
stop "$PID"

"$BARE" --port 0 --threads "$IO_THREADS" --response-file "$TMP/answer.json" >"$TMP/bare.out" &
BPID=$!
for _ in $(seq 1 100); do grep -q listening "$TMP/bare.out" && break; sleep 0.05; done
BPORT="$(awk '/listening on/ {print $3}' "$TMP/bare.out")"
BARE_C="$(run "$BPORT" /v2/models/echo/infer "$CONC")"
BARE_1="$(run "$BPORT" /v2/models/echo/infer 1)"
stop "$BPID"

python3 - "$CONC" "$MM_C" "$BARE_C" "$MM_1" "$BARE_1" "$(wc -c <"$TMP/answer.json")" <<'PY'
import json, sys
conc = sys.argv[1]
mm_c, bare_c, mm_1, bare_1 = (json.loads(a) for a in sys.argv[2:6])
print(f"1 KB JSON request, {sys.argv[6]} B answer, keep-alive")
print("| load | mmserve identity | bare Beast server | ratio |")
print("|---|---|---|---|")
print(f"| {conc} clients, requests/s | {mm_c['rps']:.0f} | {bare_c['rps']:.0f} | {mm_c['rps'] / bare_c['rps']:.2f}x |")
print(f"| {conc} clients, p50 µs | {mm_c['p50_us']} | {bare_c['p50_us']} | |")
print(f"| 1 client, requests/s | {mm_1['rps']:.0f} | {bare_1['rps']:.0f} | {mm_1['rps'] / bare_1['rps']:.2f}x |")
print(f"| 1 client, p50 µs | {mm_1['p50_us']} | {bare_1['p50_us']} | added {mm_1['p50_us'] - bare_1['p50_us']} µs |")
print(f"| 1 client, p99 µs | {mm_1['p99_us']} | {bare_1['p99_us']} | |")
for name, r in [("mmserve", mm_c), ("bare", bare_c), ("mmserve 1", mm_1), ("bare 1", bare_1)]:
    if r["errors"]:
        print(f"{name}: {r['errors']} errors: {r.get('first_error')}")
PY
