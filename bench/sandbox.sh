#!/usr/bin/env bash
# P10s — what `isolation: sandbox` adds to `isolation: process` (issue #40): the same models in
# one server, each in a worker process and in a sandboxed one, in alternating rounds. Identity
# with a 1 KB JSON request (the serving path only: the worst case for any per-request cost) at C
# clients, and the bert embedder at C clients (compute-bound). A sandbox adds a seccomp filter to
# every system call of the worker; nothing else changes on the request path.
#   bench/sandbox.sh [tiny|base]   (BENCH_SECONDS=5 BENCH_CONCURRENCY=16 BENCH_ROUNDS=3)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SIZE="${1:-tiny}"
SECS="${BENCH_SECONDS:-5}"
C="${BENCH_CONCURRENCY:-16}"
ROUNDS="${BENCH_ROUNDS:-3}"
MODEL="$ROOT/models/generated/bert-$SIZE.gguf"
source "$ROOT/bench/lib.sh"
ensure_model "$MODEL" "$SIZE"

echo_and_embed_bodies

PORT="$(free_port)"
{
  echo "models:"
  for iso in process sandbox; do
    cat <<YAML
  - name: echo-$iso
    backend: identity
    isolation: $iso
    params: {tensors: [{input: X, output: Y, datatype: INT32}]}
  - name: embed-$iso
    path: $MODEL
    task: embed
    isolation: $iso
    max_batch: $C
    max_queue_delay_ms: 5
    params: {n_parallel: $C, n_batch: 2048, n_threads: $THREADS}
YAML
  done
} >"$TMP/m.yaml"
"$MMSERVE" --log-level warn serve "$TMP/m.yaml" --port "$PORT" --lock-dir "$TMP/locks" &
PID=$!
wait_ok "127.0.0.1:$PORT/v2/health/ready"
run() {  # run MODEL BODY EXPECT
  "$LOAD" --port "$PORT" --path "/v2/models/$1/infer" --body-file "$TMP/$2" --expect "$3" \
    --concurrency "$C" --seconds "$SECS" --warmup 1
}
for round in $(seq 1 "$ROUNDS"); do
  for iso in process sandbox; do
    run "echo-$iso" echo.json '"Y"' >"$TMP/r$round-echo-$iso.json"
    run "embed-$iso" embed.json EMBEDDING >"$TMP/r$round-embed-$iso.json"
  done
done
stop "$PID"

python3 - "$TMP" "$ROUNDS" "$C" "$SIZE" <<'PY'
import json, statistics, sys
tmp, rounds, c, size = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
errors = []
def runs(model, iso):
    out = [json.load(open(f"{tmp}/r{r}-{model}-{iso}.json")) for r in range(1, rounds + 1)]
    errors.extend(f"{model}-{iso}: {r['errors']} errors: {r.get('first_error')}" for r in out if r["errors"])
    return out
print(f"| load, {c} clients (median of {rounds} alternating rounds) | process | sandbox | ratio (rounds) |")
print("|---|---|---|---|")
for model, label in (("echo", "identity 1 KB"), ("embed", f"bert-{size} embed")):
    a, b = runs(model, "process"), runs(model, "sandbox")
    per = [y["rps"] / x["rps"] for x, y in zip(a, b)]
    med = lambda rs, k: statistics.median(r[k] for r in rs)
    print(f"| {label}, requests/s | {med(a, 'rps'):.0f} | {med(b, 'rps'):.0f} | "
          f"{statistics.median(per):.2f}x ({' / '.join(f'{x:.2f}' for x in per)}) |")
    print(f"| {label}, p50 µs | {med(a, 'p50_us'):.0f} | {med(b, 'p50_us'):.0f} | "
          f"added {med(b, 'p50_us') - med(a, 'p50_us'):.0f} µs |")
if errors:
    print("errors:", *errors, sep="\n  ")
    sys.exit(1)
PY
