#!/usr/bin/env bash
# P1 — embeddings/s with C concurrent single-text clients (default 64), mmserve against
# llama-server and against a raw batched llama.h loop (bench/raw_embed_loop.cc), all from the same
# llama.cpp bundle, same model file, same thread count, one after the
# other in one run. llama-server is tuned for the load: -np C slots, -ub/-b 2048 (one decode can
# take every waiting text), -c C x the model's context (so each slot keeps the full 512).
# Both servers stay up for the whole run and the three sides are measured in interleaved rounds
# (mmserve, llama-server, raw loop, mmserve, ...), so the machine's drift hits every side alike;
# the table gives each round and the medians with their spread.
#   bench/embeddings.sh [tiny|base]    (BENCH_SECONDS=20 BENCH_CONCURRENCY=64 BENCH_ROUNDS=3;
#   BENCH_BINARY=true asks mmserve for binary output tensors instead of JSON numbers;
#   BENCH_PIN=1 runs the load tool on core 0 and the three measured sides on the others)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SIZE="${1:-tiny}"
SECS="${BENCH_SECONDS:-20}"
C="${BENCH_CONCURRENCY:-64}"
MODEL="$ROOT/models/generated/bert-$SIZE.gguf"
source "$ROOT/bench/lib.sh"
ensure_model "$MODEL" "$SIZE"
TEXT="The quick brown fox jumps over the lazy dog near the river bank."

ROUNDS="${BENCH_ROUNDS:-3}"

# mmserve
P1="$(free_port)"
cat >"$TMP/m.yaml" <<YAML
models:
  - name: embedder
    path: $MODEL
    task: embed
    max_batch: $C
    max_queue_delay_ms: 5
    queue: {max_size: 100000}
    params: {n_parallel: $C, n_batch: 2048, n_threads: $THREADS}
YAML
"$MMSERVE" --log-level warn serve "$TMP/m.yaml" --port "$P1" --lock-dir "$TMP/locks" &
MM_PID=$!
printf '{"parameters":{"binary_data_output":%s},"inputs":[{"name":"TEXT","datatype":"BYTES","shape":[1],"data":["%s"]}]}' \
  "${BENCH_BINARY:-false}" "$TEXT" >"$TMP/kserve.json"

# llama-server
P2="$(free_port)"
"$SERVER" -m "$MODEL" --embedding -np "$C" -ub 2048 -b 2048 -c $((C * 512)) -t "$THREADS" \
  --host 127.0.0.1 --port "$P2" >"$TMP/llama-server.log" 2>&1 &
LS_PID=$!
printf '{"input":"%s"}' "$TEXT" >"$TMP/openai.json"
wait_ok "127.0.0.1:$P1/v2/health/ready"
wait_ok "127.0.0.1:$P2/health"

MM=(); LS=(); RAW=()
for _ in $(seq 1 "$ROUNDS"); do
  MM+=("$("$LOAD" --port "$P1" --path /v2/models/embedder/infer --body-file "$TMP/kserve.json" \
          --expect EMBEDDING --concurrency "$C" --seconds "$SECS" --warmup 2)")
  LS+=("$("$LOAD" --port "$P2" --path /v1/embeddings --body-file "$TMP/openai.json" \
          --expect embedding --concurrency "$C" --seconds "$SECS" --warmup 2)")
  # The engine's limit: llama.cpp called directly, C copies of the text per decode.
  RAW+=("$("$(peer raw_embed_loop)" --model "$MODEL" --text "$TEXT" --batch "$C" \
           --threads "$THREADS" --seconds "$SECS" --warmup 2)")
done
stop "$MM_PID"
stop "$LS_PID"

echo "Cores: $PIN_NOTE; engine threads: $THREADS."
python3 - "$SIZE" "$C" "$ROUNDS" "${MM[@]}" "${LS[@]}" "${RAW[@]}" <<'PY'
import json, statistics, sys
size, c, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
runs = [json.loads(a) for a in sys.argv[4:]]
mm, ls, raw = runs[:n], runs[n:2 * n], runs[2 * n:]
print(f"| bert-{size}, {c} clients, round | mmserve | llama-server | raw loop | vs llama-server | vs raw loop |")
print("|---|---|---|---|---|---|")
vs_ls = [m['rps'] / l['rps'] for m, l in zip(mm, ls)]
vs_raw = [m['rps'] / r['rps'] for m, r in zip(mm, raw)]
for i in range(n):
    print(f"| {i + 1} | {mm[i]['rps']:.1f} | {ls[i]['rps']:.1f} | {raw[i]['rps']:.1f} | "
          f"{vs_ls[i]:.2f}x | {vs_raw[i]:.2f}x |")
med = lambda xs: statistics.median(xs)
print(f"| median (range) | {med(r['rps'] for r in mm):.1f} | {med(r['rps'] for r in ls):.1f} | "
      f"{med(r['rps'] for r in raw):.1f} | {med(vs_ls):.2f}x ({min(vs_ls):.2f}-{max(vs_ls):.2f}) | "
      f"{med(vs_raw):.2f}x ({min(vs_raw):.2f}-{max(vs_raw):.2f}) |")
for p in ("p50_us", "p99_us"):
    m, l = med(r[p] for r in mm), med(r[p] for r in ls)
    print(f"| {p[:-3]} latency (ms), median | {m/1000:.1f} | {l/1000:.1f} | | {m/max(l, 1):.2f}x | |")
print(f"| load tool's own CPU (cores), median | {med(r['client_cpu_cores'] for r in mm):.2f} | "
      f"{med(r['client_cpu_cores'] for r in ls):.2f} | | | |")
print(f"| errors | {sum(r['errors'] for r in mm)} | {sum(r['errors'] for r in ls)} | | | |")
PY
