#include "common/huge_pages.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#ifdef __linux__
#include <sys/mman.h>
#endif

namespace mmserve {
namespace {

// The anonymous, writable mappings of /proc/self/maps ("start-end perms offset dev inode" and
// no path).
std::vector<std::pair<uintptr_t, uintptr_t>> AnonymousMappings() {
  std::vector<std::pair<uintptr_t, uintptr_t>> out;
#ifdef __linux__
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream in(line);
    std::string range, perms, offset, dev, path;
    unsigned long inode = 0;
    if (!(in >> range >> perms >> offset >> dev >> inode) || inode != 0) continue;
    if (in >> path) continue;  // named: [heap], [stack], a file
    if (perms.size() < 2 || perms[1] != 'w') continue;
    const size_t dash = range.find('-');
    if (dash == std::string::npos) continue;
    out.emplace_back(std::stoul(range.substr(0, dash), nullptr, 16),
                     std::stoul(range.substr(dash + 1), nullptr, 16));
  }
#endif
  return out;
}

}  // namespace

HugePageAdvice::HugePageAdvice() {
  for (const auto& m : AnonymousMappings()) before_.insert(m);
}

size_t HugePageAdvice::AdviseNew(size_t min_bytes) {
  size_t advised = 0;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  for (const auto& [begin, end] : AnonymousMappings()) {
    if (end - begin < min_bytes || before_.contains({begin, end})) continue;
    if (madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE) == 0) {
      advised += end - begin;
    }
  }
#else
  (void)min_bytes;
#endif
  return advised;
}

}  // namespace mmserve
