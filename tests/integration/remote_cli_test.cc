// `mmserve ps | load | unload` against a real server on 127.0.0.1, keys from the environment.
#include <stdlib.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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
                                 "+UNLOADS IN"));
  // Loaded with 3 MiB, unloads after 10 minutes of idleness: "9m 59s" or "10m 0s".
  EXPECT_THAT(out, ContainsRegex("echo +1 +READY +identity +0 +3\\.0 +0 +(9m 5[0-9]s|10m 0s)"));
  EXPECT_THAT(out, ContainsRegex("forever +1 +READY .* never"));
  EXPECT_THAT(out, ContainsRegex("lazy +1 +UNLOADED +identity +0 +- +0 +never"));
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

}  // namespace
}  // namespace mmserve
