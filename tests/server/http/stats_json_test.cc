#include "server/http/stats_json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace mmserve {
namespace {

ModelInfo Loading() {
  ModelInfo info;
  info.config.name = "big";
  info.config.version = 3;
  info.state = ModelState::kLoading;
  info.load_done_bytes = 300;
  info.load_total_bytes = 1200;
  info.labels = {{"stable", 3}, {"canary", 4}};
  info.last_event = Event{.seq = 9, .unix_ms = 1'700'000'000'000, .kind = "loading",
                          .model = "big", .version = 3, .message = ""};
  return info;
}

// What the status page draws a model's row from, beside Triton's fields.
TEST(StatsJsonTest, ALoadingModelShowsItsProgressLabelsAndLastEvent) {
  const auto j = ModelStatsJson(Loading());
  const auto& m = j.at("mmserve");
  EXPECT_EQ(m.at("state"), "LOADING");
  EXPECT_EQ(m.at("load_progress").at("done_bytes"), 300);
  EXPECT_EQ(m.at("load_progress").at("total_bytes"), 1200);
  EXPECT_EQ(m.at("labels"), nlohmann::json::array({"stable"}));  // only those naming v3
  EXPECT_EQ(m.at("last_event").at("kind"), "loading");
  EXPECT_EQ(m.at("last_event").at("time_ms"), 1'700'000'000'000);
  EXPECT_FALSE(m.contains("latency"));  // nothing measured before it is loaded
}

TEST(StatsJsonTest, ProgressOnlyWhileLoading) {
  ModelInfo info = Loading();
  info.state = ModelState::kNotLoaded;
  info.last_event.reset();
  const auto j = ModelStatsJson(info);
  EXPECT_FALSE(j.at("mmserve").contains("load_progress"));
  EXPECT_FALSE(j.at("mmserve").contains("last_event"));
}

// The server's last minute (ModelVersion::SampleMinute): rates per second over its window, and
// tokens/s for generators only.
TEST(StatsJsonTest, TheLastMinuteIsGivenAsRates) {
  ModelInfo info = Loading();
  info.state = ModelState::kReady;
  EXPECT_TRUE(ModelStatsJson(info).at("mmserve").at("last_minute").is_null());
  info.last_minute = MinuteFigures{.seconds = 60, .requests = 120, .errors = 3, .p50 = 0.004,
                                   .p99 = 0.02, .generated_tokens = 600};
  auto minute = ModelStatsJson(info).at("mmserve").at("last_minute");
  EXPECT_EQ(minute.at("rate"), 2.0);
  EXPECT_EQ(minute.at("errors"), 3);
  EXPECT_EQ(minute.at("p50_s"), 0.004);
  EXPECT_EQ(minute.at("p99_s"), 0.02);
  EXPECT_FALSE(minute.contains("tokens_per_s"));
  info.config.task = "generate";
  minute = ModelStatsJson(info).at("mmserve").at("last_minute");
  EXPECT_EQ(minute.at("tokens_per_s"), 10.0);
}

}  // namespace
}  // namespace mmserve
