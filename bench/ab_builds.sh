#!/usr/bin/env bash
# A/B of two mmserve binaries (a refactor must not cost speed): both serve the same models at
# once on 127.0.0.1 and bench/loadgen alternates between them, round after round (the order
# flips every round), so that the machine's drift falls on both alike. Scenarios: H1's identity
# request (1 KB INT32) by a worker at 16 clients and at 1, and inline at 16; the same model
# isolated (`isolation: process`, max_batch 8, and 1) with the 1 KB request at 16 clients, an
# isolated echo of a 1 MiB text at 4, and an isolated bert-tiny (P10's embedder, 16 clients);
# P1 tiny (bert-tiny, one text per request, 64 clients) over KServe and over OpenAI
# /v1/embeddings; P2's shape (llama-tiny, 4 streams of 32 generated tokens each, KServe).
# Then P5's first response (bert-tiny, `load: on_demand`, `keep_alive: 0`: each request after it
# unloaded loads it), timed by curl, BENCH_LOADS rounds per side alternating. Reported: answers/s per round
# and their ratio (B / A), medians, and each server's CPU time per answer, its worker processes included (utime + stime from
# /proc over the run, warm-up included, divided by the answers over the same span), and p50.
#   bench/ab_builds.sh A_BINARY B_BINARY   (BENCH_SECONDS=5 BENCH_ROUNDS=4 BENCH_LOADS=6;
#                                           BENCH_ONLY=REGEX runs the scenarios whose name
#                                           matches, first-response included)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
A_BIN="$1"
B_BIN="$2"
SECS="${BENCH_SECONDS:-5}"
ROUNDS="${BENCH_ROUNDS:-4}"
WARMUP=1
source "$ROOT/bench/lib.sh"
MODEL="$ROOT/models/generated/bert-tiny.gguf"
LLM="$ROOT/models/generated/llama-tiny.gguf"
ensure_model "$MODEL" tiny
ensure_model "$LLM" tiny
LOADS="${BENCH_LOADS:-6}"
TEXT="The quick brown fox jumps over the lazy dog near the river bank."

cat >"$TMP/m.yaml" <<YAML
global: {thread_num: 2}
models:
  - name: echo
    backend: identity
    thread_num: 1
    params: {tensors: [{input: X, output: Y, datatype: INT32}]}
  - name: echo_isolated
    backend: identity
    isolation: process
    max_batch: 8
    params: {tensors: [{input: X, output: Y, datatype: INT32}]}
  - name: echo_isolated_1
    backend: identity
    isolation: process
    params: {tensors: [{input: X, output: Y, datatype: INT32}]}
  - name: text_isolated
    backend: identity
    isolation: process
    params: {tensors: [{input: TEXT, output: ECHO, datatype: BYTES, shape: [-1]}]}
  - name: echo_inline
    backend: identity
    execution: inline
    params: {tensors: [{input: X, output: Y, datatype: INT32}]}
  - name: embedder
    path: $MODEL
    task: embed
    max_batch: 64
    max_queue_delay_ms: 5
    queue: {max_size: 100000}
    params: {n_parallel: 64, n_batch: 2048, n_threads: $THREADS}
  - name: embedder_isolated
    path: $MODEL
    task: embed
    isolation: process
    max_batch: 16
    max_queue_delay_ms: 5
    params: {n_parallel: 16, n_batch: 2048, n_threads: $THREADS}
  - name: llm
    path: $LLM
    task: generate
    timeout_ms: 600000
    params: {n_parallel: 4, n_ctx: 512, n_batch: 512, n_threads: $THREADS}
  - name: cold
    path: $MODEL
    task: embed
    load: on_demand
    keep_alive: 0
    params: {n_parallel: 1, n_ctx: 512, n_batch: 512, n_threads: $THREADS}
YAML
python3 - "$TMP" "$TEXT" <<'PY'
import json, sys
tmp, text = sys.argv[1], sys.argv[2]
data = list(range(100000, 100140))
json.dump({"inputs": [{"name": "X", "datatype": "INT32", "shape": [140], "data": data}]},
          open(f"{tmp}/echo.json", "w"), separators=(",", ":"))
json.dump({"inputs": [{"name": "TEXT", "datatype": "BYTES", "shape": [1], "data": [text]}]},
          open(f"{tmp}/kserve.json", "w"))
json.dump({"model": "embedder", "input": text}, open(f"{tmp}/openai.json", "w"))
json.dump({"parameters": {"max_tokens": 32},
           "inputs": [{"name": "PROMPT", "datatype": "BYTES", "shape": [1],
                       "data": ["Once upon a time, in a land far away, there lived"]}]},
          open(f"{tmp}/generate.json", "w"))
json.dump({"inputs": [{"name": "TEXT", "datatype": "BYTES", "shape": [1], "data": ["x" * (1 << 20)]}]},
          open(f"{tmp}/text-1mib.json", "w"))
PY

declare -A PORT PID
for side in A B; do
  bin_var="${side}_BIN"
  PORT[$side]="$(free_port)"
  mkdir -p "$TMP/locks-$side"
  "${!bin_var}" --log-level warn serve "$TMP/m.yaml" --port "${PORT[$side]}" \
    --lock-dir "$TMP/locks-$side" &
  PID[$side]=$!
done
for side in A B; do wait_ok "127.0.0.1:${PORT[$side]}/v2/health/ready"; done

# name | path | body | expected substring | clients
SCENARIOS=(
  "kserve-echo-worker|/v2/models/echo/infer|echo.json|\"Y\"|16"
  "kserve-echo-worker-1-client|/v2/models/echo/infer|echo.json|\"Y\"|1"
  "kserve-echo-inline|/v2/models/echo_inline/infer|echo.json|\"Y\"|16"
  "kserve-echo-isolated|/v2/models/echo_isolated/infer|echo.json|\"Y\"|16"
  "kserve-echo-isolated-max-batch-1|/v2/models/echo_isolated_1/infer|echo.json|\"Y\"|16"
  "kserve-text-isolated-1mib|/v2/models/text_isolated/infer|text-1mib.json|\"ECHO\"|4"
  "kserve-embeddings|/v2/models/embedder/infer|kserve.json|EMBEDDING|64"
  "openai-embeddings|/v1/embeddings|openai.json|embedding|64"
  "kserve-embeddings-isolated|/v2/models/embedder_isolated/infer|kserve.json|EMBEDDING|16"
  "kserve-generate-4-streams|/v2/models/llm/infer|generate.json|\"completion_tokens\":32|4"
)
RUN=()  # the scenarios BENCH_ONLY selects
for s in "${SCENARIOS[@]}"; do [[ ${s%%|*} =~ ${BENCH_ONLY:-.} ]] && RUN+=("$s"); done
# cpu_ticks PID: the CPU time (utime + stime, in ticks) of the server and its worker processes
# (isolated models), so that an isolated scenario's cost includes the worker's.
cpu_ticks() {
  local total=0 p
  for p in "$1" $(pgrep -P "$1"); do
    total=$((total + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)))
  done
  echo "$total"
}
for round in $(seq 1 "$ROUNDS"); do
  order=(A B)
  ((round % 2 == 0)) && order=(B A)
  for s in "${RUN[@]}"; do
    IFS='|' read -r name path body expect clients <<<"$s"
    for side in "${order[@]}"; do
      before=$(cpu_ticks "${PID[$side]}")
      "$LOAD" --port "${PORT[$side]}" --path "$path" --body-file "$TMP/$body" --expect "$expect" \
        --concurrency "$clients" --seconds "$SECS" --warmup "$WARMUP" \
        >"$TMP/$name-$side-$round.json"
      echo "$(($(cpu_ticks "${PID[$side]}") - before))" >"$TMP/$name-$side-$round.cpu"
    done
  done
done
# first_response SIDE: waits until `cold` unloaded (keep_alive: 0), then times one request
# (appended to $TMP/cold.txt as "SIDE seconds").
first_response() {
  local port="${PORT[$1]}"
  for _ in $(seq 1 100); do
    curl -s "127.0.0.1:$port/v2/models/cold" | grep -q '"UNLOADED"' && break
    sleep 0.1
  done
  local took
  took="$(curl -s -o "$TMP/cold-$1.out" -w '%{time_total}' -H 'Content-Type: application/json' \
          --data-binary @"$TMP/kserve.json" "127.0.0.1:$port/v2/models/cold/infer")"
  echo "$1 $took" >>"$TMP/cold.txt"
  grep -q EMBEDDING "$TMP/cold-$1.out" || { echo "bad answer: $(head -c 200 "$TMP/cold-$1.out")" >&2; exit 1; }
}
COLD=()
if [[ first-response =~ ${BENCH_ONLY:-.} ]]; then
  for round in $(seq 1 "$LOADS"); do
    order=(A B)
    ((round % 2 == 0)) && order=(B A)
    for side in "${order[@]}"; do first_response "$side"; done
  done
fi
for side in A B; do stop "${PID[$side]}"; done
if [[ -f "$TMP/cold.txt" ]]; then
  python3 - "$TMP/cold.txt" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
a = [float(t) * 1000 for s, t in rows if s == "A"]
b = [float(t) * 1000 for s, t in rows if s == "B"]
print("| first response (bert-tiny on demand) | A ms (median) | B ms (median) | B / A per round | median |")
print("|---|---|---|---|---|")
ratios = [y / x for x, y in zip(a, b)]
print(f"| first-response | {statistics.median(a):.0f} | {statistics.median(b):.0f} | "
      f"{' / '.join(f'{r:.2f}' for r in ratios)} | {statistics.median(ratios):.2f} |")
PY
fi

python3 - "$TMP" "$ROUNDS" "$SECS" "$WARMUP" "$(getconf CLK_TCK)" "${RUN[@]}" <<'PY'
import json, statistics, sys
tmp, rounds, secs, warmup, hz = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
names = [s.split("|")[0] for s in sys.argv[6:]]
print(f"| scenario | A answers/s (median) | B answers/s (median) | B / A per round | median | A CPU µs/answer (server + workers) | B CPU µs/answer | A p50 µs | B p50 µs |")
print("|---|---|---|---|---|---|---|---|---|")
errors = []
for name in names:
    runs = {side: [json.load(open(f"{tmp}/{name}-{side}-{r}.json")) for r in range(1, rounds + 1)]
            for side in "AB"}
    cpu = {side: [int(open(f"{tmp}/{name}-{side}-{r}.cpu").read()) for r in range(1, rounds + 1)]
           for side in "AB"}
    for side in "AB":
        errors += [f"{name} {side}: {r['errors']} errors: {r.get('first_error')}" for r in runs[side] if r["errors"]]
    ratios = [b["rps"] / a["rps"] for a, b in zip(runs["A"], runs["B"])]
    med = lambda side: statistics.median(r["rps"] for r in runs[side])
    p50 = lambda side: statistics.median(r["p50_us"] for r in runs[side])
    # CPU over the whole loadgen run (warm-up included) per answer over the same span.
    per = lambda side: statistics.median(
        c / hz * 1e6 / (r["rps"] * (secs + warmup)) for c, r in zip(cpu[side], runs[side]))
    print(f"| {name} | {med('A'):.0f} | {med('B'):.0f} | {' / '.join(f'{x:.2f}' for x in ratios)} | "
          f"{statistics.median(ratios):.2f} | {per('A'):.0f} | {per('B'):.0f} | "
          f"{p50('A'):.0f} | {p50('B'):.0f} |")
if errors:
    print("\n".join(errors))
    sys.exit(1)
PY
