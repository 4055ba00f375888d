#include "service/inference_service.h"

#include <malloc.h>

#include <set>

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

}  // namespace

std::string_view ModelStateName(ModelState state) {
  switch (state) {
    case ModelState::kNotLoaded: return "UNLOADED";
    case ModelState::kLoading: return "LOADING";
    case ModelState::kReady: return "READY";
    case ModelState::kUnavailable: return "UNAVAILABLE";
    case ModelState::kUnloading: return "UNLOADING";
  }
  return "UNKNOWN";
}

// Declaration order is destruction order in reverse: the scheduler (workers and their instances)
// goes first, then the session, then the runtime lease.
struct InferenceService::LoadedModel {
  RuntimeLease lease;
  std::unique_ptr<Session> session;
  std::unique_ptr<ModelScheduler> scheduler;
};

struct InferenceService::Entry {
  ModelConfig config;
  mutable std::mutex mu;
  ModelState state = ModelState::kNotLoaded;  // guarded by mu
  std::string reason;                          // guarded by mu
  MemoryEstimate estimate;                     // guarded by mu
  int64_t measured_bytes = 0;                  // guarded by mu
  std::shared_ptr<LoadedModel> loaded;         // guarded by mu
  // Loads on its next request: on-demand and not loaded yet, or unloaded after idling.
  bool loads_on_demand = false;                                  // guarded by mu
  bool load_queued = false;                                      // guarded by mu
  std::vector<std::unique_ptr<InferRequest>> waiting;            // guarded by mu
  int64_t in_flight = 0;                                         // guarded by mu
  int64_t loads = 0;                                             // guarded by mu
  Clock::time_point last_used = Clock::now();                    // guarded by mu
  // After a failed on-demand load, requests are answered with its error until then.
  Clock::time_point retry_load_at;                               // guarded by mu
  std::string domain;  // the memory its device draws from; fixed after construction
  // Queue bound and default timeout per priority level; fixed after construction.
  std::array<LevelPolicy, kMaxPriorityLevel + 1> levels;
};

namespace {
// How long a failed on-demand load is not retried: requests meanwhile get its error at once.
constexpr auto kLoadRetryBackoff = std::chrono::seconds(5);
}  // namespace

InferenceService::InferenceService(ServerConfig config, const BackendRegistry& backends,
                                   RuntimeGuard& guard)
    : config_(std::move(config)), backends_(backends), guard_(guard), jobs_(config_.global.jobs) {
  for (const auto& m : config_.models) {
    auto entry = std::make_unique<Entry>();
    entry->config = m;
    entry->levels = ModelScheduler::Levels(m.queue, m.timeout);
    if (m.load == LoadMode::kOnDemand) {
      entry->loads_on_demand = true;
      entry->reason = "loads on its first request (load: on_demand)";
    }
    entries_.emplace(m.name, std::move(entry));
  }
  // Budgets only: the estimates are taken at each load (preflight took them before start).
  for (auto& [name, entry] : entries_) {
    const DeviceMemory memory = MemoryOf(entry->config, backends_);
    entry->domain = memory.domain;
    budgets_[memory.domain] = BudgetFor(memory, config_.global);
  }
  loader_ = std::jthread([this](std::stop_token stop) { LoaderLoop(stop); });
  reaper_ = std::jthread([this](std::stop_token stop) { ReaperLoop(stop); });
}

InferenceService::~InferenceService() { Shutdown(std::chrono::milliseconds(0)); }

InferenceService::Entry* InferenceService::FindEntry(const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : it->second.get();
}

void InferenceService::LoadStartupModels() {
  for (const auto& m : config_.models) {
    if (m.load == LoadMode::kStartup) Load(*FindEntry(m.name));
  }
}

void InferenceService::LoaderLoop(std::stop_token stop) {
  while (true) {
    Entry* entry = nullptr;
    {
      std::unique_lock lock(loader_mu_);
      loader_cv_.wait(lock, stop, [&] { return !load_queue_.empty(); });
      if (stop.stop_requested()) return;
      entry = load_queue_.front();
      load_queue_.erase(load_queue_.begin());
    }
    Load(*entry);
    std::vector<std::unique_ptr<InferRequest>> waiting;
    std::shared_ptr<LoadedModel> loaded;
    Status failed;
    {
      std::lock_guard lock(entry->mu);
      entry->load_queued = false;
      waiting.swap(entry->waiting);
      if (entry->state == ModelState::kReady) {
        loaded = entry->loaded;
        entry->in_flight += static_cast<int64_t>(waiting.size());
      } else {
        failed = Unavailable("model '" + entry->config.name + "' failed to load: " +
                             entry->reason);
        entry->retry_load_at = Clock::now() + kLoadRetryBackoff;
        entry->loads_on_demand = true;
      }
    }
    for (auto& r : waiting) {
      if (loaded) {
        SubmitLoaded(*entry, loaded, std::move(r));
      } else {
        r->done(failed);
      }
    }
  }
}

void InferenceService::ReaperLoop(std::stop_token stop) {
  using namespace std::chrono_literals;
  while (true) {
    {
      std::unique_lock lock(loader_mu_);
      reaper_cv_.wait_for(lock, stop, 50ms, [&] { return idle_check_; });
      if (stop.stop_requested()) return;
      idle_check_ = false;
    }
    const auto now = Clock::now();
    for (auto& [name, entry] : entries_) {
      // Requests waiting for a load are answered at their deadline.
      std::vector<std::unique_ptr<InferRequest>> expired;
      {
        std::lock_guard lock(entry->mu);
        for (auto it = entry->waiting.begin(); it != entry->waiting.end();) {
          if ((*it)->deadline <= now) {
            expired.push_back(std::move(*it));
            it = entry->waiting.erase(it);
          } else {
            ++it;
          }
        }
      }
      for (auto& r : expired) {
        const auto waited =
            std::chrono::duration_cast<std::chrono::milliseconds>(now - r->arrival).count();
        r->done(DeadlineExceeded("request to '" + name + "' expired after " +
                                 std::to_string(waited) + " ms waiting for the model to load"));
      }
      // Idle models past their keep-alive are unloaded.
      if (entry->config.keep_alive) Unload(*entry, now);
    }
  }
}

void InferenceService::Load(Entry& entry) {
  const ModelConfig& m = entry.config;
  const auto start = Clock::now();
  {
    std::lock_guard lock(entry.mu);
    entry.state = ModelState::kLoading;
    entry.reason.clear();
    ++entry.loads;
  }
  auto fail = [&](const Status& s) {
    spdlog::error("model {}: load failed: {}", m.name, s.ToString());
    std::lock_guard lock(entry.mu);
    entry.state = ModelState::kUnavailable;
    entry.reason = std::string(s.message());
  };
  auto backend = backends_.Find(m.backend);
  if (!backend.ok()) return fail(backend.status());
  auto estimate = (*backend)->Estimate(m);
  if (!estimate.ok()) return fail(estimate.status());
  if (Status room = MakeRoom(entry, estimate->bytes); !room.ok()) return fail(room);
  auto loaded = std::make_shared<LoadedModel>();
  // Loads run one at a time (start-up), so the heap's growth over this one is its measured
  // footprint: weights, contexts and buffers, whatever the backend reports.
  const int64_t heap_before = HeapBytesInUse();
  auto lease = guard_.Acquire((*backend)->runtime(), m.device_id);
  if (!lease.ok()) return fail(lease.status());
  loaded->lease = std::move(*lease);
  auto session = (*backend)->Load(m);
  if (!session.ok()) return fail(session.status());
  loaded->session = std::move(*session);
  // The model's own gears (compiled batch sizes) unless the config names tiers.
  std::vector<int> tiers = m.batch_tiers.empty() ? loaded->session->batch_tiers() : m.batch_tiers;
  int max_batch = m.max_batch;
  if (!tiers.empty()) max_batch = std::min(max_batch, tiers.back());
  auto scheduler = ModelScheduler::Create(
      {.model = m.name,
       .version = m.version,
       .thread_num = m.thread_num,
       .max_batch = max_batch,
       .batch_tiers = std::move(tiers),
       .max_queue_delay = m.max_queue_delay,
       .preserve_ordering = m.preserve_ordering,
       .default_priority = m.priority,
       .levels = entry.levels,
       .breaker = {.failures = m.breaker.failures, .cooldown = m.breaker.cooldown},
       .watchdog_margin = m.watchdog_margin,
       .cpu_affinity = m.cpu_affinity,
       .nice = m.nice},
      *loaded->session);
  if (!scheduler.ok()) return fail(scheduler.status());
  loaded->scheduler = std::move(*scheduler);
  const int64_t measured = HeapBytesInUse() - heap_before;

  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  spdlog::info("model {}: loaded version {} (backend {}, task {}, device {}, {} worker{}, "
               "estimate {} B from {}, measured {} B) in {} ms",
               m.name, m.version, m.backend, m.task, m.device_id, m.thread_num,
               m.thread_num == 1 ? "" : "s", estimate->bytes, estimate->source, measured, ms);
  {
    std::lock_guard lock(entry.mu);
    entry.estimate = *estimate;
    entry.measured_bytes = measured;
    entry.loaded = std::move(loaded);
    entry.state = ModelState::kReady;
    entry.loads_on_demand = false;
    entry.last_used = Clock::now();
  }
  std::lock_guard lock(order_mu_);
  load_order_.push_back(&entry);
}

int64_t InferenceService::Footprint(const Entry& entry) {
  // REQUIRES: entry.mu held. What the model holds now: the backend's own figure, else the
  // heap's growth over its load, else the estimate.
  if (!entry.loaded) return 0;
  const int64_t resident = entry.loaded->session->resident_bytes();
  if (resident > 0) return resident;
  return entry.measured_bytes > 0 ? entry.measured_bytes : entry.estimate.bytes;
}

Status InferenceService::MakeRoom(const Entry& loading, int64_t bytes) {
  const int64_t budget = budgets_.at(loading.domain);
  auto mib = [](int64_t b) { return std::to_string((b + (1 << 19)) >> 20) + " MiB"; };
  while (true) {
    int64_t used = 0;
    Entry* victim = nullptr;
    int victim_priority = 0;
    Clock::time_point victim_used;
    std::vector<std::string> holders;
    for (auto& [name, e] : entries_) {
      if (e.get() == &loading || e->domain != loading.domain) continue;
      std::lock_guard lock(e->mu);
      const int64_t held = Footprint(*e);
      if (held == 0) continue;
      used += held;
      const bool busy = e->in_flight > 0 || e->state != ModelState::kReady;
      holders.push_back(name + " " + mib(held) +
                        (e->config.pinned ? " (pinned)" : busy ? " (in use)" : " (idle)"));
      if (busy || e->config.pinned) continue;
      // Lower priority first (a larger level), then the least recently used.
      if (!victim || e->config.priority > victim_priority ||
          (e->config.priority == victim_priority && e->last_used < victim_used)) {
        victim = e.get();
        victim_priority = e->config.priority;
        victim_used = e->last_used;
      }
    }
    if (used + bytes <= budget) return Status::Ok();
    if (!victim) {
      return Unavailable("not enough memory on device " + loading.domain + ": model '" +
                         loading.config.name + "' needs " + mib(bytes) + ", " +
                         mib(std::max<int64_t>(0, budget - used)) + " of the " + mib(budget) +
                         " budget are free, and nothing can be evicted; held by " +
                         Join(holders, ", "));
    }
    spdlog::info("model {}: evicted to make room for {} ({} needed on device {})",
                 victim->config.name, loading.config.name, mib(bytes), loading.domain);
    Unload(*victim, std::nullopt, /*evict=*/true);
  }
}

void InferenceService::Unload(Entry& entry, std::optional<Clock::time_point> if_idle_at,
                              bool evict) {
  std::shared_ptr<LoadedModel> loaded;
  {
    std::lock_guard lock(entry.mu);
    if (!entry.loaded) return;
    if (if_idle_at) {
      // Past its keep-alive with nothing in flight; requests from now on wait for a new load.
      if (entry.in_flight > 0 || entry.load_queued ||
          *if_idle_at - entry.last_used < *entry.config.keep_alive) {
        return;
      }
      entry.loads_on_demand = true;
      spdlog::info("model {}: idle for {} ms (keep_alive)", entry.config.name,
                   std::chrono::duration_cast<std::chrono::milliseconds>(*if_idle_at -
                                                                         entry.last_used)
                       .count());
    }
    if (evict) {
      if (entry.in_flight > 0) return;  // a request arrived meanwhile: the caller looks again
      entry.loads_on_demand = true;
    }
    entry.state = ModelState::kUnloading;
    loaded = std::move(entry.loaded);
  }
  spdlog::info("model {}: unloading version {}", entry.config.name, entry.config.version);
  loaded->scheduler->StopAccepting();
  loaded.reset();  // joins the workers, frees the session, releases the runtime lease
  {
    std::lock_guard lock(entry.mu);
    entry.state = ModelState::kNotLoaded;
    entry.reason = evict                   ? "evicted to make room; loads on its next request"
                   : entry.loads_on_demand ? "unloaded after idling; loads on its next request"
                                           : "unloaded";
  }
  {
    std::lock_guard lock(order_mu_);
    std::erase(load_order_, &entry);
  }
  spdlog::info("model {}: unloaded", entry.config.name);
}

bool InferenceService::Ready() const {
  if (!accepting_) return false;
  for (const auto& [name, entry] : entries_) {
    std::lock_guard lock(entry->mu);
    // A start-up model unloaded after idling counts: its next request loads it.
    if (entry->config.load == LoadMode::kStartup && entry->state != ModelState::kReady &&
        !entry->loads_on_demand) {
      return false;
    }
  }
  return true;
}

ModelInfo InferenceService::Snapshot(const Entry& entry) {
  std::lock_guard lock(entry.mu);
  ModelInfo info{.config = entry.config,
                 .state = entry.state,
                 .reason = entry.reason,
                 .estimate = entry.estimate,
                 .measured_bytes = entry.measured_bytes,
                 .loads = entry.loads,
                 .in_flight = entry.in_flight};
  if (entry.loaded) {
    info.signature = entry.loaded->session->signature();
    info.resident_bytes = entry.loaded->session->resident_bytes();
    info.counters = entry.loaded->session->counters();
    info.stats = entry.loaded->scheduler->stats();
    if (info.state == ModelState::kReady && info.stats->breaker != CircuitBreaker::State::kClosed) {
      info.state = ModelState::kUnavailable;
      info.reason = "circuit breaker " + std::string(BreakerStateName(info.stats->breaker)) +
                    ": " + info.stats->breaker_reason;
    }
  }
  return info;
}

Result<ModelInfo> InferenceService::GetModel(const std::string& name, int64_t version) const {
  const Entry* entry = FindEntry(name);
  if (!entry) return NotFound("unknown model '" + name + "'");
  if (version != 0 && version != entry->config.version) {
    return NotFound("model '" + name + "' has no version " + std::to_string(version) +
                    " (serving version " + std::to_string(entry->config.version) + ")");
  }
  return Snapshot(*entry);
}

int64_t InferenceService::ServedVersion(const std::string& name) const {
  const Entry* entry = FindEntry(name);
  return entry ? entry->config.version : 0;
}

std::vector<ModelInfo> InferenceService::ListModels() const {
  std::vector<ModelInfo> out;
  for (const auto& m : config_.models) out.push_back(Snapshot(*FindEntry(m.name)));
  return out;
}

Status InferenceService::ValidateRequest(const ModelSignature& signature,
                                         const InferRequest& request) {
  std::set<std::string> seen;
  std::vector<std::string> names;
  for (const auto& spec : signature.inputs) names.push_back(spec.name);
  for (const auto& input : request.inputs) {
    if (!seen.insert(input.name()).second) {
      return InvalidArgument("input '" + input.name() + "' is given more than once");
    }
    const TensorSpec* spec = nullptr;
    for (const auto& s : signature.inputs) {
      if (s.name == input.name()) spec = &s;
    }
    if (!spec) {
      return InvalidArgument("unknown input '" + input.name() + "'; the model's inputs are " +
                             Join(names, ", "));
    }
    if (spec->type != input.type()) {
      return InvalidArgument("input '" + input.name() + "': expected datatype " +
                             std::string(DataTypeName(spec->type)) + ", found " +
                             std::string(DataTypeName(input.type())));
    }
    if (!ShapeMatches(spec->shape, input.shape())) {
      return InvalidArgument("input '" + input.name() + "': expected shape " +
                             ShapeToString(spec->shape) + ", found " +
                             ShapeToString(input.shape()));
    }
    MMS_RETURN_IF_ERROR(input.Validate());
  }
  for (const auto& spec : signature.inputs) {
    if (!spec.optional && !seen.count(spec.name)) {
      return InvalidArgument("missing input '" + spec.name + "'");
    }
  }
  for (const auto& out : request.requested_outputs) {
    bool known = false;
    for (const auto& s : signature.outputs) known = known || s.name == out;
    if (!known) return InvalidArgument("unknown output '" + out + "'");
  }
  return Status::Ok();
}

Status InferenceService::ApplySchedulingParams(InferRequest& request) {
  if (auto it = request.parameters.find("priority"); it != request.parameters.end()) {
    const int64_t* level = std::get_if<int64_t>(&it->second);
    if (!level || *level < 0 || *level > kMaxPriorityLevel) {
      return InvalidArgument("parameters.priority: expected a level in 1.." +
                             std::to_string(kMaxPriorityLevel) +
                             " (1 is highest; 0 = the model's default)");
    }
    request.priority = static_cast<int>(*level);
  }
  if (auto it = request.parameters.find("timeout"); it != request.parameters.end()) {
    const int64_t* us = std::get_if<int64_t>(&it->second);
    if (!us || *us <= 0) {
      return InvalidArgument(
          "parameters.timeout: expected a positive number of microseconds (it can only "
          "shorten the model's timeout)");
    }
    // A request may shorten its timeout, never lengthen it: the scheduler bounds the deadline
    // by its level's timeout as well.
    request.deadline =
        std::min(request.deadline, request.arrival + std::chrono::microseconds(*us));
  }
  return Status::Ok();
}

void InferenceService::Submit(std::unique_ptr<InferRequest> request) {
  auto reject = [&](Status s) { request->done(std::move(s)); };
  if (!accepting_) return reject(Unavailable("the server is shutting down"));
  Entry* entry = FindEntry(request->model_name);
  if (!entry) return reject(NotFound("unknown model '" + request->model_name + "'"));
  if (request->model_version != 0 && request->model_version != entry->config.version) {
    return reject(NotFound("model '" + request->model_name + "' has no version " +
                           std::to_string(request->model_version)));
  }
  if (Status s = ApplySchedulingParams(*request); !s.ok()) {
    return reject(s.WithContext("model '" + request->model_name + "'"));
  }
  // The deadline holds from now on, also while the request waits for a load.
  const int level = request->priority > 0 ? request->priority : entry->config.priority;
  request->deadline = std::min(
      request->deadline, request->arrival + entry->levels[static_cast<size_t>(level)].timeout);
  std::shared_ptr<LoadedModel> loaded;
  {
    std::lock_guard lock(entry->mu);
    if (entry->state == ModelState::kReady) {
      loaded = entry->loaded;
      ++entry->in_flight;  // before the lock goes: an idle unload must see it
      entry->last_used = Clock::now();
    } else if (entry->loads_on_demand && entry->state == ModelState::kUnavailable &&
               Clock::now() < entry->retry_load_at) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          entry->retry_load_at - Clock::now());
      return reject(Unavailable("model '" + request->model_name + "' failed to load: " +
                                entry->reason + " (the next load is tried in " +
                                std::to_string(left.count()) + " ms)"));
    } else if (entry->loads_on_demand) {
      // Single flight: the first request queues the load, the others wait for it.
      entry->waiting.push_back(std::move(request));
      if (!entry->load_queued) {
        entry->load_queued = true;
        std::lock_guard loader_lock(loader_mu_);
        load_queue_.push_back(entry);
        loader_cv_.notify_all();
      }
      return;
    } else {
      return reject(Unavailable("model '" + request->model_name + "' is " +
                                std::string(ModelStateName(entry->state)) +
                                (entry->reason.empty() ? "" : ": " + entry->reason)));
    }
  }
  SubmitLoaded(*entry, std::move(loaded), std::move(request));
}

void InferenceService::SubmitLoaded(Entry& entry, std::shared_ptr<LoadedModel> loaded,
                                    std::unique_ptr<InferRequest> request) {
  // REQUIRES: entry.in_flight already counts this request.
  auto release = [this, &entry] {
    std::lock_guard lock(entry.mu);
    entry.last_used = Clock::now();
    if (--entry.in_flight == 0 && entry.config.keep_alive &&
        entry.config.keep_alive->count() == 0) {
      std::lock_guard loader_lock(loader_mu_);
      idle_check_ = true;
      reaper_cv_.notify_all();
    }
  };
  Status s = ValidateRequest(loaded->session->signature(), *request);
  if (!s.ok()) {
    release();
    return request->done(s.WithContext("model '" + request->model_name + "'"));
  }

  // Count the request in flight until its callback has run, and keep only the outputs it asked
  // for. The wrapper holds no reference to the model, so the last one to finish never unloads it.
  in_flight_.fetch_add(1);
  request->done = [this, release, done = std::move(request->done),
                   wanted = request->requested_outputs](Result<InferResponse> result) mutable {
    if (result.ok() && !wanted.empty()) {
      auto& outputs = result->outputs;
      std::erase_if(outputs, [&](const Tensor& t) {
        return std::find(wanted.begin(), wanted.end(), t.name()) == wanted.end();
      });
    }
    // The model is idle before the caller hears back, so a caller's next step (another
    // model's load that needs room) finds it evictable; the server's drain still waits.
    release();
    done(std::move(result));
    if (in_flight_.fetch_sub(1) == 1) {
      std::lock_guard lock(drain_mu_);
      drained_.notify_all();
    }
  };
  (void)loaded->scheduler->Enqueue(std::move(request));  // completes the request itself on error
}

void InferenceService::Shutdown(std::chrono::milliseconds drain_timeout) {
  if (accepting_.exchange(false)) {
    spdlog::info("service: stopped accepting requests; draining {} in flight", in_flight_.load());
  }
  for (auto* t : {&reaper_, &loader_}) {
    if (t->joinable()) {
      t->request_stop();
      t->join();
    }
  }
  for (auto& [name, entry] : entries_) {
    std::vector<std::unique_ptr<InferRequest>> waiting;
    {
      std::lock_guard lock(entry->mu);
      waiting.swap(entry->waiting);
      entry->loads_on_demand = false;
    }
    for (auto& r : waiting) r->done(Unavailable("the server is shutting down"));
  }
  {
    std::unique_lock lock(drain_mu_);
    if (!drained_.wait_for(lock, drain_timeout, [&] { return in_flight_.load() == 0; })) {
      spdlog::warn("service: {} requests still in flight after {} ms; they are answered "
                   "Unavailable",
                   in_flight_.load(), drain_timeout.count());
    }
  }
  std::vector<Entry*> order;
  {
    std::lock_guard lock(order_mu_);
    order.swap(load_order_);
  }
  for (auto it = order.rbegin(); it != order.rend(); ++it) Unload(**it);
}

}  // namespace mmserve
