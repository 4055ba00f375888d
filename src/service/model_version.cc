#include "service/model_version.h"

#include <algorithm>
#include <iterator>
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
    state_ = VersionState::kOnDemand;
    reason_ = "loads on its first request (load: on_demand)";
  }
}

std::string ModelVersion::VersionName() const {
  return config_.name + " v" + std::to_string(config_.version);
}

void ModelVersion::TransitionLocked(VersionState to, std::string why, std::string_view kind) {
  if (!IsLegalTransition(state_, to)) {
    // A bug, not an input: the lifecycle's callers keep to the machine in the header.
    spdlog::critical("model {}: illegal state transition {} -> {}", VersionName(),
                     VersionStateName(state_), VersionStateName(to));
    assert(false && "illegal ModelVersion state transition");
  }
  const VersionState from = state_;
  state_ = to;
  reason_ = std::move(why);
  changed_.notify_all();
  if (kind.empty()) kind = EventKindOf(from, to);
  if (kind.empty()) return;
  std::string message = reason_;
  if (to == VersionState::kReady) {
    message = "in " + std::to_string(last_load_time_.count() / 1'000'000) + " ms, holds " +
              FormatMib(FootprintLocked());
  }
  Event event{.kind = std::string(kind), .model = config_.name, .version = config_.version,
              .message = std::move(message)};
  if (events_) event = events_->Record(event.kind, event.model, event.version, event.message);
  last_event_ = std::move(event);
}

ModelVersion::Admission ModelVersion::AdmitLocked(Clock::time_point now) {
  const std::string& name = config_.name;
  CountRequestLocked(now);
  const auto park = [] { return Admission{.parked = true}; };
  switch (state_) {
    case VersionState::kReady: return {.serve = UseLocked(now)};
    case VersionState::kHeld:
      return {.rejected = Unavailable(
                  "model '" + VersionName() +
                  "' was unloaded through the repository API; load it with `mmserve load " +
                  name + "` (POST /v2/repository/models/" + name + "/load)")};
    case VersionState::kFailed:
      // An on-demand load just failed and its waiters are not answered yet: join them, so
      // that a request in that window gets the same answer as theirs.
      if (waiting_.empty()) break;
      return park();
    case VersionState::kBackingOff:
      if (now < retry_at_) {
        return {.rejected = Unavailable("model '" + name + "' failed to load: " + reason_ +
                                        " (the next load is tried in " +
                                        std::to_string(Millis(retry_at_ - now)) + " ms)")};
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
      if (unloading_to_ != VersionState::kOnDemand) break;
      return park();
    case VersionState::kUnloaded:
    case VersionState::kLoading: break;
  }
  return {.rejected = Unavailable("model '" + name + "' is " +
                                  std::string(ModelStateName(PublicState(state_))) +
                                  (reason_.empty() ? "" : ": " + reason_))};
}

std::vector<ParkedRequest> ModelVersion::TakeWaiting() {
  MutexLock lock(mu_);
  return std::exchange(waiting_, {});
}

ModelVersion::Waiters ModelVersion::TakeWaitersAfterLoad(bool ran, Clock::time_point retry) {
  MutexLock lock(mu_);
  Waiters w{.requests = std::exchange(waiting_, {})};
  if (ran && state_ == VersionState::kReady) {
    w.end = {.kind = WaitEnd::Kind::kServe, .version = shared_from_this(), .loaded = loaded_};
    in_flight_ += static_cast<int64_t>(w.requests.size());
  } else if (ran && state_ == VersionState::kFailed) {
    w.end = {.kind = WaitEnd::Kind::kFail,
             .error = Unavailable("model '" + name() + "' failed to load: " + reason_)};
    retry_at_ = retry;
    TransitionLocked(VersionState::kBackingOff, reason_);
  }
  return w;
}

bool ModelVersion::DemandLoadGoesAhead(bool accepting) {
  MutexLock lock(mu_);
  if (state_ != VersionState::kLoadingOnDemand) return false;
  if (!retire_by_ && accepting) return true;
  TransitionLocked(VersionState::kOnDemand, "loads on its next request");
  return false;
}

// ---- what the others read ------------------------------------------------------------------

ModelVersion::View ModelVersion::view() const {
  MutexLock lock(mu_);
  return {.state = state_,
          .reason = reason_,
          .unloading_to = unloading_to_,
          .in_flight = in_flight_,
          .retire_by = retire_by_};
}

bool ModelVersion::retired() const {
  MutexLock lock(mu_);
  return retire_by_.has_value();
}

ModelSignature ModelVersion::signature() const {
  MutexLock lock(mu_);
  return signature_;
}

int64_t ModelVersion::Footprint() const {
  MutexLock lock(mu_);
  return FootprintLocked();
}

ModelVersion::Residency ModelVersion::ResidencyAt(Clock::time_point now) const {
  MutexLock lock(mu_);
  return {.held = FootprintLocked(),
          .ready = state_ == VersionState::kReady,
          .in_flight = in_flight_,
          .retired = retire_by_.has_value(),
          .ready_at = ready_at_,
          .last_load_time = last_load_time_,
          .rate = RateLocked(now),
          .last_used = last_used_};
}

std::optional<Clock::time_point> ModelVersion::LatestWaitingDeadline() const {
  MutexLock lock(mu_);
  if (waiting_.empty()) return std::nullopt;
  Clock::time_point latest = Clock::time_point::min();
  for (const auto& p : waiting_) latest = std::max(latest, p.request->deadline);
  return latest;
}

// ---- requests --------------------------------------------------------------------------------

bool ModelVersion::Release(Clock::time_point now) {
  MutexLock lock(mu_);
  last_used_ = now;
  const bool none = --in_flight_ == 0;
  if (none) changed_.notify_all();  // a drain waits for it
  return none;
}

std::shared_ptr<LoadedModel> ModelVersion::Borrow(Clock::time_point now) {
  MutexLock lock(mu_);
  return loaded_ ? UseLocked(now) : nullptr;
}

std::shared_ptr<LoadedModel> ModelVersion::UseLocked(Clock::time_point now) {
  ++in_flight_;  // before the lock goes: an idle unload must see it
  last_used_ = now;
  return loaded_;
}

std::vector<ParkedRequest> ModelVersion::TakeExpired(Clock::time_point steady_now) {
  MutexLock lock(mu_);
  // One pass, whatever the number waiting (erasing each from the middle would be quadratic);
  // both groups keep their arrival order.
  const auto first_expired =
      std::stable_partition(waiting_.begin(), waiting_.end(), [&](const ParkedRequest& p) {
        return p.request->deadline > steady_now;
      });
  std::vector<ParkedRequest> expired(std::make_move_iterator(first_expired),
                                     std::make_move_iterator(waiting_.end()));
  waiting_.erase(first_expired, waiting_.end());
  return expired;
}

std::vector<ParkedRequest> ModelVersion::StopLoadingOnDemand() {
  // One section: no request parks between the take and the end of loading on request.
  MutexLock lock(mu_);
  if (state_ == VersionState::kOnDemand || state_ == VersionState::kLoadingOnDemand ||
      state_ == VersionState::kBackingOff) {
    TransitionLocked(VersionState::kUnloaded, "the server is shutting down");
  }
  return std::exchange(waiting_, {});
}

void ModelVersion::Retire(Clock::time_point by) {
  MutexLock lock(mu_);
  retire_by_ = by;
}

void ModelVersion::MarkUsed(Clock::time_point now) {
  MutexLock lock(mu_);
  last_used_ = now;
}

// ---- loads -----------------------------------------------------------------------------------

void ModelVersion::BeginLoad() {
  MutexLock lock(mu_);
  if (state_ == VersionState::kLoadingOnDemand) {
    reason_.clear();
  } else {
    TransitionLocked(VersionState::kLoading);
  }
}

void ModelVersion::SetProgress(std::shared_ptr<const LoadProgress> progress) {
  MutexLock lock(mu_);
  progress_ = std::move(progress);
}

void ModelVersion::WaitForRoom(std::string why) {
  MutexLock lock(mu_);
  reason_ = std::move(why);
}

void ModelVersion::FailLoad(const Status& error) {
  MutexLock lock(mu_);
  ++loads_;
  TransitionLocked(VersionState::kFailed, std::string(error.message()));
}

void ModelVersion::FinishLoad(std::shared_ptr<LoadedModel> loaded, const LoadFacts& facts) {
  MutexLock lock(mu_);
  ++loads_;
  estimate_ = facts.estimate;
  measured_bytes_ = facts.measured_bytes;
  shed_bytes_ = 0;
  last_load_time_ = facts.took;
  signature_ = loaded->session->signature();
  loaded_ = std::move(loaded);
  ready_at_ = facts.ready_at;
  TransitionLocked(VersionState::kReady);
  last_used_ = facts.now;
}

// ---- room for other loads ----------------------------------------------------------------

std::optional<int64_t> ModelVersion::BeginDrain(std::string why) {
  MutexLock lock(mu_);
  if (state_ != VersionState::kReady) return std::nullopt;
  TransitionLocked(VersionState::kDraining, std::move(why));
  return in_flight_;
}

ModelVersion::DrainEnd ModelVersion::WaitDrained(Clock::time_point until) {
  // Woken by the last request's answer or a state change, not by polling.
  MutexLock lock(mu_);
  changed_.wait_until(lock, until, [&]() REQUIRES(mu_) {
    return state_ != VersionState::kDraining || in_flight_ == 0;
  });
  if (state_ != VersionState::kDraining) return DrainEnd::kChanged;
  return in_flight_ == 0 ? DrainEnd::kDrained : DrainEnd::kTimedOut;
}

bool ModelVersion::EndDrain() {
  MutexLock lock(mu_);
  if (state_ != VersionState::kDraining) return false;  // unloaded meanwhile
  TransitionLocked(VersionState::kReady);
  return !waiting_.empty();
}

std::shared_ptr<LoadedModel> ModelVersion::Current() const {
  MutexLock lock(mu_);
  return loaded_;
}

void ModelVersion::CountShed(const std::shared_ptr<LoadedModel>& from, int64_t bytes) {
  MutexLock lock(mu_);
  if (loaded_ == from) shed_bytes_ += bytes;
}

// ---- unloads ---------------------------------------------------------------------------------

std::shared_ptr<LoadedModel> ModelVersion::BeginUnloadLocked(VersionState to) {
  unloading_to_ = to;
  TransitionLocked(VersionState::kUnloading);
  return std::move(loaded_);
}

std::shared_ptr<LoadedModel> ModelVersion::BeginUnload(VersionState to) {
  MutexLock lock(mu_);
  if (state_ == VersionState::kUnloading) {
    if (to == VersionState::kHeld) unloading_to_ = to;  // an idle unload ends held
    return nullptr;
  }
  if (!loaded_) {  // neither kReady nor kDraining
    if (to == VersionState::kHeld && state_ != to) {
      TransitionLocked(to, "unloaded through the repository API");
    }
    return nullptr;
  }
  return BeginUnloadLocked(to);
}

std::shared_ptr<LoadedModel> ModelVersion::BeginIdleUnload(Clock::time_point now) {
  MutexLock lock(mu_);
  // Past its keep-alive with nothing in flight; requests from now on wait for a new load.
  const auto idle = now - last_used_;
  if (state_ != VersionState::kReady || in_flight_ > 0 || !config_.keep_alive ||
      idle < *config_.keep_alive) {
    return nullptr;
  }
  spdlog::info("model {}: idle for {} ms (keep_alive, version {})", config_.name, Millis(idle),
               config_.version);
  return BeginUnloadLocked(VersionState::kOnDemand);
}

std::shared_ptr<LoadedModel> ModelVersion::BeginEviction() {
  MutexLock lock(mu_);
  // Not loaded (kReady or kDraining) any more, or a request arrived meanwhile: the caller
  // looks again.
  if (!loaded_ || in_flight_ > 0) return nullptr;
  ++evictions_;
  return BeginUnloadLocked(VersionState::kOnDemand);
}

bool ModelVersion::FinishUnload(std::string reason, std::string_view kind) {
  MutexLock lock(mu_);
  const VersionState to = unloading_to_;  // the repository API may have changed it
  if (to == VersionState::kHeld) reason = "unloaded through the repository API";
  else if (retire_by_) reason = "retired: no longer served";
  TransitionLocked(to, std::move(reason), kind);
  // Requests that came while it unloaded wait for the next load (or are routed anew).
  if (waiting_.empty()) return false;
  if (to == VersionState::kOnDemand) TransitionLocked(VersionState::kLoadingOnDemand);
  return true;
}

int64_t ModelVersion::FootprintLocked() const {
  if (!loaded_) return 0;
  const int64_t resident = loaded_->session->resident_bytes();
  if (InWorker(config_.isolation)) return std::max(resident, estimate_.bytes - shed_bytes_);
  if (resident > 0) return resident;
  return measured_bytes_ > 0 ? measured_bytes_ : estimate_.bytes;
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
  MutexLock lock(mu_);
  ModelInfo info{.config = config_,
                 .state = PublicState(state_),
                 .reason = reason_,
                 .estimate = estimate_,
                 .measured_bytes = measured_bytes_,
                 .loads = loads_,
                 .evictions = evictions_,
                 .last_load_time = last_load_time_,
                 .in_flight = in_flight_,
                 .last_used = last_used_,
                 .last_event = last_event_};
  if (progress_) {
    info.load_done_bytes = progress_->done();
    info.load_total_bytes = progress_->total();
  }
  if (loaded_) {
    info.loaded = true;
    info.signature = loaded_->session->signature();
    info.resident_bytes = FootprintLocked();
    info.counters = loaded_->session->counters();
    info.notes = loaded_->session->notes();
    info.histograms = loaded_->session->histograms();
    info.context_length = loaded_->session->context_length();
    info.stats = loaded_->scheduler->stats();
    if (Status health = loaded_->session->health(); info.state == ModelState::kReady && !health.ok()) {
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
