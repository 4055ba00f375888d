// Looks for device runtimes on this host without initializing anything mmserve serves with:
// libascendcl and the CUDA driver are dlopen'ed and asked for their device count, then closed.
// Used by `mmserve doctor`.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace mmserve {

struct RuntimeProbe {
  std::string name;     // "AscendCL", "CUDA"
  bool found = false;
  std::string library;  // the path or soname that loaded
  int devices = 0;
  std::string detail;   // versions, or why it was not found
};

std::vector<RuntimeProbe> ProbeRuntimes();

struct DeviceHolder {
  int device;
  std::string pid;  // the process holding the device lock
};

// Devices whose lock in `lock_dir` is held by a live process right now.
std::vector<DeviceHolder> FindDeviceHolders(const std::filesystem::path& lock_dir);

}  // namespace mmserve
