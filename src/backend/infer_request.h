// InferRequest / InferResponse: one client call and its answer, as every layer below the
// frontends sees them — tensors and typed parameters, never JSON or HTTP.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "common/tensor.h"

namespace mmserve {

using ParamValue = std::variant<bool, int64_t, double, std::string>;
using RequestParams = std::map<std::string, ParamValue>;

// Typed reads of request parameters: the fallback when the key is absent or of another type.
inline bool BoolParam(const RequestParams& params, const std::string& key, bool fallback) {
  auto it = params.find(key);
  const bool* b = it == params.end() ? nullptr : std::get_if<bool>(&it->second);
  return b ? *b : fallback;
}
// For parameters the server set itself (token counts in a response): converted to T.
template <typename T>
T NumberParam(const RequestParams& params, const std::string& key, T fallback) {
  auto it = params.find(key);
  if (it == params.end()) return fallback;
  if (const auto* i = std::get_if<int64_t>(&it->second)) return static_cast<T>(*i);
  if (const auto* d = std::get_if<double>(&it->second)) return static_cast<T>(*d);
  return fallback;
}
// For parameters a client sent: `fallback` when absent; otherwise a number within [lo, hi] or an
// error that names the parameter and the range. Never narrowed, wrapped or clamped silently
// (gRPC's uint64 2^32+3 is not 3). IntParam takes whole doubles too.
Result<int64_t> IntParam(const RequestParams& params, const std::string& key, int64_t fallback,
                         int64_t lo, int64_t hi);
Result<double> RealParam(const RequestParams& params, const std::string& key, double fallback,
                         double lo, double hi);
inline std::string StringParam(const RequestParams& params, const std::string& key) {
  auto it = params.find(key);
  const std::string* s = it == params.end() ? nullptr : std::get_if<std::string>(&it->second);
  return s ? *s : std::string();
}

struct InferResponse {
  int64_t model_version = 0;  // the version that served it (set by the service)
  int64_t queue_ns = 0;       // its time in the queue and in execution (set by the scheduler)
  int64_t compute_ns = 0;
  std::vector<Tensor> outputs;
  RequestParams parameters;
};

using InferCallback = std::function<void(Result<InferResponse>)>;

struct InferRequest {
  std::string model_name;
  int64_t model_version = 0;  // 0: routed by label, canary or default
  std::string model_label;    // with model_version 0: the version this label points at
  std::string id;             // echoed back
  // For the access log: how it came ("POST /v1/embeddings", "grpc ModelInfer") and the
  // transport's request id (X-Request-Id), if any.
  std::string route;
  std::string trace_id;
  std::vector<Tensor> inputs;
  std::vector<std::string> requested_outputs;  // empty: every output
  RequestParams parameters;
  int priority = 0;                    // 1 (highest) .. kMaxPriorityLevel; 0: the model's default
  Clock::time_point deadline = Clock::time_point::max();
  Clock::time_point arrival = Clock::now();
  // Called exactly once with the outcome, on whichever thread finishes the request.
  InferCallback done;
  // The input named `name`, or null.
  const Tensor* input(const std::string& name) const {
    for (const auto& t : inputs) {
      if (t.name() == name) return &t;
    }
    return nullptr;
  }

  // Streaming backends call this with each partial output (e.g. a token's text) before `done`;
  // it returns false when the client has gone away, which cancels the request. Optional.
  std::function<bool(const InferResponse&)> on_partial;
  // True once whoever asked no longer wants the answer (the client disconnected, the job was
  // deleted): a queued request is then answered Cancelled without being executed, and a
  // generation stops at its next token. Any thread; optional.
  std::function<bool()> cancelled;
};

// Whether the thread now calling a request's `done` may spend its own time on the answer
// (encode it, write it to the client) instead of handing it to the frontend's threads: one
// thread wake-up fewer on the answer's way. True only inside a ScopedAnswerHere — a model's
// worker answering the few requests (at most kMaxBatchesPerCall) it executed, with nothing
// queued behind them (it would go idle otherwise, so the answers delay no queued request).
bool MayAnswerHere();
class ScopedAnswerHere {
 public:
  explicit ScopedAnswerHere(bool allowed);
  ~ScopedAnswerHere();
  ScopedAnswerHere(const ScopedAnswerHere&) = delete;
  ScopedAnswerHere& operator=(const ScopedAnswerHere&) = delete;

 private:
  bool saved_;
};

// The longest a request may ask to wait (a day): bounds arrival + timeout well inside the clock.
inline constexpr int64_t kMaxRequestTimeoutUs = int64_t{24} * 3600 * 1'000'000;

// Applies the KServe request parameters `priority` (a level; 0 = the model's default) and
// `timeout` (µs; it may only shorten the deadline, and is capped at a day), which the KServe
// protocols carry as parameters.
Status ApplySchedulingParams(InferRequest& request);

// What a BatchItem holds until its backend fills it in.
inline Status NoResponseYet() {
  static const Status kNoResponse =
      Status::Permanent(StatusCode::kInternal, "the backend produced no response for this request");
  return kNoResponse;
}

// One request of a batch and the slot for its outcome. Backends fill `result` per request, so a
// failure of one request does not fail the others.
struct BatchItem {
  const InferRequest* request;  // not owned; outlives the execution
  Result<InferResponse> result = NoResponseYet();
};
using BatchView = std::span<BatchItem>;

}  // namespace mmserve
