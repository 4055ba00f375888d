#include "service/model_version.h"

#include <algorithm>
#include <utility>

#include <cassert>
#include <cmath>

#include "common/logging.h"
#include "common/strings.h"

namespace mmserve {

std::string_view ModelStateName(ModelState state) {
  switch (state) {
    case ModelState::kNotLoaded: return "UNLOADED";
    case ModelState::kLoading: return "LOADING";
    case ModelState::kReady: return "READY";
    case ModelState::kUnavailable: return "UNAVAILABLE";
    case ModelState::kFailed: return "FAILED";
    case ModelState::kUnloading: return "UNLOADING";
  }
  return "UNKNOWN";
}

std::string_view VersionStateName(VersionState state) {
  switch (state) {
    case VersionState::kUnloaded: return "unloaded";
    case VersionState::kOnDemand: return "on-demand";
    case VersionState::kLoading: return "loading";
    case VersionState::kLoadingOnDemand: return "loading-on-demand";
    case VersionState::kReady: return "ready";
    case VersionState::kDraining: return "draining";
    case VersionState::kFailed: return "failed";
    case VersionState::kBackingOff: return "backing-off";
    case VersionState::kUnloading: return "unloading";
    case VersionState::kHeld: return "held";
  }
  return "unknown";
}

ModelState PublicState(VersionState state) {
  switch (state) {
    case VersionState::kUnloaded:
    case VersionState::kOnDemand: return ModelState::kNotLoaded;
    case VersionState::kLoading:
    case VersionState::kLoadingOnDemand: return ModelState::kLoading;
    case VersionState::kReady:
    case VersionState::kDraining: return ModelState::kReady;  // it still serves what it holds
    case VersionState::kUnloading: return ModelState::kUnloading;
    case VersionState::kFailed:
    case VersionState::kBackingOff:
    case VersionState::kHeld: return ModelState::kUnavailable;
  }
  return ModelState::kUnavailable;
}

bool IsLegalTransition(VersionState from, VersionState to) {
  using S = VersionState;
  switch (from) {
    case S::kUnloaded: return to == S::kLoading || to == S::kHeld;
    case S::kOnDemand:
      return to == S::kLoadingOnDemand || to == S::kLoading || to == S::kHeld ||
             to == S::kUnloaded;
    case S::kLoading: return to == S::kReady || to == S::kFailed;
    // Queued and not started yet, a load its requests wanted may be called off.
    case S::kLoadingOnDemand:
      return to == S::kReady || to == S::kFailed || to == S::kOnDemand || to == S::kHeld ||
             to == S::kUnloaded;
    case S::kReady: return to == S::kUnloading || to == S::kDraining;
    case S::kDraining: return to == S::kUnloading || to == S::kReady;
    case S::kFailed: return to == S::kLoading || to == S::kBackingOff || to == S::kHeld;
    case S::kBackingOff:
      return to == S::kLoadingOnDemand || to == S::kLoading || to == S::kHeld ||
             to == S::kUnloaded;
    case S::kUnloading: return to == S::kUnloaded || to == S::kOnDemand || to == S::kHeld;
    case S::kHeld: return to == S::kLoading;
  }
  return false;
}

namespace {

// The event a state change makes, "" for none (the start of an unload: its end says why).
std::string_view EventKindOf(VersionState from, VersionState to) {
  switch (to) {
    case VersionState::kLoading:
    case VersionState::kLoadingOnDemand: return "loading";
    case VersionState::kReady: return from == VersionState::kDraining ? "" : "loaded";
    case VersionState::kDraining: return "";  // the lifecycle logs it; an eviction may follow
    case VersionState::kFailed: return "load_failed";
    case VersionState::kBackingOff: return "";  // the failure was the event
    case VersionState::kUnloading: return "";
    case VersionState::kHeld: return from == VersionState::kUnloading ? "unloaded" : "held";
    case VersionState::kUnloaded:
    case VersionState::kOnDemand: return from == VersionState::kUnloading ? "unloaded" : "";
  }
  return "";
}

}  // namespace

ModelVersion::ModelVersion(ModelConfig config, std::string domain,
                           std::shared_ptr<EventLog> events)
    : config_(std::move(config)),
      domain_(std::move(domain)),
      events_(std::move(events)),
      levels_(ModelScheduler::Levels(config_.queue, config_.timeout)) {
  if (config_.load == LoadMode::kOnDemand) {
    state = VersionState::kOnDemand;
    reason = "loads on its first request (load: on_demand)";
  }
}

std::string ModelVersion::VersionName() const {
  return config_.name + " v" + std::to_string(config_.version);
}

void ModelVersion::TransitionLocked(VersionState to, std::string why, std::string_view kind) {
  if (!IsLegalTransition(state, to)) {
    // A bug, not an input: the lifecycle's callers keep to the machine in the header.
    spdlog::critical("model {}: illegal state transition {} -> {}", VersionName(),
                     VersionStateName(state), VersionStateName(to));
    assert(false && "illegal ModelVersion state transition");
  }
  const VersionState from = state;
  state = to;
  reason = std::move(why);
  changed.notify_all();
  if (kind.empty()) kind = EventKindOf(from, to);
  if (kind.empty()) return;
  std::string message = reason;
  if (to == VersionState::kReady) {
    message = "in " + std::to_string(last_load_time.count() / 1'000'000) + " ms, holds " +
              FormatMib(FootprintLocked());
  }
  Event event{.kind = std::string(kind), .model = config_.name, .version = config_.version,
              .message = std::move(message)};
  if (events_) event = events_->Record(event.kind, event.model, event.version, event.message);
  last_event = std::move(event);
}

ModelVersion::Admission ModelVersion::Admit(std::unique_ptr<InferRequest>& request,
                                            Clock::time_point now) {
  MutexLock lock(mu);
  const std::string& name = config_.name;
  CountRequestLocked(now);
  const auto park = [&]() REQUIRES(mu) {
    waiting.push_back(std::move(request));
    return Admission{};
  };
  switch (state) {
    case VersionState::kReady:
      ++in_flight;  // before the lock goes: an idle unload must see it
      last_used = now;
      return {.serve = loaded};
    case VersionState::kHeld:
      return {.rejected = Unavailable(
                  "model '" + VersionName() +
                  "' was unloaded through the repository API; load it with `mmserve load " +
                  name + "` (POST /v2/repository/models/" + name + "/load)")};
    case VersionState::kFailed:
      // An on-demand load just failed and its waiters are not answered yet: join them, so
      // that a request in that window gets the same answer as theirs.
      if (waiting.empty()) break;
      return park();
    case VersionState::kBackingOff:
      if (now < retry_at) {
        return {.rejected = Unavailable("model '" + name + "' failed to load: " + reason +
                                        " (the next load is tried in " +
                                        std::to_string(Millis(retry_at - now)) + " ms)")};
      }
      [[fallthrough]];
    case VersionState::kOnDemand: {
      // Single flight: the first request queues the load, the others wait for it.
      TransitionLocked(VersionState::kLoadingOnDemand);
      Admission first = park();
      first.start_load = true;
      return first;
    }
    case VersionState::kLoadingOnDemand: return park();
    case VersionState::kDraining: return park();  // emptied for another load: wait for its next
    case VersionState::kUnloading:
      // Idle or evicted: requests wait for the load that follows.
      if (unloading_to != VersionState::kOnDemand) break;
      return park();
    case VersionState::kUnloaded:
    case VersionState::kLoading: break;
  }
  return {.rejected = Unavailable("model '" + name + "' is " +
                                  std::string(ModelStateName(PublicState(state))) +
                                  (reason.empty() ? "" : ": " + reason))};
}

std::vector<std::unique_ptr<InferRequest>> ModelVersion::TakeWaiting() {
  MutexLock lock(mu);
  return std::exchange(waiting, {});
}

ModelVersion::Waiters ModelVersion::TakeWaitersAfterLoad(bool ran, Clock::time_point retry) {
  MutexLock lock(mu);
  Waiters w{.requests = std::exchange(waiting, {})};
  if (ran && state == VersionState::kReady) {
    w.serve = loaded;
    in_flight += static_cast<int64_t>(w.requests.size());
  } else if (ran && state == VersionState::kFailed) {
    w.failed = Unavailable("model '" + name() + "' failed to load: " + reason);
    retry_at = retry;
    TransitionLocked(VersionState::kBackingOff, reason);
  }
  return w;
}

bool ModelVersion::DemandLoadGoesAhead(bool accepting) {
  MutexLock lock(mu);
  if (state != VersionState::kLoadingOnDemand) return false;
  if (!retire_by && accepting) return true;
  TransitionLocked(VersionState::kOnDemand, "loads on its next request");
  return false;
}

int64_t ModelVersion::FootprintLocked() const {
  if (!loaded) return 0;
  const int64_t resident = loaded->session->resident_bytes();
  if (InWorker(config_.isolation)) return std::max(resident, estimate.bytes - shed_bytes);
  if (resident > 0) return resident;
  return measured_bytes > 0 ? measured_bytes : estimate.bytes;
}

void ModelVersion::CountRequestLocked(Clock::time_point now) {
  rate_ = RateLocked(now) + 1.0 / std::chrono::duration<double>(kRateWindow).count();
  rate_at_ = now;
}

double ModelVersion::RateLocked(Clock::time_point now) const {
  const double age = std::chrono::duration<double>(now - rate_at_).count();
  const double window = std::chrono::duration<double>(kRateWindow).count();
  return age <= 0 ? rate_ : rate_ * std::exp(-age / window);
}

ModelInfo ModelVersion::Snapshot() const {
  MutexLock lock(mu);
  ModelInfo info{.config = config_,
                 .state = PublicState(state),
                 .reason = reason,
                 .estimate = estimate,
                 .measured_bytes = measured_bytes,
                 .loads = loads,
                 .evictions = evictions,
                 .last_load_time = last_load_time,
                 .in_flight = in_flight,
                 .last_used = last_used,
                 .last_event = last_event};
  if (progress) {
    info.load_done_bytes = progress->done();
    info.load_total_bytes = progress->total();
  }
  if (loaded) {
    info.loaded = true;
    info.signature = loaded->session->signature();
    info.resident_bytes = FootprintLocked();
    info.counters = loaded->session->counters();
    info.notes = loaded->session->notes();
    info.histograms = loaded->session->histograms();
    info.context_length = loaded->session->context_length();
    info.stats = loaded->scheduler->stats();
    if (Status health = loaded->session->health(); info.state == ModelState::kReady && !health.ok()) {
      info.state = ModelState::kFailed;
      info.reason = std::string(health.message());
    } else if (info.state == ModelState::kReady &&
               info.stats->breaker != CircuitBreaker::State::kClosed) {
      info.state = ModelState::kUnavailable;
      info.reason = "circuit breaker " + std::string(BreakerStateName(info.stats->breaker)) +
                    ": " + info.stats->breaker_reason;
    }
  }
  MutexLock carried_lock(carried_mu_);
  if (carried_) {
    if (!info.stats) info.stats = SchedulerStats{};
    AddCounts(*info.stats, carried_->stats);
    AddSessionCounts(info.counters, info.histograms, carried_->counters, carried_->histograms);
  }
  info.last_minute = LastMinute(info);
  return info;
}

ModelVersion::MinuteSample ModelVersion::SampleOf(const ModelInfo& info, Clock::time_point at) {
  MinuteSample sample{.at = at};
  if (info.stats) {
    sample.requests = info.stats->request_latency;
    sample.errors = info.stats->failure + info.stats->expired + info.stats->rejected;
  }
  if (auto it = info.counters.find("generated_tokens"); it != info.counters.end()) {
    sample.generated = it->second;
  }
  return sample;
}

std::optional<MinuteFigures> ModelVersion::LastMinute(const ModelInfo& now_info) const {
  const MinuteSample now = SampleOf(now_info, Clock::now());
  MinuteSample base;
  {
    MutexLock lock(minute_mu_);
    if (minute_.empty()) return std::nullopt;
    base = minute_.front();
  }
  const double seconds = std::chrono::duration<double>(now.at - base.at).count();
  if (seconds <= 0) return std::nullopt;
  const Histogram window = now.requests.Since(base.requests);
  return MinuteFigures{.seconds = seconds,
                       .requests = window.count,
                       .errors = std::max<int64_t>(0, now.errors - base.errors),
                       .p50 = window.Quantile(0.5),
                       .p99 = window.Quantile(0.99),
                       .generated_tokens = std::max<int64_t>(0, now.generated - base.generated)};
}

void ModelVersion::SampleMinute() {
  const auto now = Clock::now();
  {
    MutexLock lock(minute_mu_);
    if (!minute_.empty() && now - minute_.back().at < kSampleEvery) return;
  }
  const MinuteSample sample = SampleOf(Snapshot(), now);
  MutexLock lock(minute_mu_);
  minute_.push_back(sample);
  // Keep the newest sample at least a minute old: the window's base.
  while (minute_.size() > 1 && now - minute_[1].at >= std::chrono::seconds(60)) {
    minute_.pop_front();
  }
}

void ModelVersion::CarryRetired(const SchedulerStats& stats,
                                const std::map<std::string, int64_t>& counters,
                                const std::map<std::string, Histogram>& histograms) {
  MutexLock lock(carried_mu_);
  if (!carried_) carried_.emplace();
  AddCounts(carried_->stats, stats);
  AddSessionCounts(carried_->counters, carried_->histograms, counters, histograms);
}

}  // namespace mmserve
