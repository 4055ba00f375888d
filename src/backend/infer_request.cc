#include "backend/infer_request.h"

#include <cmath>
#include <sstream>

#include "config/model_config.h"

namespace mmserve {
namespace {

thread_local bool t_may_answer_here = false;

Status OutOfRange(const std::string& key, const std::string& range) {
  return InvalidArgument("parameter " + key + ": expected " + range);
}

}  // namespace

bool MayAnswerHere() { return t_may_answer_here; }

ScopedAnswerHere::ScopedAnswerHere(bool allowed) : saved_(t_may_answer_here) {
  t_may_answer_here = allowed;
}

ScopedAnswerHere::~ScopedAnswerHere() { t_may_answer_here = saved_; }

Result<int64_t> IntParam(const RequestParams& params, const std::string& key, int64_t fallback,
                         int64_t lo, int64_t hi) {
  auto it = params.find(key);
  if (it == params.end()) return fallback;
  const std::string range =
      "an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
  if (const auto* i = std::get_if<int64_t>(&it->second)) {
    if (*i < lo || *i > hi) return OutOfRange(key, range + ", found " + std::to_string(*i));
    return *i;
  }
  if (const auto* d = std::get_if<double>(&it->second)) {
    // Compared as doubles first: converting an out-of-range double to int64_t is undefined.
    if (std::isfinite(*d) && *d == std::floor(*d) && *d >= static_cast<double>(lo) &&
        *d <= static_cast<double>(hi) && std::fabs(*d) < 9.2e18) {
      return static_cast<int64_t>(*d);
    }
  }
  return OutOfRange(key, range);
}

Result<double> RealParam(const RequestParams& params, const std::string& key, double fallback,
                         double lo, double hi) {
  auto it = params.find(key);
  if (it == params.end()) return fallback;
  double v;
  if (const auto* i = std::get_if<int64_t>(&it->second)) {
    v = static_cast<double>(*i);
  } else if (const auto* d = std::get_if<double>(&it->second)) {
    v = *d;
  } else {
    v = std::nan("");
  }
  if (!(v >= lo && v <= hi)) {  // NaN fails both
    std::ostringstream range;
    range << "a number from " << lo << " to " << hi;
    return OutOfRange(key, range.str());
  }
  return v;
}

Status ApplySchedulingParams(InferRequest& request) {
  if (auto it = request.parameters.find("priority"); it != request.parameters.end()) {
    const int64_t* level = std::get_if<int64_t>(&it->second);
    if (!level || *level < 0 || *level > kMaxPriorityLevel) {
      return InvalidArgument("parameters.priority: expected a level in 1.." +
                             std::to_string(kMaxPriorityLevel) +
                             " (1 is highest; 0 = the model's default)");
    }
    request.priority = static_cast<int>(*level);
  }
  if (auto it = request.parameters.find("timeout"); it != request.parameters.end()) {
    const int64_t* us = std::get_if<int64_t>(&it->second);
    if (!us || *us <= 0) {
      return InvalidArgument(
          "parameters.timeout: expected a positive number of microseconds (it can only "
          "shorten the model's timeout)");
    }
    // A request may shorten its timeout, never lengthen it: the scheduler bounds the deadline
    // by its level's timeout as well. Capped first (no model waits longer than a day), so that
    // arrival + timeout cannot overflow the clock's nanoseconds.
    request.deadline = std::min(
        request.deadline,
        request.arrival + std::chrono::microseconds(std::min<int64_t>(*us, kMaxRequestTimeoutUs)));
  }
  return Status::Ok();
}

}  // namespace mmserve
