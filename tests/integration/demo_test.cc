// The README's run command (scripts/demo.sh) serves the demo and answers readiness with 200,
// as seen by curl.
#include <signal.h>

#include <cstdio>
#include <memory>

#include <utility>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/paths.h"
#include "testing/server_process.h"
#include "testing/test_util.h"

namespace mmserve {
namespace {

using ::testing::HasSubstr;

std::string Curl(const std::string& args) { return testing::RunShell("curl -s " + args).second; }

TEST(DemoTest, RunCommandServesTheDemoAndIsReady) {
  testing::TempDir dir;
  const int port = testing::FreePort();
  ::setenv("MMSERVE_PORT", std::to_string(port).c_str(), 1);
  ::setenv("MMSERVE_GRPC_PORT", "0", 1);
  ::setenv("MMSERVE_LOCK_DIR", (dir.path() / "locks").c_str(), 1);
  testing::ServerProcess demo({testing::SourceDir() + "/scripts/demo.sh"},
                              dir.path() / "demo.log", "/bin/bash");
  ASSERT_TRUE(demo.Start(std::chrono::minutes(5))) << demo.Log();
  EXPECT_EQ(demo.port(), port);
  const std::string base = "127.0.0.1:" + std::to_string(port);
  EXPECT_EQ(Curl("-o /dev/null -w '%{http_code}' " + base + "/v2/health/ready"), "200");
  const std::string json = " -H 'Content-Type: application/json' -d ";
  EXPECT_THAT(Curl("-X POST " + base + "/v2/models/echo/infer" + json + "'{\"inputs\":[{\"name\":"
                   "\"INPUT0\",\"datatype\":\"FP32\",\"shape\":[1,4],\"data\":[1,2,3,4]}]}'"),
              HasSubstr("\"data\":[1.0,2.0,3.0,4.0]"));
  EXPECT_THAT(Curl("-X POST " + base + "/v2/models/embedder/infer" + json + "'{\"inputs\":[{\"name\":"
                   "\"TEXT\",\"datatype\":\"BYTES\",\"shape\":[1],\"data\":[\"hi\"]}]}'"),
              HasSubstr("\"name\":\"EMBEDDING\",\"datatype\":\"FP32\",\"shape\":[1,64]"));
  EXPECT_THAT(Curl(base + "/v1/chat/completions" + json + "'{\"model\":\"llm\",\"messages\":[{\"role\":"
                   "\"user\",\"content\":\"Hi\"}],\"max_tokens\":4}'"),
              HasSubstr("\"object\":\"chat.completion\""));
  const std::string sample = testing::SourceDir() + "/models/generated/sample.png";
  EXPECT_THAT(Curl("-X POST " + base + "/v2/models/detector/infer -H 'Content-Type: image/png' "
                   "--data-binary @" + sample),
              HasSubstr("\"name\":\"BOXES\",\"datatype\":\"FP32\""));
  EXPECT_THAT(Curl("-X POST " + base + "/v2/models/classifier/infer -H 'Content-Type: image/png' "
                   "--data-binary @" + sample),
              HasSubstr("\"name\":\"LABELS\""));
  EXPECT_THAT(demo.Log(), HasSubstr("grpc listening on 127.0.0.1:"));
  EXPECT_THAT(demo.Log(), HasSubstr("curl -i 127.0.0.1:" + std::to_string(port) +
                                    "/v2/health/ready"));
  EXPECT_EQ(demo.Stop(SIGINT), 0) << demo.Log();
}

}  // namespace
}  // namespace mmserve
