#include <sys/sysinfo.h>

#include "runtime/runtime.h"

namespace mmserve {

DeviceMemory HostMemory() {
  struct sysinfo info {};
  DeviceMemory m{.domain = "host"};
  if (::sysinfo(&info) == 0) {
    m.total = static_cast<int64_t>(info.totalram) * info.mem_unit;
    m.free = static_cast<int64_t>(info.freeram + info.bufferram) * info.mem_unit;
  }
  return m;
}

}  // namespace mmserve
