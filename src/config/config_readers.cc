#include "config/config_readers.h"

#include <unistd.h>

#include <algorithm>
#include <map>

#include "common/json.h"
#include "common/strings.h"
#include "config/config_parser.h"

namespace mmserve {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path AbsoluteIn(const fs::path& base_dir, const std::string& text) {
  return fs::path(text).is_absolute() ? fs::path(text) : base_dir / text;
}

std::string JoinInts(const std::vector<int>& values) {
  std::vector<std::string> parts;
  for (int v : values) parts.push_back(std::to_string(v));
  return Join(parts, ", ");
}

std::optional<std::chrono::milliseconds> ReadDuration(
    ParamReader& r, const std::string& key,
    std::optional<std::chrono::milliseconds> fallback) {
  const json* v = r.Raw(key);
  if (!v) return fallback;
  std::optional<std::optional<std::chrono::milliseconds>> parsed;
  if (v->is_number_integer()) {
    parsed = ParseDuration(std::to_string(v->get<int64_t>()));
  } else if (v->is_string()) {
    parsed = ParseDuration(v->get<std::string>());
  }
  if (!parsed) {
    r.Error(key,
            "a duration (seconds, or \"500ms\", \"30s\", \"5m\", \"1h\"; at most 100 years; "
            "-1 = forever)",
            DescribeFound(*v));
    return fallback;
  }
  return *parsed;
}

// Set by CMake on this file alone (MMSERVE_SECCOMP): whether backend/process/sandbox.cc can
// enter a sandbox.
#ifdef MMSERVE_HAVE_SECCOMP
constexpr bool kBuiltWithSeccomp = true;
#else
constexpr bool kBuiltWithSeccomp = false;
#endif

Isolation ReadIsolation(ParamReader& r, Isolation fallback) {
  if (!r.Has("isolation")) return fallback;
  const std::string value = r.String("isolation", "none", {"none", "process", "sandbox"});
  return value == "process"   ? Isolation::kProcess
         : value == "sandbox" ? Isolation::kSandbox
                              : Isolation::kNone;
}

void CheckIsolation(ParamReader& r, const ModelConfig& m, bool supported) {
  if (!InWorker(m.isolation)) return;
  const std::string found = m.isolation == Isolation::kSandbox ? "\"sandbox\"" : "\"process\"";
  if (m.execute_inline) {
    r.Error("isolation", "none with execution: inline (requests run on the server's threads)",
            found);
  } else if (!supported) {
    r.Error("isolation",
            "none for backend " + m.backend + " task " + m.task +
                " (this build has no worker process for it)",
            found);
  } else if (m.isolation == Isolation::kSandbox && !kBuiltWithSeccomp) {
    r.Error("isolation", "none or process: this build has no seccomp (libseccomp-dev)", found);
  } else if (m.isolation == Isolation::kSandbox && m.backend == "acl") {
    // A card's driver is driven through ioctls, which the sandbox's allow list leaves out.
    r.Error("isolation", "none or process for backend acl (the sandbox runs host models only)",
            found);
  }
}

std::optional<ComputeWait> ReadComputeWait(ParamReader& r) {
  if (!r.Has("compute_wait")) return std::nullopt;
  return r.String("compute_wait", "sleep", {"spin", "sleep"}) == "spin" ? ComputeWait::kSpin
                                                                       : ComputeWait::kSleep;
}

void CheckComputeWait(ParamReader& r, const ModelConfig& m, bool has_threads) {
  if (!m.compute_wait) return;
  const std::string found = m.compute_wait == ComputeWait::kSpin ? "\"spin\"" : "\"sleep\"";
  if (!InWorker(m.isolation)) {
    r.Error("compute_wait",
            "no compute_wait without isolation: process or sandbox (in-process models share "
            "the server's OpenMP runtime: set OMP_WAIT_POLICY in the server's environment)",
            found);
  } else if (!has_threads) {
    r.Error("compute_wait",
            "no compute_wait for backend " + m.backend +
                " (its engine runs no OpenMP compute threads in this build)",
            found);
  }
}

int ReadPriority(ParamReader& r) {
  const json* v = r.Raw("priority");
  if (!v) return kDefaultPriority;
  if (v->is_string()) {
    static const std::map<std::string, int> kNames = {{"high", 1}, {"normal", 2}, {"low", 3}};
    if (auto it = kNames.find(v->get<std::string>()); it != kNames.end()) return it->second;
  } else if (v->is_number_integer() && v->get<int64_t>() >= 1 &&
             v->get<int64_t>() <= kMaxPriorityLevel) {
    return static_cast<int>(v->get<int64_t>());
  }
  r.Error("priority",
          "high, normal, low or a level in 1.." + std::to_string(kMaxPriorityLevel) +
              " (1 is highest)",
          DescribeFound(*v));
  return kDefaultPriority;
}

// Model and label names: letters, digits, '_', '-' or '.', and not "." or ".." (a name becomes a
// URL segment and may become a file name).
bool IsValidName(std::string_view name) {
  if (name.empty() || name == "." || name == "..") return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '-' || c == '.';
  });
}


// The version's load-relevant description: the entry without its routing keys, plus what was
// resolved for this version, plus its file's size and modification time.
std::string ModelFingerprint(const Params& entry, const ModelConfig& v) {
  json j = entry.value();
  for (const char* key : {"labels", "canary", "version_policy", "versions"}) j.erase(key);
  j["=version"] = v.version;
  j["=path"] = v.path.string();
  j["=params"] = v.params.value();
  j["=device"] = v.device_id;
  j["=keep_alive"] = v.keep_alive ? v.keep_alive->count() : -1;
  std::error_code ec;
  if (!v.path.empty() && fs::is_regular_file(v.path, ec)) {
    j["=size"] = static_cast<int64_t>(fs::file_size(v.path, ec));
    j["=mtime"] = static_cast<int64_t>(fs::last_write_time(v.path, ec).time_since_epoch().count());
  }
  return DumpJson(j);
}

GlobalConfig ReadGlobal(const Params& p, const fs::path& base_dir, ConfigErrors& errors) {
  ParamReader r(p, errors);
  GlobalConfig g;
  g.device = static_cast<int>(r.Int("device", g.device, 0, 1023));
  g.memory_pool_mb = r.Int("memory_pool", g.memory_pool_mb, 0, int64_t{1} << 30);
  if (r.Has("memory_headroom")) {
    r.Error("memory_headroom",
            "preflight.max_fill (memory_headroom was folded into it: one share of a device's "
            "capacity that models may fill, 0.9 by default)",
            "memory_headroom");
  }
  if (auto preflight = r.Map("preflight")) {
    ParamReader p(*preflight, errors);
    g.preflight.factor = p.Double("factor", g.preflight.factor, 1.0, 10.0);
    g.preflight.max_fill = p.Double("max_fill", g.preflight.max_fill, 0.01, 1.0);
    p.Finish();
  }
  g.thread_num = static_cast<int>(r.Int("thread_num", g.thread_num, 1, 1024));
  g.host = r.String("host", g.host);
  g.port = static_cast<int>(r.Int("port", g.port, 0, 65535));
  g.max_request_mb = r.Int("max_request_mb", g.max_request_mb, 1, 4096);
  g.keep_alive = ReadDuration(r, "keep_alive", g.keep_alive);
  g.isolation = ReadIsolation(r, g.isolation);
  g.drain_timeout = ReadDuration(r, "drain_timeout", g.drain_timeout)
                        .value_or(std::chrono::milliseconds(kMaxTimeoutMs));
  g.priority_linger = ReadDuration(r, "priority_linger", g.priority_linger)
                          .value_or(std::chrono::milliseconds(kMaxTimeoutMs));
  g.log_level = r.String("log_level", g.log_level,
                         {"trace", "debug", "info", "warn", "error", "critical", "off"});
  if (auto jobs = r.Map("jobs")) {
    ParamReader j(*jobs, errors);
    g.jobs.max = j.Int("max", g.jobs.max, 1, 1'000'000);
    g.jobs.ttl = ReadDuration(j, "ttl", g.jobs.ttl).value_or(std::chrono::milliseconds(kMaxTimeoutMs));
    j.Finish();
  }
  if (const json* roots = r.Raw("model_roots")) {
    if (!roots->is_array()) {
      r.Error("model_roots", "a list of folders", DescribeFound(*roots));
    } else {
      for (size_t i = 0; i < roots->size(); ++i) {
        const json& root = (*roots)[i];
        const std::string field = "model_roots[" + std::to_string(i) + "]";
        std::error_code ec;
        if (!root.is_string() || root.get<std::string>().empty()) {
          r.Error(field, "a folder", DescribeFound(root));
        } else if (fs::path dir = AbsoluteIn(base_dir, root.get<std::string>()); !fs::is_directory(dir, ec)) {
          r.Error(field, "an existing folder", "\"" + dir.string() + "\"");
        } else {
          g.model_roots.push_back(fs::weakly_canonical(dir, ec));
        }
      }
    }
  }
  g.watch = ReadDuration(r, "watch", std::nullopt);
  if (g.watch && g.watch->count() == 0) g.watch.reset();
  if (r.Has("grpc_port")) g.grpc_port = static_cast<int>(r.Int("grpc_port", 0, 0, 65535));
  g.api_key = r.String("api_key", g.api_key);
  g.admin_key = r.String("admin_key", g.admin_key);
  g.max_connections = static_cast<int>(r.Int("max_connections", g.max_connections, 1, 1 << 20));
  g.max_in_flight = r.Int("max_in_flight", g.max_in_flight, 0, int64_t{1} << 30);
  g.cors_origins = r.StringList("cors_origins",
                                "a list of origins such as \"https://app.example.com\" or \"*\"",
                                "an origin");
  g.allowed_hosts = r.StringList("allowed_hosts",
                                 "a list of host names such as \"mmserve.internal\", "
                                 "\".example.com\" or \"*\"",
                                 "a host name");
  for (size_t i = 0; i < g.allowed_hosts.size(); ++i) {
    const std::string& h = g.allowed_hosts[i];
    if (h.find_first_of(":/ \t[]@") != std::string::npos) {
      r.Error("allowed_hosts[" + std::to_string(i) + "]",
              "a host name without scheme, port or path", "'" + h + "'");
    }
  }
  r.Finish();
  return g;
}

bool InsideRoots(const std::vector<fs::path>& roots, const fs::path& path) {
  std::error_code ec;
  const fs::path real = fs::weakly_canonical(path, ec);
  if (ec) return false;
  return std::any_of(roots.begin(), roots.end(), [&](const fs::path& root) {
    return std::mismatch(root.begin(), root.end(), real.begin(), real.end()).first == root.end();
  });
}

std::optional<std::optional<std::chrono::milliseconds>> ParseDuration(const std::string& text) {
  std::string_view number = text;
  int64_t factor = 1000;  // seconds without a unit
  for (const auto& [unit, ms] : {std::pair<std::string_view, int64_t>{"ms", 1}, {"s", 1000},
                                 {"m", 60'000}, {"h", 3'600'000}}) {
    if (number.size() > unit.size() && number.ends_with(unit)) {
      number.remove_suffix(unit.size());
      factor = ms;
      break;
    }
  }
  const bool has_unit = number.size() != text.size();
  if (number.empty() || number[0] == '+') return std::nullopt;
  const auto n = ParseInt64(number);
  if (!n) return std::nullopt;
  if (*n < 0) {
    if (*n == -1 && !has_unit) return std::optional<std::chrono::milliseconds>();
    return std::nullopt;
  }
  // Bounded so that now + duration never overflows a clock (steady_clock counts nanoseconds).
  const auto ms = CheckedMul(*n, factor);
  if (!ms || *ms > kMaxDurationMs) return std::nullopt;
  return std::optional<std::chrono::milliseconds>(std::chrono::milliseconds(*ms));
}

bool CheckModelFile(ParamReader& r, const std::string& field, const std::string& backend,
                    const fs::path& path, const std::string& path_text,
                    const std::vector<fs::path>* roots) {
  if (path_text.empty()) {
    if (field == "path") r.Error(field, "the model file for backend " + backend, "nothing");
    return false;  // a version folder without a file: already reported
  }
  if (roots && !InsideRoots(*roots, path)) {
    std::vector<std::string> names;
    for (const auto& root : *roots) names.push_back(root.string());
    r.Error(field, "a file inside the model roots (" + Join(names, ", ") + "; global.model_roots)",
            "\"" + path.lexically_normal().string() + "\"");
    return false;
  }
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (ec || !fs::exists(status)) {
    r.Error(field, "an existing file", "\"" + path.string() + "\" (no such file)");
  } else if (::access(path.c_str(), R_OK) != 0) {
    r.Error(field, "a readable file", "\"" + path.string() + "\" (permission denied)");
  } else if (!fs::is_regular_file(status)) {
    r.Error(field, "a model file", "\"" + path.string() + "\" (not a regular file)");
  } else {
    return true;
  }
  return false;
}

void ReadBatching(ParamReader& r, ModelConfig& m) {
  m.batch_size = static_cast<int>(r.Int("batch_size", m.batch_size, 1, 4096));
  m.max_batch = static_cast<int>(r.Int("max_batch", std::max(m.batch_size, 1), 1, 4096));
  m.max_batch_set = r.Has("max_batch");
  m.batch_size_set = r.Has("batch_size");
  if (r.Has("dynamic_batch")) m.dynamic_batch = r.Bool("dynamic_batch", false);
  for (int64_t tier : r.IntList("batch_tiers", 1, 4096)) {
    m.batch_tiers.push_back(static_cast<int>(tier));
  }
  if (r.Has("batch_tiers") && !r.Has("max_batch") && !m.batch_tiers.empty()) {
    m.max_batch = *std::max_element(m.batch_tiers.begin(), m.batch_tiers.end());
  }
  m.preserve_ordering = r.Bool("preserve_ordering", m.preserve_ordering);
  m.max_queue_delay =
      std::chrono::milliseconds(r.Int("max_queue_delay_ms", m.max_queue_delay.count(), 0, 60'000));
}

}  // namespace mmserve
