// Access: who may call what, the same for every transport — HTTP passes its Authorization
// header, gRPC its "authorization" metadata. Keys are compared in constant time.
//
//   kOpen       health probes: always allowed
//   kInference  inference, metadata, listings, metrics: the API key (or the admin key)
//   kAdmin      load, unload, reload: the admin key (the API key when no admin key is set)
//
// A scope whose key is not configured is open. No credentials (or not "Bearer <key>") →
// Unauthenticated (HTTP 401); a key that does not grant the scope → PermissionDenied (403).
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace mmserve {

enum class Scope { kOpen, kInference, kAdmin };

class Access {
 public:
  Access() = default;
  Access(std::string api_key, std::string admin_key)
      : api_key_(std::move(api_key)), admin_key_(std::move(admin_key)) {}

  // `authorization`: the header's value, empty when absent.
  Status Check(Scope scope, std::string_view authorization) const;
  // Whether `scope` needs a key at all (the status page asks for one only then).
  bool KeyRequired(Scope scope) const;

 private:
  std::string api_key_;
  std::string admin_key_;
};

}  // namespace mmserve
