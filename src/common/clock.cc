#include "common/clock.h"

namespace mmserve {
namespace {

class SteadyTime final : public TimeSource {
 public:
  Clock::time_point Now() const override { return Clock::now(); }
};

}  // namespace

const TimeSource& TimeSource::Real() {
  static const SteadyTime kSteady;
  return kSteady;
}

}  // namespace mmserve
