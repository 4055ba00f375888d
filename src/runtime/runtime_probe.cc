#include "runtime/runtime_probe.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdint>
#include <string_view>

#include "common/strings.h"

namespace mmserve {
namespace {

void* OpenFirst(const std::vector<std::string>& candidates, std::string& loaded) {
  for (const auto& c : candidates) {
    if (void* h = ::dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      loaded = c;
      return h;
    }
  }
  return nullptr;
}

RuntimeProbe ProbeCuda() {
  RuntimeProbe p{.name = "CUDA"};
  void* h = OpenFirst({"libcuda.so.1", "libcuda.so"}, p.library);
  if (!h) {
    p.detail = "CUDA driver (libcuda.so.1) not found";
    return p;
  }
  p.found = true;
  using Init = int (*)(unsigned);
  using Count = int (*)(int*);
  using Version = int (*)(int*);
  auto init = reinterpret_cast<Init>(::dlsym(h, "cuInit"));
  auto count = reinterpret_cast<Count>(::dlsym(h, "cuDeviceGetCount"));
  auto version = reinterpret_cast<Version>(::dlsym(h, "cuDriverGetVersion"));
  int rc = init ? init(0) : -1;
  if (rc == 0 && count) count(&p.devices);
  int v = 0;
  if (version && version(&v) == 0) {
    p.detail = "driver API " + std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
  }
  if (rc != 0) p.detail += (p.detail.empty() ? "" : "; ") + std::string("cuInit failed: ") + std::to_string(rc);
  // The driver stays loaded: unloading libcuda after cuInit is not supported.
  return p;
}

}  // namespace

std::vector<RuntimeProbe> ProbeRuntimes() { return {ProbeCuda()}; }

std::vector<DeviceHolder> FindDeviceHolders(const std::filesystem::path& lock_dir) {
  std::vector<DeviceHolder> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(lock_dir, ec)) {
    // device-<N>.lock
    std::string_view name = entry.path().filename().native();
    if (!name.starts_with("device-") || !name.ends_with(".lock")) continue;
    name = name.substr(7, name.size() - 12);
    const auto device = name.empty() || name[0] == '-' ? std::nullopt : ParseInt64(name);
    if (!device || *device > INT32_MAX) continue;
    const int fd = ::open(entry.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      ::flock(fd, LOCK_UN);  // free: nobody holds it
    } else {
      char buf[32] = {};
      const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
      std::string pid = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "unknown";
      while (!pid.empty() && pid.back() == '\n') pid.pop_back();
      out.push_back({static_cast<int>(*device), pid});
    }
    ::close(fd);
  }
  return out;
}

}  // namespace mmserve
