#!/usr/bin/env bash
# P8 — vision: images/s with C concurrent clients (default 16), each sending one JPEG photo
# (Content-Type: image/jpeg) to a classifier with pre-processing (decode, resize to 32x32, /255,
# RGB, NCHW) and post-processing (softmax, top 3), mmserve with dynamic batching on (max_batch C)
# and off (max_batch 1), against a raw loop (bench/raw_vision_loop.cc: OpenCV's imdecode,
# blobFromImages and Net::forward on batches of C in one process, no server). One worker thread
# in mmserve, one loop in the peer; OpenCV's own compute pool in both. Interleaved rounds.
#   bench/vision.sh        (BENCH_SECONDS=10 BENCH_CONCURRENCY=16 BENCH_ROUNDS=3)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SECS="${BENCH_SECONDS:-10}"
C="${BENCH_CONCURRENCY:-16}"
ROUNDS="${BENCH_ROUNDS:-3}"
MODEL="$ROOT/models/generated/classifier-tiny.onnx"
source "$ROOT/bench/lib.sh"
ensure_model "$MODEL" tiny
# A real photo when opencv-doc is installed (the test command installs it), else the demo's PNG.
IMAGE=/usr/share/doc/opencv-doc/examples/data/fruits.jpg
TYPE=image/jpeg
if [[ ! -f $IMAGE ]]; then IMAGE="$ROOT/models/generated/sample.png"; TYPE=image/png; fi

serve() {  # serve NAME MAX_BATCH: starts mmserve with the classifier; prints its port
  local port
  port="$(free_port)"
  cat >"$TMP/$1.yaml" <<YAML
models:
  - name: classifier
    path: $MODEL
    max_batch: $2
    max_queue_delay_ms: 2
    queue: {max_size: 100000}
    preprocess: {resize: {width: 32, height: 32}, scale: 0.00392156862745098}
    postprocess: {softmax: true, top_k: 3}
YAML
  "$MMSERVE" --log-level warn serve "$TMP/$1.yaml" --port "$port" --lock-dir "$TMP/locks-$1" &
  echo "$port $!"
}
read -r P_ON PID_ON < <(serve on "$C")
read -r P_OFF PID_OFF < <(serve off 1)
wait_ok "127.0.0.1:$P_ON/v2/health/ready"
wait_ok "127.0.0.1:$P_OFF/v2/health/ready"

load() {
  "$LOAD" --port "$1" --path /v2/models/classifier/infer --body-file "$IMAGE" --content-type "$TYPE" \
    --expect SCORES --concurrency "$C" --seconds "$SECS" --warmup 1
}
ON=(); OFF=(); RAW=()
for _ in $(seq 1 "$ROUNDS"); do
  ON+=("$(load "$P_ON")")
  OFF+=("$(load "$P_OFF")")
  RAW+=("$("$(peer raw_vision_loop)" --model "$MODEL" --image "$IMAGE" --batch "$C" \
           --size 32 --seconds "$SECS" --warmup 1)")
done
stop "$PID_ON"
stop "$PID_OFF"

python3 - "$C" "$ROUNDS" "$(basename "$IMAGE")" "${ON[@]}" "${OFF[@]}" "${RAW[@]}" <<'PY'
import json, statistics, sys
c, n, image = sys.argv[1], int(sys.argv[2]), sys.argv[3]
runs = [json.loads(a) for a in sys.argv[4:]]
on, off, raw = runs[:n], runs[n:2 * n], runs[2 * n:]
med = statistics.median
print(f"| classifier-tiny + pre/post, {image}, {c} clients, round | batching on | batching off "
      f"| raw loop (batch {c}) | on vs raw | off vs raw |")
print("|---|---|---|---|---|---|")
r_on = [a['rps'] / r['ips'] for a, r in zip(on, raw)]
r_off = [a['rps'] / r['ips'] for a, r in zip(off, raw)]
for i in range(n):
    print(f"| {i + 1} | {on[i]['rps']:.1f} | {off[i]['rps']:.1f} | {raw[i]['ips']:.1f} | "
          f"{r_on[i]:.2f}x | {r_off[i]:.2f}x |")
print(f"| median (range) | {med(r['rps'] for r in on):.1f} | {med(r['rps'] for r in off):.1f} | "
      f"{med(r['ips'] for r in raw):.1f} | {med(r_on):.2f}x ({min(r_on):.2f}-{max(r_on):.2f}) | "
      f"{med(r_off):.2f}x ({min(r_off):.2f}-{max(r_off):.2f}) |")
for p in ("p50_us", "p99_us"):
    print(f"| {p[:-3]} latency (ms), median | {med(r[p] for r in on)/1000:.1f} | "
          f"{med(r[p] for r in off)/1000:.1f} | | | |")
print(f"| decode + blob share of the raw loop's time | | | {med(r['pre_share'] for r in raw):.0%} | | |")
print(f"| errors | {sum(r['errors'] for r in on)} | {sum(r['errors'] for r in off)} | | | |")
PY
