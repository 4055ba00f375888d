// Fuzzes HostMemoryIn (runtime/host_memory.cc): the text of /proc/self/cgroup and the contents
// of the limit and usage files it reads. Input: the /proc text, a NUL, then the files' text.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "runtime/runtime.h"

namespace fs = std::filesystem;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A cgroup tree of its own, removed at exit.
  static const struct Tree {
    fs::path dir = fs::temp_directory_path() / ("cgroup_fuzzer." + std::to_string(getpid()));
    Tree() {
      fs::create_directories(dir / "a/b");
      fs::create_directories(dir / "memory/a/b");
    }
    ~Tree() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } tree;
  const fs::path& root = tree.dir;
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string proc = input.substr(0, nul);
  const std::string file = nul == std::string::npos ? "" : input.substr(nul + 1);
  for (const char* name : {"a/memory.max", "a/b/memory.current", "memory/a/memory.limit_in_bytes",
                           "memory/a/b/memory.usage_in_bytes"}) {
    std::ofstream(root / name, std::ios::binary | std::ios::trunc) << file;
  }
  constexpr int64_t kTotal = int64_t{1} << 40, kFree = int64_t{1} << 39;
  const mmserve::DeviceMemory m = mmserve::HostMemoryIn(root, proc, kTotal, kFree);
  if (m.total < 0 || m.total > kTotal || m.free < 0 || m.free > m.total) __builtin_trap();
  return 0;
}
