#include "common/histogram.h"

#include <algorithm>

namespace mmserve {
namespace {

// The bucket an observation of `ns` nanoseconds falls in.
size_t BucketOf(int64_t ns) {
  const double seconds = static_cast<double>(ns) / 1e9;
  return static_cast<size_t>(
      std::lower_bound(kLatencyBuckets.begin(), kLatencyBuckets.end(), seconds) -
      kLatencyBuckets.begin());
}

}  // namespace

void Histogram::Record(int64_t ns) {
  ns = std::max<int64_t>(ns, 0);
  ++counts[BucketOf(ns)];
  ++count;
  sum_ns += ns;
}

double Histogram::Quantile(double q) const {
  if (count <= 0) return 0;
  const double rank = std::clamp(q, 0.0, 1.0) * static_cast<double>(count);
  double below = 0;  // observations in the buckets before bucket i
  for (size_t i = 0; i < counts.size(); ++i) {
    const auto in = static_cast<double>(counts[i]);
    if (in > 0 && below + in >= rank) {
      if (i == kLatencyBuckets.size()) return kLatencyBuckets.back();
      const double lower = i == 0 ? 0 : kLatencyBuckets[i - 1];
      return lower + (kLatencyBuckets[i] - lower) * ((rank - below) / in);
    }
    below += in;
  }
  return kLatencyBuckets.back();
}

Histogram Histogram::Since(const Histogram& earlier) const {
  Histogram out;
  for (size_t i = 0; i < counts.size(); ++i) {
    out.counts[i] = std::max<int64_t>(counts[i] - earlier.counts[i], 0);
  }
  out.count = std::max<int64_t>(count - earlier.count, 0);
  out.sum_ns = std::max<int64_t>(sum_ns - earlier.sum_ns, 0);
  return out;
}

void Histogram::Add(const Histogram& other) {
  for (size_t i = 0; i < counts.size(); ++i) counts[i] += other.counts[i];
  count += other.count;
  sum_ns += other.sum_ns;
}

void AtomicHistogram::Record(int64_t ns) {
  ns = std::max<int64_t>(ns, 0);
  counts_[BucketOf(ns)].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(ns, std::memory_order_relaxed);
}

Histogram AtomicHistogram::Snapshot() const {
  Histogram out;
  for (size_t i = 0; i < counts_.size(); ++i) {
    out.counts[i] = counts_[i].load(std::memory_order_relaxed);
  }
  out.count = count_.load(std::memory_order_relaxed);
  out.sum_ns = sum_ns_.load(std::memory_order_relaxed);
  return out;
}

}  // namespace mmserve
