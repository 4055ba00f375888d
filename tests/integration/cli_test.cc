// `mmserve validate`, `doctor` and `version` as a user runs them.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <filesystem>

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
  - {name: big, backend: identity, params: {memory_mb: 70}}
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
  EXPECT_THAT(out, HasSubstr("70.0 MiB  identity params.memory_mb"));
  EXPECT_THAT(out, HasSubstr("start-up total 80.0 MiB x 1.20 = 96.0 MiB exceeds the budget "
                             "(90.0 MiB, 90% of 100.0 MiB): DOES NOT FIT"));
  // What to change, with the numbers.
  EXPECT_THAT(out, HasSubstr("to fit, remove 6.0 MiB from the start-up total"));
  EXPECT_THAT(out, HasSubstr("load: on_demand for 'big' (saves 84.0 MiB"));
  EXPECT_THAT(out, ::testing::Not(HasSubstr("loaded")));
}

TEST(CliTest, ValidatePrintsThePlanWithoutLoadingAndFailsWhatServeWouldRefuse) {
  testing::TempDir dir;
  auto [code, out] = ServerProcess::Run({"validate", dir.Write("m.yaml", kTooBig).string()});
  EXPECT_EQ(code, 1) << out;
  EXPECT_THAT(out, HasSubstr("memory plan:"));
  EXPECT_THAT(out, HasSubstr("DOES NOT FIT"));
  std::string fits = kTooBig;
  fits.replace(fits.find("memory_mb: 70"), 13, "memory_mb: 40");
  auto [ok_code, ok_out] = ServerProcess::Run({"validate", dir.Write("f.yaml", fits).string()});
  EXPECT_EQ(ok_code, 0) << ok_out;
  EXPECT_THAT(ok_out, HasSubstr("start-up total 50.0 MiB x 1.20 = 60.0 MiB within the budget "
                                "(90.0 MiB, 90% of 100.0 MiB): fits"));
  auto [skip_code, skip_out] =
      ServerProcess::Run({"validate", "--no-plan", dir.Write("m.yaml", kTooBig).string()});
  EXPECT_EQ(skip_code, 0) << skip_out;
  EXPECT_THAT(skip_out, ::testing::Not(HasSubstr("memory plan:")));
}

// validate = serve (issue #44): an on-demand model larger than the whole budget could never
// load, so both refuse it, and the advice never suggests on_demand for it.
TEST(CliTest, AModelThatCouldNeverFitIsRefusedByValidateAndServe) {
  testing::TempDir dir;
  const auto file = dir.Write("m.yaml", R"(global: {memory_pool: 100}
models:
  - {name: small, backend: identity, params: {memory_mb: 10}}
  - {name: huge, backend: identity, load: on_demand, params: {memory_mb: 500}}
)");
  auto [code, out] = ServerProcess::Run({"validate", file.string()});
  EXPECT_EQ(code, 1) << out;
  EXPECT_THAT(out, HasSubstr("start-up total 10.0 MiB x 1.20 = 12.0 MiB within the budget (90.0 "
                             "MiB, 90% of 100.0 MiB), but a model alone exceeds the budget: "
                             "DOES NOT FIT"));
  EXPECT_THAT(out, HasSubstr("model 'huge' v1 alone needs 500.0 MiB x 1.2 = 600.0 MiB, more than "
                             "the whole budget (90.0 MiB): it could never load"));
  EXPECT_THAT(out, Not(HasSubstr("load: on_demand for")));
  std::tie(code, out) = ServerProcess::Run(
      {"serve", file.string(), "--port", "0", "--lock-dir", dir.path().string()});
  EXPECT_EQ(code, 4) << out;
  EXPECT_THAT(out, HasSubstr("refusing to start: a model could never fit in device host's"));
}

// A GGUF file cut inside its tensor data (a download stopped early) is invalid, as serve would
// find when llama.cpp loads it.
TEST(CliTest, AGgufFileCutInsideItsTensorDataIsInvalid) {
  testing::TempDir dir;
  const std::string bytes = testing::ReadFile(testing::GeneratedModel("bert-tiny.gguf"));
  for (const size_t size : {size_t{1} << 20, size_t{5} << 20, bytes.size() - 4096}) {
    dir.Write("cut.gguf", bytes.substr(0, size));
    auto [code, out] = ServerProcess::Run(
        {"validate", dir.Write("m.yaml", "models:\n  - {name: e, path: cut.gguf}\n").string()});
    EXPECT_EQ(code, 1) << size << ": " << out;
    EXPECT_THAT(out, HasSubstr("it is cut short: the tensor '")) << size;
  }
}

// The plan's advice for a GGUF model that could never fit is one `mmserve quantize` command;
// run as printed, its output fits the same budget and serves.
TEST(CliTest, TheQuantizeCommandThePlanAdvisesMakesTheModelFit) {
  testing::TempDir dir;
  const std::string model = (dir.path() / "llm.gguf").string();
  std::filesystem::copy_file(testing::GeneratedModel("llama-tiny.gguf"), model);
  const auto config = [&](const std::string& path) {
    // llama-tiny's estimate: 126 MiB at F32, 100 MiB at Q4_K_M (most of it compute buffers):
    // x 1.2 against a budget of 0.9 x 150 = 135 MiB.
    return dir.Write("m.yaml", "global: {memory_pool: 150}\nmodels:\n  - name: llm\n    path: " +
                                   path + "\n    task: generate\n    load: on_demand\n"
                                   "    params: {n_ctx: 256, prompt_cache_mb: 0}\n")
        .string();
  };
  auto [code, out] = ServerProcess::Run({"validate", config(model)});
  ASSERT_EQ(code, 1) << out;
  const std::string advice = "mmserve quantize " + model + " ";
  const size_t at = out.find(advice);
  ASSERT_NE(at, std::string::npos) << out;
  std::vector<std::string> args = {"quantize", model};
  std::string rest = out.substr(at + advice.size(), out.find('\n', at) - at - advice.size());
  args.push_back(rest.substr(0, rest.find(' ')));   // OUT
  args.push_back(rest.substr(rest.find(' ') + 1));  // TYPE
  EXPECT_EQ(args[3], "Q4_K_M");
  std::tie(code, out) = ServerProcess::Run(args);
  ASSERT_EQ(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("wrote " + args[2] + " (Q4_K_M): weights "));
  std::tie(code, out) = ServerProcess::Run({"validate", config(args[2])});
  EXPECT_EQ(code, 0) << out;
  EXPECT_THAT(out, HasSubstr(": fits"));
  // Refused: an unknown type, the same file twice, an already quantized input.
  std::tie(code, out) = ServerProcess::Run({"quantize", model, model + ".x", "Q9_Z"});
  EXPECT_EQ(code, 1);
  EXPECT_THAT(out, HasSubstr("'Q9_Z' is not one of Q4_K_M"));
  std::tie(code, out) = ServerProcess::Run({"quantize", model, model, "Q8_0"});
  EXPECT_EQ(code, 1);
  EXPECT_THAT(out, HasSubstr("OUT is IN"));
  std::tie(code, out) = ServerProcess::Run({"quantize", args[2], model + ".x", "Q8_0"});
  EXPECT_EQ(code, 1) << out;
  EXPECT_FALSE(std::filesystem::exists(model + ".x.part"));
  EXPECT_FALSE(std::filesystem::exists(model + ".x"));
}

// A model directory stands for a YAML file nobody wrote: its errors name the directory, not a
// line and column in that YAML.
TEST(CliTest, ValidatingAModelDirectoryNamesNoPositionInAGeneratedFile) {
  testing::TempDir dir;
  dir.Write("models/det.onnx", "not really onnx");
  const std::string models = (dir.path() / "models").string();
  auto [code, out] = ServerProcess::Run({"validate", models});
  EXPECT_EQ(code, 1) << out;
  EXPECT_THAT(out, HasSubstr(models + ": models[0].path: expected an ONNX model"));
  EXPECT_THAT(out, Not(::testing::ContainsRegex(models + ":[0-9]")));
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
