#include "common/pages.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#ifdef __linux__
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace mmserve {
namespace {

using Range = std::pair<uintptr_t, uintptr_t>;

// The mappings of /proc/self/maps ("start-end perms offset dev inode [path]"), in address
// order; with `anonymous_writable`, only those without a file or name that can be written.
std::vector<Range> Mappings(bool anonymous_writable) {
  std::vector<Range> out;
#ifdef __linux__
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream in(line);
    std::string range, perms, offset, dev, path;
    unsigned long inode = 0;
    if (!(in >> range >> perms >> offset >> dev >> inode)) continue;
    if (anonymous_writable) {
      if (inode != 0 || (in >> path)) continue;  // a file, or named: [heap], [stack]
      if (perms.size() < 2 || perms[1] != 'w') continue;
    }
    const size_t dash = range.find('-');
    if (dash == std::string::npos) continue;
    uintptr_t begin = 0, end = 0;
    const char* text = range.data();
    if (std::from_chars(text, text + dash, begin, 16).ec != std::errc() ||
        std::from_chars(text + dash + 1, text + range.size(), end, 16).ec != std::errc()) {
      continue;
    }
    out.emplace_back(begin, end);
  }
#endif
  return out;
}

}  // namespace

HugePageAdvice::HugePageAdvice() : before_(Mappings(/*anonymous_writable=*/false)) {}

size_t HugePageAdvice::AdviseNew(size_t min_bytes) {
  size_t advised = 0;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  auto advise = [&](uintptr_t begin, uintptr_t end) {
    if (end - begin >= min_bytes &&
        madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE) == 0) {
      advised += end - begin;
    }
  };
  for (const auto& [begin, end] : Mappings(/*anonymous_writable=*/true)) {
    // The parts of [begin, end) no earlier mapping covered: the kernel merges a new mapping
    // into an older neighbour with the same flags.
    uintptr_t from = begin;
    auto old = std::lower_bound(before_.begin(), before_.end(), Range{begin, 0},
                                [](const Range& a, const Range& b) { return a.second <= b.first; });
    for (; old != before_.end() && old->first < end; ++old) {
      if (old->first > from) advise(from, old->first);
      from = std::max(from, old->second);
    }
    if (from < end) advise(from, end);
  }
#else
  (void)min_bytes;
#endif
  return advised;
}

size_t ReleasePages(void* data, size_t bytes) {
#ifdef __linux__
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<uintptr_t>(data) + page - 1) / page * page;
  const auto end = (reinterpret_cast<uintptr_t>(data) + bytes) / page * page;
  if (data == nullptr || end <= begin) return 0;
  return madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED) == 0 ? end - begin : 0;
#else
  (void)data;
  (void)bytes;
  return 0;
#endif
}

}  // namespace mmserve
