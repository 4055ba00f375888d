#include "service/config_source.h"

#include <gtest/gtest.h>

#include <mutex>
#include <thread>

#include "testing/fake_time.h"
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

// What the watch sees and asks for: a stamp the test changes, an interval it sets, and the
// reloads it was asked for (their `done`s kept for the test to call). Counts, not times.
class WatchedFiles {
 public:
  ConfigWatch::Sources Sources() {
    return {.stamp =
                [this] {
                  std::lock_guard lock(mu_);
                  ++looks_;
                  return stamp_;
                },
            .interval =
                [this] {
                  std::lock_guard lock(mu_);
                  return interval_;
                },
            .reload = [this](std::function<void()> done) {
              std::lock_guard lock(mu_);
              dones_.push_back(std::move(done));
            }};
  }
  void Change(std::string stamp) {
    std::lock_guard lock(mu_);
    stamp_ = std::move(stamp);
  }
  void SetInterval(std::optional<std::chrono::milliseconds> interval) {
    std::lock_guard lock(mu_);
    interval_ = interval;
  }
  int looks() {
    std::lock_guard lock(mu_);
    return looks_;
  }
  size_t reloads() {
    std::lock_guard lock(mu_);
    return dones_.size();
  }
  void EndReload(size_t i) {
    std::function<void()> done;
    {
      std::lock_guard lock(mu_);
      done = dones_.at(i);
    }
    done();
  }
  // Waits (in real time, bounded) until the watch took at least `n` stamps in all, or asked
  // for at least `n` reloads.
  bool LooksReach(int n) {
    return Eventually([&] { return looks() >= n; });
  }
  bool ReloadsReach(size_t n) {
    return Eventually([&] { return reloads() >= n; });
  }

 private:
  std::mutex mu_;
  std::string stamp_ = "a";
  std::optional<std::chrono::milliseconds> interval_ = std::chrono::milliseconds(200);
  int looks_ = 0;
  std::vector<std::function<void()>> dones_;

  template <typename Done>
  static bool Eventually(Done done) {
    for (int i = 0; i < 10'000 && !done(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return done();
  }
};

// The watch looks once per interval on its own thread and asks for one reload at a time; the
// stamp it compares with is taken anew once that reload ended.
TEST(ConfigWatchTest, OneLookPerIntervalAndOneReloadAtATime) {
  using namespace std::chrono_literals;
  testing::FakeTime time;
  WatchedFiles files;
  ConfigWatch watch(files.Sources(), time);
  EXPECT_EQ(files.looks(), 1) << "the stamp at start, before the server listens";
  files.Change("b");  // changed after start-up: not missed
  watch.Start();
  time.Advance(199ms);
  EXPECT_EQ(files.reloads(), 0u);
  EXPECT_EQ(files.looks(), 1) << "no look before the interval";
  time.Advance(1ms);
  ASSERT_TRUE(files.LooksReach(2));
  ASSERT_TRUE(files.ReloadsReach(1));
  EXPECT_EQ(files.reloads(), 1u);

  // While that reload runs the watch does not look, however the files change.
  files.Change("c");
  time.Advance(1s);
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(files.looks(), 2);
  EXPECT_EQ(files.reloads(), 1u);
  files.EndReload(0);
  ASSERT_TRUE(files.LooksReach(3)) << "the stamp taken anew after the reload";
  time.Advance(200ms);
  ASSERT_TRUE(files.LooksReach(4));
  EXPECT_EQ(files.reloads(), 1u) << "what the reload read is not a change";

  files.Change("d");
  time.Advance(200ms);
  ASSERT_TRUE(files.LooksReach(5));
  ASSERT_TRUE(files.ReloadsReach(2));
  EXPECT_EQ(files.reloads(), 2u);
  watch.Stop();
  files.EndReload(1);  // a reload that ends after the watch stopped does nothing
}

// Off, the watch takes no stamps; a reload that turns it on starts it from what is there then.
TEST(ConfigWatchTest, OffLooksNotAndOnStartsFromWhatIsThere) {
  using namespace std::chrono_literals;
  testing::FakeTime time;
  WatchedFiles files;
  files.SetInterval(std::nullopt);
  ConfigWatch watch(files.Sources(), time);
  watch.Start();
  files.Change("b");
  time.Advance(10s);
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(files.looks(), 0);
  files.SetInterval(100ms);
  time.Advance(1s);  // at most a second until it sees the watch turned on
  ASSERT_TRUE(files.LooksReach(1));
  time.Advance(100ms);
  ASSERT_TRUE(files.LooksReach(2));
  EXPECT_EQ(files.reloads(), 0u) << "a change before the watch was on is not one";
  files.Change("c");
  time.Advance(100ms);
  ASSERT_TRUE(files.LooksReach(3));
  ASSERT_TRUE(files.ReloadsReach(1));
  EXPECT_EQ(files.reloads(), 1u);
}

}  // namespace
}  // namespace mmserve
