#include "service/inference_service.h"

#include <malloc.h>

#include <random>

#include <boost/container/small_vector.hpp>

#include "common/json.h"
#include "common/logging.h"
#include "common/strings.h"
#include "config/config_parser.h"
#include "service/memory_plan.h"

namespace mmserve {

namespace {

namespace fs = std::filesystem;

// Bytes the allocator has handed out and not taken back (heap arenas plus mmapped blocks).
// Unlike RSS it counts buffers not yet touched and ignores memory recycled from earlier frees,
// so its growth over a load is what the load reserved.
int64_t HeapBytesInUse() {
  const struct mallinfo2 info = ::mallinfo2();
  return static_cast<int64_t>(info.uordblks + info.hblkhd);
}

// How long a failed on-demand load is not retried: requests meanwhile get its error at once.
constexpr auto kLoadRetryBackoff = std::chrono::seconds(5);

std::string VersionName(const ModelConfig& m) { return m.name + " v" + std::to_string(m.version); }

// A uniform draw in [0, 1): from the request id when it has one (the same id always draws the
// same, so a client's retries stay on one version), else at random.
double CanaryDraw(const std::string& model, const std::string& id) {
  if (id.empty()) {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    return std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  }
  uint64_t x = std::hash<std::string>{}(model + '\0' + id);
  // splitmix64's finalizer: std::hash of strings need not mix its high bits well.
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return static_cast<double>(x >> 11) * 0x1.0p-53;
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

// One version of one model.
struct InferenceService::Entry {
  ModelConfig config;  // fixed after construction
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
  int64_t evictions = 0;                                         // guarded by mu
  std::chrono::nanoseconds last_load_time{0};                    // guarded by mu
  Clock::time_point last_used = Clock::now();                    // guarded by mu
  // After a failed on-demand load, requests are answered with its error until then.
  Clock::time_point retry_load_at;                               // guarded by mu
  // Unloaded through the repository API: not loaded again until LoadModel.
  bool held_unloaded = false;                                    // guarded by mu
  // No longer routed to; unloads once idle, or at `retire_by` at the latest.
  bool retired = false;                                          // guarded by mu
  Clock::time_point retire_by;                                   // guarded by mu
  std::string domain;  // the memory its device draws from; fixed after construction
  // Queue bound and default timeout per priority level; fixed after construction.
  std::array<LevelPolicy, kMaxPriorityLevel + 1> levels;
};

struct InferenceService::Model {
  std::map<int64_t, std::shared_ptr<Entry>> versions;  // at least one
  std::map<std::string, int64_t> labels;
  std::optional<CanaryConfig> canary;
  int64_t default_version = 0;  // `stable`, else the highest version
  bool from_api = false;        // added by LoadModel: kept when a reload's file does not name it
};

InferenceService::InferenceService(ServerConfig config, const BackendRegistry& backends,
                                   RuntimeGuard& guard)
    : backends_(backends), guard_(guard), jobs_(config.global.jobs), config_(std::move(config)) {
  std::map<std::string, std::map<int64_t, std::shared_ptr<Entry>>> versions;
  for (const auto& m : config_.models) {
    auto entry = MakeEntry(m);
    // Budgets only: the estimates are taken at each load (preflight took them before start).
    // A device whose capacity its runtime cannot tell yet (AscendCL before aclInit) gets its
    // budget at its first load, with the runtime up.
    const DeviceMemory memory = MemoryOf(m, backends_);
    budgets_[entry->domain] = memory.total > 0 || config_.global.memory_pool_mb > 0
                                  ? BudgetFor(memory, config_.global)
                                  : kBudgetUnknown;
    if (!gates_.count(entry->domain)) {
      gates_[entry->domain] = std::make_unique<PriorityGate>(config_.global.priority_linger);
    }
    devices_.insert(m.device_id);
    versions[m.name][m.version] = std::move(entry);
  }
  for (auto& [name, v] : versions) {
    const ModelConfig& routing = v.begin()->second->config;
    models_[name] = MakeModel(std::move(v), routing, /*from_api=*/false);
  }
  loader_ = std::jthread([this](std::stop_token stop) { LoaderLoop(stop); });
  reaper_ = std::jthread([this](std::stop_token stop) { ReaperLoop(stop); });
}

InferenceService::~InferenceService() { Shutdown(std::chrono::milliseconds(0)); }

std::shared_ptr<InferenceService::Entry> InferenceService::MakeEntry(const ModelConfig& m) const {
  auto entry = std::make_shared<Entry>();
  entry->config = m;
  entry->levels = ModelScheduler::Levels(m.queue, m.timeout);
  entry->domain = MemoryOf(m, backends_).domain;
  if (m.load == LoadMode::kOnDemand) {
    entry->loads_on_demand = true;
    entry->reason = "loads on its first request (load: on_demand)";
  }
  return entry;
}

std::shared_ptr<const InferenceService::Model> InferenceService::MakeModel(
    std::map<int64_t, std::shared_ptr<Entry>> versions, const ModelConfig& routing,
    bool from_api) {
  auto model = std::make_shared<Model>();
  model->labels = routing.labels;
  model->canary = routing.canary;
  auto stable = model->labels.find("stable");
  model->default_version =
      stable != model->labels.end() ? stable->second : versions.rbegin()->first;
  model->versions = std::move(versions);
  model->from_api = from_api;
  return model;
}

std::vector<std::shared_ptr<InferenceService::Entry>> InferenceService::AllEntriesLocked() const {
  std::vector<std::shared_ptr<Entry>> out = retiring_;
  for (const auto& [name, model] : models_) {
    for (const auto& [version, entry] : model->versions) out.push_back(entry);
  }
  return out;
}

std::vector<std::shared_ptr<InferenceService::Entry>> InferenceService::AllEntries() const {
  std::shared_lock lock(models_mu_);
  return AllEntriesLocked();
}

Result<std::shared_ptr<InferenceService::Entry>> InferenceService::Route(
    const Model& model, const InferRequest& request) {
  const std::string& name = request.model_name;
  int64_t version = request.model_version;
  if (version == 0 && !request.model_label.empty()) {
    auto it = model.labels.find(request.model_label);
    if (it == model.labels.end()) {
      std::vector<std::string> labels;
      for (const auto& [label, v] : model.labels) labels.push_back(label);
      return NotFound("model '" + name + "' has no label '" + request.model_label + "'" +
                      (labels.empty() ? " (it has none)" : " (its labels: " + Join(labels, ", ") + ")"));
    }
    version = it->second;
  }
  if (version == 0) {
    version = model.canary && CanaryDraw(name, request.id) < model.canary->weight
                  ? model.canary->version
                  : model.default_version;
  }
  auto it = model.versions.find(version);
  if (it == model.versions.end()) {
    std::vector<std::string> served;
    for (const auto& [v, entry] : model.versions) served.push_back(std::to_string(v));
    return NotFound("model '" + name + "' has no version " + std::to_string(version) +
                    " (it serves " + Join(served, ", ") + ")");
  }
  return it->second;
}

void InferenceService::LoadStartupModels() {
  std::vector<std::shared_ptr<Entry>> startup;
  {
    std::shared_lock lock(models_mu_);
    for (const auto& m : config_.models) {
      if (m.load == LoadMode::kStartup) startup.push_back(models_.at(m.name)->versions.at(m.version));
    }
  }
  for (const auto& entry : startup) Load(*entry);
}

void InferenceService::Post(std::function<void()> task) {
  std::lock_guard lock(loader_mu_);
  tasks_.push_back(std::move(task));
  loader_cv_.notify_all();
}

void InferenceService::LoaderLoop(std::stop_token stop) {
  while (true) {
    std::function<void()> task;
    {
      std::unique_lock lock(loader_mu_);
      loader_cv_.wait(lock, stop, [&] { return !tasks_.empty(); });
      if (stop.stop_requested()) break;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    try {
      task();
    } catch (const std::exception& e) {
      spdlog::error("loader thread: unexpected exception: {}", e.what());
    }
  }
  // What is still queued runs now that accepting_ is false: each task answers "shutting down".
  std::deque<std::function<void()>> left;
  {
    std::lock_guard lock(loader_mu_);
    left.swap(tasks_);
  }
  for (auto& task : left) task();
}

void InferenceService::LoadForWaiting(const std::shared_ptr<Entry>& entry) {
  bool reroute = false;
  {
    std::lock_guard lock(entry->mu);
    // Retired or unloaded meanwhile: its requests go where the routing sends them now.
    reroute = entry->retired || entry->held_unloaded || !accepting_;
  }
  if (!reroute) Load(*entry);
  std::vector<std::unique_ptr<InferRequest>> waiting;
  std::shared_ptr<LoadedModel> loaded;
  Status failed;
  {
    std::lock_guard lock(entry->mu);
    entry->load_queued = false;
    waiting.swap(entry->waiting);
    if (reroute) {
      // handed back to Submit below
    } else if (entry->state == ModelState::kReady) {
      loaded = entry->loaded;
      entry->in_flight += static_cast<int64_t>(waiting.size());
    } else {
      failed = Unavailable("model '" + entry->config.name + "' failed to load: " + entry->reason);
      entry->retry_load_at = Clock::now() + kLoadRetryBackoff;
      entry->loads_on_demand = true;
    }
  }
  for (auto& r : waiting) {
    if (reroute) {
      Submit(std::move(r));
    } else if (loaded) {
      SubmitLoaded(entry, loaded, std::move(r));
    } else {
      r->done(failed);
    }
  }
}

std::string InferenceService::WatchStamp() const {
  std::string stamp;
  std::error_code ec;
  auto add_file = [&](const fs::path& file) {
    const auto size = fs::file_size(file, ec);
    const auto mtime = fs::last_write_time(file, ec).time_since_epoch().count();
    stamp += file.string() + ":" + std::to_string(ec ? -1 : static_cast<int64_t>(size)) + ":" +
             std::to_string(mtime) + ";";
  };
  std::set<fs::path> folders;
  std::vector<fs::path> files;
  {
    std::shared_lock lock(models_mu_);
    add_file(config_.file);
    for (const auto& m : config_.models) {
      if (!m.versions_dir.empty()) folders.insert(m.versions_dir);
      if (!m.path.empty()) files.push_back(m.path);
    }
  }
  for (const auto& f : files) add_file(f);
  for (const auto& dir : folders) {
    std::vector<std::string> names;
    for (const auto& d : fs::directory_iterator(dir, ec)) names.push_back(d.path().filename());
    std::sort(names.begin(), names.end());
    stamp += dir.string() + "[" + Join(names, ",") + "];";
  }
  return stamp;
}

void InferenceService::ReaperLoop(std::stop_token stop) {
  using namespace std::chrono_literals;
  // What the watched files looked like: taken now (before the server listens, so no change
  // made after start-up is missed), or when a reload first configures a watch.
  std::optional<std::string> watched;
  bool watching = false;
  {
    std::shared_lock lock(models_mu_);
    watching = config_.global.watch.has_value();
  }
  if (watching) watched = WatchStamp();
  auto next_watch = Clock::now();
  bool reloading = false;  // a reload this thread asked for is not done yet
  while (true) {
    {
      std::unique_lock lock(loader_mu_);
      reaper_cv_.wait_for(lock, stop, 50ms, [&] { return idle_check_; });
      if (stop.stop_requested()) return;
      idle_check_ = false;
    }
    const auto now = Clock::now();
    std::vector<std::shared_ptr<Entry>> retiring;
    std::optional<std::chrono::milliseconds> watch;
    {
      std::shared_lock lock(models_mu_);
      retiring = retiring_;
      watch = config_.global.watch;
    }
    for (auto& entry : AllEntries()) {
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
        r->done(DeadlineExceeded("request to '" + entry->config.name + "' expired after " +
                                 std::to_string(waited) + " ms waiting for the model to load"));
      }
      // Idle models past their keep-alive are unloaded.
      if (entry->config.keep_alive) Unload(*entry, now);
    }
    // Retired versions unload once their last request has left (or at their drain bound).
    for (auto& entry : retiring) {
      bool go = false;
      {
        std::lock_guard lock(entry->mu);
        go = (entry->in_flight == 0 && entry->state != ModelState::kLoading) ||
             now >= entry->retire_by;
        if (go && entry->in_flight > 0) {
          spdlog::warn("model {}: retiring with {} requests still in flight after the drain "
                       "timeout; they are answered Unavailable",
                       VersionName(entry->config), entry->in_flight);
        }
      }
      if (!go) continue;
      Unload(*entry);
      std::unique_lock lock(models_mu_);
      std::erase(retiring_, entry);
    }
    // Watched files: a change reloads, one reload at a time; once it is done, what is watched
    // is taken anew (the served files may have changed with it).
    if (reloading && !reload_pending_.load()) {
      reloading = false;
      watched = WatchStamp();
    }
    if (!watch) {
      watched.reset();
    } else if (!watched) {
      watched = WatchStamp();
      next_watch = now + *watch;
    } else if (now >= next_watch && !reloading) {
      next_watch = now + *watch;
      if (std::string stamp = WatchStamp(); stamp != *watched) {
        watched = std::move(stamp);
        spdlog::info("config: the YAML file or its model files changed; reloading");
        reloading = true;
        reload_pending_.store(true);
        Reload([this](const Result<ReloadReport>& result) {
          if (!result.ok()) {
            spdlog::error("config: reload rejected, the served models are unchanged: {}",
                          result.status().message());
          }
          reload_pending_.store(false);
        });
      }
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
    spdlog::error("model {}: load failed: {}", VersionName(m), s.ToString());
    std::lock_guard lock(entry.mu);
    entry.state = ModelState::kUnavailable;
    entry.reason = std::string(s.message());
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
  if (Status room = MakeRoom(entry, estimate->bytes); !room.ok()) return fail(room);
  // Loads run one at a time (start-up, then the loader thread), so the heap's growth over this
  // one is its measured footprint: weights, contexts and buffers, whatever the backend reports.
  const int64_t heap_before = HeapBytesInUse();
  auto session = (*backend)->Load(m);
  if (!session.ok()) return fail(session.status());
  loaded->session = std::move(*session);
  // The model's own gears (compiled batch sizes) unless the config names tiers; without a
  // max_batch in the file, batches grow to the largest gear.
  std::vector<int> tiers = m.batch_tiers.empty() ? loaded->session->batch_tiers() : m.batch_tiers;
  int max_batch = m.max_batch;
  if (m.batch_tiers.empty() && !tiers.empty() && !m.max_batch_set) max_batch = tiers.back();
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
       .nice = m.nice,
       .gate = gates_.at(entry.domain).get(),
       .execute_inline = m.execute_inline},
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
    entry.last_load_time = Clock::now() - start;
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
  int64_t& budget = budgets_.at(loading.domain);
  if (budget == kBudgetUnknown) {
    const DeviceMemory memory = MemoryOf(loading.config, backends_);
    if (memory.total == 0) return Status::Ok();  // still unknown: the load itself will say
    budget = BudgetFor(memory, config_.global);
    spdlog::info("memory: device {} budget {} MiB (capacity read at its first load)",
                 loading.domain, budget >> 20);
  }
  const auto mib = FormatWholeMib;
  while (true) {
    int64_t used = 0;
    std::shared_ptr<Entry> victim;
    int victim_priority = 0;
    Clock::time_point victim_used;
    std::vector<std::string> holders;
    for (auto& e : AllEntries()) {
      if (e.get() == &loading || e->domain != loading.domain) continue;
      std::lock_guard lock(e->mu);
      const int64_t held = Footprint(*e);
      if (held == 0) continue;
      used += held;
      const bool busy = e->in_flight > 0 || e->state != ModelState::kReady;
      holders.push_back(VersionName(e->config) + " " + mib(held) +
                        (e->config.pinned ? " (pinned)" : busy ? " (in use)" : " (idle)"));
      if (busy || e->config.pinned) continue;
      // Retired versions first, then lower priority (a larger level), then least recently used.
      const int priority = e->retired ? kMaxPriorityLevel + 1 : e->config.priority;
      if (!victim || priority > victim_priority ||
          (priority == victim_priority && e->last_used < victim_used)) {
        victim = e;
        victim_priority = priority;
        victim_used = e->last_used;
      }
    }
    if (used + bytes <= budget) return Status::Ok();
    if (!victim) {
      return Unavailable("not enough memory on device " + loading.domain + ": model '" +
                         VersionName(loading.config) + "' needs " + mib(bytes) + ", " +
                         mib(std::max<int64_t>(0, budget - used)) + " of the " + mib(budget) +
                         " budget are free, and nothing can be evicted" +
                         (holders.empty() ? std::string(" (no other model holds any: the model "
                                                        "is larger than the budget)")
                                          : "; held by " + Join(holders, ", ")));
    }
    spdlog::info("model {}: evicted to make room for {} ({} needed on device {})",
                 VersionName(victim->config), VersionName(loading.config), mib(bytes),
                 loading.domain);
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
      spdlog::info("model {}: idle for {} ms (keep_alive, version {})", entry.config.name,
                   std::chrono::duration_cast<std::chrono::milliseconds>(*if_idle_at -
                                                                         entry.last_used)
                       .count(),
                   entry.config.version);
    }
    if (evict) {
      if (entry.in_flight > 0) return;  // a request arrived meanwhile: the caller looks again
      entry.loads_on_demand = true;
      ++entry.evictions;
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
    entry.reason = entry.held_unloaded     ? "unloaded through the repository API"
                   : entry.retired         ? "retired: no longer served"
                   : evict                 ? "evicted to make room; loads on its next request"
                   : entry.loads_on_demand ? "unloaded after idling; loads on its next request"
                                           : "unloaded";
  }
  {
    std::lock_guard lock(order_mu_);
    std::erase(load_order_, &entry);
  }
  spdlog::info("model {}: unloaded version {}", entry.config.name, entry.config.version);
}

bool InferenceService::Ready() const {
  if (!accepting_) return false;
  for (const auto& entry : AllEntries()) {
    std::lock_guard lock(entry->mu);
    // A start-up model unloaded after idling counts: its next request loads it; so does one an
    // operator unloaded on purpose, and a retiring one.
    if (entry->config.load == LoadMode::kStartup && entry->state != ModelState::kReady &&
        !entry->loads_on_demand && !entry->held_unloaded && !entry->retired) {
      return false;
    }
  }
  return true;
}

ModelInfo InferenceService::Snapshot(const Entry& entry, const Model* model) {
  std::lock_guard lock(entry.mu);
  ModelInfo info{.config = entry.config,
                 .state = entry.state,
                 .reason = entry.reason,
                 .estimate = entry.estimate,
                 .measured_bytes = entry.measured_bytes,
                 .loads = entry.loads,
                 .evictions = entry.evictions,
                 .last_load_time = entry.last_load_time,
                 .in_flight = entry.in_flight};
  if (model) {
    for (const auto& [v, e] : model->versions) info.versions.push_back(v);
    info.labels = model->labels;
  }
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

Result<ModelInfo> InferenceService::GetModel(const std::string& name, int64_t version,
                                             const std::string& label) const {
  std::shared_lock lock(models_mu_);
  auto it = models_.find(name);
  if (it == models_.end()) return NotFound("unknown model '" + name + "'");
  const Model& model = *it->second;
  if (version == 0 && label.empty()) version = model.default_version;
  InferRequest probe;
  probe.model_name = name;
  probe.model_version = version;
  probe.model_label = label;
  auto entry = Route(model, probe);
  if (!entry.ok()) return entry.status();
  return Snapshot(**entry, &model);
}

std::vector<ModelInfo> InferenceService::ListModels() const {
  std::shared_lock lock(models_mu_);
  std::vector<ModelInfo> out;
  for (const auto& m : config_.models) {
    auto model = models_.find(m.name);
    if (model == models_.end()) continue;
    auto entry = model->second->versions.find(m.version);
    if (entry != model->second->versions.end()) {
      out.push_back(Snapshot(*entry->second, model->second.get()));
    }
  }
  return out;
}

Status InferenceService::ValidateRequest(const ModelSignature& signature,
                                         const InferRequest& request) {
  // Which of the model's inputs the request gives: every input must name one, at most once.
  boost::container::small_vector<bool, 16> given(signature.inputs.size(), false);
  for (const auto& input : request.inputs) {
    size_t at = 0;
    while (at < signature.inputs.size() && signature.inputs[at].name != input.name()) ++at;
    if (at == signature.inputs.size()) {
      std::vector<std::string> names;
      for (const auto& spec : signature.inputs) names.push_back(spec.name);
      return InvalidArgument("unknown input '" + input.name() + "'; the model's inputs are " +
                             Join(names, ", "));
    }
    if (given[at]) return InvalidArgument("input '" + input.name() + "' is given more than once");
    given[at] = true;
    const TensorSpec* spec = &signature.inputs[at];
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
  for (size_t i = 0; i < signature.inputs.size(); ++i) {
    if (!signature.inputs[i].optional && !given[i]) {
      return InvalidArgument("missing input '" + signature.inputs[i].name + "'");
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
    // by its level's timeout as well. Capped first (no model waits longer than a day), so that
    // arrival + timeout cannot overflow the clock's nanoseconds.
    constexpr int64_t kMaxTimeoutUs = int64_t{24} * 3600 * 1'000'000;
    request.deadline = std::min(request.deadline,
                                request.arrival + std::chrono::microseconds(
                                                      std::min<int64_t>(*us, kMaxTimeoutUs)));
  }
  return Status::Ok();
}

void InferenceService::Submit(std::unique_ptr<InferRequest> request) {
  if (!accepting_) return request->done(Unavailable("the server is shutting down"));
  if (Status s = ApplySchedulingParams(*request); !s.ok()) {
    return request->done(s.WithContext("model '" + request->model_name + "'"));
  }
  std::shared_ptr<Entry> entry;
  std::shared_ptr<LoadedModel> loaded;
  Status rejected;  // answered once the locks are gone
  {
    // Routing and the in-flight count happen under the models lock, so a version a reload
    // retires either counts this request (and waits for it) or was never chosen for it.
    std::shared_lock models_lock(models_mu_);
    auto model = models_.find(request->model_name);
    auto routed = model == models_.end()
                      ? Result<std::shared_ptr<Entry>>(
                            NotFound("unknown model '" + request->model_name + "'"))
                      : Route(*model->second, *request);
    if (routed.ok()) {
      entry = std::move(*routed);
      request->model_version = entry->config.version;
      // The deadline holds from now on, also while the request waits for a load.
      const int level = request->priority > 0 ? request->priority : entry->config.priority;
      request->deadline =
          std::min(request->deadline,
                   request->arrival + entry->levels[static_cast<size_t>(level)].timeout);
      rejected = Admit(entry, request, loaded);
    } else {
      rejected = routed.status();
    }
  }
  if (!rejected.ok()) return request->done(std::move(rejected));
  if (loaded) SubmitLoaded(std::move(entry), std::move(loaded), std::move(request));
}

Status InferenceService::Admit(const std::shared_ptr<Entry>& entry,
                               std::unique_ptr<InferRequest>& request,
                               std::shared_ptr<LoadedModel>& loaded) {
  std::lock_guard lock(entry->mu);
  const ModelConfig& m = entry->config;
  if (entry->state == ModelState::kReady) {
    loaded = entry->loaded;
    ++entry->in_flight;  // before the lock goes: an idle unload must see it
    entry->last_used = Clock::now();
    return Status::Ok();
  }
  if (entry->held_unloaded) {
    return Unavailable("model '" + VersionName(m) +
                       "' was unloaded through the repository API; load it with "
                       "POST /v2/repository/models/" + m.name + "/load");
  }
  if (entry->loads_on_demand && entry->state == ModelState::kUnavailable &&
      Clock::now() < entry->retry_load_at) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        entry->retry_load_at - Clock::now());
    return Unavailable("model '" + m.name + "' failed to load: " + entry->reason +
                       " (the next load is tried in " + std::to_string(left.count()) + " ms)");
  }
  if (entry->loads_on_demand) {
    // Single flight: the first request queues the load, the others wait for it.
    entry->waiting.push_back(std::move(request));
    if (!entry->load_queued) {
      entry->load_queued = true;
      Post([this, entry] { LoadForWaiting(entry); });
    }
    return Status::Ok();
  }
  return Unavailable("model '" + m.name + "' is " + std::string(ModelStateName(entry->state)) +
                     (entry->reason.empty() ? "" : ": " + entry->reason));
}

void InferenceService::SubmitLoaded(std::shared_ptr<Entry> entry,
                                    std::shared_ptr<LoadedModel> loaded,
                                    std::unique_ptr<InferRequest> request) {
  // REQUIRES: entry->in_flight already counts this request.
  auto release = [this, entry] {
    std::lock_guard lock(entry->mu);
    entry->last_used = Clock::now();
    if (--entry->in_flight == 0 && entry->config.keep_alive &&
        entry->config.keep_alive->count() == 0) {
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
  // for. The wrapper holds no reference to the loaded model, so the last one to finish never
  // unloads it.
  in_flight_.fetch_add(1);
  const int64_t version = entry->config.version;
  if (request->on_partial) {
    request->on_partial = [version, inner = std::move(request->on_partial)](
                              const InferResponse& partial) {
      InferResponse stamped = partial;
      stamped.model_version = version;
      return inner(stamped);
    };
  }
  request->done = [this, release, version, done = std::move(request->done),
                   wanted = request->requested_outputs](Result<InferResponse> result) mutable {
    if (result.ok()) {
      result->model_version = version;
      if (!wanted.empty()) {
        std::erase_if(result->outputs, [&](const Tensor& t) {
          return std::find(wanted.begin(), wanted.end(), t.name()) == wanted.end();
        });
      }
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

// ---- changes of the served set (the loader thread) ----------------------------------------

namespace {

// Runs a change of the served set and turns an exception escaping it into an error answer (and
// a log line): a hostile file or entry must not take the loader thread, and with it the server,
// down. The causes are fixed where they arise; this is the last line.
template <typename F>
Result<ReloadReport> Contained(const char* what, F&& change) {
  try {
    return change();
  } catch (const std::exception& e) {
    spdlog::error("{}: unexpected exception: {}", what, e.what());
    return Internal(std::string(what) + " failed unexpectedly: " + e.what());
  }
}

}  // namespace

void InferenceService::Reload(ReloadDone done) {
  Post([this, done = std::move(done)] {
    if (!accepting_) return done(Unavailable("the server is shutting down"));
    std::string file;
    {
      std::shared_lock lock(models_mu_);
      file = config_.file;
    }
    done(Contained("reload", [&]() -> Result<ReloadReport> {
      auto next = LoadConfigFile(file, backends_);
      if (!next.ok()) {
        return InvalidArgument(file + ": " + std::string(next.status().message()));
      }
      return ApplyConfig(std::move(*next));
    }));
  });
}

void InferenceService::LoadModel(const std::string& name, std::optional<nlohmann::json> entry,
                                 ReloadDone done) {
  Post([this, name, entry = std::move(entry), done = std::move(done)]() mutable {
    if (!accepting_) return done(Unavailable("the server is shutting down"));
    done(Contained("repository load", [&] { return DoLoadModel(name, std::move(entry)); }));
  });
}

void InferenceService::UnloadModel(const std::string& name, ReloadDone done) {
  Post([this, name, done = std::move(done)] {
    if (!accepting_) return done(Unavailable("the server is shutting down"));
    done(Contained("repository unload", [&] { return DoUnloadModel(name); }));
  });
}

Status InferenceService::CheckPlacement(const ModelConfig& m) const {
  if (!devices_.count(m.device_id)) {
    return FailedPrecondition("model '" + m.name + "': device " + std::to_string(m.device_id) +
                              " was not in use (nor locked) when the server started; restart "
                              "the server to serve models on it");
  }
  const std::string domain = MemoryOf(m, backends_).domain;
  if (!budgets_.count(domain)) {
    return FailedPrecondition("model '" + m.name + "': memory domain " + domain +
                              " has no budget (no model used it at start); restart the server "
                              "to serve models on it");
  }
  return Status::Ok();
}

Status InferenceService::LoadVersions(const std::map<int64_t, std::shared_ptr<Entry>>& versions,
                                      bool startup_only) {
  for (const auto& [v, entry] : versions) {
    {
      std::lock_guard lock(entry->mu);
      if (entry->loaded) continue;
      if (startup_only && entry->config.load != LoadMode::kStartup) continue;
      entry->held_unloaded = false;
    }
    Load(*entry);
    std::lock_guard lock(entry->mu);
    if (entry->state != ModelState::kReady) {
      return Unavailable("version " + std::to_string(v) + " failed to load: " + entry->reason);
    }
  }
  return Status::Ok();
}

void InferenceService::Publish(const std::string& name, std::shared_ptr<const Model> model) {
  std::vector<std::shared_ptr<Entry>> retired;
  {
    std::unique_lock lock(models_mu_);
    auto it = models_.find(name);
    if (it != models_.end()) {
      for (const auto& [v, entry] : it->second->versions) {
        const bool kept = model && model->versions.count(v) && model->versions.at(v) == entry;
        if (!kept) retired.push_back(entry);
      }
    }
    if (model) {
      models_[name] = std::move(model);
    } else if (it != models_.end()) {
      models_.erase(it);
    }
    const auto by = Clock::now() + config_.global.drain_timeout;
    for (const auto& entry : retired) {
      std::lock_guard entry_lock(entry->mu);
      entry->retired = true;
      entry->retire_by = by;
      retiring_.push_back(entry);
    }
  }
  // Requests parked on a retired version waiting for its load go where the routing sends them.
  for (const auto& entry : retired) {
    std::vector<std::unique_ptr<InferRequest>> waiting;
    int64_t in_flight = 0;
    {
      std::lock_guard lock(entry->mu);
      waiting.swap(entry->waiting);
      in_flight = entry->in_flight;
    }
    spdlog::info("model {}: retired; unloads when its {} requests in flight are done",
                 VersionName(entry->config), in_flight);
    for (auto& r : waiting) {
      r->model_version = 0;
      Submit(std::move(r));
    }
  }
  std::lock_guard loader_lock(loader_mu_);
  idle_check_ = true;  // a retired version with nothing in flight goes at once
  reaper_cv_.notify_all();
}

Result<ReloadReport> InferenceService::ApplyConfig(ServerConfig next) {
  ReloadReport report;
  // What cannot change while serving: reported, and the old values stay.
  ServerConfig current;
  Models models;
  {
    std::shared_lock lock(models_mu_);
    current = config_;
    models = models_;
  }
  const GlobalConfig& was = current.global;
  const GlobalConfig& now = next.global;
  auto restart = [&](bool changed, const char* field) {
    if (changed) report.restart.push_back(std::string("global.") + field);
  };
  restart(was.host != now.host, "host");
  restart(was.port != now.port, "port");
  restart(was.thread_num != now.thread_num, "thread_num");
  restart(was.max_request_mb != now.max_request_mb, "max_request_mb");
  restart(was.memory_pool_mb != now.memory_pool_mb, "memory_pool");
  restart(was.memory_headroom != now.memory_headroom, "memory_headroom");
  restart(was.drain_timeout != now.drain_timeout, "drain_timeout");
  restart(was.log_level != now.log_level, "log_level");
  restart(was.jobs.max != now.jobs.max || was.jobs.ttl != now.jobs.ttl, "jobs");
  restart(was.grpc_port != now.grpc_port, "grpc_port");
  restart(was.api_key != now.api_key, "api_key");
  restart(was.admin_key != now.admin_key, "admin_key");
  restart(was.max_connections != now.max_connections, "max_connections");
  restart(was.max_in_flight != now.max_in_flight, "max_in_flight");
  restart(was.cors_origins != now.cors_origins, "cors_origins");
  for (const auto& m : next.models) {
    if (Status s = CheckPlacement(m); !s.ok()) return s;
  }

  // Model by model, in the new file's order; models added through the API are kept.
  std::vector<std::string> order;
  std::map<std::string, std::vector<ModelConfig>> wanted;
  for (auto& m : next.models) {
    if (!wanted.count(m.name)) order.push_back(m.name);
    wanted[m.name].push_back(std::move(m));
  }
  std::vector<ModelConfig> served;  // the configs of what is served after this
  auto keep_current = [&](const std::string& name) {
    for (const auto& m : current.models) {
      if (m.name == name) served.push_back(m);
    }
  };
  for (const auto& name : order) {
    const auto old = models.find(name);
    const Model* before = old == models.end() ? nullptr : old->second.get();
    std::map<int64_t, std::shared_ptr<Entry>> versions;
    std::map<int64_t, std::shared_ptr<Entry>> fresh;
    std::vector<std::string> added, reloaded;
    for (const auto& m : wanted[name]) {
      if (before) {
        auto it = before->versions.find(m.version);
        if (it != before->versions.end() && it->second->config.fingerprint == m.fingerprint) {
          versions[m.version] = it->second;
          ++report.unchanged;
          continue;
        }
        (it == before->versions.end() ? added : reloaded).push_back(VersionName(m));
      } else {
        added.push_back(VersionName(m));
      }
      versions[m.version] = fresh[m.version] = MakeEntry(m);
    }
    if (Status s = LoadVersions(fresh, /*startup_only=*/true); !s.ok() && before) {
      // Availability first: what served keeps serving; the new versions go.
      report.kept.push_back(name + " (" + std::string(s.message()) + ")");
      for (const auto& [v, entry] : fresh) Unload(*entry);
      keep_current(name);
      continue;
    }
    // Routing comes from the new file: an unchanged version's Entry keeps its old config.
    auto model = MakeModel(std::move(versions), wanted[name].front(), /*from_api=*/false);
    if (before) {
      for (const auto& [v, entry] : before->versions) {
        auto it = model->versions.find(v);
        if (it == model->versions.end()) report.retired.push_back(VersionName(entry->config));
      }
      if (before->labels != model->labels || before->default_version != model->default_version ||
          before->canary.has_value() != model->canary.has_value() ||
          (before->canary && (before->canary->version != model->canary->version ||
                              before->canary->weight != model->canary->weight))) {
        report.rerouted.push_back(name);
      }
    }
    report.added.insert(report.added.end(), added.begin(), added.end());
    report.reloaded.insert(report.reloaded.end(), reloaded.begin(), reloaded.end());
    Publish(name, std::move(model));
    for (auto& m : wanted[name]) served.push_back(std::move(m));
  }
  for (const auto& [name, model] : models) {
    if (wanted.count(name)) continue;
    if (model->from_api) {
      keep_current(name);
      continue;
    }
    for (const auto& [v, entry] : model->versions) report.retired.push_back(VersionName(entry->config));
    Publish(name, nullptr);
  }
  {
    std::unique_lock lock(models_mu_);
    config_.models = std::move(served);
    config_.global.watch = now.watch;
    config_.global.model_roots = now.model_roots;
  }
  spdlog::info("config: reloaded: {} added, {} reloaded, {} retired, {} rerouted, {} kept, {} "
               "unchanged{}",
               report.added.size(), report.reloaded.size(), report.retired.size(),
               report.rerouted.size(), report.kept.size(), report.unchanged,
               report.restart.empty() ? ""
                                      : "; after a restart: " + Join(report.restart, ", "));
  return report;
}

Result<ReloadReport> InferenceService::DoLoadModel(const std::string& name,
                                                   std::optional<nlohmann::json> entry) {
  ReloadReport report;
  if (!entry) {
    std::shared_ptr<const Model> model;
    {
      std::shared_lock lock(models_mu_);
      auto it = models_.find(name);
      if (it == models_.end()) {
        return NotFound("unknown model '" + name +
                        "'; to add it, give its entry as parameters.config");
      }
      model = it->second;
    }
    MMS_RETURN_IF_ERROR(LoadVersions(model->versions, /*startup_only=*/false)
                            .WithContext("model '" + name + "'"));
    for (const auto& [v, e] : model->versions) report.added.push_back(VersionName(e->config));
    return report;
  }
  // A new or replacing entry: read as if it were in the YAML, files inside the model roots.
  if (!entry->is_object()) {
    return InvalidArgument("parameters.config: expected a model entry (a JSON object), found " +
                           QuoteJson(*entry));
  }
  if (!entry->contains("name")) (*entry)["name"] = name;
  if ((*entry)["name"] != name) {
    return InvalidArgument("parameters.config.name: expected '" + name +
                           "' (the model named in the URL), found " + QuoteJson((*entry)["name"]));
  }
  ServerConfig current;
  {
    std::shared_lock lock(models_mu_);
    current = config_;
  }
  auto configs = ParseModelEntry(*entry, current, backends_);
  if (!configs.ok()) return configs.status();
  for (const auto& m : *configs) {
    std::error_code ec;
    if (!m.path.empty()) {
      const fs::path real = fs::weakly_canonical(m.path, ec);
      bool inside = false;
      for (const auto& root : current.global.model_roots) {
        auto [r, p] = std::mismatch(root.begin(), root.end(), real.begin(), real.end());
        inside = inside || r == root.end();
      }
      if (!inside) {
        std::vector<std::string> roots;
        for (const auto& root : current.global.model_roots) roots.push_back(root.string());
        return InvalidArgument("parameters.config.path: expected a file inside the model roots (" +
                               Join(roots, ", ") + "; global.model_roots), found \"" +
                               real.string() + "\"");
      }
    }
    MMS_RETURN_IF_ERROR(CheckPlacement(m));
  }
  std::shared_ptr<const Model> before;
  {
    std::shared_lock lock(models_mu_);
    if (auto it = models_.find(name); it != models_.end()) before = it->second;
  }
  std::map<int64_t, std::shared_ptr<Entry>> versions;
  for (const auto& m : *configs) versions[m.version] = MakeEntry(m);
  if (Status s = LoadVersions(versions, /*startup_only=*/false); !s.ok()) {
    for (const auto& [v, e] : versions) Unload(*e);
    return s.WithContext("model '" + name + "'" +
                         (before ? " keeps serving what it served" : " was not added"));
  }
  for (const auto& [v, e] : versions) {
    ((before && before->versions.count(v)) ? report.reloaded : report.added)
        .push_back(VersionName(e->config));
  }
  if (before) {
    for (const auto& [v, e] : before->versions) report.retired.push_back(VersionName(e->config));
  }
  Publish(name, MakeModel(std::move(versions), configs->front(), /*from_api=*/true));
  {
    std::unique_lock lock(models_mu_);
    std::erase_if(config_.models, [&](const ModelConfig& m) { return m.name == name; });
    for (const auto& m : *configs) config_.models.push_back(m);
  }
  return report;
}

Result<ReloadReport> InferenceService::DoUnloadModel(const std::string& name) {
  std::shared_ptr<const Model> model;
  {
    std::shared_lock lock(models_mu_);
    auto it = models_.find(name);
    if (it == models_.end()) return NotFound("unknown model '" + name + "'");
    model = it->second;
  }
  ReloadReport report;
  for (const auto& [v, entry] : model->versions) {
    std::vector<std::unique_ptr<InferRequest>> waiting;
    {
      std::lock_guard lock(entry->mu);
      entry->held_unloaded = true;
      waiting.swap(entry->waiting);
    }
    for (auto& r : waiting) {
      r->done(Unavailable("model '" + name + "' was unloaded through the repository API"));
    }
    Unload(*entry);
    {
      std::lock_guard lock(entry->mu);
      entry->state = ModelState::kUnavailable;
      entry->reason = "unloaded through the repository API";
    }
    report.retired.push_back(VersionName(entry->config));
  }
  return report;
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
  for (auto& entry : AllEntries()) {
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
