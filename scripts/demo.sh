#!/usr/bin/env bash
# The run command: sets up what is missing (scripts/setup.sh), then serves examples/demo.yaml on
# 127.0.0.1:8000 in the foreground. Ctrl-C (SIGINT) drains and shuts down cleanly.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh
CONFIG="${1:-examples/demo.yaml}"
PORT="${MMSERVE_PORT:-8000}"
GRPC_PORT="${MMSERVE_GRPC_PORT:-8001}"  # KServe v2 gRPC; -1 = none
cat <<MSG

==> mmserve: serving $CONFIG on http://127.0.0.1:$PORT and gRPC 127.0.0.1:$GRPC_PORT  (Ctrl-C to stop)
Try, from another terminal:
  curl -i 127.0.0.1:$PORT/v2/health/ready
  curl -s -X POST 127.0.0.1:$PORT/v2/models/llm/infer \\
       -H 'Content-Type: application/json' -d '{"parameters":{"max_tokens":16},"inputs":[{"name":"PROMPT","datatype":"BYTES","shape":[1],"data":["Once upon a time"]}]}'
  curl -s 127.0.0.1:$PORT/v2/models/embedder
  curl -s 127.0.0.1:$PORT/v1/chat/completions \\
       -H 'Content-Type: application/json' -d '{"model":"llm","messages":[{"role":"user","content":"Hi"}],"max_tokens":16}'
  curl -s 127.0.0.1:$PORT/v1/embeddings -H 'Content-Type: application/json' -d '{"model":"embedder","input":["hello world"]}'
  curl -s 127.0.0.1:$PORT/v1/rerank \\
       -H 'Content-Type: application/json' -d '{"model":"reranker","query":"what do cats eat","documents":["cats eat fish","GPUs are fast"]}'
  curl -s -X POST 127.0.0.1:$PORT/v2/models/detector/infer \\
       -H 'Content-Type: image/png' --data-binary @models/generated/sample.png
  curl -s -X POST 127.0.0.1:$PORT/v2/models/classifier/infer \\
       -H 'Content-Type: image/png' --data-binary @models/generated/sample.png
  curl -s 127.0.0.1:$PORT/metrics
  curl -s -X POST 127.0.0.1:$PORT/v2/models/embedder/infer \\
       -H 'Content-Type: application/json' -d '{"inputs":[{"name":"TEXT","datatype":"BYTES","shape":[2],"data":["hello world","mmserve"]}]}'
  curl -s -X POST 127.0.0.1:$PORT/v2/models/reranker/infer \\
       -H 'Content-Type: application/json' -d '{"inputs":[{"name":"QUERY","datatype":"BYTES","shape":[1],"data":["what do cats eat"]},
                      {"name":"DOCUMENTS","datatype":"BYTES","shape":[2],"data":["cats eat fish","GPUs are fast"]}]}'
  curl -s -X POST 127.0.0.1:$PORT/v2/models/echo/infer \\
       -H 'Content-Type: application/json' -d '{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]},
                      {"name":"TEXT","datatype":"BYTES","shape":[1],"data":["hello"]}]}'
  curl -s -X POST 127.0.0.1:$PORT/v2/models/echo_slow/infer \\
       -H 'Content-Type: application/json' -d '{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[3],"data":[1,2,3]}]}'

MSG
exec "$ROOT/build/src/app/mmserve" serve "$CONFIG" --port "$PORT" --grpc-port "$GRPC_PORT"
