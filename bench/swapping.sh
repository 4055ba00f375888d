#!/usr/bin/env bash
# P7 — model swapping under a memory budget: six models (an embedder, a reranker and a generator,
# each tiny and base), more than the budget holds, and BENCH_CLIENTS (16) closed-loop clients
# whose every request picks a model by a Zipf law (s = 1.1) over a ranking that is shuffled every
# BENCH_SHIFT (20) seconds: the popular set moves and the server has to follow. Nothing is loaded
# at the start; loads, evictions and the waits they cause are part of what is measured.
#
#   mmserve:              every model `load: on_demand`, a budget (global.memory_pool) of
#                         BENCH_BUDGET_MB, by default what the three largest models need
#                         (their estimates: about three models' worth, in bytes)
#   llama-server router:  the same six files as presets, `--models-max 3` (LRU; a process per
#                         model), children with OMP_WAIT_POLICY=passive as in rag_mix.sh
#
# Same model files, same threads, same request bodies (generation: mmserve's /v1/completions,
# the router's native /completion, as in rag_mix.sh), one server after the other, alternating
# rounds. Reports requests/s and p50/p99 per model class, loads and evictions, errors.
#   bench/swapping.sh [mixed|tiny]   (tiny: the base slots use the tiny files too — the quick run)
#                     (BENCH_SECONDS=60 BENCH_WARMUP=5 BENCH_CLIENTS=16 BENCH_SHIFT=20 BENCH_ROUNDS=1
#                      BENCH_MMAP=true BENCH_PEER_TIMEOUT=120)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SIZE="${1:-mixed}"
SECS="${BENCH_SECONDS:-60}"
WARMUP="${BENCH_WARMUP:-5}"
CLIENTS="${BENCH_CLIENTS:-16}"
SHIFT="${BENCH_SHIFT:-20}"
ROUNDS="${BENCH_ROUNDS:-1}"
MMAP="${BENCH_MMAP:-true}"  # mmserve's llama params.mmap (false: weights copied at each load)
N=8  # tokens per generated answer
source "$ROOT/bench/lib.sh"
BIG=base
[[ "$SIZE" == tiny ]] && BIG=tiny
G="$ROOT/models/generated"
ensure_model "$G/bert-$BIG.gguf" "$BIG"
declare -A FILE=([embed-tiny]="$G/bert-tiny.gguf" [embed-base]="$G/bert-$BIG.gguf"
                 [rerank-tiny]="$G/rerank-tiny.gguf" [rerank-base]="$G/rerank-$BIG.gguf"
                 [gen-tiny]="$G/llama-tiny.gguf" [gen-base]="$G/llama-$BIG.gguf")
MODELS=(embed-tiny embed-base rerank-tiny rerank-base gen-tiny gen-base)

# The request bodies, and one mix file per side (the generation route differs).
for m in "${MODELS[@]}"; do
  case $m in
    embed-*) printf '{"model":"%s","input":"The quick brown fox jumps over the lazy dog near the river bank."}' "$m" >"$TMP/$m.json" ;;
    rerank-*) printf '{"model":"%s","query":"where does the fox jump?","documents":["The fox jumps over the dog.","Rivers flow to the sea.","A lazy dog sleeps by the bank.","Foxes are quick animals."]}' "$m" >"$TMP/$m.json" ;;
    gen-*)
      printf '{"model":"%s","prompt":"Tell me a story about a fox.","max_tokens":%d,"temperature":0}' "$m" "$N" >"$TMP/$m.json"
      printf '{"model":"%s","prompt":"Tell me a story about a fox.","n_predict":%d,"temperature":0,"cache_prompt":false}' "$m" "$N" >"$TMP/$m.ls.json" ;;
  esac
done
python3 - "$TMP" "$N" "${MODELS[@]}" <<'PY'
import json, sys
tmp, n, models = sys.argv[1], sys.argv[2], sys.argv[3:]
for side in ("mm", "ls"):
    mix = []
    for m in models:
        kind = m.split("-")[0]
        if kind == "embed": path, expect, body = "/v1/embeddings", '"embedding"', f"{tmp}/{m}.json"
        elif kind == "rerank": path, expect, body = "/v1/rerank", '"relevance_score"', f"{tmp}/{m}.json"
        elif side == "mm": path, expect, body = "/v1/completions", f'"completion_tokens":{n}', f"{tmp}/{m}.json"
        else: path, expect, body = "/completion", f'"tokens_predicted":{n}', f"{tmp}/{m}.ls.json"
        mix.append({"name": m, "path": path, "body_file": body, "expect": expect})
    json.dump(mix, open(f"{tmp}/mix.{side}.json", "w"))
PY

# mmserve's budget: the three largest models at their estimates (about three models' worth).
config() {  # config BUDGET_MB
  printf 'global:\n  memory_pool: %s\n  keep_alive: 5m\nmodels:\n' "$1"
  for m in "${MODELS[@]}"; do
    case $m in
      embed-*) task=embed extra="max_batch: 64, max_queue_delay_ms: 2, params: {n_parallel: 16, n_batch: 2048, n_threads: $THREADS, mmap: $MMAP}" ;;
      rerank-*) task=rerank extra="max_batch: 16, params: {n_parallel: 16, n_batch: 2048, n_threads: $THREADS, mmap: $MMAP}" ;;
      gen-*) task=generate extra="timeout_ms: 600000, params: {n_parallel: 4, n_ctx: 512, n_batch: 512, n_threads: $THREADS, mmap: $MMAP}" ;;
    esac
    echo "  - {name: $m, path: ${FILE[$m]}, task: $task, load: on_demand, $extra}"
  done
}
if [[ -z "${BENCH_BUDGET_MB:-}" ]]; then
  config 0 >"$TMP/plan.yaml"
  BENCH_BUDGET_MB="$("$MMSERVE" validate "$TMP/plan.yaml" 2>/dev/null | python3 -c '
import re, sys
plan = {m[1]: float(m[2]) for m in re.finditer(r"^  (\S+) v\d+ +on_demand +([\d.]+) MiB", sys.stdin.read(), re.M)}
print(int(sum(sorted(plan.values())[-3:]) / 0.9) + 1)')"
fi
config "$BENCH_BUDGET_MB" >"$TMP/m.yaml"

cat >"$TMP/presets.ini" <<INI
version = 1
[*]
t = $THREADS
INI
for m in "${MODELS[@]}"; do
  case $m in
    embed-*) extra=$'embedding = true\nnp = 16\nc = 8192\nb = 2048\nub = 2048' ;;
    rerank-*) extra=$'rerank = true\nnp = 16\nc = 8192\nb = 2048\nub = 2048' ;;
    gen-*) extra=$'np = 4\nc = 2048\nb = 512\nub = 512' ;;
  esac
  printf '[%s]\nmodel = %s\n%s\n' "$m" "${FILE[$m]}" "$extra" >>"$TMP/presets.ini"
done

# peak_kib PID: the peak resident memory of PID and its children together, until PID exits.
peak_kib() {
  local peak=0 now
  while kill -0 "$1" 2>/dev/null; do
    now=$(rss_kib "$1" $(pgrep -P "$1" || true))
    ((now > peak)) && peak=$now
    sleep 0.5
  done
  echo "$peak"
}
metric_sum() { curl -sf "127.0.0.1:$1/metrics" | awk -v n="$2" '$1 ~ "^"n"[{ ]" || $1 == n {s += $NF} END {print s + 0}'; }

# run SIDE ROUND: one server and the load: its JSON line in $TMP/SIDE.ROUND.json, the peak RSS in
# .peak, "loads evictions seconds-loading" in .counts (the router's loading time is not known: 0).
run() {
  local side=$1 round=$2 port pid watcher
  port="$(free_port)"
  if [[ $side == mm ]]; then
    "$MMSERVE" --log-level info serve "$TMP/m.yaml" --port "$port" --grpc-port -1 \
      --lock-dir "$TMP/locks" >"$TMP/mm.$round.log" 2>&1 &
    pid=$!
    wait_ok "127.0.0.1:$port/v2/health/live"
  else
    env OMP_WAIT_POLICY=passive "$SERVER" --models-preset "$TMP/presets.ini" --models-max 3 \
      --host 127.0.0.1 --port "$port" --no-webui >"$TMP/ls.$round.log" 2>&1 &
    pid=$!
    wait_ok "127.0.0.1:$port/health"
  fi
  peak_kib "$pid" >"$TMP/$side.$round.peak" &
  watcher=$!
  # A request the router never answers is an error after BENCH_PEER_TIMEOUT (the quick run's
  # bound: one stuck child made a 10-second smoke test wait two minutes).
  local timeout=120
  [[ $side == ls ]] && timeout="${BENCH_PEER_TIMEOUT:-120}"
  "$LOAD" --port "$port" --mix "$TMP/mix.$side.json" --concurrency "$CLIENTS" --seconds "$SECS" \
    --warmup "$WARMUP" --shift-seconds "$SHIFT" --timeout "$timeout" >"$TMP/$side.$round.json" || true
  if [[ $side == mm ]]; then
    # loads, evictions, and the seconds spent loading (the loader runs one load at a time)
    echo "$(metric_sum "$port" mmserve_model_loads_total) $(metric_sum "$port" mmserve_model_evictions_total)" \
      "$(grep -o 'loaded version .* in [0-9]* ms' "$TMP/mm.$round.log" | awk '{s += $(NF-1)} END {print s / 1000}')" \
      >"$TMP/$side.$round.counts"
    # Each answer's time split (access log): queued behind its model's requests, computing, and
    # the rest, waiting for its model to load (or drain for another's load).
    grep -oE 'model=[^ ]+ version=[^ ]+ status=OK queue_ms=[0-9.]+ compute_ms=[0-9.]+ total_ms=[0-9.]+' \
      "$TMP/mm.$round.log" >"$TMP/mm.$round.access" || true
  else
    echo "$(grep -c 'spawning server instance with name' "$TMP/ls.$round.log") $(grep -c 'stopping model instance name' "$TMP/ls.$round.log") 0" >"$TMP/$side.$round.counts"
  fi
  stop "$pid"
  wait "$watcher" || true
  cat "$TMP/$side.$round.json" >&2
}
for r in $(seq 1 "$ROUNDS"); do
  run mm "$r"
  run ls "$r"
done

python3 - "$TMP" "$ROUNDS" "$SIZE" "$CLIENTS" "$SECS" "$SHIFT" "$BENCH_BUDGET_MB" <<'PY'
import json, statistics, sys
tmp, rounds, size, clients, secs, shift, budget = sys.argv[1], int(sys.argv[2]), *sys.argv[3:]
def side(s):
    out = []
    for r in range(1, rounds + 1):
        text = open(f"{tmp}/{s}.{r}.json").read().strip()
        j = json.loads(text.splitlines()[-1]) if text else {"rps": 0, "errors": -1, "models": []}
        loads, evictions, loading = open(f"{tmp}/{s}.{r}.counts").read().split()
        j.update(loads=int(loads), evictions=int(evictions), loading=float(loading), peak=int(open(f"{tmp}/{s}.{r}.peak").read() or 0))
        out.append(j)
    return out
mm, ls = side("mm"), side("ls")
med = lambda runs, f: statistics.median(f(j) for j in runs)
def cls(j, kind, key):
    ms = [m for m in j.get("models", []) if m["name"].startswith(kind)]
    if key == "rps": return sum(m["rps"] for m in ms)
    return max((m[key] for m in ms), default=0)
ratio = lambda a, b: f"{a / b:.2f}x" if b else "—"
print(f"P7 — six models ({size}), {clients} Zipf clients (s 1.1, new ranking every {shift} s), "
      f"{secs} s measured, median of {rounds} alternating round(s); mmserve budget {budget} MiB, "
      "router --models-max 3")
print("| | mmserve | llama-server router | ratio | goal |")
print("|---|---|---|---|---|")
a, b = med(mm, lambda j: j["rps"]), med(ls, lambda j: j["rps"])
print(f"| requests/s, all models | {a:.1f} | {b:.1f} | {ratio(a, b)} | ≥ 1.5x |")
for kind in ("embed", "rerank", "gen"):
    a, b = med(mm, lambda j: cls(j, kind, "rps")), med(ls, lambda j: cls(j, kind, "rps"))
    print(f"| {kind}: requests/s | {a:.1f} | {b:.1f} | {ratio(a, b)} | |")
    for key, label in (("p50_us", "p50"), ("p99_us", "p99")):
        a, b = med(mm, lambda j: cls(j, kind, key)), med(ls, lambda j: cls(j, kind, key))
        print(f"| {kind}: {label} ms (worse of tiny/base) | {a/1000:.1f} | {b/1000:.1f} | {ratio(a, b)} | {'≤ 0.7x' if key == 'p99_us' else ''} |")
a, b = med(mm, lambda j: j.get("p99_us", 0)), med(ls, lambda j: j.get("p99_us", 0))
print(f"| p99 ms, all requests | {a/1000:.1f} | {b/1000:.1f} | {ratio(a, b)} | ≤ 0.7x |")
for key, label in (("loads", "loads"), ("evictions", "evictions")):
    print(f"| {label} | {med(mm, lambda j: j[key]):.0f} | {med(ls, lambda j: j[key]):.0f} | | |")
print(f"| seconds spent loading (mmserve's loader) | {med(mm, lambda j: j['loading']):.1f} | | | |")
print(f"| errors | {med(mm, lambda j: j['errors']):.0f} | {med(ls, lambda j: j['errors']):.0f} | | 0 |")
a, b = med(mm, lambda j: j["peak"]), med(ls, lambda j: j["peak"])
print(f"| peak resident memory (MiB, all processes) | {a/1024:.0f} | {b/1024:.0f} | {ratio(a, b)} | |")
# Where mmserve's slowest answers spent their time (what bounds its p99).
for r in range(1, rounds + 1):
    rows = []
    for line in open(f"{tmp}/mm.{r}.access"):
        f = dict(kv.split("=", 1) for kv in line.split())
        total, queue, compute = float(f["total_ms"]), float(f["queue_ms"]), float(f["compute_ms"])
        rows.append((total, queue, compute, f["model"].strip('"')))
    rows.sort(reverse=True)
    worst = rows[:max(1, len(rows) // 100)]
    if not worst: continue
    t = sum(w[0] for w in worst)
    q, c = sum(w[1] for w in worst), sum(w[2] for w in worst)
    models = {}
    for w in worst: models[w[3]] = models.get(w[3], 0) + 1
    print(f"\nmmserve round {r}, its slowest 1 % ({len(worst)} of {len(rows)} answers, "
          f"{worst[-1][0]:.0f} ms and more): {100 * (t - q - c) / t:.0f} % of their time waiting "
          f"for a load, {100 * q / t:.0f} % queued, {100 * c / t:.0f} % computing; "
          + ", ".join(f"{m} {n}" for m, n in sorted(models.items(), key=lambda x: -x[1])))
for s, runs in (("mmserve", mm), ("router", ls)):
    for j in runs:
        if j.get("first_error"): print(f"\n{s}: first error: {j['first_error'][:300]}")
sys.exit(1 if any(j["errors"] != 0 or not j.get("requests") for j in mm) else 0)
PY
