#include "common/huge_pages.h"

#include <sys/mman.h>

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
};

Smaps SmapsOf(const void* p) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::ifstream in("/proc/self/smaps");
  std::string line;
  bool inside = false;
  Smaps out;
  while (std::getline(in, line)) {
    unsigned long begin = 0, end = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &begin, &end) == 2 && line.find(':') > line.find(' ')) {
      if (inside) break;
      inside = begin <= at && at < end;
      continue;
    }
    if (!inside) continue;
    if (line.rfind("VmFlags:", 0) == 0) out.flags = line + " ";
    if (line.rfind("AnonHugePages:", 0) == 0) out.anon_huge_kb = std::stol(line.substr(14));
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

TEST(HugePageAdviceTest, NothingNewNothingAdvised) {
  HugePageAdvice advice;
  EXPECT_EQ(advice.AdviseNew(), 0u);
}

}  // namespace
}  // namespace mmserve
