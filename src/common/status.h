// A Status is the outcome of an operation that returns no value: OK, or a code plus a
// human-readable message. OK costs nothing (no allocation); error Statuses share one immutable
// payload, so copying is cheap.
//
// Thread-safety: const methods may run concurrently; assigning to a Status that other threads
// read needs external locking.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace mmserve {

enum class StatusCode : uint8_t {
  kOk = 0,
  kInvalidArgument,     // the request or config is wrong; retrying will not help
  kNotFound,            // unknown model, version or route
  kAlreadyExists,
  kFailedPrecondition,  // e.g. a device already held by another server
  kResourceExhausted,   // queue full, memory budget exhausted, body too large
  kUnavailable,         // loading, draining or quarantined; retry later
  kDeadlineExceeded,
  kCancelled,
  kUnimplemented,
  kInternal,            // a bug or an engine failure
  kUnauthenticated,     // no credentials, or unreadable ones
  kPermissionDenied,    // credentials that do not allow this
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message);

  static Status Ok() { return {}; }
  // A Status for a sentinel that is set on every request and nearly always replaced, kept in a
  // static: `static const Status kNone = Status::Permanent(...)`. Its payload is never freed, and
  // copies share it without allocating or counting references.
  static Status Permanent(StatusCode code, std::string message);

  bool ok() const { return rep_ == nullptr; }
  StatusCode code() const { return rep_ ? rep_->code : StatusCode::kOk; }
  std::string_view message() const { return rep_ ? std::string_view(rep_->message) : ""; }
  std::string ToString() const;  // "NotFound: model 'resnet' has no version 3"

  // Returns this status with "context: " prepended to the message (OK stays OK).
  Status WithContext(std::string_view context) const;

  // When a retry may succeed, in seconds (HTTP Retry-After); 0 = not said. Kept by WithContext.
  int64_t retry_after_s() const { return rep_ ? rep_->retry_after_s : 0; }
  Status WithRetryAfter(int64_t seconds) const;

 private:
  struct Rep {
    StatusCode code;
    std::string message;
    int64_t retry_after_s = 0;
  };
  std::shared_ptr<const Rep> rep_;  // null means OK
};

Status InvalidArgument(std::string message);
Status NotFound(std::string message);
Status AlreadyExists(std::string message);
Status FailedPrecondition(std::string message);
Status ResourceExhausted(std::string message);
Status Unavailable(std::string message);
Status DeadlineExceeded(std::string message);
Status Cancelled(std::string message);
Status Unimplemented(std::string message);
Status Internal(std::string message);
Status Unauthenticated(std::string message);
Status PermissionDenied(std::string message);

#define MMS_RETURN_IF_ERROR(expr)                      \
  do {                                                 \
    if (::mmserve::Status s_ = (expr); !s_.ok()) {     \
      return s_;                                       \
    }                                                  \
  } while (false)

}  // namespace mmserve
