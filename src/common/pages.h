// Page-level hints to the kernel about memory a backend's engine allocated.
//
// HugePageAdvice: asks for transparent huge pages on the large anonymous mappings a phase of
// work creates, before their pages are touched.
//
// Why: a backend that copies its weights into memory it owns (llama.cpp without mmap) gets 4 KiB
// pages wherever THP is "madvise" (Debian's default), while the same file mapped from the page
// cache gets huge folios; a decode that streams every weight each token then spends measurably
// more on TLB misses (2.5 % of a 0.5B F16 decoder's tokens/s here). On bare metal, advising
// the fresh buffers before they are filled costs nothing (collapsing them afterwards costs
// ~2.3 s per GiB); on a VM whose balloon hands free 2 MiB blocks back to the host every huge
// page is faulted in anew (a cold 254 MB load: 2.5 s instead of 0.22 s here), so callers make
// it a choice (llama: params.huge_pages).
//
//   HugePageAdvice advice;          // remembers today's mappings
//   ... allocate the weight buffers ...
//   advice.AdviseNew();             // before the first byte is written into them
//
// A hint only: it never fails the work. Only address ranges mapped since construction are
// advised (not whole mappings the kernel merged them into), but whatever another thread mapped
// meanwhile is among them: a caller that must advise only its own buffers keeps other large
// allocations out of the window (llama_backend.cc does). Linux only; elsewhere a no-op.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace mmserve {

class HugePageAdvice {
 public:
  // Remembers the address ranges the process has mapped now.
  HugePageAdvice();

  // Advises MADV_HUGEPAGE on each stretch of at least `min_bytes` of anonymous, writable memory
  // mapped since construction. Returns the bytes advised.
  size_t AdviseNew(size_t min_bytes = size_t{16} << 20);

 private:
  std::vector<std::pair<uintptr_t, uintptr_t>> before_;  // sorted, as /proc/self/maps lists them
};

// Gives back to the system the whole pages inside [data, data + bytes) of private anonymous
// memory whose content the caller does not need: they stay allocated and read as zeros when
// next touched. Returns the bytes given back (0 off Linux or on failure).
size_t ReleasePages(void* data, size_t bytes);

}  // namespace mmserve
