#include <sys/sysinfo.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <optional>
#include <string_view>

#include "runtime/runtime.h"

namespace mmserve {

namespace fs = std::filesystem;

namespace {

// The number a cgroup file holds, or nullopt: absent, "max" (no limit) or not a number. At most
// 64 bytes are read: these files hold one number.
std::optional<int64_t> ReadCgroupNumber(const fs::path& file) {
  std::ifstream in(file);
  char buf[64] = {};
  in.read(buf, sizeof(buf) - 1);
  std::string_view text(buf, static_cast<size_t>(in.gcount()));
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  int64_t value = 0;
  auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || err != std::errc() || end != text.data() + text.size() || value < 0) {
    return std::nullopt;
  }
  return value;
}

// The memory cgroup of this process, relative to its hierarchy's root, from /proc/self/cgroup:
// v1 "N:memory:/path" (or a list holding "memory"), else v2 "0::/path" (a hybrid host lists
// both; the v1 memory controller is then the one that limits). Empty when there is none.
std::pair<std::string, bool> MemoryCgroup(const std::string& proc_self_cgroup) {
  std::string v2;
  size_t start = 0;
  while (start < proc_self_cgroup.size()) {
    size_t end = proc_self_cgroup.find('\n', start);
    if (end == std::string::npos) end = proc_self_cgroup.size();
    std::string_view line(proc_self_cgroup.data() + start, end - start);
    start = end + 1;
    const size_t a = line.find(':'), b = a == line.npos ? a : line.find(':', a + 1);
    if (b == line.npos) continue;
    const std::string_view controllers = line.substr(a + 1, b - a - 1);
    const std::string path(line.substr(b + 1));
    if (line.substr(0, a) == "0" && controllers.empty()) v2 = path;
    for (size_t at = 0; at < controllers.size();) {
      size_t comma = controllers.find(',', at);
      if (comma == controllers.npos) comma = controllers.size();
      if (controllers.substr(at, comma - at) == "memory") return {path, false};
      at = comma + 1;
    }
  }
  return {v2, true};
}

}  // namespace

DeviceMemory HostMemoryIn(const fs::path& cgroup_root, const std::string& proc_self_cgroup,
                          int64_t total, int64_t free) {
  DeviceMemory m{.domain = "host", .total = total, .free = free};
  const auto [path, v2] = MemoryCgroup(proc_self_cgroup);
  if (path.empty() || path.find("..") != std::string::npos) return m;
  const fs::path root = v2 ? cgroup_root : cgroup_root / "memory";
  const char* limit_file = v2 ? "memory.max" : "memory.limit_in_bytes";
  const char* usage_file = v2 ? "memory.current" : "memory.usage_in_bytes";
  // The tightest limit on the way up from this process's cgroup to the root: a container's
  // limit may sit on a parent (a pod's) as well as on its own cgroup.
  fs::path dir = (root / fs::path(path).relative_path()).lexically_normal();
  for (int depth = 0; depth < 64; ++depth) {
    const auto limit = ReadCgroupNumber(dir / limit_file);
    if (limit && *limit < m.total) {  // v1's "no limit" is a number near 2^63: above total
      m.total = *limit;
      const int64_t used = ReadCgroupNumber(dir / usage_file).value_or(0);
      m.free = std::min(m.free, std::max<int64_t>(0, *limit - used));
    }
    if (dir == root || !dir.has_relative_path() || dir.parent_path() == dir) break;
    dir = dir.parent_path();
  }
  m.free = std::min(m.free, m.total);
  return m;
}

DeviceMemory HostMemory() {
  struct sysinfo info {};
  int64_t total = 0, free = 0;
  if (::sysinfo(&info) == 0) {
    total = static_cast<int64_t>(info.totalram) * info.mem_unit;
    free = static_cast<int64_t>(info.freeram + info.bufferram) * info.mem_unit;
  }
  std::ifstream in("/proc/self/cgroup");
  std::string cgroups(4096, '\0');
  in.read(cgroups.data(), static_cast<std::streamsize>(cgroups.size()));
  cgroups.resize(static_cast<size_t>(in.gcount()));
  return HostMemoryIn("/sys/fs/cgroup", cgroups, total, free);
}

}  // namespace mmserve
