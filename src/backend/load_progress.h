// LoadProgress: how far a model's load has read its file. The backend reports as it reads
// (llama.cpp calls back before each tensor); the lifecycle reads done()/total() for the status
// page. A file of kLogBytes or more logs its progress once a second — bytes, share and rate —
// and its total when done, so a multi-gigabyte load is never a silent minute.
//
// Thread-safety: one thread (the loading one) calls Update() and Finish(); any thread reads.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "common/clock.h"

namespace mmserve {

class LoadProgress {
 public:
  static constexpr int64_t kLogBytes = int64_t{100} << 20;

  // `model` names it in the log; `total_bytes` is the file's size (0: unknown, never logged).
  LoadProgress(std::string model, int64_t total_bytes,
               const TimeSource& time = TimeSource::Real());

  // `fraction` (0..1) of the file has been read; logs when a second passed since the last line.
  void Update(double fraction);
  // The whole file has been read: logs the total and the average rate (for a large file), once.
  void Finish();

  int64_t done() const { return done_.load(std::memory_order_relaxed); }
  int64_t total() const { return total_; }

 private:
  void Log(const char* what) const;

  const std::string model_;
  const int64_t total_;
  const TimeSource& time_;
  const Clock::time_point start_;
  Clock::time_point last_log_;
  bool finished_ = false;
  std::atomic<int64_t> done_{0};
};

}  // namespace mmserve
