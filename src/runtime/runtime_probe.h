// Looks for device runtimes mmserve has no Runtime of its own for, without initializing anything
// it serves with: the CUDA driver is dlopen'ed and asked for its device count. Used by
// `mmserve doctor` (which asks AscendCL through AclRuntime itself).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace mmserve {

struct RuntimeProbe {
  std::string name;     // "CUDA"
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
