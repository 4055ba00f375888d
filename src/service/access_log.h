// The access log: one line per inference request, written as its answer leaves the service.
// Every protocol (KServe REST and gRPC, OpenAI, rerank, jobs, streams) submits through
// InferenceService, so this one place sees every request, with what only the service and the
// scheduler know: the version that served it, its queue and compute time, its tokens.
//
// Text:  access id=abc route="POST /v1/embeddings" model=embedder version=1 status=OK
//        queue_ms=0.21 compute_ms=3.40 total_ms=3.70 tokens_in=12 tokens_out=0
//        (a generation adds tokens_cached=N: prompt tokens reused from a cache, not decoded)
// JSON:  the same fields as members of the line's object (--log-format json).
// A failed request adds error="<the message>". Values a client chose (id, model) are quoted
// and escaped when they hold anything but plain characters, so no client can forge a field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "backend/infer_request.h"
#include "common/logging.h"

namespace mmserve {

struct AccessEntry {
  std::string id;     // the transport's request id, else the request's own, else empty
  std::string route;  // "POST /v2/models/echo/infer", "grpc ModelInfer"
  std::string model;
  int64_t version = 0;  // 0: never routed to one
  std::string status;   // a StatusCode's name: OK, NotFound, Unavailable, ...
  std::string error;    // the message of a failure
  std::optional<double> queue_ms;
  std::optional<double> compute_ms;
  double total_ms = 0;
  std::optional<int64_t> tokens_in;
  std::optional<int64_t> tokens_out;
  std::optional<int64_t> tokens_cached;  // prompt tokens a generator reused from its caches
};

std::string FormatAccess(const AccessEntry& entry, LogFormat format);

// Wraps `request.done` so that its answer is logged before it is delivered. Nothing when the
// access log is off.
void LogAccessOnAnswer(InferRequest& request);

}  // namespace mmserve
