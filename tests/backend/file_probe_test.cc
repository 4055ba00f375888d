#include "backend/file_probe.h"

#include <fcntl.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/test_util.h"

namespace mmserve {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// A probe whose child is `/bin/sh -c SCRIPT` (the answer protocol by hand).
ProbeSpec Shell(const std::string& script) {
  return {.command = {"/bin/sh", "-c", script}, .what = "the test parser", .file = "m.bin"};
}

constexpr char kOk[] = "printf '\\n\\036mmserve-probe ok '";

TEST(FileProbeTest, TheAnswerIsTheLastMarkedLineWhateverTheChildLogged) {
  auto r = RunProbe(Shell(std::string("echo a log line; ") + kOk + "; echo 42; echo more log"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "42");
  r = RunProbe(Shell("printf '\\n\\036mmserve-probe error no frame header\\n'"));
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "no frame header");
}

TEST(FileProbeTest, AChildsDeathIsTheFilesErrorWithTheSignalAndItsLastWords) {
  auto r = RunProbe(Shell("echo 'GGML_ASSERT(n > 0) failed' >&2; kill -FPE $$"));
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(),
              StartsWith("the test parser crashed on 'm.bin' (SIGFPE, Floating point exception)"));
  EXPECT_THAT(r.status().message(), HasSubstr(": GGML_ASSERT(n > 0) failed"));
  r = RunProbe(Shell("exit 3"));
  EXPECT_THAT(r.status().message(), HasSubstr("exited with code 3 on 'm.bin' without an answer"));
}

TEST(FileProbeTest, TheChildRunsUnderLimitsAndIsKilledPastItsTime) {
  // Address space (KiB), core files, files written (dash counts 512-byte blocks).
  ProbeSpec spec =
      Shell(std::string(kOk) + "; echo $(ulimit -v) $(ulimit -c) $(ulimit -f) $(ulimit -t)");
  spec.address_space_bytes = int64_t{1} << 30;
  spec.cpu = std::chrono::seconds(7);
  auto r = RunProbe(spec);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, std::string(ProbesLimitAddressSpace() ? "1048576" : "unlimited") + " 0 2048 7");
  spec = Shell("sleep 30");
  spec.wall = std::chrono::seconds(1);
  r = RunProbe(spec);
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_THAT(r.status().message(), HasSubstr("did not finish on 'm.bin' within 1 s"));
}

TEST(FileProbeTest, AnOutcomeIsKeptPerFileVersionAndAWriteMakesANewOne) {
  testing::TempDir dir;
  const auto file = dir.Write("m.bin", "first");
  const auto runs = dir.path() / "runs";
  Fd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_GE(fd.get(), 0);
  ProbeSpec spec = Shell("echo run >> " + runs.string() + "; " + kOk + "; echo fine");
  auto identity = IdentityOf(fd.get());
  ASSERT_TRUE(identity.ok());
  EXPECT_EQ(*ProbeOnce(spec, *identity), "fine");
  EXPECT_EQ(*ProbeOnce(spec, *identity), "fine");
  EXPECT_EQ(testing::ReadFile(runs), "run\n") << "the second probe of the same version ran none";
  dir.Write("m.bin", "second");  // the same size would do: the change time moves
  identity = IdentityOf(fd.get());
  EXPECT_EQ(*ProbeOnce(spec, *identity), "fine");
  EXPECT_EQ(testing::ReadFile(runs), "run\nrun\n");
  // A descriptor made for the child (a copy of the bytes) is made only when the child runs.
  int opened = 0;
  const auto open_file = [&]() -> Result<Fd> {
    ++opened;
    return SealedCopy("second");
  };
  EXPECT_EQ(*ProbeOnce(spec, *identity, open_file), "fine");
  EXPECT_EQ(opened, 0);
  EXPECT_EQ(testing::ReadFile(runs), "run\nrun\n");
}

TEST(FileProbeTest, ABinaryThatDoesNotServeProbesNeverStartsItselfAsTheChild) {
  // This test binary runs gmock's main: started as `probe ...`, it would run the suite again.
  auto r = RunProbe({.backend = "opencv", .what = "x", .file = "m.onnx"});
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
  EXPECT_THAT(r.status().message(), HasSubstr("does not run file probes"));
}

TEST(FileProbeTest, ASnapshotIsRefusedWhenTheFileIsTooLarge) {
  testing::TempDir dir;
  const auto file = dir.Write("m.bin", "0123456789");
  auto snapshot = ReadSnapshot(file, 100);
  ASSERT_TRUE(snapshot.ok());
  EXPECT_EQ(snapshot->bytes, "0123456789");
  EXPECT_THAT(ReadSnapshot(file, 4).status().message(), HasSubstr("holds 10 bytes, more than the 4"));
  auto sealed = SealedCopy("abc");
  ASSERT_TRUE(sealed.ok());
  EXPECT_EQ(*ReadWhole(sealed->get(), 10), "abc");
  EXPECT_LT(::write(sealed->get(), "x", 1), 0) << "sealed against writes";
}

}  // namespace
}  // namespace mmserve
