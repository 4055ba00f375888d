// `mmserve doctor`: what this host offers mmserve. Never fails for lack of an accelerator.
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "app/server_builder.h"
#include "backend/process/process_session.h"
#include "common/strings.h"
#include "runtime/runtime_guard.h"
#include "runtime/runtime_probe.h"

namespace mmserve {
namespace {

std::string ReadField(const std::string& file, const std::string& key) {
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key, 0) == 0) {
      auto colon = line.find(':');
      auto value = line.substr(colon + 1);
      value.erase(0, value.find_first_not_of(" \t"));
      return value;
    }
  }
  return "unknown";
}

// The CANN toolkit's version file next to the library (lib64/..), when it has one.
std::string CannVersion(const std::string& library) {
  const std::filesystem::path lib(library);
  std::vector<std::filesystem::path> dirs;
  if (lib.has_parent_path()) dirs.push_back(lib.parent_path().parent_path());
  if (const char* home = std::getenv("ASCEND_HOME_PATH"); home && *home) dirs.emplace_back(home);
  for (const auto& dir : dirs) {
    for (const char* file : {"ascend_toolkit_install.info", "version.cfg", "version.info"}) {
      std::ifstream in(dir / file);
      for (std::string line; std::getline(in, line);) {
        const auto eq = line.find('=');
        if (eq == std::string::npos) continue;
        const std::string key = line.substr(0, eq);
        if (key == "version" || key == "Version" || key == "toolkit_installed_version") {
          return line.substr(eq + 1) + " (" + (dir / file).string() + ")";
        }
      }
    }
  }
  return "unknown (no version file next to the library)";
}

std::string FindOnPath(const std::string& program) {
  std::vector<std::string> dirs = {"/usr/local/bin", "/usr/local/sbin"};
  if (const char* path = std::getenv("PATH")) {
    std::istringstream in(path);
    for (std::string d; std::getline(in, d, ':');) dirs.push_back(d);
  }
  for (const auto& d : dirs) {
    const std::string candidate = d + "/" + program;
    if (!d.empty() && ::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// AscendCL through mmserve's own runtime: the library, the SoC, each device's memory.
void ReportAscend(AclRuntime& runtime) {
  std::cout << "  AscendCL: ";
  auto api = runtime.Api();
  if (!api.ok()) {
    std::cout << "not found — mmserve runs without it; acl models will not load\n    "
              << api.status().message() << "\n";
  } else {
    std::cout << "found (" << (*api)->library << ")";
    int32_t major = 0, minor = 0, patch = 0;
    if ((*api)->aclGetVersion && (*api)->aclGetVersion(&major, &minor, &patch) == 0) {
      std::cout << ", ACL " << major << "." << minor << "." << patch;
    }
    std::cout << "\n    CANN version: " << CannVersion((*api)->library) << "\n";
    const char* soc = (*api)->aclrtGetSocName ? (*api)->aclrtGetSocName() : nullptr;
    std::cout << "    SoC: " << (soc ? soc : "unknown") << "\n";
    const int devices = runtime.DeviceCount();
    std::cout << "    devices: " << (devices < 0 ? std::string("unknown") : std::to_string(devices))
              << "\n";
    RuntimeGuard guard;
    for (int d = 0; d < devices; ++d) {
      auto lease = guard.Acquire(runtime, d);
      auto memory = lease.ok() ? runtime.Memory(d) : Result<DeviceMemory>(lease.status());
      if (memory.ok()) {
        std::cout << "    device " << d << ": " << FormatMib(memory->free) << " free of "
                  << FormatMib(memory->total) << "\n";
      } else {
        std::cout << "    device " << d << ": " << memory.status().message() << "\n";
      }
    }
  }
  const std::string smi = FindOnPath("npu-smi");
  std::cout << "    npu-smi: " << (smi.empty() ? "not found" : "present (" + smi + ")") << "\n";
}

}  // namespace

int Doctor(const std::filesystem::path& lock_dir) {
  BuiltIns builtins;
  const DeviceMemory host = HostMemory();
  std::cout << "host\n"
            << "  cpu:      " << ReadField("/proc/cpuinfo", "model name") << " ("
            << std::thread::hardware_concurrency() << " cores)\n"
            << "  memory:   total " << FormatMib(host.total) << ", available "
            << FormatMib(host.free) << " (a container's limit, where it has one)\n"
            << "backends compiled in: " << Join(builtins.backends.BuiltIn(), ", ") << "\n"
            << "device runtimes\n";
  ReportAscend(builtins.acl_runtime);
  for (const auto& p : ProbeRuntimes()) {
    std::cout << "  " << p.name << ": ";
    if (p.found) {
      std::cout << "found (" << p.library << "), " << p.devices << " device"
                << (p.devices == 1 ? "" : "s");
      if (!p.detail.empty()) std::cout << "; " << p.detail;
    } else {
      std::cout << "not found — " << p.detail;
    }
    std::cout << "\n";
  }
  std::cout << "device locks (" << lock_dir.string() << ")\n";
  const auto holders = FindDeviceHolders(lock_dir);
  if (holders.empty()) std::cout << "  no mmserve holds a device\n";
  for (const auto& h : holders) {
    std::cout << "  device " << h.device << ": held by mmserve pid " << h.pid << "\n";
    const auto pid = ParseInt64(h.pid);
    if (!pid || *pid <= 0 || *pid > INT32_MAX) continue;
    for (const auto& w : FindWorkerProcesses(static_cast<pid_t>(*pid))) {
      std::cout << "    worker pid " << w.pid << ": model '" << w.model
                << "' (isolation: process)\n";
    }
  }
  return 0;
}

}  // namespace mmserve
