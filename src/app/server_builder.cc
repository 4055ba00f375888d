#include "app/server_builder.h"

#include <algorithm>
#include <signal.h>

#include <iostream>
#include <set>

#include "backend/acl/acl_backend.h"
#include "backend/identity/identity_backend.h"
#include "backend/llama/llama_backend.h"
#ifdef MMSERVE_HAVE_OPENCV
#include "backend/opencv/opencv_backend.h"
#endif
#include "common/logging.h"
#include "config/config_parser.h"
#include "runtime/device_lock.h"
#include "runtime/runtime_guard.h"
#include "server/grpc/grpc_frontend.h"
#include "server/http/http_frontend.h"
#include "service/inference_service.h"
#include "service/memory_plan.h"

namespace mmserve {

BuiltIns::BuiltIns() {
  backends.Register(std::make_unique<IdentityBackend>(host_runtime));
  backends.Register(std::make_unique<LlamaBackend>(ggml_runtime));
  backends.Register(std::make_unique<AclBackend>(acl_runtime));
#ifdef MMSERVE_HAVE_OPENCV
  backends.Register(std::make_unique<OpencvBackend>(host_runtime));
#endif
  backends.set_complete(true);
}

std::vector<RuntimeLease> HoldRuntimes(const ServerConfig& config, const BackendRegistry& backends,
                                       RuntimeGuard& guard, Status* failed) {
  std::vector<RuntimeLease> leases;
  std::set<std::pair<Runtime*, int>> held;
  for (const auto& m : config.models) {
    auto backend = backends.Find(m.backend);
    if (!backend.ok()) continue;
    Runtime& runtime = (*backend)->runtime();
    if (!held.insert({&runtime, m.device_id}).second) continue;
    auto lease = guard.Acquire(runtime, m.device_id);
    if (!lease.ok()) {
      spdlog::warn("runtime {} device {}: {}; its models will not load", runtime.name(),
                   m.device_id, lease.status().message());
      // Unavailable: the runtime's library is not on this host (its models fail alone).
      if (failed && failed->ok() && lease.status().code() != StatusCode::kUnavailable) {
        *failed = lease.status();
      }
      continue;
    }
    leases.push_back(std::move(*lease));
  }
  return leases;
}

int Validate(const std::filesystem::path& config, bool plan) {
  BuiltIns builtins;
  auto parsed = LoadConfigFile(config, builtins.backends);
  if (!parsed.ok()) {
    std::cerr << config.string() << ": invalid\n" << parsed.status().message() << "\n";
    return kExitInvalid;
  }
  std::cout << config.string() << ": valid, " << parsed->models.size() << " model"
            << (parsed->models.size() == 1 ? "" : "s") << "\n";
  for (const auto& m : parsed->models) {
    std::cout << "  " << m.name << " v" << m.version << ": backend " << m.backend << ", task "
              << m.task << ", device " << m.device_id << ", load "
              << (m.load == LoadMode::kStartup ? "startup" : "on_demand") << "\n";
    if (auto b = builtins.backends.Find(m.backend); !b.ok()) {
      std::cout << "    note: " << b.status().message() << "; its params were not checked\n";
    }
  }
  if (!plan) return 0;
  RuntimeGuard guard;  // device capacities and model sizes need the runtimes up
  std::vector<RuntimeLease> runtimes = HoldRuntimes(*parsed, builtins.backends, guard);
  const auto plans = PlanMemory(*parsed, builtins.backends);
  std::cout << "memory plan:\n" << FormatPlan(plans);
  if (const std::string problems = PlanProblems(plans); !problems.empty()) {
    std::cout << "invalid: what the model files cannot do:\n" << problems;
    return kExitInvalid;
  }
  for (const auto& p : plans) {
    if (!p.fits()) return kExitInvalid;
  }
  return kExitOk;
}

namespace {

// Waits for SIGINT or SIGTERM; each SIGHUP meanwhile reloads the YAML file.
int WaitForTerminationSignal(InferenceService& service) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  while (true) {
    int signal = 0;
    sigwait(&set, &signal);
    if (signal != SIGHUP) return signal;
    spdlog::info("received SIGHUP: reloading the configuration");
    service.Reload([](const Result<ReloadReport>& result) {
      if (!result.ok()) {
        spdlog::error("config: reload rejected, the served models are unchanged: {}",
                      result.status().message());
      }
    });
  }
}

// The command line's --host, --port, --grpc-port and --allowed-host, and the keys from the environment (which
// keep secrets out of the YAML file), over the file's settings.
void ApplyOverrides(const ServeOptions& options, GlobalConfig& global) {
  if (options.host) global.host = *options.host;
  if (options.port) global.port = *options.port;
  if (options.grpc_port) {
    global.grpc_port =
        *options.grpc_port < 0 ? std::nullopt : std::optional<int>(*options.grpc_port);
  }
  for (const auto& host : options.allowed_hosts) {
    if (std::find(global.allowed_hosts.begin(), global.allowed_hosts.end(), host) ==
        global.allowed_hosts.end()) {
      global.allowed_hosts.push_back(host);
    }
  }
  if (const char* key = std::getenv("MMSERVE_API_KEY"); key && *key) global.api_key = key;
  if (const char* key = std::getenv("MMSERVE_ADMIN_KEY"); key && *key) global.admin_key = key;
}

// One server per device: every device a model is placed on, locked before any runtime is
// touched.
Result<std::vector<DeviceLock>> LockDevices(const ServerConfig& config,
                                            const std::filesystem::path& lock_dir) {
  std::set<int> devices;
  for (const auto& m : config.models) devices.insert(m.device_id);
  std::vector<DeviceLock> locks;
  for (int d : devices) {
    auto lock = DeviceLock::Acquire(lock_dir, d);
    if (!lock.ok()) return lock.status();
    locks.push_back(std::move(*lock));
  }
  return locks;
}

// Preflight: kExitOk when the model files can do what the config asks (kExitConfig if not)
// and the start-up models fit in every device's memory budget (kExitMemoryPlan if not).
int Preflight(const ServerConfig& config, const BackendRegistry& backends) {
  const auto plans = PlanMemory(config, backends);
  if (const std::string problems = PlanProblems(plans); !problems.empty()) {
    spdlog::error("refusing to start: what the model files cannot do:\n{}", problems);
    return kExitConfig;
  }
  for (const auto& p : plans) {
    if (!p.fits()) {
      spdlog::error("refusing to start: {} in device {}'s memory budget\n{}",
                    p.each_fits_alone() ? "the start-up models do not fit"
                                        : "a model could never fit",
                    p.domain, FormatPlan(plans));
      return kExitMemoryPlan;
    }
    spdlog::info("memory plan: device {}: start-up models need {} MiB of {} MiB ({}; {} MiB "
                 "free now)",
                 p.domain, p.required() >> 20, p.budget >> 20, p.budget_source,
                 p.device_free >> 20);
  }
  return kExitOk;
}

// Graceful shutdown: no new connections, requests in progress finish (up to `drain`), then the
// gRPC frontend, the models and the HTTP threads stop, in that order.
void DrainAndStop(HttpFrontend& http_frontend, GrpcFrontend* grpc, InferenceService& service,
                  std::chrono::milliseconds drain) {
  http_frontend.StopAccepting();
  spdlog::info("http: stopped accepting connections");
  if (!http_frontend.WaitIdle(drain)) {
    spdlog::warn("http: requests still in progress after the drain timeout");
  } else {
    spdlog::info("http: in-flight requests finished");
  }
  if (grpc) {
    grpc->Shutdown(drain);  // running calls finish first
    spdlog::info("grpc: stopped");
  }
  service.Shutdown(drain);
  http_frontend.Stop();
  spdlog::info("http: stopped");
}

// The HTTP frontend and, when configured, the gRPC one, bound and serving.
struct Frontends {
  std::unique_ptr<HttpFrontend> http;
  std::unique_ptr<GrpcFrontend> grpc;
};

Result<Frontends> StartFrontends(const GlobalConfig& global, InferenceService& service) {
  Frontends f;
  auto http = HttpFrontend::Create(
      {.host = global.host,
       .port = global.port,
       .threads = global.thread_num,
       .max_body_bytes = static_cast<size_t>(global.max_request_mb) << 20,
       .api_key = global.api_key,
       .admin_key = global.admin_key,
       .max_connections = global.max_connections,
       .max_in_flight = global.max_in_flight,
       .cors_origins = global.cors_origins,
       .allowed_hosts = global.allowed_hosts},
      service);
  if (!http.ok()) return http.status();
  f.http = std::move(*http);
  if (global.grpc_port) {
    auto grpc = GrpcFrontend::Create(
        {.host = global.host,
         .port = *global.grpc_port,
         .access = Access(global.api_key, global.admin_key),
         .max_message_bytes = static_cast<size_t>(global.max_request_mb) << 20,
         .max_in_flight = global.max_in_flight},
        service);
    if (!grpc.ok()) {
      f.http->Stop();
      return grpc.status();
    }
    f.grpc = std::move(*grpc);
    spdlog::info("grpc listening on {}:{} (KServe v2 GRPCInferenceService)", global.host,
                 f.grpc->port());
  }
  return f;
}

}  // namespace

int Serve(const ServeOptions& options) {
  BuiltIns builtins;
  auto config = options.models.empty()
                    ? LoadConfigFile(options.config, builtins.backends, options.model_name)
                    : LoadModelArgs(options.models, options.tasks, builtins.backends);
  if (!config.ok()) {
    spdlog::error("{}: {}", options.models.empty() ? options.config.string() : "--model",
                  config.status().message());
    return kExitConfig;
  }
  if (options.log_level_from_config) {
    SetLogLevel(config->global.log_level);
  }
  config->overrides = [options](GlobalConfig& g) { ApplyOverrides(options, g); };
  config->overrides(config->global);
  const GlobalConfig global = config->global;

  auto locks = LockDevices(*config, options.lock_dir);
  if (!locks.ok()) {
    spdlog::error("refusing to start: {}", locks.status().message());
    return kExitLocked;
  }

  RuntimeGuard guard;  // outlives the service, whose models hold its leases
  Status runtime_failed;
  std::vector<RuntimeLease> runtimes =
      HoldRuntimes(*config, builtins.backends, guard, &runtime_failed);
  if (!runtime_failed.ok()) {
    spdlog::error("refusing to start: {}", runtime_failed.message());
    return kExitRuntime;
  }

  // Preflight: with the devices open, before anything loads.
  if (int code = Preflight(*config, builtins.backends); code != kExitOk) return code;

  InferenceService service(std::move(*config), builtins.backends, guard);
  // The ports before the models: a port in use fails in milliseconds, not after the loads.
  // Meanwhile the server answers: live, not ready, its models LOADING.
  auto frontends = StartFrontends(global, service);
  if (!frontends.ok()) {
    spdlog::error("refusing to start: {}", frontends.status().ToString());
    service.Shutdown(std::chrono::milliseconds(0));
    return kExitPort;
  }
  service.LoadStartupModels();
  spdlog::info("mmserve listening on http://{}:{} ({}, {} I/O threads)", global.host,
               frontends->http->port(), service.Ready() ? "ready" : "NOT ready",
               global.thread_num);

  const int signal = WaitForTerminationSignal(service);
  spdlog::info("received {}: shutting down (drain timeout {} ms)",
               signal == SIGINT ? "SIGINT" : "SIGTERM", global.drain_timeout.count());
  DrainAndStop(*frontends->http, frontends->grpc.get(), service, global.drain_timeout);
  runtimes.clear();  // the last leases: the runtimes close and finalize, newest first
  locks->clear();
  spdlog::info("shutdown complete");
  return kExitOk;
}

}  // namespace mmserve
