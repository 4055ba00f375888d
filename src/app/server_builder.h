// The composition root: the only code that sees every layer. Builds the backends and runtimes,
// validates the config, takes the device locks, loads the models, serves HTTP until SIGINT or
// SIGTERM, and shuts down in order.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "backend/backend_registry.h"
#include "config/model_config.h"
#include "runtime/acl_runtime.h"
#include "runtime/ggml_runtime.h"
#include "runtime/host_runtime.h"
#include "runtime/runtime_guard.h"

namespace mmserve {

// Owns the runtimes and the backends compiled into this binary. The runtimes outlive the
// backends that point at them (declaration order).
struct BuiltIns {
  HostRuntime host_runtime;
  GgmlRuntime ggml_runtime;
  AclRuntime acl_runtime;
  BackendRegistry backends;
  BuiltIns();
};

// Opens every (runtime, device) the models are placed on, so that the server owns each runtime
// from start to shutdown: initialized once, before device memory is read or anything loads, and
// finalized only after the last model is gone — never in between when a model idles out
// (AscendCL cannot be initialized again after aclFinalize in one process). A runtime that cannot
// open is logged; its models then fail to load with the same reason, and the others serve.
std::vector<RuntimeLease> HoldRuntimes(const ServerConfig& config, const BackendRegistry& backends,
                                       RuntimeGuard& guard);

struct ServeOptions {
  std::filesystem::path config;
  std::optional<std::string> host;  // overrides global.host
  std::optional<int> port;          // overrides global.port
  std::optional<int> grpc_port;     // overrides global.grpc_port (-1: no gRPC)
  std::filesystem::path lock_dir;
  bool log_level_from_config = true;  // false when --log-level was given
};

// Runs the server until a termination signal; returns the process exit code.
// REQUIRES: SIGINT, SIGTERM and SIGHUP are blocked in every thread (main() does it first).
int Serve(const ServeOptions& options);

// `mmserve validate [--plan]`: prints the verdict (and every error), with `plan` the memory
// plan per device too, and returns the exit code (1: invalid, or the plan does not fit).
int Validate(const std::filesystem::path& config, bool plan = false);

// `mmserve doctor`: host, backends, device runtimes and device holders. Always exits 0.
int Doctor(const std::filesystem::path& lock_dir);

}  // namespace mmserve
