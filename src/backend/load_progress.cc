#include "backend/load_progress.h"

#include <algorithm>
#include <cmath>

#include "common/logging.h"

namespace mmserve {

LoadProgress::LoadProgress(std::string model, int64_t total_bytes, const TimeSource& time)
    : model_(std::move(model)),
      total_(std::max<int64_t>(total_bytes, 0)),
      time_(time),
      start_(time.Now()),
      last_log_(start_) {}

void LoadProgress::Update(double fraction) {
  if (!std::isfinite(fraction)) return;
  fraction = std::clamp(fraction, 0.0, 1.0);
  const auto done = static_cast<int64_t>(fraction * static_cast<double>(total_));
  done_.store(std::max(done, this->done()), std::memory_order_relaxed);
  if (total_ < kLogBytes) return;
  const auto now = time_.Now();
  if (now - last_log_ < std::chrono::seconds(1)) return;
  last_log_ = now;
  Log("loading");
}

void LoadProgress::Finish() {
  if (finished_) return;
  finished_ = true;
  done_.store(total_, std::memory_order_relaxed);
  if (total_ >= kLogBytes) Log("read");
}

void LoadProgress::Log(const char* what) const {
  const double seconds = std::chrono::duration<double>(time_.Now() - start_).count();
  const double mib = static_cast<double>(done()) / (1 << 20);
  const double total_mib = static_cast<double>(total_) / (1 << 20);
  const double rate = seconds > 0 ? mib / seconds : 0;
  spdlog::info("model {}: {} {:.0f} of {:.0f} MiB ({:.0f}%) in {:.1f} s, {:.0f} MiB/s", model_,
               what, mib, total_mib, 100.0 * mib / total_mib, seconds, rate);
}

}  // namespace mmserve
