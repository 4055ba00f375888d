#!/usr/bin/env bash
# P12b — bulk ingestion: C clients (default 8) each sending K requests (default 1) of 32 texts
# of 256–512 tokens to /v1/embeddings, mmserve against llama-server (--embedding, the same
# threads, -b/-ub 2048) and against a raw llama.h loop packing the same 32 texts into decodes of
# at most 2048 tokens (bench/raw_embed_loop.cc --texts-file, BENCH_SECONDS long). Tokens/s for a
# server = C x K x the body's tokens (counted by the server's /tokenize, with the special tokens
# each text gets) / the wall time from the first request to the last answer: a fixed amount of
# work, because on the 2-core machine one bert-base request is ~18 s of it and a time window of
# a closed loop sees almost no answers (64 clients, the issue's figure, queue 20 minutes).
# Every answer must hold 32 embeddings. Both servers stay up; rounds alternate the three sides.
#   bench/ingestion.sh [base|tiny]    (BENCH_CONCURRENCY=8 BENCH_REQUESTS=1 BENCH_ROUNDS=2
#                                      BENCH_SECONDS=30)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SIZE="${1:-base}"
SECS="${BENCH_SECONDS:-30}"
K="${BENCH_REQUESTS:-1}"
C="${BENCH_CONCURRENCY:-8}"
ROUNDS="${BENCH_ROUNDS:-2}"
MODEL="$ROOT/models/generated/bert-$SIZE.gguf"
source "$ROOT/bench/lib.sh"
ensure_model "$MODEL" "$SIZE"

P1="$(free_port)"
cat >"$TMP/m.yaml" <<YAML
models:
  - name: embedder
    path: $MODEL
    task: embed
    max_batch: $C
    max_queue_delay_ms: 5
    timeout_ms: 600000
    queue: {max_size: 100000}
    params: {n_batch: 2048, n_threads: $THREADS}
YAML
"$MMSERVE" --log-level warn serve "$TMP/m.yaml" --port "$P1" --grpc-port -1 --lock-dir "$TMP/locks" &
MM_PID=$!
P2="$(free_port)"
"$SERVER" -m "$MODEL" --embedding -np "$C" -ub 2048 -b 2048 -c $((C * 512)) -t "$THREADS" \
  --host 127.0.0.1 --port "$P2" >"$TMP/llama-server.log" 2>&1 &
LS_PID=$!
wait_ok "127.0.0.1:$P1/v2/health/ready"
wait_ok "127.0.0.1:$P2/health"

# 32 texts of 256-512 tokens (by the model's own tokenizer), one per line, and the request body.
TOKENS="$(/usr/bin/python3 - "$P1" "$TMP" <<'PY'
import http.client, json, random, sys
port, tmp = int(sys.argv[1]), sys.argv[2]
WORDS = ("the river carries stone and cloud past a lantern in the meadow where copper violet "
         "harbor signals reach an orchard under thunder while glaciers of pepper anchor velvet "
         "canyons of ember and willow light").split()
def ntokens(text):
    c = http.client.HTTPConnection("127.0.0.1", port)
    c.request("POST", "/tokenize", json.dumps({"content": text, "add_special": True}),
              {"Content-Type": "application/json"})
    n = len(json.loads(c.getresponse().read())["tokens"])
    c.close()
    return n
rng = random.Random(12)
texts, total = [], 0
for i in range(32):
    goal = rng.randint(256, 512)
    words = [f"passage {i}:"]
    while ntokens(" ".join(words)) < goal - 8:
        words += [rng.choice(WORDS) for _ in range(8)]
    text = " ".join(words)
    while ntokens(text) > 512:
        text = text.rsplit(" ", 1)[0]
    texts.append(text)
    total += ntokens(text)
open(f"{tmp}/texts.txt", "w").write("\n".join(texts) + "\n")
open(f"{tmp}/mm.json", "w").write(json.dumps({"model": "embedder", "input": texts}))
open(f"{tmp}/ls.json", "w").write(json.dumps({"input": texts}))
print(total)
PY
)"

# C clients, K requests each; the wall time of the whole load.
cat >"$TMP/client.py" <<'PY'
import http.client, json, sys, threading, time
port, path, body, clients, k = int(sys.argv[1]), sys.argv[2], open(sys.argv[3]).read(), int(sys.argv[4]), int(sys.argv[5])
bad = []
def client():
    for _ in range(k):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)
        c.request("POST", path, body, {"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        c.close()
        if r.status != 200 or len(json.loads(data)["data"]) != 32:
            bad.append(f"{r.status}: {data[:200]!r}")
t0 = time.perf_counter()
threads = [threading.Thread(target=client) for _ in range(clients)]
for t in threads: t.start()
for t in threads: t.join()
wall = time.perf_counter() - t0
if bad: raise SystemExit(f"{len(bad)} bad answers, e.g. {bad[0]}")
print(json.dumps({"requests": clients * k, "seconds": wall, "rps": clients * k / wall, "errors": 0}))
PY

MM=(); LS=(); RAW=()
for _ in $(seq 1 "$ROUNDS"); do
  MM+=("$(/usr/bin/python3 "$TMP/client.py" "$P1" /v1/embeddings "$TMP/mm.json" "$C" "$K")")
  LS+=("$(/usr/bin/python3 "$TMP/client.py" "$P2" /v1/embeddings "$TMP/ls.json" "$C" "$K")")
  RAW+=("$("$(peer raw_embed_loop)" --model "$MODEL" --texts-file "$TMP/texts.txt" \
           --batch 16 --n-batch 2048 --threads "$THREADS" --seconds "$SECS" --warmup 2)")
done
stop "$MM_PID"
stop "$LS_PID"

/usr/bin/python3 - "$SIZE" "$C" "$ROUNDS" "$TOKENS" "${MM[@]}" "${LS[@]}" "${RAW[@]}" <<'PY'
import json, statistics, sys
size, c, n, tokens = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
runs = [json.loads(a) for a in sys.argv[5:]]
mm, ls, raw = runs[:n], runs[n:2 * n], runs[2 * n:]
tps = lambda r: r["rps"] * tokens
print(f"| bert-{size}, {c} clients x 32 texts ({tokens} tokens) per request, tokens/s | mmserve | llama-server | raw loop | vs llama-server | vs raw loop |")
print("|---|---|---|---|---|---|")
vs_ls = [tps(m) / tps(l) for m, l in zip(mm, ls)]
vs_raw = [tps(m) / r["tokens_per_s"] for m, r in zip(mm, raw)]
for i in range(n):
    print(f"| round {i + 1} | {tps(mm[i]):.0f} | {tps(ls[i]):.0f} | {raw[i]['tokens_per_s']:.0f} | "
          f"{vs_ls[i]:.2f}x | {vs_raw[i]:.2f}x |")
med = statistics.median
print(f"| median | | | | **{med(vs_ls):.2f}x** | **{med(vs_raw):.2f}x** |")
print(f"| errors | {sum(r['errors'] for r in mm)} | {sum(r['errors'] for r in ls)} | | | |")
PY
