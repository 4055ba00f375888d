#!/usr/bin/env bash
# P10 — what `isolation: process` costs (issue #21): the same model served in the server's
# process and in a worker process, side by side in one server, in alternating rounds. Identity
# with a 1 KB JSON request (the serving path's cost is all there is: the worst case) at C
# clients and at 1 (added p50), the same with max_batch 8 (a round trip to the worker carries
# what queued meanwhile, in batches of max_batch, up to 8 batches), and the bert embedder at C
# clients (compute-bound). Then an
# isolated worker killed under load (the other model's p99 before and during, the time to
# serve again), and the RSS of one idle isolated model's worker.
#   bench/isolation.sh [tiny|base]   (BENCH_SECONDS=5 BENCH_CONCURRENCY=16 BENCH_ROUNDS=3;
#                                     BENCH_PIN=1: the load tool on core 0, the server on the rest;
#                                     BENCH_COMPUTE_WAIT=spin|sleep: the isolated embedder's
#                                     compute_wait, spin by default)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SIZE="${1:-tiny}"
SECS="${BENCH_SECONDS:-5}"
C="${BENCH_CONCURRENCY:-16}"
ROUNDS="${BENCH_ROUNDS:-3}"
WAIT="${BENCH_COMPUTE_WAIT:-spin}"
MODEL="$ROOT/models/generated/bert-$SIZE.gguf"
source "$ROOT/bench/lib.sh"
ensure_model "$MODEL" "$SIZE"

echo_and_embed_bodies

PORT="$(free_port)"
{
  echo "models:"
  for iso in none process; do
    wait_field=""
    [[ "$iso" == process ]] && wait_field="compute_wait: $WAIT"
    cat <<YAML
  - name: echo-$iso
    backend: identity
    isolation: $iso
    params: {tensors: [{input: X, output: Y, datatype: INT32}]}
  - name: batched-$iso
    backend: identity
    isolation: $iso
    max_batch: 8
    params: {tensors: [{input: X, output: Y, datatype: INT32}]}
  - name: embed-$iso
    path: $MODEL
    task: embed
    isolation: $iso
    max_batch: $C
    max_queue_delay_ms: 5
    $wait_field
    params: {n_parallel: $C, n_batch: 2048, n_threads: $THREADS}
YAML
  done
  echo "  - {name: idle, backend: identity, isolation: process}"
} >"$TMP/m.yaml"
"$MMSERVE" --log-level warn serve "$TMP/m.yaml" --port "$PORT" --lock-dir "$TMP/locks" &
PID=$!
wait_ok "127.0.0.1:$PORT/v2/health/ready"
run() {  # run MODEL BODY EXPECT CONCURRENCY
  "$LOAD" --port "$PORT" --path "/v2/models/$1/infer" --body-file "$TMP/$2" --expect "$3" \
    --concurrency "$4" --seconds "$SECS" --warmup 1
}
for iso in none process; do  # the same text as embed.json, for /v1/embeddings
  printf '{"model":"embed-%s","input":"The quick brown fox jumps over the lazy dog near the river bank."}' \
    "$iso" >"$TMP/openai-embed-$iso.json"
done
run_openai() {  # run_openai MODEL CONCURRENCY
  "$LOAD" --port "$PORT" --path /v1/embeddings --body-file "$TMP/openai-$1.json" \
    --expect embedding --concurrency "$2" --seconds "$SECS" --warmup 1
}
for round in $(seq 1 "$ROUNDS"); do
  for iso in none process; do
    run "echo-$iso" echo.json '"Y"' "$C" >"$TMP/r$round-echo-$iso-$C.json"
    run "echo-$iso" echo.json '"Y"' 1 >"$TMP/r$round-echo-$iso-1.json"
    run "batched-$iso" echo.json '"Y"' "$C" >"$TMP/r$round-batched-$iso-$C.json"
    run "embed-$iso" embed.json EMBEDDING "$C" >"$TMP/r$round-embed-$iso-$C.json"
    run_openai "embed-$iso" "$C" >"$TMP/r$round-openai-$iso-$C.json"
  done
done
# A worker killed under load: the in-process model's p99 while the isolated one's worker is
# killed (SIGKILL, half-way through the window) against its p99 in the window before, both
# models loaded by C/2 clients; and how long after the kill the isolated model answers again.
H=$(( (C + 1) / 2 ))
run_local() { "$LOAD" --port "$PORT" --path /v2/models/echo-none/infer --body-file "$TMP/echo.json" \
  --expect '"Y"' --concurrency "$H" --seconds "$SECS" --warmup 1; }
run_iso_load() {  # its errors (the requests in flight at the kill) are expected: exit 1 is fine
  "$LOAD" --port "$PORT" --path /v2/models/echo-process/infer --body-file "$TMP/echo.json" \
    --expect '"Y"' --concurrency "$H" --seconds "$SECS" --warmup 1 >"$TMP/$1" || true
}
run_iso_load iso-before.json &
IB=$!
run_local >"$TMP/kill-before.json"
wait "$IB"
run_iso_load iso-during.json &
IB=$!
run_local >"$TMP/kill-during.json" &
LB=$!
sleep "$(python3 -c "print(1 + $SECS / 2)")"
VICTIM="$(pgrep -f -- "worker --parent $PID .*--model echo-process " || true)"
KILLED_AT=$(date +%s%N)
kill -9 $VICTIM
for _ in $(seq 1 3000); do  # at most about 30 s
  curl -sf -o /dev/null -H 'Content-Type: application/json' --data-binary @"$TMP/echo.json" \
    "127.0.0.1:$PORT/v2/models/echo-process/infer" && break
  sleep 0.005
done
BACK_MS=$(( ($(date +%s%N) - KILLED_AT) / 1000000 ))
wait "$LB"
wait "$IB"

IDLE_PID="$(pgrep -f -- "worker --parent $PID .*--model idle " || true)"
IDLE_KIB="$(rss_kib $IDLE_PID)"
# Its proportional share (shared library pages split among the processes mapping them) and
# what it alone holds.
IDLE_PSS="$(awk '/^Pss:/ {print $2}' "/proc/$IDLE_PID/smaps_rollup" 2>/dev/null || echo 0)"
IDLE_PRIVATE="$(awk '/^Private_(Clean|Dirty):/ {s += $2} END {print s + 0}' "/proc/$IDLE_PID/smaps_rollup" 2>/dev/null || echo 0)"
SERVER_KIB="$(rss_kib "$PID")"
stop "$PID"

echo "Cores: $PIN_NOTE; engine threads: $THREADS; the isolated embedder's compute_wait: $WAIT."
python3 - "$TMP" "$ROUNDS" "$C" "$SIZE" "$IDLE_KIB" "$SERVER_KIB" "$IDLE_PSS" "$IDLE_PRIVATE" "$BACK_MS" <<'PY'
import json, statistics, sys
tmp, rounds, c, size, idle_kib, server_kib, pss, private, back_ms = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], *map(int, sys.argv[5:10])
errors = []
def runs(model, iso, conc):
    out = [json.load(open(f"{tmp}/r{r}-{model}-{iso}-{conc}.json")) for r in range(1, rounds + 1)]
    errors.extend(f"{model}-{iso} x{conc}: {r['errors']} errors: {r.get('first_error')}" for r in out if r["errors"])
    return out
print(f"| load (median of {rounds} alternating rounds) | in-process | isolated | ratio (rounds) |")
print("|---|---|---|---|")
for model, conc, label in (("echo", c, f"identity 1 KB, {c} clients"), ("echo", "1", "identity 1 KB, 1 client"),
                           ("batched", c, f"identity 1 KB, max_batch 8, {c} clients"),
                           ("embed", c, f"bert-{size} embed (KServe TEXT), {c} clients"),
                           ("openai", c, f"bert-{size} embed (/v1/embeddings), {c} clients")):
    a, b = runs(model, "none", conc), runs(model, "process", conc)
    per = [y["rps"] / x["rps"] for x, y in zip(a, b)]
    med = lambda rs, k: statistics.median(r[k] for r in rs)
    print(f"| {label}, requests/s | {med(a, 'rps'):.0f} | {med(b, 'rps'):.0f} | "
          f"{statistics.median(per):.2f}x ({' / '.join(f'{x:.2f}' for x in per)}) |")
    print(f"| {label}, p50 µs | {med(a, 'p50_us'):.0f} | {med(b, 'p50_us'):.0f} | "
          f"added {med(b, 'p50_us') - med(a, 'p50_us'):.0f} µs |")
    print(f"| {label}, the load tool's own CPU (cores) | {med(a, 'client_cpu_cores'):.2f} | "
          f"{med(b, 'client_cpu_cores'):.2f} | |")
print()
print(f"One idle isolated identity model: its worker's RSS {idle_kib / 1024:.1f} MiB, PSS "
      f"{pss / 1024:.1f} MiB, private {private / 1024:.1f} MiB (the server's RSS: {server_kib / 1024:.1f} MiB).")
before, during = (json.load(open(f"{tmp}/kill-{w}.json")) for w in ("before", "during"))
iso_during = json.load(open(f"{tmp}/iso-during.json"))
for w, r in (("before", before), ("during", during)):
    if r["errors"]:
        errors.append(f"in-process model, window {w}: {r['errors']} errors: {r.get('first_error')}")
print(f"\nThe isolated model's worker killed mid-window, both models under load: the in-process "
      f"model's p99 {during['p99_us'] / 1000:.2f} ms against {before['p99_us'] / 1000:.2f} ms the "
      f"window before ({during['p99_us'] / before['p99_us']:.2f}x; goal <= 1.5x), "
      f"{during['errors']} errors; the isolated model answered again {back_ms} ms after the kill "
      f"(goal <= 2000), {iso_during['errors']} of its requests failed with the worker.")
if errors:
    print("\n".join(errors), file=sys.stderr)
    sys.exit(1)
PY
