// GrpcFrontend: KServe v2 gRPC (package inference, service GRPCInferenceService, with
// Triton's ModelStreamInfer, ModelConfig, ModelStatistics and repository RPCs) over gRPC's
// callback API. Like the HTTP frontend it never waits on a model: a call is decoded on a gRPC
// thread, Submit()ted to the InferenceService, and finished from the request's `done` callback.
// Errors travel as gRPC status codes (the Status → code mapping is in grpc_frontend.cc); the
// same API and admin keys apply, read from the "authorization" metadata ("Bearer <key>").
//
// ModelStreamInfer: every request read on the stream is submitted at once; each answer is one
// ModelStreamInferResponse (error_message set on failure), and a generate model's tokens arrive
// as partial responses before the final one (parameter triton_final_response false, then true).
//
// Threads: gRPC's own completion-queue threads; responses are written from worker threads.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "common/result.h"
#include "server/access.h"
#include "service/inference_service.h"

namespace mmserve {

class GrpcFrontend {
 public:
  struct Options {
    std::string host = "127.0.0.1";
    int port = 8001;  // 0 = an ephemeral port; see port()
    Access access;
    size_t max_message_bytes = 64u << 20;  // larger requests get RESOURCE_EXHAUSTED
    // Inference requests handled at once (this frontend's own count); beyond: UNAVAILABLE.
    int64_t max_in_flight = 0;  // 0 = no limit
  };

  // Binds and starts serving. `service` is not owned and must outlive the frontend.
  static Result<std::unique_ptr<GrpcFrontend>> Create(Options options, InferenceService& service);
  ~GrpcFrontend();

  int port() const { return port_; }
  // Stops taking calls, lets the running ones finish for up to `grace`, then cancels the rest.
  // Idempotent.
  void Shutdown(std::chrono::milliseconds grace);

 private:
  struct Impl;
  explicit GrpcFrontend(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace mmserve
