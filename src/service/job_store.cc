#include "service/job_store.h"

#include <atomic>
#include <cstdio>

namespace mmserve {

std::string_view JobStateName(JobState state) {
  switch (state) {
    case JobState::kPending: return "PENDING";
    case JobState::kSucceeded: return "SUCCEEDED";
    case JobState::kFailed: return "FAILED";
    case JobState::kCancelled: return "CANCELLED";
  }
  return "UNKNOWN";
}

struct JobStore::Record {
  std::string id;
  std::string model;
  std::string request_id;
  Clock::time_point created;
  std::atomic<bool> cancelled{false};
  Mutex mu;
  int64_t model_version GUARDED_BY(mu) = 0;  // the served one once known
  JobState state GUARDED_BY(mu) = JobState::kPending;
  Clock::time_point finished GUARDED_BY(mu);
  std::optional<Result<InferResponse>> result GUARDED_BY(mu);
};

Result<std::string> JobStore::Start(InferRequest& request, int64_t model_version) {
  auto record = std::make_shared<Record>();
  record->model = request.model_name;
  record->request_id = request.id;
  record->created = time_.Now();
  {
    MutexLock lock(record->mu);
    record->model_version = model_version;
  }
  {
    MutexLock lock(mu_);
    Expire(time_.Now());
    if (jobs_.size() >= static_cast<size_t>(config_.max)) {
      return ResourceExhausted("too many asynchronous jobs: " + std::to_string(config_.max) +
                               " are pending or waiting to be fetched (global.jobs.max)");
    }
    char id[33];
    std::snprintf(id, sizeof(id), "%016llx%016llx", static_cast<unsigned long long>(rng_()),
                  static_cast<unsigned long long>(rng_()));
    record->id = id;
    jobs_.emplace(record->id, record);
  }
  request.cancelled = [record] { return record->cancelled.load(); };
  request.done = [record, &time = time_](Result<InferResponse> result) {
    MutexLock lock(record->mu);
    if (record->state != JobState::kPending) return;  // cancelled meanwhile
    record->state = result.ok() ? JobState::kSucceeded : JobState::kFailed;
    if (result.ok() && result->model_version != 0) record->model_version = result->model_version;
    record->finished = time.Now();
    record->result = std::move(result);
  };
  return record->id;
}

void JobStore::Expire(Clock::time_point now) {
  std::erase_if(jobs_, [&](const auto& kv) {
    MutexLock lock(kv.second->mu);
    return kv.second->state != JobState::kPending && now - kv.second->finished >= config_.ttl;
  });
}

Result<JobInfo> JobStore::Get(const std::string& id) {
  std::shared_ptr<Record> record;
  const auto now = time_.Now();
  {
    MutexLock lock(mu_);
    Expire(now);
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return NotFound("unknown or expired job '" + id + "'");
    record = it->second;
  }
  JobInfo info{.id = record->id,
               .model = record->model,
               .request_id = record->request_id,
               .age = std::chrono::duration_cast<std::chrono::milliseconds>(now - record->created)};
  MutexLock lock(record->mu);
  info.model_version = record->model_version;
  info.state = record->state;
  if (record->state != JobState::kPending) {
    info.run_time = std::chrono::duration_cast<std::chrono::milliseconds>(record->finished -
                                                                          record->created);
  }
  info.result = record->result;
  return info;
}

Result<JobState> JobStore::Cancel(const std::string& id) {
  MutexLock lock(mu_);
  Expire(time_.Now());
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return NotFound("unknown or expired job '" + id + "'");
  auto record = it->second;
  MutexLock record_lock(record->mu);
  if (record->state == JobState::kPending) {
    record->cancelled.store(true);
    record->state = JobState::kCancelled;
    record->finished = time_.Now();
    return JobState::kCancelled;
  }
  const JobState was = record->state;
  jobs_.erase(it);
  return was;
}

size_t JobStore::size() {
  MutexLock lock(mu_);
  return jobs_.size();
}

}  // namespace mmserve
