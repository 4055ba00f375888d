#!/usr/bin/env bash
# P11c — the prompt cache in a RAG service's traffic, against llama-server from the same bundle
# with its default cache (slot reuse, --cache-ram 8192), on the same GGUF, threads and slots.
#   shared:  a ~1,500-token system prompt, then a different ~40-token question per request, from
#            4 clients at once. Time to first token (max_tokens 1): cold (cache_prompt: false)
#            and warm (after one request primed the cache); then generated tokens/s with
#            max_tokens 32.
#   rag:     a ~300-token system prompt, 5 of 20 retrieved ~150-token passages (in id order) and
#            a question per request: the share of prompt tokens served from a cache
#            (usage.prompt_tokens_details.cached_tokens, which both servers report) and time to
#            first token.
# Rounds alternate the servers, each started fresh. The client is one Python process.
#   bench/prompt_cache.sh [base|tiny]    (BENCH_ROUNDS=2 BENCH_CLIENTS=4)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SIZE="${1:-base}"
ROUNDS="${BENCH_ROUNDS:-2}"
C="${BENCH_CLIENTS:-4}"
MODEL="$ROOT/models/generated/llama-$SIZE.gguf"
source "$ROOT/bench/lib.sh"
ensure_model "$MODEL" "$SIZE"
CTX=2048

cat >"$TMP/m.yaml" <<YAML
models:
  - name: llm
    path: $MODEL
    task: generate
    timeout_ms: 600000
    params: {n_parallel: $C, n_ctx: $CTX, n_batch: 512, n_threads: $THREADS, prompt_cache_mb: 8192}
YAML

cat >"$TMP/client.py" <<'PY'
import http.client, json, random, statistics, sys, threading, time

port, clients, label = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
WORDS = ("river stone cloud lantern meadow copper violet harbor signal orchard thunder "
         "glacier pepper anchor velvet canyon ember willow prism falcon quartz tundra "
         "saffron beacon marble juniper cobalt monsoon nectar obsidian").split()

def post(path, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    if r.status != 200:
        raise SystemExit(f"{label}: {path} answered {r.status}: {data[:200]!r}")
    return json.loads(data)

def ntokens(text):
    return len(post("/tokenize", {"content": text})["tokens"])

def text_of(seed, tokens):
    rng = random.Random(seed)
    words = []
    while True:
        words += [rng.choice(WORDS) for _ in range(16)]
        text = " ".join(words)
        if ntokens(text) >= tokens:
            return text

def complete(prompt, max_tokens, cache=True):
    t0 = time.perf_counter()
    out = post("/v1/completions", {"model": "llm", "prompt": prompt, "max_tokens": max_tokens,
                                   "temperature": 0, "cache_prompt": cache})
    u = out["usage"]
    cached = (u.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
    return time.perf_counter() - t0, u["prompt_tokens"], cached, u["completion_tokens"]

def parallel(jobs):  # jobs: per client, a list of (prompt, max_tokens, cache)
    results, lock = [], threading.Lock()
    def run(mine):
        for job in mine:
            r = complete(*job)
            with lock:
                results.append(r)
    t0 = time.perf_counter()
    threads = [threading.Thread(target=run, args=(j,)) for j in jobs]
    for t in threads: t.start()
    for t in threads: t.join()
    return results, time.perf_counter() - t0

system = "You answer questions about the passages below. " + text_of(1, 1500)
question = lambda i: f"Question {i}: " + text_of(1000 + i, 40) + "?"
out = {}
cold, _ = parallel([[(system + "\n" + question(c), 1, False)] for c in range(clients)])
out["cold_ttft"] = statistics.median(r[0] for r in cold)
complete(system + "\n" + question(99), 1)  # primes the cache
warm, _ = parallel([[(system + "\n" + question(100 + 10 * c + q), 1, True) for q in range(3)]
                    for c in range(clients)])
out["warm_ttft"] = statistics.median(r[0] for r in warm)
out["warm_hit"] = sum(r[2] for r in warm) / sum(r[1] for r in warm)
gen, wall = parallel([[(system + "\n" + question(200 + 10 * c + q), 32, True) for q in range(2)]
                      for c in range(clients)])
out["tokens_per_s"] = sum(r[3] for r in gen) / wall
rag_system = "Answer from the retrieved passages only. " + text_of(2, 300)
passages = [f"[{i}] " + text_of(3000 + i, 150) for i in range(20)]
rng = random.Random(7)
def rag_prompt(i):
    chosen = sorted(rng.sample(range(20), 5))
    return rag_system + "\n" + "\n".join(passages[p] for p in chosen) + "\n" + question(300 + i)
rag, _ = parallel([[(rag_prompt(10 * c + q), 1, True) for q in range(3)] for c in range(clients)])
out["rag_ttft"] = statistics.median(r[0] for r in rag)
out["rag_hit"] = sum(r[2] for r in rag) / sum(r[1] for r in rag)
out["prompt_tokens"] = cold[0][1]
print(json.dumps(out))
PY

RESULTS=()
for _ in $(seq 1 "$ROUNDS"); do
  P1="$(free_port)"
  "$MMSERVE" --log-level warn serve "$TMP/m.yaml" --port "$P1" --grpc-port -1 --lock-dir "$TMP/locks" &
  MM_PID=$!
  wait_ok "127.0.0.1:$P1/v2/health/ready"
  RESULTS+=("$(/usr/bin/python3 "$TMP/client.py" "$P1" "$C" mmserve)")
  stop "$MM_PID"
  P2="$(free_port)"
  "$SERVER" -m "$MODEL" -np "$C" -c $((C * CTX)) -b 512 -ub 512 -t "$THREADS" --no-warmup \
    --host 127.0.0.1 --port "$P2" >"$TMP/llama-server.log" 2>&1 &
  LS_PID=$!
  wait_ok "127.0.0.1:$P2/health"
  RESULTS+=("$(/usr/bin/python3 "$TMP/client.py" "$P2" "$C" llama-server)")
  stop "$LS_PID"
done

/usr/bin/python3 - "$SIZE" "$C" "${RESULTS[@]}" <<'PY'
import json, statistics, sys
size, c = sys.argv[1], sys.argv[2]
r = [json.loads(a) for a in sys.argv[3:]]
pairs = list(zip(r[0::2], r[1::2]))
print(f"| llama-{size}, {c} clients, {r[0]['prompt_tokens']}-token prompts | mmserve | llama-server | mmserve / llama-server |")
print("|---|---|---|---|")
def row(name, key, fmt, better_low):
    for i, (m, l) in enumerate(pairs, 1):
        ratio = (l[key] / m[key]) if better_low else (m[key] / l[key])
        print(f"| round {i}: {name} | {m[key]:{fmt}} | {l[key]:{fmt}} | {ratio:.2f}x |")
row("shared prompt, cold time to first token (s)", "cold_ttft", ".2f", True)
row("shared prompt, warm time to first token (s)", "warm_ttft", ".3f", True)
row("shared prompt, warm cached share", "warm_hit", ".2f", False)
row("shared prompt, generated tokens/s", "tokens_per_s", ".1f", False)
row("RAG, cached share", "rag_hit", ".2f", False)
row("RAG, time to first token (s)", "rag_ttft", ".3f", True)
med = lambda f: statistics.median(f(m, l) for m, l in pairs)
print(f"| median: mmserve warm vs cold time to first token | **{med(lambda m, l: m['cold_ttft'] / m['warm_ttft']):.1f}x** faster | {med(lambda m, l: l['cold_ttft'] / l['warm_ttft']):.1f}x | |")
print(f"| median: time to first token, warm (llama-server / mmserve) | | | **{med(lambda m, l: l['warm_ttft'] / m['warm_ttft']):.2f}x** |")
print(f"| median: tokens/s (mmserve / llama-server) | | | **{med(lambda m, l: m['tokens_per_s'] / l['tokens_per_s']):.2f}x** |")
print(f"| median: RAG time to first token (llama-server / mmserve) | | | **{med(lambda m, l: l['rag_ttft'] / m['rag_ttft']):.2f}x** |")
PY
