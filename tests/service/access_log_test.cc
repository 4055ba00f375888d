#include "service/access_log.h"

#include <spdlog/sinks/ostream_sink.h>

#include <algorithm>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace mmserve {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

AccessEntry Entry() {
  return {.id = "req-1",
          .route = "POST /v1/embeddings",
          .model = "embedder",
          .version = 3,
          .status = "OK",
          .queue_ms = 0.25,
          .compute_ms = 3.5,
          .total_ms = 4,
          .tokens_in = 12,
          .tokens_out = 0};
}

TEST(AccessLogTest, TextLineHasEveryField) {
  EXPECT_EQ(FormatAccess(Entry(), LogFormat::kText),
            "access id=req-1 route=\"POST /v1/embeddings\" model=embedder version=3 status=OK "
            "queue_ms=0.250 compute_ms=3.500 total_ms=4.000 tokens_in=12 tokens_out=0");
  AccessEntry generated = Entry();
  generated.tokens_cached = 9;
  EXPECT_THAT(FormatAccess(generated, LogFormat::kText), HasSubstr("tokens_out=0 tokens_cached=9"));
  AccessEntry failed{.route = "grpc ModelInfer", .model = "m", .status = "Unavailable",
                     .error = "model 'm' is loading", .total_ms = 1};
  EXPECT_EQ(FormatAccess(failed, LogFormat::kText),
            "access id=- route=\"grpc ModelInfer\" model=m version=- status=Unavailable "
            "total_ms=1.000 error=\"model 'm' is loading\"");
}

TEST(AccessLogTest, AClientCannotForgeFieldsOrLines) {
  AccessEntry e = Entry();
  e.id = "x status=OK\naccess id=forged";
  e.model = std::string(1000, 'm') + "\xff";
  const std::string line = FormatAccess(e, LogFormat::kText);
  EXPECT_THAT(line, Not(HasSubstr("\n")));
  EXPECT_THAT(line, HasSubstr("id=\"x status=OK\\naccess id=forged\""));
  EXPECT_LT(line.size(), 600u);  // a kilobyte model name is cut
  const auto j = nlohmann::json::parse(FormatAccess(e, LogFormat::kJson));
  EXPECT_EQ(j["id"], "x status=OK\naccess id=forged");
}

TEST(AccessLogTest, JsonLeavesOutAnIdTheRequestDidNotHave) {
  AccessEntry e = Entry();
  e.id.clear();
  const auto j = nlohmann::json::parse(FormatAccess(e, LogFormat::kJson));
  EXPECT_FALSE(j.contains("id")) << j.dump();  // the text line's id=-, not "id":""
}

TEST(AccessLogTest, JsonHasTheFieldsAsMembers) {
  const auto j = nlohmann::json::parse(FormatAccess(Entry(), LogFormat::kJson));
  EXPECT_EQ(j["route"], "POST /v1/embeddings");
  EXPECT_EQ(j["version"], 3);
  EXPECT_EQ(j["compute_ms"], 3.5);
  EXPECT_EQ(j["tokens_in"], 12);
  EXPECT_FALSE(j.contains("error"));
}

// Through the access logger, as the service does it: the answer is logged, then delivered.
class AccessLoggerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sink_ = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    AccessLogger().sinks().push_back(sink_);
    ConfigureLogging("info", LogFormat::kJson, true);  // formats the new sink too
  }
  void TearDown() override {
    auto& sinks = AccessLogger().sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
    ConfigureLogging("info");
  }
  std::ostringstream out_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
};

TEST_F(AccessLoggerTest, AnAnswerIsLoggedAsOneJsonLineBeforeItIsDelivered) {
  InferRequest request;
  request.model_name = "llm";
  request.route = "POST /v1/completions";
  request.trace_id = "trace-7";
  bool delivered = false;
  request.done = [&](Result<InferResponse> r) {
    delivered = true;
    EXPECT_TRUE(r.ok());
    EXPECT_THAT(out_.str(), HasSubstr("trace-7"));  // logged first
  };
  LogAccessOnAnswer(request);
  InferResponse response;
  response.model_version = 2;
  response.queue_ns = 1'000'000;
  response.compute_ns = 9'000'000;
  response.parameters["prompt_tokens"] = int64_t{5};
  response.parameters["completion_tokens"] = int64_t{3};
  response.parameters["cached_tokens"] = int64_t{4};
  request.done(std::move(response));
  ASSERT_TRUE(delivered);
  const auto j = nlohmann::json::parse(out_.str());
  EXPECT_EQ(j["logger"], "access");
  EXPECT_EQ(j["level"], "info");
  EXPECT_EQ(j["id"], "trace-7");
  EXPECT_EQ(j["model"], "llm");
  EXPECT_EQ(j["version"], 2);
  EXPECT_EQ(j["status"], "OK");
  EXPECT_EQ(j["queue_ms"], 1.0);
  EXPECT_EQ(j["compute_ms"], 9.0);
  EXPECT_EQ(j["tokens_in"], 5);
  EXPECT_EQ(j["tokens_out"], 3);
  EXPECT_EQ(j["tokens_cached"], 4);
}

TEST_F(AccessLoggerTest, OffMeansNoWrapperAndNoLine) {
  ConfigureLogging("info", LogFormat::kText, false);
  InferRequest request;
  int calls = 0;
  request.done = [&](Result<InferResponse>) { ++calls; };
  LogAccessOnAnswer(request);
  request.done(Unavailable("x"));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(out_.str(), "");
}

TEST_F(AccessLoggerTest, OtherLinesInJsonFormatEscapeTheirMessage) {
  auto logger = spdlog::default_logger();
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
  logger->sinks().push_back(sink);
  ConfigureLogging("info", LogFormat::kJson, true);
  spdlog::warn("a \"quoted\" line\nwith a newline and \xff");
  logger->sinks().pop_back();
  const auto j = nlohmann::json::parse(out_.str());
  EXPECT_EQ(j["level"], "warning");
  EXPECT_EQ(j["logger"], "mmserve");
  EXPECT_THAT(j["msg"].get<std::string>(), HasSubstr("\"quoted\" line\nwith"));
  EXPECT_THAT(j["time"].get<std::string>(), ::testing::MatchesRegex(
                                                "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}\\.[0-9]{3}Z"));
}

}  // namespace
}  // namespace mmserve
