#include "backend/load_progress.h"

#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

#include "common/logging.h"
#include "testing/fake_time.h"

namespace mmserve {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Captures what the default logger writes while it lives.
class CapturedLog {
 public:
  CapturedLog() : sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(out_)) {
    sink_->set_pattern("%v");
    spdlog::default_logger()->sinks().push_back(sink_);
  }
  ~CapturedLog() { spdlog::default_logger()->sinks().pop_back(); }
  std::string Take() {
    std::string text = out_.str();
    out_.str("");
    return text;
  }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
};

TEST(LoadProgressTest, ALargeFileLogsOnceASecondWithBytesShareAndRate) {
  testing::FakeTime time;
  CapturedLog log;
  LoadProgress progress("big v1", int64_t{400} << 20, time);
  progress.Update(0.1);
  EXPECT_THAT(log.Take(), IsEmpty());  // not a second yet
  EXPECT_EQ(progress.done(), int64_t{40} << 20);
  EXPECT_EQ(progress.total(), int64_t{400} << 20);
  time.Advance(std::chrono::milliseconds(1000));
  progress.Update(0.25);
  EXPECT_THAT(log.Take(), HasSubstr("model big v1: loading 100 of 400 MiB (25%) in 1.0 s, 100 MiB/s"));
  time.Advance(std::chrono::milliseconds(500));
  progress.Update(0.5);
  EXPECT_THAT(log.Take(), IsEmpty());  // half a second since the last line
  time.Advance(std::chrono::milliseconds(500));
  progress.Finish();
  EXPECT_THAT(log.Take(), HasSubstr("model big v1: read 400 of 400 MiB (100%) in 2.0 s, 200 MiB/s"));
  progress.Finish();
  EXPECT_THAT(log.Take(), IsEmpty());  // once
  EXPECT_EQ(progress.done(), progress.total());
}

TEST(LoadProgressTest, ASmallFileIsQuietAndBadFractionsAreIgnored) {
  testing::FakeTime time;
  CapturedLog log;
  LoadProgress progress("small v1", LoadProgress::kLogBytes - 1, time);
  time.Advance(std::chrono::seconds(5));
  progress.Update(0.5);
  progress.Update(std::numeric_limits<double>::quiet_NaN());
  progress.Update(-3);
  EXPECT_EQ(progress.done(), (LoadProgress::kLogBytes - 1) / 2);  // never goes back
  progress.Update(7);
  EXPECT_EQ(progress.done(), progress.total());  // clamped to the file
  progress.Finish();
  EXPECT_THAT(log.Take(), IsEmpty());
  LoadProgress unknown("none v1", 0, time);
  unknown.Update(0.5);
  unknown.Finish();
  EXPECT_EQ(unknown.done(), 0);
}

}  // namespace
}  // namespace mmserve
