// `mmserve doctor`: what this host offers mmserve. Never fails for lack of an accelerator.
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <thread>

#include "app/server_builder.h"
#include "common/strings.h"
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

}  // namespace

int Doctor(const std::filesystem::path& lock_dir) {
  BuiltIns builtins;
  std::cout << "host\n"
            << "  cpu:      " << ReadField("/proc/cpuinfo", "model name") << " ("
            << std::thread::hardware_concurrency() << " cores)\n"
            << "  memory:   total " << ReadField("/proc/meminfo", "MemTotal") << ", available "
            << ReadField("/proc/meminfo", "MemAvailable") << "\n"
            << "backends compiled in: " << Join(builtins.backends.BuiltIn(), ", ") << "\n"
            << "device runtimes\n";
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
  }
  return 0;
}

}  // namespace mmserve
