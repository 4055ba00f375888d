// Helpers for tests that drive an InferenceService in process.
#pragma once

#include <future>
#include <memory>

#include "service/inference_service.h"

namespace mmserve::testing {

// Submits `request`; the future holds its outcome.
inline std::future<Result<InferResponse>> Submit(InferenceService& service,
                                                 std::unique_ptr<InferRequest> request) {
  auto promise = std::make_shared<std::promise<Result<InferResponse>>>();
  auto future = promise->get_future();
  request->done = [promise](Result<InferResponse> result) {
    promise->set_value(std::move(result));
  };
  service.Submit(std::move(request));
  return future;
}

}  // namespace mmserve::testing
