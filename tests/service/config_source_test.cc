#include "service/config_source.h"

#include <gtest/gtest.h>

#include "testing/test_util.h"

namespace mmserve {
namespace {

namespace fs = std::filesystem;

// A Kubernetes ConfigMap volume: models.yaml → ..data/models.yaml, ..data → a timestamped
// folder. An update writes a new folder and switches ..data to it in one rename.
TEST(WatchStampTest, SeesAConfigMapSwitchEvenWithEqualSizeAndTime) {
  testing::TempDir dir;
  const auto first = dir.Write("..2026_12_04_a/models.yaml", "models: []\n");
  const auto second = dir.Write("..2026_12_04_b/models.yaml", "models: []\n");
  fs::last_write_time(second, fs::last_write_time(first));  // only the target differs
  fs::create_directory_symlink("..2026_12_04_a", dir.path() / "..data");
  fs::create_symlink("..data/models.yaml", dir.path() / "models.yaml");
  ServerConfig served;
  served.file = (dir.path() / "models.yaml").string();
  const std::string before = WatchStamp(served);
  EXPECT_EQ(WatchStamp(served), before);

  fs::create_directory_symlink("..2026_12_04_b", dir.path() / "..data_tmp");
  fs::rename(dir.path() / "..data_tmp", dir.path() / "..data");
  EXPECT_NE(WatchStamp(served), before);
}

// A model directory served as the config: a model file added to it changes the stamp.
TEST(WatchStampTest, SeesAModelAddedToAModelDirectory) {
  testing::TempDir dir;
  dir.Write("a.gguf", "x");
  ServerConfig served;
  served.file = dir.path().string();
  const std::string before = WatchStamp(served);
  dir.Write("b.gguf", "x");
  EXPECT_NE(WatchStamp(served), before);
}

}  // namespace
}  // namespace mmserve
