// HugePageAdvice: asks for transparent huge pages on the large anonymous mappings a phase of
// work creates, before their pages are touched.
//
// Why: a backend that copies its weights into memory it owns (llama.cpp without mmap) gets 4 KiB
// pages wherever THP is "madvise" (Debian's default), while the same file mapped from the page
// cache gets huge folios; a decode that streams every weight each token then spends measurably
// more on TLB misses (2.5 % of a 0.5B F16 decoder's tokens/s here). Advising the fresh buffers
// before they are filled costs nothing; collapsing them afterwards costs ~2.3 s per GiB.
//
//   HugePageAdvice advice;          // remembers today's mappings
//   ... allocate the weight buffers ...
//   advice.AdviseNew();             // before the first byte is written into them
//
// A hint only: it never fails the work. Mappings another thread created meanwhile may be
// advised too, which is harmless. Linux only; elsewhere AdviseNew does nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <utility>

namespace mmserve {

class HugePageAdvice {
 public:
  // Remembers the process's anonymous mappings as they are now.
  HugePageAdvice();

  // Advises MADV_HUGEPAGE on every anonymous, writable mapping of at least `min_bytes` that did
  // not exist (with the same bounds) at construction. Returns the bytes advised.
  size_t AdviseNew(size_t min_bytes = size_t{16} << 20);

 private:
  std::set<std::pair<uintptr_t, uintptr_t>> before_;
};

}  // namespace mmserve
