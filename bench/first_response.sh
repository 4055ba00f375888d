#!/usr/bin/env bash
# P5 — the first response of an on-demand model against the engine's own cold start: llama.cpp
# loading the same file the same way (weights read into memory), creating a context and
# embedding one text (bench/raw_cold_start.cc). mmserve serves the model with `load: on_demand`
# and `keep_alive: 0`, so every request after an idle pause is a first response: it is timed
# by the client (curl) from sending the request to the last byte of the answer.
#   bench/first_response.sh [base|tiny]    (BENCH_ROUNDS=5)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SIZE="${1:-base}"
ROUNDS="${BENCH_ROUNDS:-5}"
MODEL="$ROOT/models/generated/bert-$SIZE.gguf"
source "$ROOT/bench/lib.sh"
ensure_model "$MODEL" "$SIZE"
TEXT="The quick brown fox jumps over the lazy dog near the river bank."

PORT="$(free_port)"
cat >"$TMP/m.yaml" <<YAML
models:
  - name: cold
    path: $MODEL
    task: embed
    load: on_demand
    keep_alive: 0
    params: {n_parallel: 1, n_ctx: 512, n_batch: 512, n_threads: $THREADS}
YAML
"$MMSERVE" --log-level warn serve "$TMP/m.yaml" --port "$PORT" --lock-dir "$TMP/locks" &
PID=$!
wait_ok "127.0.0.1:$PORT/v2/health/ready"
printf '{"inputs":[{"name":"TEXT","datatype":"BYTES","shape":[1],"data":["%s"]}]}' "$TEXT" \
  >"$TMP/body.json"
MM=()
for _ in $(seq 1 "$ROUNDS"); do
  # Wait until the model is unloaded again (keep_alive: 0), then time one request.
  for _ in $(seq 1 100); do
    curl -s "127.0.0.1:$PORT/v2/models/cold" | grep -q '"UNLOADED"' && break
    sleep 0.1
  done
  MM+=("$(curl -s -o "$TMP/out.json" -w '%{time_total}' -H 'Content-Type: application/json' \
          --data-binary @"$TMP/body.json" "127.0.0.1:$PORT/v2/models/cold/infer")")
  grep -q EMBEDDING "$TMP/out.json" || { echo "bad answer: $(head -c 200 "$TMP/out.json")"; exit 1; }
done
stop "$PID"
RAW="$("$(peer raw_cold_start)" --model "$MODEL" --text "$TEXT" --threads "$THREADS" \
       --rounds "$ROUNDS")"

python3 - "$SIZE" "$RAW" "${MM[@]}" <<'PY'
import json, statistics, sys
size, raw = sys.argv[1], json.loads(sys.argv[2])
mm = [float(s) * 1000 for s in sys.argv[3:]]
print(f"| bert-{size}, first response | mmserve on demand (ms) | raw load + first embedding (ms) | ratio |")
print("|---|---|---|---|")
for i, (m, r) in enumerate(zip(mm, raw["rounds_ms"]), 1):
    print(f"| round {i} | {m:.0f} | {r:.0f} | {m / r:.2f}x |")
m, r = statistics.median(mm), raw["median_ms"]
print(f"| median | {m:.0f} | {r:.0f} | {m / r:.2f}x |")
PY
