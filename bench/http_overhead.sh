#!/usr/bin/env bash
# H1 — what mmserve's HTTP path costs over a bare Boost.Beast server (issue #6): requests/s of
# the identity model answering a 1 KB JSON request over keep-alive — executed by its worker
# (`echo`, the default) and inline on the I/O threads (`echo_inline`, `execution: inline`) — against
# bench/bare_beast_server.cc answering the same request with mmserve's own answer (same bytes,
# same I/O thread count, no work). Then the same over KServe v2 gRPC: the same tensor as a
# ModelInferRequest against bench/bare_grpc_server.cc answering mmserve's own ModelInferResponse
# (gRPC's callback API on both). Side by side in one run, same load tool (bench/loadgen.cc).
# Last, the infer codec alone against nlohmann's DOM (bench/json_codec_bench.cc).
#   bench/http_overhead.sh    (BENCH_SECONDS=10, BENCH_CONCURRENCY=16, BENCH_THREADS=2,
#                              BENCH_ROUNDS=3 alternating rounds, medians reported)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SECONDS_RUN="${BENCH_SECONDS:-10}"
CONC="${BENCH_CONCURRENCY:-16}"
ROUNDS="${BENCH_ROUNDS:-3}"
IO_THREADS="${BENCH_THREADS:-2}"
source "$ROOT/bench/lib.sh"
BARE="$(peer bare_beast_server)"

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
"$LOAD" --grpc --port "$GPORT" --body-file "$TMP/grpc.json" --save-answer "$TMP/answer.pb"
"$BARE" --port 0 --threads "$IO_THREADS" --response-file "$TMP/answer.json" >"$TMP/bare.out" &
BPID=$!
"$(peer bare_grpc_server)" --port 0 --response-file "$TMP/answer.pb" >"$TMP/bare-grpc.out" &
GPID=$!
BPORT="$(listening_port "$TMP/bare.out")"
GBPORT="$(listening_port "$TMP/bare-grpc.out")"

# Every server is up (an idle one costs nothing); the loads alternate between them, round after
# round, so that a slow spell of this shared machine falls on all sides alike. Medians below.
for round in $(seq 1 "$ROUNDS"); do
  for c in "$CONC" 1; do
    run "$PORT" /v2/models/echo/infer "$c" >"$TMP/r$round-http-worker-$c.json"
    run "$PORT" /v2/models/echo_inline/infer "$c" >"$TMP/r$round-http-inline-$c.json"
    run "$BPORT" /v2/models/echo/infer "$c" >"$TMP/r$round-http-bare-$c.json"
    grpc_run "$GPORT" "$c" >"$TMP/r$round-grpc-worker-$c.json"
    grpc_run "$GPORT" "$c" "$TMP/grpc-inline.json" >"$TMP/r$round-grpc-inline-$c.json"
    grpc_run "$GBPORT" "$c" >"$TMP/r$round-grpc-bare-$c.json"
  done
done
stop "$PID"
stop "$BPID"
stop "$GPID"

python3 - "$TMP" "$ROUNDS" "$CONC" "$(wc -c <"$TMP/answer.json")" "$(wc -c <"$TMP/answer.pb")" <<'PY'
import json, statistics, sys
tmp, rounds, conc, json_bytes, pb_bytes = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
def load(proto, side, c):
    return [json.load(open(f"{tmp}/r{r}-{proto}-{side}-{c}.json")) for r in range(1, rounds + 1)]
errors = []
def table(title, proto, peer):
    print(title)
    print(f"| load (median of {rounds} alternating rounds) | mmserve, worker | mmserve, inline | {peer} | worker ratio | inline ratio |")
    print("|---|---|---|---|---|---|")
    for c, label in ((conc, f"{conc} clients"), ("1", "1 client")):
        sides = {side: load(proto, side, c) for side in ("worker", "inline", "bare")}
        for side, runs in sides.items():
            errors.extend(f"{proto} {side} {label}: {r['errors']} errors: {r.get('first_error')}"
                          for r in runs if r["errors"])
        med = lambda side, key: statistics.median(r[key] for r in sides[side])
        def ratios(side):
            per_round = [m["rps"] / b["rps"] for m, b in zip(sides[side], sides["bare"])]
            shown = " / ".join(f"{x:.2f}" for x in per_round)
            return f"{statistics.median(per_round):.2f}x ({shown})" if rounds > 1 else f"{per_round[0]:.2f}x"
        print(f"| {label}, requests/s | {med('worker', 'rps'):.0f} | {med('inline', 'rps'):.0f} | {med('bare', 'rps'):.0f} | {ratios('worker')} | {ratios('inline')} |")
        p50 = {side: med(side, "p50_us") for side in sides}
        added = lambda side: f"added {p50[side] - p50['bare']:.0f} µs" if c == "1" else ""
        print(f"| {label}, p50 µs | {p50['worker']:.0f} | {p50['inline']:.0f} | {p50['bare']:.0f} | {added('worker')} | {added('inline')} |")
        if c == "1":
            print(f"| {label}, p99 µs | {med('worker', 'p99_us'):.0f} | {med('inline', 'p99_us'):.0f} | {med('bare', 'p99_us'):.0f} | | |")
    print()
table(f"HTTP: 1 KB JSON request, {json_bytes} B answer, keep-alive", "http", "bare Beast server")
table(f"gRPC ModelInfer: the same 140 INT32 values, {pb_bytes} B answer", "grpc", "bare gRPC server")
for e in errors:
    print(e)
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
