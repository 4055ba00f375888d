#include "config/restart_fields.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace mmserve {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(RestartFieldsTest, SettingsThatTakeARestartAreNamedAsTheYamlSpellsThem) {
  GlobalConfig was, now;
  now.port = 9000;
  now.memory_pool_mb = 512;
  now.priority_linger = std::chrono::milliseconds(50);
  now.preflight.factor = 1.5;
  now.jobs.ttl = std::chrono::minutes(1);
  EXPECT_THAT(RestartNeeded(was, now),
              ElementsAre("global.memory_pool", "global.preflight", "global.port", "global.jobs",
                          "global.priority_linger"));
}

TEST(RestartFieldsTest, SettingsAReloadAppliesAreNotReported) {
  GlobalConfig was, now;
  now.watch = std::chrono::seconds(2);
  now.model_roots = {"/models"};
  now.keep_alive = std::chrono::minutes(5);  // a default of the model entries, applied with them
  now.device = 1;
  EXPECT_THAT(RestartNeeded(was, now), IsEmpty());
  EXPECT_THAT(RestartNeeded(was, was), IsEmpty());
}

}  // namespace
}  // namespace mmserve
