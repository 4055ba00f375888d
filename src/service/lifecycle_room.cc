// Lifecycle's budget side: making room for a load (which versions to free, draining busy ones).
#include "service/lifecycle.h"

#include <cmath>
#include <thread>

#include "common/logging.h"
#include "common/strings.h"
#include "service/memory_plan.h"

namespace mmserve {

// What a domain's other versions hold, and which to free first.
struct Lifecycle::RoomScan {
  int64_t used = 0;
  std::vector<std::string> holders;
  std::shared_ptr<ModelVersion> victim;  // unpinned and ready; null: none
  bool victim_busy = false;              // it answers requests: it has to drain first
  Clock::time_point victim_eligible;     // steady clock: when it has been resident long enough
};

Lifecycle::RoomScan Lifecycle::ScanRoom(const ModelVersion& loading, bool demand) const {
  const auto mib = FormatWholeMib;
  const auto steady_now = Clock::now();
  const auto now = time_.Now();
  RoomScan scan;
  // Smaller goes first. Retired versions, then lower priority (a larger level). For a load
  // nobody waits for, only idle ones, least recently used first. For a demand load, also busy
  // ones, and by what losing each costs: idle before busy, then the least reload time x request
  // rate, then least recently used; the one chosen goes once resident for its minimum.
  using Key = std::tuple<int, bool, double, Clock::time_point>;
  std::optional<Key> best;
  for (auto& e : registry_.All()) {
    if (e.get() == &loading || e->domain() != loading.domain()) continue;
    const ModelVersion::Residency r = e->ResidencyAt(now);
    if (r.held == 0) continue;
    scan.used += r.held;
    const bool busy = r.in_flight > 0 || !r.ready;
    const bool pinned = e->config().pinned;
    scan.holders.push_back(e->VersionName() + " " + mib(r.held) +
                           (pinned ? " (pinned)" : busy ? " (in use)" : " (idle)"));
    if (pinned || !r.ready || (busy && !demand)) continue;
    const int priority = r.retired ? kMaxPriorityLevel + 1 : e->config().priority;
    const auto eligible =
        r.ready_at + std::max<Clock::duration>(kMinResidency, 2 * r.last_load_time);
    // Seconds of reloading per second of its traffic, in tenths: closer costs are a tie, which
    // recency decides.
    const double cost =
        std::round(10 * r.rate * std::chrono::duration<double>(r.last_load_time).count());
    const Key key = demand ? Key{-priority, busy, cost, r.last_used}
                           : Key{-priority, false, 0, r.last_used};
    if (!best || key < *best) {
      best = key;
      scan.victim = e;
      scan.victim_busy = busy;
      scan.victim_eligible = demand ? eligible : steady_now;
    }
  }
  return scan;
}

Status Lifecycle::MakeRoom(const ModelVersion& loading, int64_t bytes,
                           std::optional<GiveWay>* give_way) {
  std::atomic<int64_t>& known = budgets_.at(loading.domain());
  int64_t budget = known.load();
  if (budget == kBudgetUnknown) {
    const DeviceMemory memory = MemoryOf(loading.config(), backends_);
    if (memory.total == 0) return Status::Ok();  // still unknown: the load itself will say
    budget = BudgetFor(memory, global_);
    known.store(budget);
    spdlog::info("memory: device {} budget {} MiB (capacity read at its first load)",
                 loading.domain(), budget >> 20);
  }
  const auto mib = FormatWholeMib;
  while (true) {
    // Requests waiting for this load may take a busy model's place, or a young one's once it
    // has been resident long enough (no thrash), within their deadlines.
    const auto until = WaitingDeadline(loading);
    RoomScan scan = ScanRoom(loading, until.has_value());
    if (scan.used + bytes <= budget) return Status::Ok();
    // Room kept only to be faster (prompt caches) goes before any model does.
    if (ShedCaches(loading, scan.used + bytes - budget) > 0) continue;
    const std::string why = "evicted to make room for " + loading.VersionName() + " (" +
                            mib(bytes) + " needed on device " + loading.domain() + ")";
    if (scan.victim && !scan.victim_busy && scan.victim_eligible <= Clock::now()) {
      spdlog::info("model {}: {}", scan.victim->VersionName(), why);
      Evict(*scan.victim, why + "; loads on its next request");
      continue;
    }
    if (scan.victim && until && give_way && Clock::now() < scan.victim_eligible &&
        scan.victim_eligible < *until) {
      // Too recently loaded to go yet: the loads queued behind this one go first meanwhile.
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          scan.victim_eligible - Clock::now());
      *give_way = GiveWay{
          .until = std::min(scan.victim_eligible, Clock::now() + kLookAgain),
          .why = "waits for room on device " + loading.domain() + ": " +
                 scan.victim->VersionName() + " may be evicted in " +
                 std::to_string(left.count()) + " ms (its minimum residency)"};
      return Status::Ok();
    }
    if (scan.victim && until) {
      const DrainResult drained =
          Drain(*scan.victim, scan.victim_eligible, *until, loading.VersionName());
      if (drained == DrainResult::kDrained) {
        spdlog::info("model {}: {}", scan.victim->VersionName(), why);
        if (!Evict(*scan.victim, why + "; loads on its next request")) Undrain(*scan.victim);
      }
      if (drained != DrainResult::kTooLate) continue;
    }
    return Unavailable("not enough memory on device " + loading.domain() + ": model '" +
                       loading.VersionName() + "' needs " + mib(bytes) + ", " +
                       mib(std::max<int64_t>(0, budget - scan.used)) + " of the " + mib(budget) +
                       " budget are free, and nothing can be evicted" +
                       (scan.holders.empty()
                            ? std::string(" (no other model holds any: the model is larger "
                                          "than the budget)")
                            : (scan.victim ? " in time" : "") + std::string("; held by ") +
                                  Join(scan.holders, ", ")));
  }
}

int64_t Lifecycle::ShedCaches(const ModelVersion& loading, int64_t needed) {
  int64_t shed = 0;
  for (auto& e : registry_.All()) {
    if (shed >= needed) break;
    if (e.get() == &loading || e->domain() != loading.domain()) continue;
    std::shared_ptr<LoadedModel> loaded = e->Current();
    if (!loaded) continue;
    const int64_t given = loaded->session->ShedCache(needed - shed);  // no lock: a round trip
    if (given <= 0) continue;
    shed += given;
    e->CountShed(loaded, given);
    const std::string message = "gave " + FormatWholeMib(given) + " of its cache's room to " +
                                loading.VersionName() + " (the cache stays smaller until it loads "
                                "again)";
    spdlog::info("model {}: {}", e->VersionName(), message);
    events_->Record("cache_shed", e->config().name, e->version(), message);
  }
  return shed;
}

std::optional<Clock::time_point> Lifecycle::WaitingDeadline(const ModelVersion& loading) {
  const auto latest = loading.LatestWaitingDeadline();
  if (!latest) return std::nullopt;
  return std::min(*latest, Clock::now() + kMaxDrainWait);
}

Lifecycle::DrainResult Lifecycle::Drain(ModelVersion& victim, Clock::time_point eligible,
                                        Clock::time_point until, const std::string& for_whom) {
  using namespace std::chrono_literals;
  // Too recently loaded: wait until it may go (or something else goes idle meanwhile).
  if (Clock::now() < eligible) {
    if (eligible >= until) return DrainResult::kTooLate;
    std::this_thread::sleep_until(std::min(eligible, Clock::now() + 20ms));
    return DrainResult::kLookAgain;
  }
  const std::optional<int64_t> in_flight = victim.BeginDrain(
      "making room for " + for_whom + ": new requests wait for its next load");
  if (!in_flight) return DrainResult::kLookAgain;  // not ready any more
  if (*in_flight > 0) {
    spdlog::info("model {}: draining {} request{} in flight to make room for {}",
                 victim.VersionName(), *in_flight, *in_flight == 1 ? "" : "s", for_whom);
  }
  switch (victim.WaitDrained(until)) {
    case ModelVersion::DrainEnd::kChanged: return DrainResult::kLookAgain;  // unloaded
    case ModelVersion::DrainEnd::kDrained: return DrainResult::kDrained;    // Evict unloads it
    case ModelVersion::DrainEnd::kTimedOut: break;
  }
  spdlog::info("model {}: still busy at the deadline of {}'s requests; it keeps serving",
               victim.VersionName(), for_whom);
  Undrain(victim);
  return DrainResult::kTooLate;
}

void Lifecycle::Undrain(ModelVersion& victim) {
  const bool held_back = victim.EndDrain();
  // The requests it held back go through the routing again (LoadForWaiting on a ready version).
  if (held_back) QueueDemandLoad(victim.shared_from_this());
}

}  // namespace mmserve
