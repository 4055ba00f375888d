#include "server/access.h"

#include <algorithm>
#include <cctype>

namespace mmserve {
namespace {

// Equal without an early exit, so the time taken does not tell how much of a key matched.
bool SameKey(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ (b.empty() ? 0 : b[i % b.size()]));
  }
  return diff == 0;
}

}  // namespace

Status Access::Check(Scope scope, std::string_view authorization) const {
  if (scope == Scope::kOpen) return Status::Ok();
  const std::string& needed =
      scope == Scope::kAdmin ? (admin_key_.empty() ? api_key_ : admin_key_) : api_key_;
  if (needed.empty()) return Status::Ok();
  constexpr std::string_view kScheme = "bearer ";
  std::string_view key;
  if (authorization.size() > kScheme.size() &&
      std::equal(kScheme.begin(), kScheme.end(), authorization.begin(),
                 [](char a, char b) { return a == std::tolower(static_cast<unsigned char>(b)); })) {
    key = authorization.substr(kScheme.size());
    while (!key.empty() && key.front() == ' ') key.remove_prefix(1);
    while (!key.empty() && key.back() == ' ') key.remove_suffix(1);
  }
  if (key.empty()) {
    return Unauthenticated(std::string(scope == Scope::kAdmin ? "an admin" : "an API") +
                           " key is required: send 'Authorization: Bearer <key>'");
  }
  if (SameKey(key, needed)) return Status::Ok();
  // The admin key grants inference too.
  if (scope == Scope::kInference && !admin_key_.empty() && SameKey(key, admin_key_)) {
    return Status::Ok();
  }
  return PermissionDenied(scope == Scope::kAdmin
                              ? "this key does not allow loading, unloading or reloading models"
                              : "the API key is not valid");
}

bool Access::KeyRequired(Scope scope) const {
  if (scope == Scope::kOpen) return false;
  return scope == Scope::kAdmin ? !(admin_key_.empty() && api_key_.empty()) : !api_key_.empty();
}

}  // namespace mmserve
