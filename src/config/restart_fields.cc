#include "config/restart_fields.h"

#include <tuple>

namespace mmserve {

namespace {

// Every field of GlobalConfig, in declaration order. The structured binding does not compile
// when the struct gains or loses a field: then classify the new one in RestartNeeded.
auto Fields(const GlobalConfig& g) {
  const auto& [device, memory_pool_mb, preflight, thread_num, host, port,
               max_request_mb, keep_alive, isolation, drain_timeout, log_level, jobs, model_roots, watch,
               grpc_port, api_key, admin_key, max_connections, max_in_flight, cors_origins,
               allowed_hosts, priority_linger] = g;
  return std::tie(device, memory_pool_mb, preflight, thread_num, host, port,
                  max_request_mb, keep_alive, isolation, drain_timeout, log_level, jobs, model_roots, watch,
                  grpc_port, api_key, admin_key, max_connections, max_in_flight, cors_origins,
                  allowed_hosts, priority_linger);
}

// A setting and when its change takes effect.
enum class Takes { kRestart, kReload };
struct Field {
  const char* name;  // as the YAML spells it
  Takes takes;
};
// In the order of Fields(). kReload: applied live — through the model entries it defaults
// (device, keep_alive) or read anew where used (model_roots, watch).
constexpr Field kFields[] = {
    {"device", Takes::kReload},          {"memory_pool", Takes::kRestart},
    {"preflight", Takes::kRestart},
    {"thread_num", Takes::kRestart},     {"host", Takes::kRestart},
    {"port", Takes::kRestart},           {"max_request_mb", Takes::kRestart},
    {"keep_alive", Takes::kReload},      {"isolation", Takes::kReload},
    {"drain_timeout", Takes::kRestart},
    {"log_level", Takes::kRestart},      {"jobs", Takes::kRestart},
    {"model_roots", Takes::kReload},     {"watch", Takes::kReload},
    {"grpc_port", Takes::kRestart},      {"api_key", Takes::kRestart},
    {"admin_key", Takes::kRestart},      {"max_connections", Takes::kRestart},
    {"max_in_flight", Takes::kRestart},  {"cors_origins", Takes::kRestart},
    {"allowed_hosts", Takes::kRestart},  {"priority_linger", Takes::kRestart},
};
static_assert(std::size(kFields) == std::tuple_size_v<decltype(Fields(GlobalConfig{}))>,
              "classify every GlobalConfig field in kFields");

}  // namespace

std::vector<std::string> RestartNeeded(const GlobalConfig& was, const GlobalConfig& now) {
  std::vector<std::string> out;
  const auto a = Fields(was);
  const auto b = Fields(now);
  [&]<size_t... I>(std::index_sequence<I...>) {
    ((kFields[I].takes == Takes::kRestart && std::get<I>(a) != std::get<I>(b)
          ? out.push_back(std::string("global.") + kFields[I].name)
          : void()),
     ...);
  }(std::make_index_sequence<std::size(kFields)>());
  return out;
}

}  // namespace mmserve
