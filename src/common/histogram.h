// Latency histograms with one fixed set of buckets, for /metrics (Prometheus `_bucket` series)
// and for the status page's per-minute quantiles (the difference of two snapshots).
//
// One bucket set serves every latency mmserve measures: half a millisecond (an identity request,
// one generated token on a small model) to a minute (a long generation). Prometheus can only
// aggregate histograms whose buckets match, so every model and every family shares them.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

namespace mmserve {

// Upper bounds in seconds, ascending; +Inf follows the last.
inline constexpr std::array<double, 16> kLatencyBuckets = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
    0.25,   0.5,   1,      2.5,   5,    10,    30,    60};

// A histogram's values: counts[i] observations in bucket i alone (not cumulative; the last is
// +Inf), their number and their sum. A plain value: the owner guards it.
struct Histogram {
  std::array<int64_t, kLatencyBuckets.size() + 1> counts{};
  int64_t count = 0;
  int64_t sum_ns = 0;

  // Adds one observation of `ns` nanoseconds (negative counts as 0).
  void Record(int64_t ns);
  // The smallest bucket bound in seconds under which at least `q` (0..1) of the observations
  // lie, interpolated linearly inside the bucket, as Prometheus's histogram_quantile does; 0
  // when empty; the last finite bound when the quantile falls in +Inf.
  double Quantile(double q) const;
  // This histogram less an earlier snapshot of the same one (the observations in between).
  Histogram Since(const Histogram& earlier) const;
  // Adds another's observations to this one (a model version's loads, summed).
  void Add(const Histogram& other);
};

// The same for recording from many threads at once without a lock.
class AtomicHistogram {
 public:
  void Record(int64_t ns);
  Histogram Snapshot() const;

 private:
  std::array<std::atomic<int64_t>, kLatencyBuckets.size() + 1> counts_{};
  std::atomic<int64_t> count_{0};
  std::atomic<int64_t> sum_ns_{0};
};

}  // namespace mmserve
