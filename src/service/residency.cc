#include "service/residency.h"

#include <cmath>
#include <thread>

#include "common/logging.h"
#include "common/strings.h"
#include "service/memory_plan.h"

namespace mmserve {

// What a domain's other versions hold, and which to free first.
struct Residency::Scan {
  int64_t used = 0;
  std::vector<std::string> holders;
  std::shared_ptr<ModelVersion> victim;  // unpinned and ready; null: none
  bool victim_busy = false;              // it answers requests: it has to drain first
  Clock::time_point victim_eligible;     // steady clock: when it has been resident long enough
};

Residency::Residency(const ServerConfig& config, const BackendRegistry& backends,
                     const ModelRegistry& registry, const TimeSource& time, EventLog& events)
    : backends_(backends),
      registry_(registry),
      time_(time),
      events_(events),
      global_(config.global) {
  for (const auto& m : config.models) {
    // Budgets only: the estimates are taken at each load (preflight took them before start).
    // A device whose capacity its runtime cannot tell yet (AscendCL before aclInit) gets its
    // budget at its first load, with the runtime up.
    const DeviceMemory memory = MemoryOf(m, backends_);
    budgets_[memory.domain] = memory.total > 0 || global_.memory_pool_mb > 0
                                  ? BudgetFor(memory, global_)
                                  : kBudgetUnknown;
  }
}

std::vector<std::string> Residency::DomainNames() const {
  std::vector<std::string> names;
  for (const auto& [domain, budget] : budgets_) names.push_back(domain);
  return names;
}

int64_t Residency::BudgetOf(const ModelVersion& loading) {
  std::atomic<int64_t>& known = budgets_.at(loading.domain());
  if (known.load() != kBudgetUnknown) return known.load();
  const DeviceMemory memory = MemoryOf(loading.config(), backends_);
  if (memory.total == 0) return 0;  // still unknown: the load itself will say
  const int64_t budget = BudgetFor(memory, global_);
  known.store(budget);
  spdlog::info("memory: device {} budget {} MiB (capacity read at its first load)",
               loading.domain(), budget >> 20);
  return budget;
}

Residency::Step Residency::NextStep(const ModelVersion& loading, int64_t bytes,
                                    bool may_give_way) {
  const int64_t budget = BudgetOf(loading);
  if (budget == 0) return {};
  const auto mib = FormatWholeMib;
  while (true) {
    // Requests waiting for this load may take a busy model's place, or a young one's once it
    // has been resident long enough (no thrash), within their deadlines.
    const auto until = WaitingDeadline(loading);
    Scan scan = ScanRoom(loading, until.has_value());
    if (scan.used + bytes <= budget) return {};
    // Room kept only to be faster (prompt caches) goes before any model does.
    if (ShedCaches(loading, scan.used + bytes - budget) > 0) continue;
    const std::string why = "evicted to make room for " + loading.VersionName() + " (" +
                            mib(bytes) + " needed on device " + loading.domain() + ")";
    const auto now = Clock::now();
    if (scan.victim && !scan.victim_busy && scan.victim_eligible <= now) {
      return {.kind = Step::Kind::kEvict, .victim = scan.victim, .why = why};
    }
    if (scan.victim && until && may_give_way && now < scan.victim_eligible &&
        scan.victim_eligible < *until) {
      // Too recently loaded to go yet: the loads queued behind this one go first meanwhile.
      return {.kind = Step::Kind::kGiveWay,
              .why = "waits for room on device " + loading.domain() + ": " +
                     scan.victim->VersionName() + " may be evicted in " +
                     std::to_string(Millis(scan.victim_eligible - now)) +
                     " ms (its minimum residency)",
              .until = std::min(scan.victim_eligible, now + kLookAgain)};
    }
    Status refused = Unavailable(
        "not enough memory on device " + loading.domain() + ": model '" +
        loading.VersionName() + "' needs " + mib(bytes) + ", " +
        mib(std::max<int64_t>(0, budget - scan.used)) + " of the " + mib(budget) +
        " budget are free, and nothing can be evicted" +
        (scan.holders.empty()
             ? std::string(" (no other model holds any: the model is larger than the budget)")
             : (scan.victim ? " in time" : "") + std::string("; held by ") +
                   Join(scan.holders, ", ")));
    if (scan.victim && until) {
      return {.kind = Step::Kind::kDrain,
              .victim = scan.victim,
              .why = why,
              .eligible = scan.victim_eligible,
              .until = *until,
              .refused = std::move(refused)};
    }
    return {.kind = Step::Kind::kRefuse, .refused = std::move(refused)};
  }
}

Residency::Scan Residency::ScanRoom(const ModelVersion& loading, bool demand) const {
  const auto mib = FormatWholeMib;
  const auto steady_now = Clock::now();
  const auto now = time_.Now();
  Scan scan;
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

int64_t Residency::ShedCaches(const ModelVersion& loading, int64_t needed) {
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
    events_.Record("cache_shed", e->config().name, e->version(), message);
  }
  return shed;
}

std::optional<Clock::time_point> Residency::WaitingDeadline(const ModelVersion& loading) {
  const auto latest = loading.LatestWaitingDeadline();
  if (!latest) return std::nullopt;
  return std::min(*latest, Clock::now() + kMaxDrainWait);
}

Residency::DrainResult Residency::Drain(ModelVersion& victim, Clock::time_point eligible,
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
  return DrainResult::kTooLate;
}

std::vector<DomainUsage> Residency::Domains() const {
  std::vector<DomainUsage> out;
  for (const auto& [domain, budget] : budgets_) {
    const int64_t b = budget.load();
    out.push_back({.domain = domain, .budget = b == kBudgetUnknown ? 0 : b});
  }
  for (const auto& version : registry_.All()) {
    const int64_t held = version->Footprint();
    if (held == 0) continue;
    for (auto& d : out) {
      if (d.domain != version->domain()) continue;
      d.used += held;
      d.holders.push_back({version->VersionName(), held});
    }
  }
  return out;
}

}  // namespace mmserve
