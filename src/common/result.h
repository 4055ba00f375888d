// Result<T> holds either a T or a non-OK Status. Returned by value from any function that
// produces something and can fail. (With C++23 this becomes std::expected<T, Status>.)
#pragma once

#include <cassert>
#include <concepts>
#include <utility>
#include <variant>

#include "common/status.h"

namespace mmserve {

template <typename T>
class [[nodiscard]] Result {
 public:
  // Implicit on purpose, so `return value;` and `return NotFound(...)` both work.
  template <typename U = T>
    requires std::constructible_from<T, U&&> && (!std::same_as<std::remove_cvref_t<U>, Status>)
  Result(U&& value) : rep_(std::in_place_type<T>, std::forward<U>(value)) {}
  Result(Status error) : rep_(std::move(error)) { assert(!std::get<Status>(rep_).ok()); }

  bool ok() const { return std::holds_alternative<T>(rep_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(rep_);
  }

  // REQUIRES: ok().
  T& value() & { return std::get<T>(rep_); }
  const T& value() const& { return std::get<T>(rep_); }
  T&& value() && { return std::get<T>(std::move(rep_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<Status, T> rep_;
};

#define MMS_CONCAT_(a, b) a##b
#define MMS_CONCAT(a, b) MMS_CONCAT_(a, b)
#define MMS_ASSIGN_OR_RETURN(lhs, expr)                    \
  auto MMS_CONCAT(result_, __LINE__) = (expr);             \
  if (!MMS_CONCAT(result_, __LINE__).ok()) {               \
    return MMS_CONCAT(result_, __LINE__).status();         \
  }                                                        \
  lhs = std::move(MMS_CONCAT(result_, __LINE__)).value()

}  // namespace mmserve
