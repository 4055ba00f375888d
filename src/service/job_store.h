// JobStore: asynchronous inference — submit now, fetch the result later.
//
// Start() reserves a job for a request and wires the request's `done` and `cancelled` to it; the
// request is then submitted as usual. A job is PENDING until its request finishes, then
// SUCCEEDED or FAILED (or CANCELLED when deleted while pending). Finished jobs are kept for
// `ttl`, and at most `max` jobs exist at once (pending or kept): beyond that Start() answers
// ResourceExhausted. Unknown and expired jobs are NotFound.
//
// Thread-safe. A job's record is shared with its request's callback, so the store may go away
// before the request finishes.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>

#include "backend/infer_request.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "config/model_config.h"

namespace mmserve {

enum class JobState { kPending, kSucceeded, kFailed, kCancelled };
std::string_view JobStateName(JobState state);  // "PENDING", "SUCCEEDED", ...

struct JobInfo {
  std::string id;
  std::string model;
  int64_t model_version = 0;
  std::string request_id;
  JobState state = JobState::kPending;
  std::chrono::milliseconds age{0};        // since it was submitted
  std::chrono::milliseconds run_time{0};   // submitted → finished (0 while pending)
  std::optional<Result<InferResponse>> result;  // once finished
};

class JobStore {
 public:
  // `time` decides when finished jobs expire; not owned, outlives the store.
  explicit JobStore(JobsConfig config, const TimeSource& time = TimeSource::Real())
      : config_(config), time_(time), rng_(std::random_device{}()) {}

  // Makes `request` a job: its `done` (which must be empty) stores the outcome, its
  // `cancelled` reports a Cancel(). Returns the job id.
  Result<std::string> Start(InferRequest& request, int64_t model_version);
  Result<JobInfo> Get(const std::string& id);
  // Pending: the request is cancelled (not executed if still queued) and the job is kept as
  // CANCELLED. Finished: the job is forgotten.
  Result<JobState> Cancel(const std::string& id);

  size_t size();

 private:
  struct Record;
  void Expire(Clock::time_point now) REQUIRES(mu_);

  const JobsConfig config_;
  const TimeSource& time_;
  Mutex mu_;
  std::mt19937_64 rng_ GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<Record>> jobs_ GUARDED_BY(mu_);
};

}  // namespace mmserve
