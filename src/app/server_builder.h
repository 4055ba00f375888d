// The composition root: the only code that sees every layer. Builds the backends and runtimes,
// validates the config, takes the device locks, loads the models, serves HTTP until SIGINT or
// SIGTERM, and shuts down in order.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

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

// The process's exit codes, one per reason (README "Exit codes").
enum ExitCode : int {
  kExitOk = 0,
  kExitInvalid = 1,     // validate: the config has errors, or its memory plan does not fit
  kExitConfig = 2,      // serve: the config has errors
  kExitLocked = 3,      // serve: a device is held by another server
  kExitMemoryPlan = 4,  // serve: the start-up models do not fit the memory rule
  kExitPort = 5,        // serve: the HTTP or gRPC port cannot be bound
  kExitRuntime = 6,     // serve: a device runtime present on this host failed to initialize
};

// Opens every (runtime, device) the models are placed on, so that the server owns each runtime
// from start to shutdown: initialized once, before device memory is read or anything loads, and
// finalized only after the last model is gone — never in between when a model idles out
// (AscendCL cannot be initialized again after aclFinalize in one process). A runtime that cannot
// open is logged; its models then fail to load with the same reason, and the others serve.
// With `failed`: the first failure of a runtime that is present (not merely absent from this
// host, e.g. AscendCL not installed) is stored there.
std::vector<RuntimeLease> HoldRuntimes(const ServerConfig& config, const BackendRegistry& backends,
                                       RuntimeGuard& guard, Status* failed = nullptr);

struct ServeOptions {
  std::filesystem::path config;  // a YAML file, or a model directory (config/model_dir.h)
  std::string model_name;        // a model directory's one model's name; empty: its file's stem
  std::vector<std::string> models;  // --model [NAME=]PATH, instead of `config`
  std::vector<std::string> tasks;   // --task: none, one for all, or one per --model
  std::optional<std::string> host;  // overrides global.host
  std::optional<int> port;          // overrides global.port
  std::optional<int> grpc_port;     // overrides global.grpc_port (-1: no gRPC)
  std::vector<std::string> allowed_hosts;  // --allowed-host: added to global.allowed_hosts
  std::filesystem::path lock_dir;
  bool log_level_from_config = true;  // false when --log-level was given
};

// Runs the server until a termination signal; returns the process exit code.
// REQUIRES: SIGINT, SIGTERM and SIGHUP are blocked in every thread (main() does it first).
int Serve(const ServeOptions& options);

// `mmserve validate [--no-plan]`: prints the verdict (and every error), with `plan` the memory
// plan per device too, and returns the exit code (1: invalid, or the plan does not fit).
int Validate(const std::filesystem::path& config, bool plan = true);

// `mmserve doctor`: host, backends, device runtimes and device holders. Always exits 0.
int Doctor(const std::filesystem::path& lock_dir);

}  // namespace mmserve
