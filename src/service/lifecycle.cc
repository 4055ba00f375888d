#include "service/lifecycle.h"

#include <malloc.h>

#include <cmath>

#include "backend/process/process_session.h"
#include "backend/vision/vision_session.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/strings.h"
#include "service/memory_plan.h"

namespace mmserve {

namespace {

// Bytes the allocator has handed out and not taken back (heap arenas plus mmapped blocks).
// Unlike RSS it counts buffers not yet touched and ignores memory recycled from earlier frees,
// so its growth over a load is what the load reserved.
int64_t HeapBytesInUse() {
  const struct mallinfo2 info = ::mallinfo2();
  return static_cast<int64_t>(info.uordblks + info.hblkhd);
}

// Where a version's scheduler and worker supervisor report what happened to it: the event log.
std::function<void(std::string, std::string)> EventSinkFor(const ModelVersion& version) {
  return [events = version.events(), name = version.config().name,
          v = version.config().version](std::string kind, std::string message) {
    if (events) events->Record(std::move(kind), name, v, std::move(message));
  };
}

// The scheduler's settings for a freshly loaded session of `m`.
ModelScheduler::Options SchedulerOptions(const ModelConfig& m, const Session& session,
                                         ModelVersion& version, PriorityGate* gate) {
  // The model's own gears (compiled batch sizes) unless the config names tiers; without a
  // max_batch in the file, batches grow to the largest gear.
  std::vector<int> tiers = m.batch_tiers.empty() ? session.batch_tiers() : m.batch_tiers;
  int max_batch = m.max_batch;
  if (m.batch_tiers.empty() && !tiers.empty() && !m.max_batch_set) max_batch = tiers.back();
  if (!tiers.empty()) max_batch = std::min(max_batch, tiers.back());
  // dynamic_batch: false — no batch beyond the one the model was compiled for.
  if (m.dynamic_batch == false) max_batch = std::min(max_batch, m.batch_size);
  return {.model = m.name,
          .version = m.version,
          .thread_num = m.thread_num,
          .max_batch = max_batch,
          .batch_tiers = std::move(tiers),
          .max_queue_delay = m.max_queue_delay,
          .hold_partial_batches = session.executions_share_device(),
          .preserve_ordering = m.preserve_ordering,
          .default_priority = m.priority,
          .levels = version.levels(),
          .breaker = m.breaker,
          .watchdog_margin = m.watchdog_margin,
          .cpu_affinity = m.cpu_affinity,
          .nice = m.nice,
          .gate = gate,
          .execute_inline = m.execute_inline,
          .on_event = EventSinkFor(version),
          // The scheduler goes before the session (LoadedModel): the session is still there.
          .on_retired = [weak = version.weak_from_this(), &session](const SchedulerStats& final) {
            if (auto v = weak.lock()) {
              v->CarryRetired(final, session.counters(), session.histograms());
            }
          },
          .warmup = m.warmup.value_or(session.default_warmup())};
}

}  // namespace

Lifecycle::Lifecycle(const ServerConfig& config, const BackendRegistry& backends,
                     RuntimeGuard& guard, ModelRegistry& registry, const TimeSource& time)
    : backends_(backends),
      guard_(guard),
      registry_(registry),
      time_(time),
      residency_(config, backends, registry, time, *events_) {
  // The memory domains Residency budgets (each model's device, asked once, there).
  for (const std::string& domain : residency_.DomainNames()) {
    gates_[domain] = std::make_unique<PriorityGate>(config.global.priority_linger);
  }
  for (const auto& m : config.models) devices_.insert(m.device_id);
}

Lifecycle::~Lifecycle() { Stop(); }

std::shared_ptr<ModelVersion> Lifecycle::NewVersion(const ModelConfig& config) const {
  auto version =
      std::make_shared<ModelVersion>(config, MemoryOf(config, backends_).domain, events_);
  version->MarkUsed(time_.Now());
  return version;
}

Status Lifecycle::CheckPlacement(const ModelConfig& m) const {
  if (!devices_.count(m.device_id)) {
    return FailedPrecondition("model '" + m.name + "': device " + std::to_string(m.device_id) +
                              " was not in use (nor locked) when the server started; restart "
                              "the server to serve models on it");
  }
  const std::string domain = MemoryOf(m, backends_).domain;
  if (!residency_.HasBudget(domain)) {
    return FailedPrecondition("model '" + m.name + "': memory domain " + domain +
                              " has no budget (no model used it at start); restart the server "
                              "to serve models on it");
  }
  return Status::Ok();
}

// ---- the threads ------------------------------------------------------------------------------

void Lifecycle::Start() {
  loads_.Start();
  reaper_ = std::jthread([this](std::stop_token stop) { ReaperLoop(stop); });
}

void Lifecycle::WakeReaper() {
  MutexLock lock(mu_);
  wake_reaper_ = true;
  reaper_cv_.notify_all();
}

void Lifecycle::Stop() {
  stopping_.store(true);
  if (reaper_.joinable()) {
    reaper_.request_stop();
    reaper_.join();
  }
  loads_.Stop();
}

void Lifecycle::ReaperLoop(std::stop_token stop) {
  using namespace std::chrono_literals;
  while (true) {
    {
      MutexLock lock(mu_);
      reaper_cv_.wait_for(lock, stop, 50ms, [&]() REQUIRES(mu_) { return wake_reaper_; });
      if (stop.stop_requested()) return;
      wake_reaper_ = false;
    }
    Reap(time_.Now());
  }
}

void Lifecycle::Reap(Clock::time_point now) {
  // Request deadlines are on the steady clock (the scheduler's), not the injected time.
  const auto steady_now = Clock::now();
  for (auto& version : registry_.All()) {
    version->SampleMinute();  // the status page's last minute, kept by the server
    // Requests waiting for a load are answered at their deadline.
    for (auto& parked : version->TakeExpired(steady_now)) {
      const int64_t waited = Millis(steady_now - parked.request->arrival);
      parked.End({.kind = WaitEnd::Kind::kFail,
                  .error = DeadlineExceeded("request to '" + version->name() + "' expired after " +
                                            std::to_string(waited) +
                                            " ms waiting for the model to load")});
    }
    if (version->config().keep_alive) UnloadIfIdle(*version, now);
  }
  // Retired versions unload once their last request has left (or at their drain bound).
  for (auto& version : registry_.Retiring()) {
    const ModelVersion::View v = version->view();
    const bool loading =
        v.state == VersionState::kLoading || v.state == VersionState::kLoadingOnDemand;
    const bool late = v.retire_by && now >= *v.retire_by;
    if (!late && (v.in_flight > 0 || loading)) continue;
    if (v.in_flight > 0) {
      spdlog::warn("model {}: retiring with {} requests still in flight after the drain "
                   "timeout; they are answered Unavailable",
                   version->VersionName(), v.in_flight);
    }
    Unload(*version);
    registry_.EraseRetiring(version);
  }
}

// ---- loads ----------------------------------------------------------------------------------

void Lifecycle::QueueDemandLoad(std::shared_ptr<ModelVersion> version) {
  Post([this, version = std::move(version)] { LoadForWaiting(version); });
}

void Lifecycle::LoadForWaiting(const std::shared_ptr<ModelVersion>& version) {
  const bool ran = version->DemandLoadGoesAhead(!stopping_.load());
  if (ran) {
    if (const auto again = Load(*version, /*give_way=*/true)) {
      // It waits for room: the loads queued behind it go first; its requests keep waiting.
      PostAt(*again, [this, version] { LoadForWaiting(version); });
      return;
    }
  }
  ModelVersion::Waiters waiters =
      version->TakeWaitersAfterLoad(ran, time_.Now() + kLoadRetryBackoff);
  for (auto& parked : waiters.requests) parked.End(waiters.end);
}

std::optional<Clock::time_point> Lifecycle::Load(ModelVersion& version, bool give_way) {
  const ModelConfig& m = version.config();
  version.BeginLoad();
  auto fail = [&](const Status& s) -> std::optional<Clock::time_point> {
    spdlog::error("model {}: load failed: {}", version.VersionName(), s.ToString());
    version.FailLoad(s);
    return std::nullopt;
  };
  auto backend = backends_.Find(m.backend);
  if (!backend.ok()) return fail(backend.status());
  auto loaded = std::make_shared<LoadedModel>();
  // The runtime first: sizing a model may need it up (aclmdlQuerySize after aclInit).
  auto lease = guard_.Acquire((*backend)->runtime(), m.device_id);
  if (!lease.ok()) return fail(lease.status());
  loaded->lease = std::move(*lease);
  auto estimate = (*backend)->Estimate(m);
  if (!estimate.ok()) return fail(estimate.status());
  std::optional<GiveWay> wait;
  Status room = MakeRoom(version, estimate->bytes, give_way ? &wait : nullptr);
  if (!room.ok()) return fail(room);
  if (wait) {
    version.WaitForRoom(std::move(wait->why));
    return wait->until;
  }
  Status loaded_ok = FinishLoad(version, **backend, std::move(loaded), *estimate);
  if (!loaded_ok.ok()) return fail(loaded_ok);
  return std::nullopt;
}

Status Lifecycle::FinishLoad(ModelVersion& version, Backend& backend,
                             std::shared_ptr<LoadedModel> loaded, const MemoryEstimate& estimate) {
  const ModelConfig& m = version.config();
  // The load's own time, not the wait for room: victims' residency and reload costs use it.
  const auto start = Clock::now();
  // Loads run one at a time (start-up, then the loader thread), so the heap's growth over this
  // one is its measured footprint: weights, contexts and buffers, whatever the backend reports.
  const int64_t heap_before = HeapBytesInUse();
  auto progress = std::make_shared<LoadProgress>(version.VersionName(), FileBytes(m.path));
  version.SetProgress(progress);
  auto session = InWorker(m.isolation) ? LoadIsolated(m, EventSinkFor(version))
                                       : backend.Load(m, progress.get());
  version.SetProgress(nullptr);
  // The image stages wrap the network where it runs: an isolated model's worker wraps its own
  // (RunWorker), so that its images are decoded there; in-process, here.
  if (session.ok() && !InWorker(m.isolation) && (m.preprocess || m.postprocess)) {
    session = WithImageStages(std::move(*session), m);
  }
  MMS_RETURN_IF_ERROR(session.status());
  loaded->session = std::move(*session);
  auto scheduler = ModelScheduler::Create(
      SchedulerOptions(m, *loaded->session, version, gates_.at(version.domain()).get()),
      *loaded->session);
  MMS_RETURN_IF_ERROR(scheduler.status());
  loaded->scheduler = std::move(*scheduler);
  // An isolated model's worker holds what it loaded: measured there, not in this heap.
  const int64_t measured = InWorker(m.isolation) ? loaded->session->resident_bytes()
                                                 : HeapBytesInUse() - heap_before;

  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  spdlog::info("model {}: loaded version {} (backend {}, task {}, device {}, {} worker{}, "
               "estimate {} from {}, measured {}) in {} ms",
               m.name, m.version, m.backend, m.task, m.device_id, m.thread_num,
               m.thread_num == 1 ? "" : "s", FormatMib(estimate.bytes), estimate.source,
               FormatMib(measured), ms);
  const auto ready_at = Clock::now();
  version.FinishLoad(std::move(loaded), {.estimate = estimate,
                                         .measured_bytes = measured,
                                         .took = ready_at - start,
                                         .ready_at = ready_at,
                                         .now = time_.Now()});
  MutexLock lock(order_mu_);
  load_order_.push_back(&version);
  return Status::Ok();
}

Status Lifecycle::LoadAll(const VersionMap& versions, bool startup_only) {
  for (const auto& [v, version] : versions) {
    const VersionState s = version->view().state;
    if (s == VersionState::kReady || s == VersionState::kDraining ||
        s == VersionState::kUnloading || s == VersionState::kLoading) {
      continue;
    }
    if (startup_only && version->config().load != LoadMode::kStartup) continue;
    Load(*version);
    const ModelVersion::View after = version->view();
    if (after.state != VersionState::kReady) {
      return Unavailable("version " + std::to_string(v) + " failed to load: " + after.reason);
    }
  }
  return Status::Ok();
}

Status Lifecycle::MakeRoom(const ModelVersion& loading, int64_t bytes,
                           std::optional<GiveWay>* give_way) {
  using Kind = Residency::Step::Kind;
  while (true) {
    Residency::Step step = residency_.NextStep(loading, bytes, give_way != nullptr);
    switch (step.kind) {
      case Kind::kFits: return Status::Ok();
      case Kind::kRefuse: return step.refused;
      case Kind::kGiveWay:
        *give_way = GiveWay{.until = step.until, .why = std::move(step.why)};
        return Status::Ok();
      case Kind::kEvict: EvictFor(step); break;
      case Kind::kDrain: {
        const Residency::DrainResult drained =
            residency_.Drain(*step.victim, step.eligible, step.until, loading.VersionName());
        if (drained == Residency::DrainResult::kDrained) {
          if (!EvictFor(step)) Undrain(*step.victim);
        } else if (drained == Residency::DrainResult::kTooLate) {
          Undrain(*step.victim);
          return step.refused;
        }
        break;
      }
    }
  }
}

bool Lifecycle::EvictFor(const Residency::Step& step) {
  spdlog::info("model {}: {}", step.victim->VersionName(), step.why);
  return Evict(*step.victim, step.why + "; loads on its next request");
}

void Lifecycle::Undrain(ModelVersion& victim) {
  // The requests it held back go through the routing again (LoadForWaiting on a ready version).
  if (victim.EndDrain()) QueueDemandLoad(victim.shared_from_this());
}

// ---- unloads --------------------------------------------------------------------------------

void Lifecycle::FinishUnload(ModelVersion& version, std::shared_ptr<LoadedModel> loaded,
                             std::string reason, std::string_view kind) {
  spdlog::info("model {}: unloading version {}", version.name(), version.version());
  loaded->scheduler->StopAccepting();
  loaded.reset();  // joins the workers, frees the session, releases the runtime lease
  const bool waiting = version.FinishUnload(std::move(reason), kind);
  {
    MutexLock lock(order_mu_);
    std::erase(load_order_, &version);
  }
  spdlog::info("model {}: unloaded version {}", version.name(), version.version());
  if (waiting) QueueDemandLoad(version.shared_from_this());
}

void Lifecycle::Unload(ModelVersion& version, VersionState to) {
  std::shared_ptr<LoadedModel> loaded = version.BeginUnload(to);
  if (loaded) FinishUnload(version, std::move(loaded), "unloaded");
}

void Lifecycle::UnloadIfIdle(ModelVersion& version, Clock::time_point now) {
  std::shared_ptr<LoadedModel> loaded = version.BeginIdleUnload(now);
  if (!loaded) return;
  FinishUnload(version, std::move(loaded), "unloaded after idling; loads on its next request");
}

bool Lifecycle::Evict(ModelVersion& version, std::string why) {
  std::shared_ptr<LoadedModel> loaded = version.BeginEviction();
  if (!loaded) return false;  // a request arrived meanwhile, or it is not loaded any more
  FinishUnload(version, std::move(loaded), std::move(why), "evicted");
  return true;
}

void Lifecycle::UnloadAll() {
  std::vector<ModelVersion*> order;
  {
    MutexLock lock(order_mu_);
    order = load_order_;
  }
  for (auto it = order.rbegin(); it != order.rend(); ++it) Unload(**it);
}

}  // namespace mmserve
