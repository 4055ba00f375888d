// Residency: each memory domain's budget, who holds how much of it, and what to free so that a
// load fits — the lifecycle's budget side. It decides and drains; the lifecycle evicts, loads
// and routes the requests a drain held back.
//
// Before a version loads, NextStep takes back the room other versions reserve for their caches
// (a generator's prompt cache), then picks an unpinned version of its domain to free — retired
// first, then lower priority. A load nobody waits for (start-up, the repository API) takes only
// idle ones, least recently used first. A load requests wait for also takes busy ones, by what
// losing each costs: idle before busy, then the least reload time x request rate, then least
// recently used; the one chosen goes once it has been resident for twice its load time, and at
// least kMinResidency (no thrash). Until then the load gives way (kGiveWay), and the loads
// queued behind it run. A busy one is drained (kDrain) — its new requests wait for its next
// load, those in flight finish — then evicted, all within the waiting requests' deadlines. The
// load is refused with who holds what when nothing more can go.
//
// Thread-safety: NextStep and Drain run on the loading thread (loads are one at a time);
// Domains() and HasBudget() on any thread.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend_registry.h"
#include "common/event_log.h"
#include "service/model_registry.h"

namespace mmserve {

// A memory domain's budget and who holds what of it now (the status page's bars).
struct DomainUsage {
  std::string domain;  // "host", "cuda:0", "npu:0"
  int64_t budget = 0;  // 0: not known yet (read at the domain's first load)
  int64_t used = 0;    // Σ held
  std::vector<std::pair<std::string, int64_t>> holders;  // "embedder v1", bytes
};

class Residency {
 public:
  // Budgets for the domains of `config`'s models. Not owned; outlive this.
  Residency(const ServerConfig& config, const BackendRegistry& backends,
            const ModelRegistry& registry, const TimeSource& time, EventLog& events);

  // What to do next so that `loading` can load `bytes` more; the caller does it and asks again.
  struct Step {
    enum class Kind { kFits, kEvict, kDrain, kGiveWay, kRefuse };
    Kind kind = Kind::kFits;
    std::shared_ptr<ModelVersion> victim;  // kEvict, kDrain: whom to free
    // kEvict, kDrain: why it is evicted; kGiveWay: what the load waits for (its reason).
    std::string why;
    Clock::time_point eligible;  // kDrain: when the victim may go (steady clock)
    Clock::time_point until;     // kDrain: the waiting requests' deadline; kGiveWay: look again
    Status refused;              // kRefuse; kDrain: the answer when the drain comes too late
  };
  // `may_give_way`: a load its requests queued, which may let the loads behind it go first.
  // Sheds caches itself (and records it) before it names a victim.
  Step NextStep(const ModelVersion& loading, int64_t bytes, bool may_give_way);

  enum class DrainResult { kDrained, kLookAgain, kTooLate };
  // Drains `victim` for `for_whom`'s load: kDrained once nothing of it is in flight (it stays
  // draining until evicted), kLookAgain after waiting a little for it to be `eligible` (or when
  // it changed state), kTooLate when that or the drain would pass `until` (it may still be
  // draining: the caller ends the drain).
  DrainResult Drain(ModelVersion& victim, Clock::time_point eligible, Clock::time_point until,
                    const std::string& for_whom);

  // Every memory domain of the models served at start, with what its loaded versions hold.
  std::vector<DomainUsage> Domains() const;
  bool HasBudget(const std::string& domain) const { return budgets_.count(domain) > 0; }
  // The memory domains of the models served at start (fixed).
  std::vector<std::string> DomainNames() const;

 private:
  struct Scan;
  static constexpr auto kMinResidency = std::chrono::seconds(1);
  static constexpr auto kMaxDrainWait = std::chrono::seconds(60);
  // How long a load that gave way waits at most before it looks again (a victim may go idle).
  static constexpr auto kLookAgain = std::chrono::milliseconds(100);
  static constexpr int64_t kBudgetUnknown = -1;

  // The domain's budget, read now if the runtime could not tell it at start; 0: still unknown.
  int64_t BudgetOf(const ModelVersion& loading);
  // What the other versions of `loading`'s domain hold, and which to free first; `demand`:
  // requests wait for the load.
  Scan ScanRoom(const ModelVersion& loading, bool demand) const;
  // Asks the other loaded versions of `loading`'s domain to give back room their caches
  // reserve, until `needed` bytes are free or none has more; returns how much they gave.
  int64_t ShedCaches(const ModelVersion& loading, int64_t needed);
  // The latest deadline of the requests waiting for `loading` (at most kMaxDrainWait away);
  // none when no request waits.
  static std::optional<Clock::time_point> WaitingDeadline(const ModelVersion& loading);

  const BackendRegistry& backends_;  // not owned
  const ModelRegistry& registry_;    // not owned
  const TimeSource& time_;           // not owned: recency and request rates are read on it
  EventLog& events_;                 // not owned
  const GlobalConfig global_;        // as at start: budgets do not change live
  // Per memory domain; fixed after construction, except that a kBudgetUnknown (a capacity the
  // runtime could not tell before it was up) is read at the domain's first load (on the
  // loading thread, one at a time).
  std::map<std::string, std::atomic<int64_t>> budgets_;  // read by Domains() on any thread
};

}  // namespace mmserve
