// `mmserve validate`, `doctor` and `version` as a user runs them.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <chrono>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/models.h"
#include "testing/paths.h"
#include "testing/seed_config.h"
#include "testing/server_process.h"
#include "testing/test_util.h"

namespace mmserve {
namespace {

using testing::kSeed;

using ::testing::HasSubstr;
using ::testing::Not;
using testing::ServerProcess;


TEST(CliTest, ValidateAcceptsTheSeedConfiguration) {
  testing::TempDir dir;
  dir.Write("person_det.om", "om");
  auto [code, out] = ServerProcess::Run({"validate", dir.Write("m.yaml", kSeed).string()});
  EXPECT_EQ(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("valid, 1 model"));
  EXPECT_THAT(out, HasSubstr("person_det v1: backend acl, task infer, device 0"));
}

TEST(CliTest, ValidatePrintsEveryErrorAndFails) {
  testing::TempDir dir;
  std::string broken = kSeed;
  broken.replace(broken.find("timeout_ms: 200"), 15, "timeout: 200");
  broken.replace(broken.find("thread_num: 2"), 13, "thread_num: zero");
  const auto file = dir.Write("m.yaml", broken);
  auto [code, out] = ServerProcess::Run({"validate", file.string()});
  EXPECT_EQ(code, 1);
  EXPECT_THAT(out, HasSubstr("3 configuration errors:"));
  EXPECT_THAT(out, HasSubstr(file.string() + ":7:11: models[0].path: expected an existing file"));
  EXPECT_THAT(out, HasSubstr(file.string() + ":14:5: models[0].timeout: expected one of"));
  EXPECT_THAT(out, HasSubstr(file.string() + ":16:17: models[0].thread_num: expected an integer "
                             "in 1..256, found \"zero\""));
}

TEST(CliTest, ServeRefusesAnInvalidConfigurationBeforeLoadingAnything) {
  testing::TempDir dir;
  auto [code, out] = ServerProcess::Run(
      {"serve", dir.Write("m.yaml", "models:\n  - name: a\n    backend: identity\n    "
                                    "priority: 0\n").string(), "--port", "0"});
  EXPECT_EQ(code, 2);
  EXPECT_THAT(out, HasSubstr(":4:15: models[0].priority: expected high, normal, low"));
  EXPECT_THAT(out, ::testing::Not(HasSubstr("loaded")));
}

constexpr const char* kTooBig = R"(global: {memory_pool: 100}
models:
  - {name: small, backend: identity, params: {memory_mb: 10}}
  - {name: big, backend: identity, params: {memory_mb: 80}}
  - {name: later, backend: identity, load: on_demand, params: {memory_mb: 60}}
)";

TEST(CliTest, ServeRefusesStartupModelsThatDoNotFitAndPrintsThePlan) {
  testing::TempDir dir;
  auto [code, out] = ServerProcess::Run({"serve", dir.Write("m.yaml", kTooBig).string(),
                                         "--port", "0", "--lock-dir", dir.path().string()});
  EXPECT_EQ(code, 4) << out;
  EXPECT_THAT(out, HasSubstr("refusing to start: the start-up models do not fit in device "
                             "host's memory budget"));
  EXPECT_THAT(out, HasSubstr("device host: budget 90.0 MiB (memory_pool 100.0 MiB x "
                             "preflight.max_fill 0.90)"));
  EXPECT_THAT(out, HasSubstr("big v1"));
  EXPECT_THAT(out, HasSubstr("80.0 MiB  identity params.memory_mb"));
  EXPECT_THAT(out, HasSubstr("start-up total 90.0 MiB x 1.20 = 108.0 MiB exceeds the budget "
                             "(90.0 MiB, 90% of 100.0 MiB): DOES NOT FIT"));
  // What to change, with the numbers.
  EXPECT_THAT(out, HasSubstr("to fit, remove 18.0 MiB from the start-up total"));
  EXPECT_THAT(out, HasSubstr("load: on_demand for 'big' (saves 96.0 MiB"));
  EXPECT_THAT(out, ::testing::Not(HasSubstr("loaded")));
}

TEST(CliTest, ValidatePrintsThePlanWithoutLoadingAndFailsWhatServeWouldRefuse) {
  testing::TempDir dir;
  auto [code, out] = ServerProcess::Run({"validate", dir.Write("m.yaml", kTooBig).string()});
  EXPECT_EQ(code, 1) << out;
  EXPECT_THAT(out, HasSubstr("memory plan:"));
  EXPECT_THAT(out, HasSubstr("DOES NOT FIT"));
  std::string fits = kTooBig;
  fits.replace(fits.find("memory_mb: 80"), 13, "memory_mb: 40");
  auto [ok_code, ok_out] = ServerProcess::Run({"validate", dir.Write("f.yaml", fits).string()});
  EXPECT_EQ(ok_code, 0) << ok_out;
  EXPECT_THAT(ok_out, HasSubstr("start-up total 50.0 MiB x 1.20 = 60.0 MiB within the budget "
                                "(90.0 MiB, 90% of 100.0 MiB): fits"));
  auto [skip_code, skip_out] =
      ServerProcess::Run({"validate", "--no-plan", dir.Write("m.yaml", kTooBig).string()});
  EXPECT_EQ(skip_code, 0) << skip_out;
  EXPECT_THAT(skip_out, ::testing::Not(HasSubstr("memory plan:")));
}

TEST(CliTest, AnOnnxFileOpenCvCannotImportIsAnErrorNotValid) {
  testing::TempDir dir;
  dir.Write("det.onnx", "not really onnx");
  const std::string yaml =
      "models:\n  - {name: det, path: det.onnx}\n  - {name: ocr, path: " +
      testing::GeneratedModel("unsupported-tiny.onnx") +
      "}\n  - {name: cls, path: " + testing::GeneratedModel("classifier-tiny.onnx") + "}\n";
  auto [code, out] = ServerProcess::Run({"validate", dir.Write("m.yaml", yaml).string()});
  EXPECT_EQ(code, 1) << out;
  EXPECT_THAT(out, HasSubstr("models[0].path: expected an ONNX model OpenCV 4.6 can import"));
  EXPECT_THAT(out, HasSubstr("found 'det.onnx': not an ONNX model"));
  EXPECT_THAT(out, HasSubstr("models[1].path"));
  EXPECT_THAT(out, HasSubstr("Node [Clip@ai.onnx]:(onnx_node!clip_0)"));
  EXPECT_THAT(out, Not(HasSubstr("models[2]")));
}

TEST(CliTest, ServeBindsItsPortBeforeLoadingAndEachFailureHasItsOwnExitCode) {
  testing::TempDir dir;
  // A port in use: exit 5 before any model loads.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string port = std::to_string(ntohs(addr.sin_port));
  const std::string yaml = dir.Write(
      "m.yaml", "models:\n  - {name: slow, backend: identity, params: {load_ms: 3000}}\n").string();
  auto [code, out] = ServerProcess::Run(
      {"serve", yaml, "--port", port, "--lock-dir", (dir.path() / "l1").string()});
  ::close(fd);
  EXPECT_EQ(code, 5) << out;
  EXPECT_THAT(out, HasSubstr("refusing to start"));
  EXPECT_THAT(out, ::testing::Not(HasSubstr("loaded"))) << "no model loaded first";
  // The other codes: 2 config, 4 memory plan (3, a locked device: DeviceLockTest).
  EXPECT_EQ(ServerProcess::Run({"serve", dir.Write("bad.yaml", "models: 7\n").string()}).first, 2);
  EXPECT_EQ(ServerProcess::Run({"serve", dir.Write("big.yaml", kTooBig).string(), "--port", "0",
                                "--lock-dir", (dir.path() / "l2").string()})
                .first,
            4);
}

TEST(CliTest, DoctorReportsTheHostAndNeverFailsWithoutAccelerators) {
  testing::TempDir dir;
  auto [code, out] = ServerProcess::Run({"doctor", "--lock-dir", dir.path().string()});
  EXPECT_EQ(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("cpu:"));
  EXPECT_THAT(out, HasSubstr("memory:"));
  EXPECT_THAT(out, HasSubstr("backends compiled in: acl, identity, llama"));
  EXPECT_THAT(out, HasSubstr("AscendCL: "));
  EXPECT_THAT(out, HasSubstr("CUDA: "));
  EXPECT_THAT(out, HasSubstr("no mmserve holds a device"));
}

TEST(CliTest, VersionPrintsTheVersion) {
  auto [code, out] = ServerProcess::Run({"version"});
  EXPECT_EQ(code, 0);
  EXPECT_THAT(out, HasSubstr("mmserve 0.1.0 (commit "));
  // The commit this binary was built from, as git names it (the test runs in the checkout).
  const auto [git_code, head] =
      testing::RunShell("git -C " + testing::SourceDir() + " rev-parse --short=12 HEAD");
  if (git_code == 0) {
    EXPECT_THAT(out, HasSubstr("(commit " + head.substr(0, 12)));
  }
  std::string tag = testing::ReadFile(testing::SourceDir() + "/.deps/llama.cpp/.mmserve-tag");
  while (!tag.empty() && std::isspace(static_cast<unsigned char>(tag.back()))) tag.pop_back();
  EXPECT_THAT(out, HasSubstr("llama.cpp " + tag + " (commit "));
  EXPECT_THAT(out, HasSubstr("backends: acl, identity, llama"));
  EXPECT_THAT(out, HasSubstr("CUDA OFF, CANN OFF"));
}

}  // namespace
}  // namespace mmserve
