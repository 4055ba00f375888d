#!/usr/bin/env bash
# Every benchmark scenario, one after the other, each side by side with its peer in one run
# (docs/BENCHMARKS.md). The tables go to stdout and to $BENCH_OUT (default build/bench-results.md).
#
#   bench/all.sh           the full suite, about 40 minutes on the 2-core machine: base models
#                          (generated first if missing), windows of 5–15 s (P7: 60 s a side),
#                          a 4-minute soak; 15–16 minutes of scenarios, plus the build check
#   bench/all.sh --quick   a smoke test (about 3 minutes, tiny models, 1 s windows, no goals):
#                          fails if any response is wrong or any scenario cannot run. The test
#                          command runs it. S1/S2 (scheduling) need the base models: not in quick.
#
# Needs what the test command builds: build/bench/*, the llama.cpp tools in .deps.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${BENCH_OUT:-$ROOT/build/bench-results.md}"
QUICK=false
[[ "${1:-}" == "--quick" ]] && QUICK=true
: >"$OUT"
failed=()

# scenario TITLE ENV... -- SCRIPT ARGS...: runs one script with its environment, records its table.
scenario() {
  local title=$1; shift
  local env=()
  while [[ $1 != -- ]]; do env+=("$1"); shift; done
  shift
  printf '\n## %s\n\n`%s %s`\n\n' "$title" "${env[*]}" "$*" | tee -a "$OUT"
  local start=$SECONDS
  if env "${env[@]}" bash "$ROOT/bench/$@" 2>"$ROOT/build/bench-$1.log" | tee -a "$OUT"; then
    printf '\n(%d s)\n' $((SECONDS - start)) | tee -a "$OUT"
  else
    printf '\n**FAILED** — see build/bench-%s.log\n' "$1" | tee -a "$OUT"
    tail -5 "$ROOT/build/bench-$1.log" || true
    failed+=("$title")
  fi
}

if $QUICK; then
  # Count requests, not seconds: a 1-second window on a loaded machine may see no answer.
  Q=(BENCH_SECONDS=1 BENCH_ROUNDS=1 BENCH_MIN_REQUESTS=3)
  scenario "P1 embeddings (tiny, quick)" "${Q[@]}" BENCH_CONCURRENCY=8 -- embeddings.sh tiny
  scenario "P2 generation (tiny, quick)" "${Q[@]}" BENCH_STREAMS=2 -- generate.sh tiny
  scenario "H1 HTTP overhead (quick)" "${Q[@]}" BENCH_CONCURRENCY=4 BENCH_ROUNDS=1 -- http_overhead.sh
  scenario "P5 first response (tiny, quick)" "${Q[@]}" -- first_response.sh tiny
  # Quick has no goals: a 4 s soak shows allocator warm-up, not a leak, so the RSS bound is off.
  scenario "P6 memory (tiny, quick)" BENCH_COPIES=2 BENCH_SOAK=4 BENCH_RSS_GROWTH_PCT=1000 -- memory.sh tiny
  scenario "RAG mix (tiny, quick)" "${Q[@]}" BENCH_EMBED=2 BENCH_RERANK=2 BENCH_CHAT=1 -- rag_mix.sh tiny
  scenario "P8 vision (quick)" "${Q[@]}" BENCH_CONCURRENCY=4 -- vision.sh
  scenario "P9 batcher against its ideal (quick)" "${Q[@]}" -- batching.sh
  scenario "P6b registered on-demand models (quick)" BENCH_MODELS=10 BENCH_ROUNDS=1 -- registry.sh tiny
  scenario "P7 model swapping (tiny, quick)" BENCH_SECONDS=3 BENCH_WARMUP=1 BENCH_SHIFT=1 BENCH_CLIENTS=8 \
    BENCH_PEER_TIMEOUT=20 -- swapping.sh tiny
  scenario "RAG mix isolated (tiny, quick)" "${Q[@]}" BENCH_EMBED=2 BENCH_RERANK=2 BENCH_CHAT=1 BENCH_ISOLATION=process -- rag_mix.sh tiny
  scenario "P10 isolation cost (tiny, quick)" "${Q[@]}" BENCH_CONCURRENCY=4 -- isolation.sh tiny
  scenario "P10s sandbox cost (tiny, quick)" "${Q[@]}" BENCH_CONCURRENCY=4 -- sandbox.sh tiny
  scenario "P11 structured output (tiny, quick)" "${Q[@]}" -- structured.sh tiny
  scenario "P11c prompt cache (tiny, quick)" BENCH_ROUNDS=1 BENCH_CLIENTS=2 -- prompt_cache.sh tiny
  scenario "P12b bulk ingestion (tiny, quick)" "${Q[@]}" BENCH_CONCURRENCY=4 -- ingestion.sh tiny
else
  MMSERVE_MODEL_SIZES=tiny,base bash "$ROOT/scripts/setup.sh" >/dev/null
  scenario "P1 embeddings, bert-base" BENCH_SECONDS=10 BENCH_ROUNDS=2 -- embeddings.sh base
  scenario "P1 embeddings, bert-tiny" BENCH_SECONDS=5 BENCH_ROUNDS=2 -- embeddings.sh tiny
  scenario "P2 generation, llama-base" BENCH_SECONDS=10 BENCH_ROUNDS=3 -- generate.sh base
  scenario "P3/H1 HTTP overhead" BENCH_SECONDS=4 -- http_overhead.sh
  scenario "P4/S1/S2 scheduling" BENCH_SECONDS=8 BENCH_ROUNDS=1 -- scheduling.sh
  scenario "P5 first response, bert-base" BENCH_ROUNDS=3 -- first_response.sh base
  scenario "RAG mix, tiny" BENCH_SECONDS=10 -- rag_mix.sh tiny
  scenario "P8 vision, classifier with pre/post-processing" BENCH_SECONDS=10 -- vision.sh
  scenario "P9 batcher against its ideal, simulated card" BENCH_SECONDS=8 BENCH_ROUNDS=2 -- batching.sh
  scenario "P6 memory, bert-base" BENCH_SOAK=240 -- memory.sh base
  scenario "P6b 100 registered on-demand models, bert-base" -- registry.sh base
  scenario "P7 model swapping under a memory budget, six models" BENCH_SECONDS=60 -- swapping.sh mixed
  scenario "RAG mix, tiny, every model isolated" BENCH_SECONDS=10 BENCH_ISOLATION=process -- rag_mix.sh tiny
  scenario "P10 isolation cost, bert-tiny" BENCH_SECONDS=5 BENCH_ROUNDS=3 -- isolation.sh tiny
  scenario "P10 isolation cost, bert-base" BENCH_SECONDS=8 BENCH_ROUNDS=2 -- isolation.sh base
  scenario "P10s sandbox cost, bert-tiny" BENCH_SECONDS=5 BENCH_ROUNDS=3 -- sandbox.sh tiny
  scenario "P11 structured output, llama-tiny" BENCH_SECONDS=15 BENCH_ROUNDS=3 -- structured.sh tiny
  scenario "P11 structured output, llama-base" BENCH_SECONDS=40 BENCH_ROUNDS=2 -- structured.sh base
  scenario "P11c prompt cache, llama-base" BENCH_ROUNDS=1 -- prompt_cache.sh base
  scenario "P12b bulk ingestion, bert-base" BENCH_SECONDS=30 BENCH_ROUNDS=1 BENCH_CONCURRENCY=4 -- ingestion.sh base
fi

echo
if ((${#failed[@]})); then
  echo "bench: ${#failed[@]} scenario(s) failed: ${failed[*]}"
  exit 1
fi
echo "bench: every scenario ran and every response was right (tables in $OUT)"
