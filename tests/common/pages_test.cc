#include "common/pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace mmserve {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

// The smaps block of the mapping holding `p`: its VmFlags line and AnonHugePages (kB).
struct Smaps {
  std::string flags;
  long anon_huge_kb = -1;
  long rss_kb = -1;
};

Smaps SmapsOf(const void* p) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::ifstream in("/proc/self/smaps");
  std::string line;
  bool inside = false;
  Smaps out;
  while (std::getline(in, line)) {
    unsigned long begin = 0, end = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &begin, &end) == 2 &&
        line.find(':') > line.find(' ')) {
      if (inside) break;
      inside = begin <= at && at < end;
      continue;
    }
    if (!inside) continue;
    if (line.rfind("VmFlags:", 0) == 0) out.flags = line + " ";
    if (line.rfind("AnonHugePages:", 0) == 0) out.anon_huge_kb = std::stol(line.substr(14));
    if (line.rfind("Rss:", 0) == 0) out.rss_kb = std::stol(line.substr(4));
  }
  return out;
}

std::string ThpMode() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  const size_t open = text.find('['), close = text.find(']');
  return open == std::string::npos ? "" : text.substr(open + 1, close - open - 1);
}

void* Map(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  EXPECT_NE(p, MAP_FAILED);
  return p;
}

TEST(HugePageAdviceTest, AdvisesOnlyLargeMappingsMadeAfterIt) {
  void* old = Map(32 * kMiB);
  // Different flags keep the kernel from merging it with the mappings made next to it.
  ASSERT_EQ(madvise(old, 32 * kMiB, MADV_NOHUGEPAGE), 0);
  HugePageAdvice advice;
  void* fresh = Map(32 * kMiB);
  void* small = Map(1 * kMiB);
  ASSERT_EQ(madvise(small, 1 * kMiB, MADV_NOHUGEPAGE), 0);  // not merged into `fresh` either

  EXPECT_GE(advice.AdviseNew(16 * kMiB), 32 * kMiB);
  EXPECT_NE(SmapsOf(fresh).flags.find(" hg "), std::string::npos) << SmapsOf(fresh).flags;
  EXPECT_EQ(SmapsOf(old).flags.find(" hg "), std::string::npos) << SmapsOf(old).flags;
  EXPECT_EQ(SmapsOf(small).flags.find(" hg "), std::string::npos) << SmapsOf(small).flags;
  munmap(old, 32 * kMiB);
  munmap(fresh, 32 * kMiB);
  munmap(small, 1 * kMiB);
}

TEST(HugePageAdviceTest, OnlyTheNewPartOfAMergedMappingIsAdvised) {
  // 64 MiB, of which the lower half is unmapped before the advice and mapped again after it,
  // at the same place: the kernel merges it with the upper half into one mapping.
  char* whole = static_cast<char*>(Map(64 * kMiB));
  ASSERT_EQ(munmap(whole, 32 * kMiB), 0);
  HugePageAdvice advice;
  void* again = mmap(whole, 32 * kMiB, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  ASSERT_EQ(again, static_cast<void*>(whole));

  EXPECT_EQ(advice.AdviseNew(16 * kMiB), 32 * kMiB);
  EXPECT_NE(SmapsOf(whole).flags.find(" hg "), std::string::npos) << SmapsOf(whole).flags;
  EXPECT_EQ(SmapsOf(whole + 32 * kMiB).flags.find(" hg "), std::string::npos)
      << SmapsOf(whole + 32 * kMiB).flags;
  munmap(whole, 64 * kMiB);
}

TEST(HugePageAdviceTest, AdvisedMemoryIsBackedByHugePagesOnceWritten) {
  const std::string mode = ThpMode();
  if (mode != "always" && mode != "madvise") GTEST_SKIP() << "THP is '" << mode << "' here";
  HugePageAdvice advice;
  char* fresh = static_cast<char*>(Map(32 * kMiB));
  ASSERT_GE(advice.AdviseNew(), 32 * kMiB);
  std::memset(fresh, 1, 32 * kMiB);  // as a model's weights are read in
  // At least half of it: the 2 MiB-aligned blocks inside the mapping.
  EXPECT_GE(SmapsOf(fresh).anon_huge_kb, 16 * 1024);
  munmap(fresh, 32 * kMiB);
}

TEST(ReleasePagesTest, WholePagesInsideReadAsZerosAndLeaveTheResidentSet) {
  char* region = static_cast<char*>(Map(8 * kMiB));
  std::memset(region, 7, 8 * kMiB);
  const long rss_before = SmapsOf(region).rss_kb;
  // From 100 bytes into the first page to 100 bytes into the one after 4 MiB.
  const size_t released = ReleasePages(region + 100, 4 * kMiB);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  EXPECT_EQ(released, 4 * kMiB - page);
  EXPECT_EQ(region[100], 7) << "the partial first page is kept";
  EXPECT_EQ(region[page - 1], 7);
  EXPECT_EQ(region[page], 0);
  EXPECT_EQ(region[4 * kMiB - 1], 0);
  EXPECT_EQ(region[4 * kMiB], 7) << "the partial last page is kept";
  EXPECT_LE(SmapsOf(region).rss_kb, rss_before - 3 * 1024);
  EXPECT_EQ(ReleasePages(region + 1, 10), 0u) << "no whole page inside";
  munmap(region, 8 * kMiB);
}

TEST(HugePageAdviceTest, NothingNewNothingAdvised) {
  HugePageAdvice advice;
  EXPECT_EQ(advice.AdviseNew(), 0u);
}

}  // namespace
}  // namespace mmserve
