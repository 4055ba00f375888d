#!/usr/bin/env bash
# H1 — what mmserve's HTTP path costs over a bare Boost.Beast server (issue #6): requests/s of
# the identity model answering a 1 KB JSON request over keep-alive — executed by its worker
# (`echo`, the default) and inline on the I/O threads (`echo_inline`, `execution: inline`) — against
# bench/bare_beast_server.cc answering the same request with mmserve's own answer (same bytes,
# same I/O thread count, no work). Then the same over KServe v2 gRPC: the same tensor as a
# ModelInferRequest against bench/bare_grpc_server.cc answering mmserve's own ModelInferResponse
# (gRPC's callback API on both). Side by side in one run, same load tool (bench/loadgen.cc).
# Last, the infer codec alone against nlohmann's DOM (bench/json_codec_bench.cc).
#   bench/http_overhead.sh    (BENCH_SECONDS=10, BENCH_CONCURRENCY=16, BENCH_THREADS=2)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SECONDS_RUN="${BENCH_SECONDS:-10}"
CONC="${BENCH_CONCURRENCY:-16}"
IO_THREADS="${BENCH_THREADS:-2}"
source "$ROOT/bench/lib.sh"
BARE="$ROOT/build/bench/bare_beast_server"

# A 1 KB request: 140 INT32 values (1047 bytes of JSON); for gRPC the same tensor as typed
# contents of a ModelInferRequest (protobuf's JSON mapping, which loadgen reads).
python3 - "$TMP/body.json" "$TMP/grpc.json" <<'PY'
import json, sys
data = list(range(100000, 100140))
body = {"inputs": [{"name": "X", "datatype": "INT32", "shape": [len(data)], "data": data}]}
text = json.dumps(body, separators=(",", ":"))
open(sys.argv[1], "w").write(text)
grpc = {"model_name": "echo", "inputs": [{"name": "X", "datatype": "INT32", "shape": [len(data)],
                                          "contents": {"int_contents": data}}]}
open(sys.argv[2], "w").write(json.dumps(grpc))
grpc["model_name"] = "echo_inline"
open(sys.argv[2].replace(".json", "-inline.json"), "w").write(json.dumps(grpc))
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
  - name: echo_inline
    backend: identity
    execution: inline
    params: {tensors: [{input: X, output: Y, datatype: INT32}]}
YAML
GPORT="$(free_port)"
"$MMSERVE" --log-level warn serve "$TMP/m.yaml" --port "$PORT" --grpc-port "$GPORT" --lock-dir "$TMP/locks" &
PID=$!
wait_ok "127.0.0.1:$PORT/v2/health/ready"
curl -s -H 'Content-Type: application/json' --data-binary @"$TMP/body.json" \
  "127.0.0.1:$PORT/v2/models/echo/infer" >"$TMP/answer.json"
grep -q '"name":"Y"' "$TMP/answer.json" || { echo "bad answer: $(head -c 200 "$TMP/answer.json")"; exit 1; }
run() {  # run PORT PATH CONCURRENCY
  "$LOAD" --port "$1" --path "$2" --body-file "$TMP/body.json" --expect '"Y"' \
    --concurrency "$3" --seconds "$SECONDS_RUN" --warmup 1
}
listening_port() {  # listening_port FILE: the port a bare server wrote to FILE once it serves
  for _ in $(seq 1 100); do grep -q listening "$1" && break; sleep 0.05; done
  awk '/listening on/ {print $3}' "$1"
}
grpc_run() {  # grpc_run PORT CONCURRENCY [BODY]
  "$LOAD" --grpc --port "$1" --body-file "${3:-$TMP/grpc.json}" --expect Y \
    --concurrency "$2" --seconds "$SECONDS_RUN" --warmup 1
}
MM_C="$(run "$PORT" /v2/models/echo/infer "$CONC")"
MM_1="$(run "$PORT" /v2/models/echo/infer 1)"
MI_C="$(run "$PORT" /v2/models/echo_inline/infer "$CONC")"
MI_1="$(run "$PORT" /v2/models/echo_inline/infer 1)"
"$LOAD" --grpc --port "$GPORT" --body-file "$TMP/grpc.json" --save-answer "$TMP/answer.pb"
MMG_C="$(grpc_run "$GPORT" "$CONC")"
MMG_1="$(grpc_run "$GPORT" 1)"
MIG_C="$(grpc_run "$GPORT" "$CONC" "$TMP/grpc-inline.json")"
MIG_1="$(grpc_run "$GPORT" 1 "$TMP/grpc-inline.json")"
stop "$PID"

"$BARE" --port 0 --threads "$IO_THREADS" --response-file "$TMP/answer.json" >"$TMP/bare.out" &
BPID=$!
BPORT="$(listening_port "$TMP/bare.out")"
BARE_C="$(run "$BPORT" /v2/models/echo/infer "$CONC")"
BARE_1="$(run "$BPORT" /v2/models/echo/infer 1)"
stop "$BPID"

"$ROOT/build/bench/bare_grpc_server" --port 0 --response-file "$TMP/answer.pb" >"$TMP/bare-grpc.out" &
GPID=$!
GBPORT="$(listening_port "$TMP/bare-grpc.out")"
BAREG_C="$(grpc_run "$GBPORT" "$CONC")"
BAREG_1="$(grpc_run "$GBPORT" 1)"
stop "$GPID"

python3 - "$CONC" "$MM_C" "$MI_C" "$BARE_C" "$MM_1" "$MI_1" "$BARE_1" \
  "$MMG_C" "$MIG_C" "$BAREG_C" "$MMG_1" "$MIG_1" "$BAREG_1" \
  "$(wc -c <"$TMP/answer.json")" "$(wc -c <"$TMP/answer.pb")" <<'PY'
import json, sys
conc = sys.argv[1]
runs = [json.loads(a) for a in sys.argv[2:14]]
json_bytes, pb_bytes = sys.argv[14], sys.argv[15]
def table(title, peer, worker_c, inline_c, bare_c, worker_1, inline_1, bare_1):
    print(title)
    print(f"| load | mmserve, worker | mmserve, inline | {peer} | worker ratio | inline ratio |")
    print("|---|---|---|---|---|---|")
    def row(what, key, w, i, b, ratio):
        print(f"| {what} | {w[key]:.0f} | {i[key]:.0f} | {b[key]:.0f} | {ratio(w, b)} | {ratio(i, b)} |")
    rps = lambda m, b: f"{m['rps'] / b['rps']:.2f}x"
    added = lambda m, b: f"added {m['p50_us'] - b['p50_us']} µs"
    row(f"{conc} clients, requests/s", "rps", worker_c, inline_c, bare_c, rps)
    row(f"{conc} clients, p50 µs", "p50_us", worker_c, inline_c, bare_c, lambda m, b: "")
    row("1 client, requests/s", "rps", worker_1, inline_1, bare_1, rps)
    row("1 client, p50 µs", "p50_us", worker_1, inline_1, bare_1, added)
    row("1 client, p99 µs", "p99_us", worker_1, inline_1, bare_1, lambda m, b: "")
    print()
table(f"HTTP: 1 KB JSON request, {json_bytes} B answer, keep-alive", "bare Beast server", *runs[0:6])
table(f"gRPC ModelInfer: the same 140 INT32 values, {pb_bytes} B answer", "bare gRPC server", *runs[6:12])
names = ["mmserve", "mmserve inline", "bare", "mmserve 1", "mmserve inline 1", "bare 1",
         "mmserve gRPC", "mmserve inline gRPC", "bare gRPC", "mmserve gRPC 1",
         "mmserve inline gRPC 1", "bare gRPC 1"]
for name, r in zip(names, runs):
    if r["errors"]:
        print(f"{name}: {r['errors']} errors: {r.get('first_error')}")
PY

# The infer codec alone against nlohmann's DOM (Google Benchmark, side by side).
"$ROOT/build/bench/json_codec_bench" --benchmark_format=json \
  --benchmark_min_time="$(awk -v s="$SECONDS_RUN" 'BEGIN {print (s < 5 ? 0.05 : 0.5)}')" \
  2>/dev/null >"$TMP/codec.json"
python3 - "$TMP/codec.json" <<'PY'
import json, sys
ns = {b["name"]: b["real_time"] for b in json.load(open(sys.argv[1]))["benchmarks"]}
print("KServe v2 JSON codec, the request above (bench/json_codec_bench)")
print("| step | mmserve codec | nlohmann DOM | ratio |")
print("|---|---|---|---|")
for step, name in (("parse into a tensor", "ParseRequest"), ("encode the answer", "EncodeAnswer")):
    mine, peer = ns[f"BM_{name}_Mmserve"], ns[f"BM_{name}_NlohmannDom"]
    print(f"| {step} | {mine / 1000:.1f} µs | {peer / 1000:.1f} µs | {peer / mine:.1f}x faster |")
PY
