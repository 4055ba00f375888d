#!/usr/bin/env bash
# P13 — many streams: S concurrent clients (16, then 32) each streaming BENCH_REQUESTS answers of
# N tokens (default 128) from /v1/completions, mmserve against llama-server from the same bundle
# with the same slots (-np S), threads and batch, greedy. Generated tokens/s = every streamed
# token / the wall time of the whole load; time per output token = the gaps between a stream's
# events (one token each), p50 and p99 over every stream. Each answer must hold N tokens. The
# client is one Python process reading server-sent events (a few hundred events/s: little CPU).
#   bench/streams.sh [base|tiny]    (BENCH_STREAMS="16 32" BENCH_TOKENS=128 BENCH_REQUESTS=2)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SIZE="${1:-base}"
STREAMS="${BENCH_STREAMS:-16 32}"
N="${BENCH_TOKENS:-128}"
K="${BENCH_REQUESTS:-2}"
MODEL="$ROOT/models/generated/llama-$SIZE.gguf"
source "$ROOT/bench/lib.sh"
ensure_model "$MODEL" "$SIZE"

cat >"$TMP/client.py" <<'PY'
import http.client, json, statistics, sys, threading, time
port, s, n, k, extra = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), json.loads(sys.argv[5])
gaps, tokens, bad, lock = [], [0], [0], threading.Lock()
def client(c):
    for q in range(k):
        body = {"model": "llm", "prompt": f"Story {c}-{q}: once upon a time, in a land far away, there lived",
                "max_tokens": n, "temperature": 0, "stream": True, **extra}
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)
        conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
        r = conn.getresponse()
        mine, last, count = [], None, 0
        for line in r:
            if not line.startswith(b"data: ") or line.startswith(b"data: [DONE]"):
                continue
            event = json.loads(line[6:])
            if not event.get("choices") or not event["choices"][0].get("text"):
                continue
            now = time.perf_counter()
            if last is not None:
                mine.append(now - last)
            last, count = now, count + 1
        conn.close()
        with lock:
            gaps.extend(mine)
            tokens[0] += count
            bad[0] += count < n * 0.9  # pieces held back (a partial UTF-8 character) join events
t0 = time.perf_counter()
threads = [threading.Thread(target=client, args=(c,)) for c in range(s)]
for t in threads: t.start()
for t in threads: t.join()
wall = time.perf_counter() - t0
gaps.sort()
print(json.dumps({"tokens_per_s": tokens[0] / wall, "tpot_p50_ms": 1000 * gaps[len(gaps) // 2],
                  "tpot_p99_ms": 1000 * gaps[int(len(gaps) * 0.99)], "short_answers": bad[0]}))
PY

RESULTS=()
for S in $STREAMS; do
  P1="$(free_port)"
  cat >"$TMP/m.yaml" <<YAML
models:
  - name: llm
    path: $MODEL
    task: generate
    timeout_ms: 3600000
    queue: {max_size: 1000}
    params: {n_parallel: $S, n_ctx: 512, n_batch: 512, n_threads: $THREADS}
YAML
  "$MMSERVE" --log-level warn serve "$TMP/m.yaml" --port "$P1" --grpc-port -1 --lock-dir "$TMP/locks" &
  MM_PID=$!
  wait_ok "127.0.0.1:$P1/v2/health/ready"
  RESULTS+=("$(/usr/bin/python3 "$TMP/client.py" "$P1" "$S" "$N" "$K" '{}')")
  stop "$MM_PID"
  P2="$(free_port)"
  "$SERVER" -m "$MODEL" -np "$S" -c $((S * 512)) -b 512 -ub 512 -t "$THREADS" --no-warmup \
    --host 127.0.0.1 --port "$P2" >"$TMP/llama-server.log" 2>&1 &
  LS_PID=$!
  wait_ok "127.0.0.1:$P2/health"
  RESULTS+=("$(/usr/bin/python3 "$TMP/client.py" "$P2" "$S" "$N" "$K" '{"cache_prompt": false}')")
  stop "$LS_PID"
done

/usr/bin/python3 - "$SIZE" "$N" "$K" "$STREAMS" "${RESULTS[@]}" <<'PY'
import json, sys
size, n, k, streams = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split()
r = [json.loads(a) for a in sys.argv[5:]]
print(f"| llama-{size}, streams of {n} tokens ({k} per client) | mmserve | llama-server | ratio |")
print("|---|---|---|---|")
for s, (m, l) in zip(streams, zip(r[0::2], r[1::2])):
    print(f"| {s} streams: generated tokens/s | {m['tokens_per_s']:.1f} | {l['tokens_per_s']:.1f} | **{m['tokens_per_s'] / l['tokens_per_s']:.2f}x** |")
    for key, label in (("tpot_p50_ms", "p50"), ("tpot_p99_ms", "p99")):
        print(f"| {s} streams: time per output token {label} (ms) | {m[key]:.1f} | {l[key]:.1f} | {m[key] / l[key]:.2f}x |")
    print(f"| {s} streams: answers under {n} tokens | {m['short_answers']} | {l['short_answers']} | |")
PY
