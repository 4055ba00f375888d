// `mmserve ps | load | unload` against a real server on 127.0.0.1, keys from the environment.
#include <stdlib.h>

#include <string>
#include <tuple>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/paths.h"
#include "testing/server_process.h"
#include "testing/test_util.h"

namespace mmserve {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::ServerProcess;

constexpr const char* kConfig = R"(global: {api_key: reader, admin_key: boss}
models:
  - {name: echo, backend: identity, keep_alive: 10m, params: {memory_mb: 3}}
  - {name: forever, backend: identity, keep_alive: -1}
  - {name: lazy, backend: identity, load: on_demand}
)";

class RemoteCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<ServerProcess>(
        std::vector<std::string>{"serve", dir_.Write("m.yaml", kConfig).string(), "--port", "0",
                                 "--grpc-port", "-1", "--lock-dir", dir_.path().string()},
        dir_.path() / "server.log");
    ASSERT_TRUE(server_->Start()) << server_->Log();
    url_ = "http://127.0.0.1:" + std::to_string(server_->port());
    setenv("MMSERVE_API_KEY", "reader", 1);
    setenv("MMSERVE_ADMIN_KEY", "boss", 1);
  }
  void TearDown() override {
    unsetenv("MMSERVE_API_KEY");
    unsetenv("MMSERVE_ADMIN_KEY");
    unsetenv("MMSERVE_URL");
  }
  std::pair<int, std::string> Cli(std::vector<std::string> args) {
    args.push_back("--url");
    args.push_back(url_);
    return ServerProcess::Run(args);
  }
  testing::TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
  std::string url_;
};

TEST_F(RemoteCliTest, PsListsEveryModelWithStateMemoryAndKeepAlive) {
  auto [code, out] = Cli({"ps"});
  ASSERT_EQ(code, 0) << out;
  EXPECT_THAT(out, ContainsRegex("NAME +VERSION +STATE +TASK +DEVICE +MEMORY \\(MiB\\) +IN FLIGHT "
                                 "+RESTARTS +UNLOADS IN"));
  // Loaded with 3 MiB, unloads after 10 minutes of idleness: "9m 59s" or "10m 0s".
  EXPECT_THAT(out, ContainsRegex("echo +1 +READY +identity +0 +3\\.0 +0 +0 +(9m 5[0-9]s|10m 0s)"));
  EXPECT_THAT(out, ContainsRegex("forever +1 +READY .* never"));
  EXPECT_THAT(out, ContainsRegex("lazy +1 +UNLOADED +identity +0 +- +0 +0 +never"));
}

TEST_F(RemoteCliTest, UnloadAndLoadGoThroughTheRepositoryApiWithTheAdminKey) {
  auto [code, out] = Cli({"unload", "echo"});
  ASSERT_EQ(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("echo: unloaded"));
  EXPECT_THAT(Cli({"ps"}).second, Not(ContainsRegex("echo +1 +READY")));
  setenv("MMSERVE_URL", url_.c_str(), 1);  // the URL from the environment this time
  auto [loaded, out2] = ServerProcess::Run({"load", "echo"});
  ASSERT_EQ(loaded, 0) << out2;
  EXPECT_THAT(Cli({"ps"}).second, ContainsRegex("echo +1 +READY"));
  auto [missing, out3] = Cli({"load", "nope"});
  EXPECT_EQ(missing, 1);
  EXPECT_THAT(out3, HasSubstr("load nope: unknown model 'nope'"));
  EXPECT_THAT(out3, HasSubstr("HTTP 404"));
}

TEST_F(RemoteCliTest, AWrongKeyOrNoServerIsAClearError) {
  setenv("MMSERVE_ADMIN_KEY", "reader", 1);  // the API key cannot unload
  auto [code, out] = Cli({"unload", "echo"});
  EXPECT_EQ(code, 1);
  EXPECT_THAT(out, HasSubstr("HTTP 403"));
  auto [down, out2] = ServerProcess::Run({"ps", "--url", "http://127.0.0.1:1"});
  EXPECT_EQ(down, 1);
  EXPECT_THAT(out2, HasSubstr("cannot reach the server at http://127.0.0.1:1"));
  auto [bad, out3] = ServerProcess::Run({"ps", "--url", "https://example.com"});
  EXPECT_EQ(bad, 1);
  EXPECT_THAT(out3, HasSubstr("--url: expected http://HOST:PORT"));
}

// Hardening round 2, F7: what a server says reaches the operator's terminal through ps, load and
// unload. Escape sequences, a CR and C1 controls are escaped, long text is cut, and a keep-alive
// past any sensible range is "?" (it printed -9223372036854775808s).
TEST(RemoteCliHostileServerTest, F7WhatAServerSaysIsPrintedEscapedAndBounded) {
  testing::TempDir dir;
  ServerProcess hostile({testing::SourceDir() + "/tests/integration/clients/hostile_server.py"},
                        dir.path() / "hostile.log", "/usr/bin/python3");
  ASSERT_TRUE(hostile.Start()) << hostile.Log();
  const std::string url = "http://127.0.0.1:" + std::to_string(hostile.port());
  auto [code, out] = ServerProcess::Run({"ps", "--url", url});
  EXPECT_EQ(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("\\x1b]0;pwned\\x07evil\\r\\x1b[2Kechodone"));
  EXPECT_THAT(out, HasSubstr("READY\\x1b[2J"));
  EXPECT_THAT(out, HasSubstr("embed\\u009b31m"));
  EXPECT_THAT(out, ContainsRegex(" \\?\n"));  // the keep-alive column
  EXPECT_THAT(out, Not(HasSubstr("-9223372036854775808")));
  for (const char raw : {'\x1b', '\r', '\x07'}) {
    EXPECT_EQ(out.find(raw), std::string::npos) << "a raw control byte " << int(raw);
  }
  EXPECT_EQ(out.find("\xc2\x9b"), std::string::npos) << "a raw C1 control";
  std::tie(code, out) = ServerProcess::Run({"load", "m", "--url", url});
  EXPECT_EQ(code, 1) << out;
  EXPECT_THAT(out, HasSubstr("load m: \\x1b[2J\\rm: loaded\\nAAAA"));
  EXPECT_LT(out.size(), 4000u) << "the 200 KB error is cut";
  EXPECT_EQ(out.find('\r'), std::string::npos);
}

}  // namespace
}  // namespace mmserve
