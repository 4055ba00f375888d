#!/usr/bin/env bash
# P9 — the batcher against its ideal, on a card whose cost is known: the simulated AscendCL
# device (sim/ascendcl, ACLSIM_SERIAL_DEVICE=1) runs one execution at a time and each costs
# BENCH_LAUNCH_US + BENCH_ROW_US x rows (default 5 ms + 0.3 ms/row), as batching pays on a
# real card. Two CPU cores cannot show that with a CPU engine (llama.cpp gains 1.2-1.8x from a
# batch of 64); here the device is not the CPU, so the numbers are the batcher's own.
#
#   throughput  64 closed-loop clients, max_batch 32, two workers (two streams): rows/s against
#               the ideal the cost model allows (every batch full, the device never idle:
#               32 / (launch + 32 x row)) with max_queue_delay_ms 0 and BENCH_DELAY_MS (default
#               2), and against max_batch 1 (the on/off ratio). Alternating rounds.
#   latency     1 and 4 clients: p50 with max_queue_delay_ms 0 and BENCH_DELAY_MS against
#               max_batch 1 (no batcher): what waiting for a batch adds at low load.
#   stages      the same card and delay with `preprocess`: a 4x4 grey PNG per request (decoded,
#               resized, normalized into the 16 floats) against the plain tensor model: the
#               batcher's hold on a shared device must survive the image stages (#42).
#
#   bench/batching.sh   (BENCH_SECONDS=8 BENCH_ROUNDS=2 BENCH_LAUNCH_US BENCH_ROW_US BENCH_DELAY_MS)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SECS="${BENCH_SECONDS:-8}"
ROUNDS="${BENCH_ROUNDS:-2}"
LAUNCH_US="${BENCH_LAUNCH_US:-5000}"
ROW_US="${BENCH_ROW_US:-300}"
DELAY_MS="${BENCH_DELAY_MS:-2}"
source "$ROOT/bench/lib.sh"

# The OM in the simulator's format: 16 floats in, 16 out, gears up to 32 (sim/ascendcl/aclsim.h).
cat >"$TMP/encoder.om" <<OM
ACLSIM-OM 1
{"soc_version": "Ascend310P3",
 "inputs": [{"name": "x", "datatype": "FLOAT", "dims": [-1, 16]}],
 "outputs": [{"name": "y", "datatype": "FLOAT", "dims": [-1, 16]}],
 "dynamic_batch": [1, 2, 4, 8, 16, 32], "work_size": 1048576, "weight_size": 4194304,
 "scale": 1.0, "bias": 0.0, "latency_us": $LAUNCH_US, "latency_per_item_us": $ROW_US}
OM
# The same model taking a grey 4x4 image: one channel, NCHW.
sed '/"inputs"/s/"dims": \[-1, 16\]/"dims": [-1, 1, 4, 4]/' "$TMP/encoder.om" >"$TMP/image.om"
grep -q '"dims": \[-1, 1, 4, 4\]' "$TMP/image.om"
/usr/bin/python3 -c 'import cv2, numpy as np, sys
cv2.imwrite(sys.argv[1], (np.arange(16, dtype=np.uint8) * 16).reshape(4, 4))' "$TMP/row.png"
# model NAME MAX_BATCH DELAY_MS: one YAML entry on the encoder.
model() {
  cat <<YAML
  - name: $1
    path: $TMP/encoder.om
    thread_num: 2
    max_batch: $2
    max_queue_delay_ms: $3
    warmup: 0
    queue: {max_size: 100000}
YAML
}
{
  echo "models:"
  model batched 32 0
  model delayed 32 "$DELAY_MS"
  model unbatched 1 0
  cat <<YAML
  - name: stages
    path: $TMP/image.om
    thread_num: 2
    max_batch: 32
    max_queue_delay_ms: $DELAY_MS
    warmup: 0
    queue: {max_size: 100000}
    preprocess: {resize: {width: 4, height: 4}, color: gray}
YAML
} >"$TMP/p9.yaml"
python3 - >"$TMP/row.json" <<'PY'
import json
print(json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 16],
                              "data": [float(i) for i in range(16)]}]}))
PY

PORT="$(free_port)"
ASCEND_HOME_PATH="$ROOT/build/acl_sim" ACLSIM_SERIAL_DEVICE=1 \
  "$MMSERVE" --log-level warn serve "$TMP/p9.yaml" --port "$PORT" --grpc-port -1 \
  --lock-dir "$TMP/locks" --no-access-log &
PID=$!
wait_ok "127.0.0.1:$PORT/v2/health/ready"
# load MODEL CLIENTS: one closed-loop run.
load() {
  "$LOAD" --port "$PORT" --path "/v2/models/$1/infer" --body-file "$TMP/row.json" \
    --expect '"name":"y"' --concurrency "$2" --seconds "$SECS" --warmup 1
}
# The image model: each request one PNG body.
load_image() {
  "$LOAD" --port "$PORT" --path "/v2/models/$1/infer" --body-file "$TMP/row.png" \
    --content-type image/png --expect '"name":"y"' --concurrency "$2" --seconds "$SECS" \
    --warmup 1
}
ON=(); DELAYED=(); OFF=(); STAGES=()
for _ in $(seq 1 "$ROUNDS"); do
  ON+=("$(load batched 64)")
  DELAYED+=("$(load delayed 64)")
  OFF+=("$(load unbatched 64)")
  STAGES+=("$(load_image stages 64)")
done
LOW=()
for c in 1 4; do
  LOW+=("$(load unbatched "$c")" "$(load batched "$c")" "$(load delayed "$c")")
done
stop "$PID"

python3 - "$ROUNDS" "$LAUNCH_US" "$ROW_US" "$DELAY_MS" "${ON[@]}" "${DELAYED[@]}" "${OFF[@]}" "${LOW[@]}" \
  "${STAGES[@]}" <<'PY'
import json, statistics, sys
rounds, launch, row, delay = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
runs = [json.loads(a) for a in sys.argv[5:]]
on, delayed, off = runs[:rounds], runs[rounds:2 * rounds], runs[2 * rounds:3 * rounds]
low = runs[3 * rounds:3 * rounds + 6]
stages = runs[3 * rounds + 6:]
ideal = 32 / ((launch + 32 * row) / 1e6)
ideal1 = 1 / ((launch + row) / 1e6)
med = lambda rs, k='rps': statistics.median(r[k] for r in rs)
print(f"P9 — the batcher against its ideal: simulated card, {launch/1000:g} ms + {row/1000:g} ms/row, one execution at a time; 64 clients, 2 workers")
print(f"| round | max_batch 32, delay 0 (rows/s) | of the ideal ({ideal:.0f}/s) | max_batch 32, delay {delay} ms | of the ideal | max_batch 1 | of its ideal ({ideal1:.0f}/s) | on/off (delay {delay} ms) |")
print("|---|---|---|---|---|---|---|---|")
for i, (a, d, b) in enumerate(zip(on, delayed, off), 1):
    print(f"| {i} | {a['rps']:.0f} | {100*a['rps']/ideal:.1f} % | {d['rps']:.0f} | {100*d['rps']/ideal:.1f} % | {b['rps']:.0f} | {100*b['rps']/ideal1:.1f} % | {d['rps']/b['rps']:.2f}x |")
print(f"| median | {med(on):.0f} | {100*med(on)/ideal:.1f} % | {med(delayed):.0f} | {100*med(delayed)/ideal:.1f} % | {med(off):.0f} | {100*med(off)/ideal1:.1f} % | {med(delayed)/med(off):.2f}x |")
print(f"| p99 (ms), median | {med(on, 'p99_us')/1000:.1f} | | {med(delayed, 'p99_us')/1000:.1f} | | {med(off, 'p99_us')/1000:.1f} | | |")
print(f"| errors | {sum(r['errors'] for r in on)} | | {sum(r['errors'] for r in delayed)} | | {sum(r['errors'] for r in off)} | | |")
print()
print(f"P9 — what waiting for a batch adds at low load (p50, ms; added = against max_batch 1)")
print(f"| clients | max_batch 1 | max_batch 32, delay 0 | added | max_batch 32, delay {delay} ms | added |")
print("|---|---|---|---|---|---|")
for i, clients in enumerate((1, 4)):
    base, zero, waited = low[3 * i: 3 * i + 3]
    b = base['p50_us'] / 1000
    z = zero['p50_us'] / 1000
    d = waited['p50_us'] / 1000
    print(f"| {clients} | {b:.2f} | {z:.2f} | {z - b:+.2f} | {d:.2f} | {d - b:+.2f} |")
errors = sum(r['errors'] for r in low)
print(f"| errors | {errors} | | | | |")
print()
print(f"P9 — the same batcher with image stages (a PNG decoded, resized and normalized per request), delay {delay} ms")
print("| round | tensor model (rows/s) | of the ideal | with preprocess (rows/s) | of the ideal | ratio |")
print("|---|---|---|---|---|---|")
for i, (d, s) in enumerate(zip(delayed, stages), 1):
    print(f"| {i} | {d['rps']:.0f} | {100*d['rps']/ideal:.1f} % | {s['rps']:.0f} | {100*s['rps']/ideal:.1f} % | {s['rps']/d['rps']:.2f}x |")
print(f"| median | {med(delayed):.0f} | {100*med(delayed)/ideal:.1f} % | {med(stages):.0f} | {100*med(stages)/ideal:.1f} % | {med(stages)/med(delayed):.2f}x |")
print(f"| errors | {sum(r['errors'] for r in delayed)} | | {sum(r['errors'] for r in stages)} | | |")
PY
