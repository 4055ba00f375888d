// What an operator reads in the server's log, through the real binary: an access line per
// inference request (any protocol), JSON lines on request, and the access log turned off.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <sstream>

#include "testing/http_client.h"
#include "testing/models.h"
#include "testing/server_process.h"
#include "testing/test_util.h"

namespace mmserve {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kEcho = R"(models:
  - {name: echo, backend: identity, versions: [1, 2]}
)";
constexpr const char* kInfer =
    R"({"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[2],"data":[1,2]}]})";

class LoggingTest : public ::testing::Test {
 protected:
  testing::ServerProcess Serve(std::vector<std::string> extra) {
    std::vector<std::string> args = {"serve", dir_.Write("m.yaml", kEcho).string(), "--port", "0",
                                     "--lock-dir", dir_.path().string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return testing::ServerProcess(args, dir_.path() / "server.log");
  }
  // The lines of `log` that are access lines (text format).
  static std::vector<std::string> AccessLines(const std::string& log) {
    std::vector<std::string> out;
    std::istringstream in(log);
    for (std::string line; std::getline(in, line);) {
      if (line.find("] access ") != std::string::npos) out.push_back(line);
    }
    return out;
  }
  testing::TempDir dir_;
};

TEST_F(LoggingTest, EveryInferenceRequestHasOneAccessLine) {
  auto server = Serve({});
  ASSERT_TRUE(server.Start()) << server.Log();
  testing::HttpClient http(server.port());
  ASSERT_EQ(http.Post("/v2/models/echo/versions/1/infer", kInfer, {{"X-Request-Id", "abc-123"}})
                .status,
            200);
  ASSERT_EQ(http.Post("/v2/models/nope/infer", kInfer).status, 404);
  ASSERT_EQ(http.Get("/v2/health/ready").status, 200);  // not an inference: no line
  ASSERT_EQ(server.Stop(SIGTERM), 0);
  const auto lines = AccessLines(server.Log());
  ASSERT_EQ(lines.size(), 2u) << server.Log();
  EXPECT_THAT(lines[0], HasSubstr("access id=abc-123 route=\"POST /v2/models/echo/versions/1/infer\""
                                  " model=echo version=1 status=OK queue_ms="));
  EXPECT_THAT(lines[0], HasSubstr(" compute_ms="));
  EXPECT_THAT(lines[1], HasSubstr("route=\"POST /v2/models/nope/infer\" model=nope version=- "
                                  "status=NotFound"));
  EXPECT_THAT(lines[1], HasSubstr("error="));
}

TEST_F(LoggingTest, JsonFormatWritesOneObjectPerLine) {
  auto server = Serve({"--log-format", "json"});
  ASSERT_TRUE(server.Start()) << server.Log();
  testing::HttpClient http(server.port());
  ASSERT_EQ(http.Post("/v2/models/echo/infer", kInfer, {{"X-Request-Id", "q\"1"}}).status, 200);
  ASSERT_EQ(server.Stop(SIGTERM), 0);
  int access = 0, other = 0;
  std::istringstream in(server.Log());
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    json j;
    ASSERT_NO_THROW(j = json::parse(line)) << line;
    ASSERT_TRUE(j.contains("time") && j.contains("level")) << line;
    if (j["logger"] == "access") {
      ++access;
      EXPECT_EQ(j["id"], "q\"1");
      EXPECT_EQ(j["model"], "echo");
      EXPECT_EQ(j["version"], 2);  // the latest
      EXPECT_EQ(j["status"], "OK");
      EXPECT_TRUE(j["compute_ms"].is_number());
    } else {
      ++other;
      EXPECT_TRUE(j["msg"].is_string()) << line;
    }
  }
  EXPECT_EQ(access, 1);
  EXPECT_GT(other, 0);  // start-up and shutdown lines
}

TEST_F(LoggingTest, NoAccessLogMeansNoAccessLines) {
  auto server = Serve({"--no-access-log"});
  ASSERT_TRUE(server.Start()) << server.Log();
  testing::HttpClient http(server.port());
  ASSERT_EQ(http.Post("/v2/models/echo/infer", kInfer).status, 200);
  ASSERT_EQ(server.Stop(SIGTERM), 0);
  EXPECT_THAT(AccessLines(server.Log()), ::testing::IsEmpty());
  EXPECT_THAT(server.Log(), HasSubstr("listening"));
}

// Hardening round 2, F8: a model's error quotes its file's name, which any client that may
// load models chooses. A newline in it forged a second log line, and an escape sequence reached
// the operator's terminal. Every text line now starts with its time; control bytes are escaped.
TEST_F(LoggingTest, F8ControlBytesInAModelsErrorCannotForgeALogLine) {
  auto server = Serve({});
  ASSERT_TRUE(server.Start()) << server.Log();
  // One block more than its tensors hold: the header check passes, llama.cpp's load then fails
  // ("missing tensor").
  const std::string name = "x\n2026-01-01T00:00:00.000 I [1] FORGED \x1b[2J.gguf";
  std::string bytes = testing::ReadFile(testing::GeneratedModel("bert-tiny.gguf"));
  const std::string key = "bert.block_count";
  const size_t at = bytes.find(key);
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at + key.size() + 4, 4, std::string("\x03\0\0\0", 4));  // u32 2 -> 3
  const auto file = dir_.Write(name, bytes);
  testing::HttpClient http(server.port());
  const json load = {{"parameters",
                      {{"config", {{"backend", "llama"}, {"task", "embed"}, {"path", file}}}}}};
  EXPECT_EQ(http.Post("/v2/repository/models/evil/load", load.dump()).status, 503);
  ASSERT_EQ(server.Stop(SIGTERM), 0);
  const std::string log = server.Log();
  EXPECT_THAT(log, HasSubstr("x\\n2026-01-01T00:00:00.000 I [1] FORGED \\x1b[2J.gguf")) << log;
  EXPECT_EQ(log.find('\x1b'), std::string::npos) << "a raw escape byte reached the log";
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    EXPECT_THAT(line, ::testing::StartsWith("20")) << "a line without its time: " << line;
    EXPECT_THAT(line, Not(::testing::StartsWith("2026-01-01")));
  }
}

// A model file of 100 MiB or more says how far its load has read (once a second while it reads;
// the cadence is load_progress_test's) and its total with the rate. Sizes in the load line are
// MiB. The file is the tiny llama padded past the threshold: llama.cpp reads only its tensors.
TEST_F(LoggingTest, ALargeModelLogsItsLoadProgressAndSizesInMib) {
  const auto big = dir_.path() / "big.gguf";
  std::filesystem::copy_file(testing::GeneratedModel("llama-tiny.gguf"), big);
  std::filesystem::resize_file(big, 101 << 20);
  testing::ServerProcess server({"serve", "--model", "big=" + big.string(), "--port", "0",
                                 "--lock-dir", dir_.path().string()},
                                dir_.path() / "big.log");
  ASSERT_TRUE(server.Start()) << server.Log();
  ASSERT_EQ(server.Stop(SIGTERM), 0);
  EXPECT_THAT(server.Log(), HasSubstr("model big v1: read 101 of 101 MiB (100%) in "));
  EXPECT_THAT(server.Log(), ::testing::ContainsRegex("MiB/s"));
  EXPECT_THAT(server.Log(), ::testing::ContainsRegex(
                                "model big: loaded version 1 .*estimate [0-9.]+ MiB from .*"
                                "measured [0-9.]+ MiB"));
}

// Loading the RAG trio warns about nothing: a warning is something the user can act on (the
// context size llama.cpp would round, with a warning, is asked for rounded already).
TEST_F(LoggingTest, LoadingEncodersAndADecoderWarnsNothing) {
  testing::ServerProcess server(
      {"serve", "--model", "e=" + testing::GeneratedModel("bert-tiny.gguf"), "--model",
       "r=" + testing::GeneratedModel("rerank-tiny.gguf"), "--model",
       "l=" + testing::GeneratedModel("llama-tiny.gguf"), "--port", "0", "--lock-dir",
       dir_.path().string()},
      dir_.path() / "trio.log");
  ASSERT_TRUE(server.Start()) << server.Log();
  ASSERT_EQ(server.Stop(SIGTERM), 0);
  std::istringstream in(server.Log());
  int loaded = 0;
  for (std::string line; std::getline(in, line);) {
    EXPECT_EQ(line.find(" W ["), std::string::npos) << line;
    EXPECT_EQ(line.find(" E ["), std::string::npos) << line;
    if (line.find(": loaded version 1") != std::string::npos) ++loaded;
  }
  EXPECT_EQ(loaded, 3) << server.Log();
}

}  // namespace
}  // namespace mmserve
