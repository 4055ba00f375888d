#include "service/inference_service.h"

#include <boost/container/small_vector.hpp>

#include "common/logging.h"
#include "common/strings.h"
#include "service/access_log.h"

namespace mmserve {

namespace {

Status ValidateRequest(const ModelSignature& signature, const InferRequest& request) {
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

// A request counted in flight, on its version and in the service, from admission until its
// answer is delivered. The version is let go before the caller hears back, so the caller's next
// step (another model's load that needs room) finds it evictable; the service's drain waits
// until the answer is out.
class InferenceService::InFlight {
 public:
  // REQUIRES: `version` already counts the request.
  InFlight(InferenceService& service, std::shared_ptr<ModelVersion> version)
      : service_(service), version_(std::move(version)) {
    service_.in_flight_.fetch_add(1);
  }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;
  ~InFlight() {
    ReleaseVersion();
    if (service_.in_flight_.fetch_sub(1) == 1) {
      std::lock_guard lock(service_.drain_mu_);
      service_.drained_.notify_all();
    }
  }

  void ReleaseVersion() {
    if (!version_) return;
    const bool none = version_->Release(service_.time_.Now());
    const auto& keep_alive = version_->config().keep_alive;
    if (none && keep_alive && keep_alive->count() == 0) service_.lifecycle_.WakeReaper();
    version_.reset();
  }

 private:
  InferenceService& service_;
  std::shared_ptr<ModelVersion> version_;
};

InferenceService::InferenceService(ServerConfig config, const BackendRegistry& backends,
                                   RuntimeGuard& guard, const TimeSource& time)
    : time_(time),
      jobs_(config.global.jobs, time),
      registry_(config, time),
      lifecycle_(config, backends, guard, registry_, time),
      changes_(backends, registry_, lifecycle_),
      watch_({.stamp = [this] { return WatchStamp(registry_.config()); },
              .interval = [this] { return registry_.watch(); },
              .reload = [this](std::function<void()> done) { ReloadChanged(std::move(done)); }},
             time) {
  std::map<std::string, VersionMap> versions;
  for (const auto& m : config.models) versions[m.name][m.version] = lifecycle_.NewVersion(m);
  for (auto& [name, v] : versions) {
    const ModelConfig routing = v.begin()->second->config();
    registry_.Publish(name, ServedModel::Make(std::move(v), routing, /*from_api=*/false));
  }
  lifecycle_.Start();
  watch_.Start();
}

InferenceService::~InferenceService() { Shutdown(std::chrono::milliseconds(0)); }

void InferenceService::LoadStartupModels() {
  for (const auto& version : registry_.StartupVersions()) lifecycle_.Load(*version);
}

bool InferenceService::Ready() const {
  if (!accepting_) return false;
  for (const auto& version : registry_.All()) {
    if (version->config().load != LoadMode::kStartup) continue;
    const ModelVersion::View v = version->view();
    if (v.retire_by) continue;
    // A start-up model unloaded after idling counts: its next request loads it; so does one an
    // operator unloaded on purpose.
    switch (v.state) {
      case VersionState::kReady:
      case VersionState::kDraining:
      case VersionState::kOnDemand:
      case VersionState::kLoadingOnDemand:
      case VersionState::kHeld: continue;
      case VersionState::kBackingOff: continue;  // its next request loads it again
      case VersionState::kFailed: return false;
      case VersionState::kUnloading:
        if (v.unloading_to != VersionState::kUnloaded) continue;
        return false;
      case VersionState::kUnloaded:
      case VersionState::kLoading: return false;
    }
  }
  return true;
}

Result<ModelInfo> InferenceService::GetModel(const std::string& name, int64_t version,
                                             const std::string& label) const {
  return registry_.Get({.name = name, .version = version, .label = label});
}

std::vector<ModelInfo> InferenceService::ListModels() const { return registry_.List(); }

Result<ModelDescription> InferenceService::Describe(const ModelRef& ref,
                                                    const std::string& request_id) const {
  return registry_.Describe(ref, request_id);
}

// ---- the request path -----------------------------------------------------------------------

void InferenceService::Submit(std::unique_ptr<InferRequest> request) {
  SubmitTo(nullptr, std::move(request));
}

void InferenceService::Submit(const ModelDescription& target,
                              std::unique_ptr<InferRequest> request) {
  SubmitTo(target.version, std::move(request));
}

void InferenceService::SubmitTo(const std::shared_ptr<ModelVersion>& pinned,
                                std::unique_ptr<InferRequest> request) {
  LogAccessOnAnswer(*request);
  if (!accepting_) return request->done(Unavailable("the server is shutting down"));
  if (Status s = ApplySchedulingParams(*request); !s.ok()) {
    return request->done(s.WithContext("model '" + request->model_name + "'"));
  }
  Route(pinned, std::move(request));
}

void InferenceService::Route(const std::shared_ptr<ModelVersion>& pinned,
                             std::unique_ptr<InferRequest> request) {
  if (!accepting_) return request->done(Unavailable("the server is shutting down"));
  std::shared_ptr<ModelVersion> version;
  std::shared_ptr<LoadedModel> loaded;
  const int64_t asked = request->model_version;  // 0: the routing's choice
  // Routing and the in-flight count happen under the registry's lock, so a version a reload
  // retires either counts this request (and waits for it) or was never chosen for it.
  Status rejected = registry_.RouteAnd(
      {.name = request->model_name,
       .version = request->model_version,
       .label = request->model_label},
      request->id, pinned, [&](const std::shared_ptr<ModelVersion>& routed) {
        version = routed;
        request->model_version = routed->version();
        // The deadline holds from now on, also while the request waits for a load.
        request->deadline = DeadlineFor(*request, routed->levels(),
                                        LevelOf(*request, routed->config().priority));
        return Admit(routed, asked, request, loaded);
      });
  if (!rejected.ok()) return request->done(std::move(rejected));
  if (loaded) SubmitLoaded(std::move(version), std::move(loaded), std::move(request));
}

Status InferenceService::WithSession(const ModelRef& ref,
                                     const std::function<Status(const Session&)>& f) {
  if (!accepting_) return Unavailable("the server is shutting down");
  std::shared_ptr<ModelVersion> version;
  std::shared_ptr<LoadedModel> loaded;
  MMS_RETURN_IF_ERROR(registry_.RouteAnd(
      ref, {}, nullptr, [&](const std::shared_ptr<ModelVersion>& routed) -> Status {
        loaded = routed->Borrow(time_.Now());  // counted in flight: an idle unload sees it
        if (!loaded) {  // neither kReady nor kDraining: no session to ask
          return Unavailable("model '" + routed->VersionName() + "' is not loaded (" +
                             std::string(ModelStateName(PublicState(routed->view().state))) +
                             "); it loads on its first inference request, or with `mmserve "
                             "load " + routed->config().name + "` (POST /v2/repository/models/" +
                             routed->config().name + "/load)");
        }
        version = routed;
        return Status::Ok();
      }));
  InFlight token(*this, version);
  return f(*loaded->session);
}

Status InferenceService::Admit(const std::shared_ptr<ModelVersion>& version, int64_t asked,
                               std::unique_ptr<InferRequest>& request,
                               std::shared_ptr<LoadedModel>& loaded) {
  ModelVersion::Admission admission =
      version->Admit(request, time_.Now(), [this, asked] { return ResumeAfterWait(asked); });
  if (admission.start_load) lifecycle_.QueueDemandLoad(version);
  loaded = std::move(admission.serve);
  return admission.rejected;
}

ParkedRequest::Resume InferenceService::ResumeAfterWait(int64_t asked) {
  return [this, asked](std::unique_ptr<InferRequest> request, WaitEnd end) {
    switch (end.kind) {
      case WaitEnd::Kind::kServe:
        return SubmitLoaded(std::move(end.version), std::move(end.loaded), std::move(request));
      case WaitEnd::Kind::kFail: return request->done(std::move(end.error));
      case WaitEnd::Kind::kRouteAnew:
        // Where the routing sends it now, for what the client asked (a retired version it
        // named is gone: 404 naming what is served).
        request->model_version = asked;
        return Route(nullptr, std::move(request));
    }
  };
}

void InferenceService::SubmitLoaded(std::shared_ptr<ModelVersion> version,
                                    std::shared_ptr<LoadedModel> loaded,
                                    std::unique_ptr<InferRequest> request) {
  auto token = std::make_shared<InFlight>(*this, version);
  Status s = ValidateRequest(loaded->session->signature(), *request);
  if (!s.ok()) {
    token->ReleaseVersion();
    return request->done(s.WithContext("model '" + request->model_name + "'"));
  }
  // Stamp the version on every answer and keep only the outputs the request asked for. The
  // wrapper holds no reference to the loaded model, so the last one to finish never unloads it.
  const int64_t v = version->version();
  if (request->on_partial) {
    request->on_partial = [v, inner = std::move(request->on_partial)](
                              const InferResponse& partial) {
      InferResponse stamped = partial;
      stamped.model_version = v;
      return inner(stamped);
    };
  }
  request->done = [token = std::move(token), v, done = std::move(request->done),
                   wanted = request->requested_outputs](Result<InferResponse> result) mutable {
    if (result.ok()) {
      result->model_version = v;
      if (!wanted.empty()) {
        std::erase_if(result->outputs, [&](const Tensor& t) {
          return std::find(wanted.begin(), wanted.end(), t.name()) == wanted.end();
        });
      }
    }
    token->ReleaseVersion();
    done(std::move(result));
    token.reset();  // the service's count: after the answer is out
  };
  (void)loaded->scheduler->Enqueue(std::move(request));  // completes the request itself on error
}

void InferenceService::ReloadChanged(std::function<void()> done) {
  spdlog::info("config: the YAML file or its model files changed; reloading");
  Reload([done = std::move(done)](const Result<ReloadReport>& result) {
    if (!result.ok()) {
      spdlog::error("config: reload rejected, the served models are unchanged: {}",
                    result.status().message());
    }
    done();
  });
}

// ---- changes of the served set (the loader thread) ------------------------------------------

void InferenceService::Reload(ReloadDone done) {
  lifecycle_.Post([this, done = std::move(done)] {
    if (!accepting_) return done(Unavailable("the server is shutting down"));
    Result<ReloadReport> result = Contained("reload", [&] { return changes_.Reload(); });
    if (result.ok()) {
      lifecycle_.events().Record("reloaded", "", 0, ReloadSummary(*result));
    } else {
      lifecycle_.events().Record("reload_rejected", "", 0, std::string(result.status().message()));
    }
    done(result);
  });
}

void InferenceService::LoadModel(const std::string& name, std::optional<nlohmann::json> entry,
                                 ReloadDone done) {
  lifecycle_.Post([this, name, entry = std::move(entry), done = std::move(done)]() mutable {
    if (!accepting_) return done(Unavailable("the server is shutting down"));
    done(Contained("repository load", [&] { return changes_.LoadModel(name, std::move(entry)); }));
  });
}

void InferenceService::UnloadModel(const std::string& name, ReloadDone done) {
  lifecycle_.Post([this, name, done = std::move(done)] {
    if (!accepting_) return done(Unavailable("the server is shutting down"));
    done(Contained("repository unload", [&] { return changes_.UnloadModel(name); }));
  });
}

void InferenceService::Shutdown(std::chrono::milliseconds drain_timeout) {
  if (accepting_.exchange(false)) {
    spdlog::info("service: stopped accepting requests; draining {} in flight", in_flight_.load());
  }
  watch_.Stop();
  lifecycle_.Stop();
  for (auto& version : registry_.All()) {
    for (auto& parked : version->StopLoadingOnDemand()) {
      parked.End({.kind = WaitEnd::Kind::kFail,
                  .error = Unavailable("the server is shutting down")});
    }
  }
  {
    std::unique_lock lock(drain_mu_);
    if (!drained_.wait_for(lock, drain_timeout, [&] { return in_flight_.load() == 0; })) {
      spdlog::warn("service: {} requests still in flight after {} ms; they are answered "
                   "Unavailable",
                   in_flight_.load(), drain_timeout.count());
    }
  }
  lifecycle_.UnloadAll();
}

}  // namespace mmserve
