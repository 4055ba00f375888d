#include "server/grpc/grpc_frontend.h"

#include <charconv>
#include <cstring>
#include <deque>
#include <mutex>

#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>

#include "common/json.h"
#include "common/logging.h"
#include "common/strings.h"
#include "grpc_service.grpc.pb.h"
#include "server/model_statistics.h"
#include "server/server_info.h"
#include "server/triton_config.h"

namespace mmserve {
namespace {

namespace pb = inference;
using grpc::CallbackServerContext;
using grpc::ServerUnaryReactor;

grpc::StatusCode GrpcCode(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return grpc::StatusCode::OK;
    case StatusCode::kInvalidArgument: return grpc::StatusCode::INVALID_ARGUMENT;
    case StatusCode::kNotFound: return grpc::StatusCode::NOT_FOUND;
    case StatusCode::kAlreadyExists: return grpc::StatusCode::ALREADY_EXISTS;
    case StatusCode::kFailedPrecondition: return grpc::StatusCode::FAILED_PRECONDITION;
    case StatusCode::kResourceExhausted: return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case StatusCode::kUnavailable: return grpc::StatusCode::UNAVAILABLE;
    case StatusCode::kDeadlineExceeded: return grpc::StatusCode::DEADLINE_EXCEEDED;
    case StatusCode::kCancelled: return grpc::StatusCode::CANCELLED;
    case StatusCode::kUnimplemented: return grpc::StatusCode::UNIMPLEMENTED;
    case StatusCode::kInternal: return grpc::StatusCode::INTERNAL;
    case StatusCode::kUnauthenticated: return grpc::StatusCode::UNAUTHENTICATED;
    case StatusCode::kPermissionDenied: return grpc::StatusCode::PERMISSION_DENIED;
  }
  return grpc::StatusCode::UNKNOWN;
}

grpc::Status ToGrpc(const Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(GrpcCode(s.code()), std::string(s.message()));
}

ParamValue FromProto(const pb::InferParameter& p) {
  switch (p.parameter_choice_case()) {
    case pb::InferParameter::kBoolParam: return p.bool_param();
    case pb::InferParameter::kInt64Param: return p.int64_param();
    case pb::InferParameter::kDoubleParam: return p.double_param();
    case pb::InferParameter::kUint64Param: return static_cast<int64_t>(p.uint64_param());
    default: return p.string_param();
  }
}

void ToProto(const ParamValue& v, pb::InferParameter& p) {
  if (const auto* b = std::get_if<bool>(&v)) p.set_bool_param(*b);
  if (const auto* i = std::get_if<int64_t>(&v)) p.set_int64_param(*i);
  if (const auto* d = std::get_if<double>(&v)) p.set_double_param(*d);
  if (const auto* s = std::get_if<std::string>(&v)) p.set_string_param(ToValidUtf8(*s));
}

template <typename To, typename Repeated>
std::string Pack(const Repeated& values) {
  std::string out(values.size() * sizeof(To), '\0');
  for (int i = 0; i < values.size(); ++i) {
    const To v = static_cast<To>(values.Get(i));
    std::memcpy(out.data() + static_cast<size_t>(i) * sizeof(To), &v, sizeof(To));
  }
  return out;
}

// The typed contents of one input as the tensor's bytes.
Result<std::string> ContentsBytes(DataType type, const pb::InferTensorContents& c,
                                  const std::string& where) {
  switch (type) {
    case DataType::kBool: return Pack<uint8_t>(c.bool_contents());
    case DataType::kInt8: return Pack<int8_t>(c.int_contents());
    case DataType::kInt16: return Pack<int16_t>(c.int_contents());
    case DataType::kInt32: return Pack<int32_t>(c.int_contents());
    case DataType::kInt64: return Pack<int64_t>(c.int64_contents());
    case DataType::kUint8: return Pack<uint8_t>(c.uint_contents());
    case DataType::kUint16: return Pack<uint16_t>(c.uint_contents());
    case DataType::kUint32: return Pack<uint32_t>(c.uint_contents());
    case DataType::kUint64: return Pack<uint64_t>(c.uint64_contents());
    case DataType::kFp32: return Pack<float>(c.fp32_contents());
    case DataType::kFp64: return Pack<double>(c.fp64_contents());
    case DataType::kBytes: {
      std::string out;
      for (const auto& e : c.bytes_contents()) Tensor::AppendBytesElement(out, e);
      return out;
    }
    case DataType::kFp16:
    case DataType::kBf16:
      return InvalidArgument(where + ": " + std::string(DataTypeName(type)) +
                             " data must travel in raw_input_contents");
  }
  return InvalidArgument(where + ": unsupported datatype");
}

Result<std::unique_ptr<InferRequest>> DecodeUnguarded(const pb::ModelInferRequest& in) {
  auto r = std::make_unique<InferRequest>();
  r->model_name = in.model_name();
  if (r->model_name.empty()) return InvalidArgument("model_name: required");
  MMS_ASSIGN_OR_RETURN(r->model_version, ParseVersion(in.model_version(), "model_version"));
  r->id = in.id();
  for (const auto& [k, v] : in.parameters()) r->parameters[k] = FromProto(v);
  const bool raw = in.raw_input_contents_size() > 0;
  if (raw && in.raw_input_contents_size() != in.inputs_size()) {
    return InvalidArgument("raw_input_contents: expected one entry per input (" +
                           std::to_string(in.inputs_size()) + "), found " +
                           std::to_string(in.raw_input_contents_size()));
  }
  for (int i = 0; i < in.inputs_size(); ++i) {
    const auto& t = in.inputs(i);
    const std::string where = "inputs[" + std::to_string(i) + "] ('" + t.name() + "')";
    auto type = ParseDataType(t.datatype());
    if (!type) return InvalidArgument(where + ".datatype: unknown '" + t.datatype() + "'");
    if (raw && t.has_contents()) {
      return InvalidArgument(where + ".contents: must not be set when raw_input_contents is used");
    }
    std::string data;
    if (raw) {
      data = in.raw_input_contents(i);
    } else {
      MMS_ASSIGN_OR_RETURN(data, ContentsBytes(*type, t.contents(), where));
    }
    Tensor tensor(t.name(), *type, Shape(t.shape().begin(), t.shape().end()), std::move(data));
    if (Status s = tensor.Validate(); !s.ok()) {
      return InvalidArgument(where + ": " + std::string(s.message()));
    }
    r->inputs.push_back(std::move(tensor));
  }
  for (const auto& o : in.outputs()) r->requested_outputs.push_back(o.name());
  return r;
}

// Decode with the last line of defence: an exception (none is known to escape) becomes an
// INTERNAL answer, not a terminated server.
Result<std::unique_ptr<InferRequest>> Decode(const pb::ModelInferRequest& in) {
  try {
    return DecodeUnguarded(in);
  } catch (const std::exception& e) {
    spdlog::error("grpc: unexpected exception decoding a request: {}", e.what());
    return Internal(std::string("unexpected error: ") + e.what());
  }
}

void Encode(const InferResponse& response, const std::string& model, const std::string& id,
            pb::ModelInferResponse& out) {
  out.set_model_name(model);
  out.set_model_version(std::to_string(response.model_version));
  out.set_id(id);
  for (const auto& [k, v] : response.parameters) ToProto(v, (*out.mutable_parameters())[k]);
  for (const auto& t : response.outputs) {
    auto* o = out.add_outputs();
    o->set_name(t.name());
    o->set_datatype(std::string(DataTypeName(t.type())));
    for (int64_t d : t.shape()) o->add_shape(d);
    out.add_raw_output_contents(t.data());
  }
}

void TensorMetadata(const std::vector<TensorSpec>& specs,
                    google::protobuf::RepeatedPtrField<pb::ModelMetadataResponse::TensorMetadata>* out) {
  for (const auto& s : specs) {
    auto* t = out->Add();
    t->set_name(s.name);
    t->set_datatype(std::string(DataTypeName(s.type)));
    for (int64_t d : s.shape) t->add_shape(d);
  }
}

void Set(pb::StatisticDuration* d, const StatDuration& from) {
  d->set_count(static_cast<uint64_t>(from.count));
  d->set_ns(static_cast<uint64_t>(from.ns));
}

void Statistics(const ModelInfo& info, pb::ModelStatistics& out) {
  const ModelStatistics stats = StatisticsOf(info);
  out.set_name(stats.name);
  out.set_version(stats.version);
  auto* memory = out.add_memory_usage();
  memory->set_type("CPU");
  memory->set_id(info.config.device_id);
  memory->set_byte_size(static_cast<uint64_t>(stats.resident_bytes));
  if (!stats.loaded) return;
  out.set_inference_count(static_cast<uint64_t>(stats.inference_count));
  out.set_execution_count(static_cast<uint64_t>(stats.execution_count));
  auto* s = out.mutable_inference_stats();
  Set(s->mutable_success(), stats.success);
  Set(s->mutable_fail(), stats.fail);
  Set(s->mutable_queue(), stats.queue);
  Set(s->mutable_compute_infer(), stats.compute_infer);
  for (const auto& [size, b] : stats.batches) {
    auto* batch = out.add_batch_stats();
    batch->set_batch_size(static_cast<uint64_t>(size));
    Set(batch->mutable_compute_infer(), b);
  }
}

// A unary call whose answer comes later, from whichever thread finishes the request.
class UnaryCall final : public ServerUnaryReactor {
 public:
  std::shared_ptr<std::atomic<bool>> cancelled = std::make_shared<std::atomic<bool>>(false);
  void OnCancel() override { cancelled->store(true); }
  void OnDone() override { delete this; }
};

}  // namespace

struct GrpcFrontend::Impl final : pb::GRPCInferenceService::CallbackService {
  Impl(InferenceService& s, Access a, int64_t limit)
      : service(s), access(std::move(a)), max_in_flight(limit) {}

  InferenceService& service;
  Access access;
  std::unique_ptr<grpc::Server> server;
  // Inference requests being handled (unary calls and each request of a stream), bounded by
  // global.max_in_flight as on HTTP. Shared with the requests' callbacks, which may outlive a
  // call.
  const int64_t max_in_flight;  // 0 = no limit
  std::shared_ptr<std::atomic<int64_t>> in_flight = std::make_shared<std::atomic<int64_t>>(0);

  // Takes a slot for one request; on success `r.done` gives it back once the answer is made.
  Status Admit(InferRequest& r) {
    if (max_in_flight <= 0) return Status::Ok();
    if (in_flight->fetch_add(1) >= max_in_flight) {
      in_flight->fetch_sub(1);
      return Unavailable("too many requests in progress (global.max_in_flight is " +
                         std::to_string(max_in_flight) + ")");
    }
    r.done = [count = in_flight, done = std::move(r.done)](Result<InferResponse> result) {
      count->fetch_sub(1);
      done(std::move(result));
    };
    return Status::Ok();
  }

  Status Authorize(CallbackServerContext* context, Scope scope) const {
    std::string authorization;
    const auto& md = context->client_metadata();
    if (auto it = md.find("authorization"); it != md.end()) {
      authorization.assign(it->second.data(), it->second.size());
    }
    return access.Check(scope, authorization);
  }

  // The model version a metadata-style request names, after checking the caller's key.
  Result<ModelInfo> Lookup(CallbackServerContext* context, const std::string& name,
                           const std::string& version_text) const {
    MMS_RETURN_IF_ERROR(Authorize(context, Scope::kInference));
    MMS_ASSIGN_OR_RETURN(const int64_t version, ParseVersion(version_text, "version"));
    return service.GetModel(name, version);
  }

  // Answers at once.
  static ServerUnaryReactor* Now(CallbackServerContext* context, const Status& s) {
    auto* reactor = context->DefaultReactor();
    reactor->Finish(ToGrpc(s));
    return reactor;
  }

  // The deadline the client set, on the service's clock.
  static Clock::time_point Deadline(CallbackServerContext* context) {
    const auto deadline = context->deadline();
    if (deadline >= std::chrono::system_clock::time_point::max() - std::chrono::hours(24 * 365)) {
      return Clock::time_point::max();
    }
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                              deadline - std::chrono::system_clock::now());
  }

  // The client's x-request-id metadata (cut to 128 bytes), for the access log.
  static std::string RequestId(CallbackServerContext* context) {
    const auto& metadata = context->client_metadata();
    auto it = metadata.find("x-request-id");
    if (it == metadata.end()) return {};
    return std::string(it->second.data(), std::min<size_t>(it->second.size(), 128));
  }

  ServerUnaryReactor* ServerLive(CallbackServerContext* c, const pb::ServerLiveRequest*,
                                 pb::ServerLiveResponse* out) override {
    out->set_live(true);
    return Now(c, Status::Ok());
  }

  ServerUnaryReactor* ServerReady(CallbackServerContext* c, const pb::ServerReadyRequest*,
                                  pb::ServerReadyResponse* out) override {
    out->set_ready(service.Ready());
    return Now(c, Status::Ok());
  }

  ServerUnaryReactor* ModelReady(CallbackServerContext* c, const pb::ModelReadyRequest* in,
                                 pb::ModelReadyResponse* out) override {
    auto info = Lookup(c, in->name(), in->version());
    if (!info.ok()) return Now(c, info.status());
    out->set_ready(info->state == ModelState::kReady && service.accepting());
    return Now(c, Status::Ok());
  }

  ServerUnaryReactor* ServerMetadata(CallbackServerContext* c, const pb::ServerMetadataRequest*,
                                     pb::ServerMetadataResponse* out) override {
    if (Status s = Authorize(c, Scope::kInference); !s.ok()) return Now(c, s);
    out->set_name(std::string(kServerName));
    out->set_version(std::string(kServerVersion));
    for (auto e : kServerExtensions) out->add_extensions(std::string(e));
    return Now(c, Status::Ok());
  }

  ServerUnaryReactor* ModelMetadata(CallbackServerContext* c, const pb::ModelMetadataRequest* in,
                                    pb::ModelMetadataResponse* out) override {
    auto info = Lookup(c, in->name(), in->version());
    if (!info.ok()) return Now(c, info.status());
    out->set_name(info->config.name);
    for (int64_t v : info->versions) out->add_versions(std::to_string(v));
    out->set_platform(PlatformOf(*info));
    TensorMetadata(info->signature.inputs, out->mutable_inputs());
    TensorMetadata(info->signature.outputs, out->mutable_outputs());
    return Now(c, Status::Ok());
  }

  ServerUnaryReactor* ModelConfig(CallbackServerContext* c, const pb::ModelConfigRequest* in,
                                  pb::ModelConfigResponse* out) override {
    auto info = Lookup(c, in->name(), in->version());
    if (!info.ok()) return Now(c, info.status());
    google::protobuf::util::JsonParseOptions options;
    options.ignore_unknown_fields = true;
    const auto parsed = google::protobuf::util::JsonStringToMessage(
        DumpJson(TritonModelConfig(*info)), out->mutable_config(), options);
    if (!parsed.ok()) return Now(c, Internal("model config: " + parsed.ToString()));
    return Now(c, Status::Ok());
  }

  ServerUnaryReactor* ModelStatistics(CallbackServerContext* c,
                                      const pb::ModelStatisticsRequest* in,
                                      pb::ModelStatisticsResponse* out) override {
    if (Status s = Authorize(c, Scope::kInference); !s.ok()) return Now(c, s);
    auto version = ParseVersion(in->version(), "version");
    if (!version.ok()) return Now(c, version.status());
    bool found = in->name().empty();
    for (const auto& info : service.ListModels()) {
      if (!in->name().empty() && info.config.name != in->name()) continue;
      if (*version != 0 && info.config.version != *version) continue;
      found = true;
      Statistics(info, *out->add_model_stats());
    }
    if (!found) return Now(c, NotFound("model '" + in->name() + "' is not served"));
    return Now(c, Status::Ok());
  }

  ServerUnaryReactor* RepositoryIndex(CallbackServerContext* c,
                                      const pb::RepositoryIndexRequest* in,
                                      pb::RepositoryIndexResponse* out) override {
    if (Status s = Authorize(c, Scope::kInference); !s.ok()) return Now(c, s);
    for (const auto& info : service.ListModels()) {
      if (in->ready() && info.state != ModelState::kReady) continue;
      auto* m = out->add_models();
      m->set_name(info.config.name);
      m->set_version(std::to_string(info.config.version));
      m->set_state(std::string(ModelStateName(info.state)));
      if (info.state != ModelState::kReady) m->set_reason(ToValidUtf8(info.reason));
    }
    return Now(c, Status::Ok());
  }

  ServerUnaryReactor* RepositoryModelLoad(CallbackServerContext* c,
                                          const pb::RepositoryModelLoadRequest* in,
                                          pb::RepositoryModelLoadResponse*) override {
    if (Status s = Authorize(c, Scope::kAdmin); !s.ok()) return Now(c, s);
    std::optional<nlohmann::json> entry;
    if (auto it = in->parameters().find("config"); it != in->parameters().end()) {
      const std::string& text = it->second.parameter_choice_case() ==
                                        pb::ModelRepositoryParameter::kBytesParam
                                    ? it->second.bytes_param()
                                    : it->second.string_param();
      JsonError error;
      entry = ParseJson(text, &error);
      if (entry->is_discarded()) {
        return Now(c, InvalidArgument("parameters.config: expected a JSON model entry, found text "
                                      "that " + DescribeJsonError(error)));
      }
    }
    auto* reactor = c->DefaultReactor();
    service.LoadModel(in->model_name(), std::move(entry),
                      [reactor](const Result<ReloadReport>& r) {
                        reactor->Finish(ToGrpc(r.ok() ? Status::Ok() : r.status()));
                      });
    return reactor;
  }

  ServerUnaryReactor* RepositoryModelUnload(CallbackServerContext* c,
                                            const pb::RepositoryModelUnloadRequest* in,
                                            pb::RepositoryModelUnloadResponse*) override {
    if (Status s = Authorize(c, Scope::kAdmin); !s.ok()) return Now(c, s);
    auto* reactor = c->DefaultReactor();
    service.UnloadModel(in->model_name(), [reactor](const Result<ReloadReport>& r) {
      reactor->Finish(ToGrpc(r.ok() ? Status::Ok() : r.status()));
    });
    return reactor;
  }

  ServerUnaryReactor* ModelInfer(CallbackServerContext* c, const pb::ModelInferRequest* in,
                                 pb::ModelInferResponse* out) override {
    if (Status s = Authorize(c, Scope::kInference); !s.ok()) return Now(c, s);
    auto decoded = Decode(*in);
    if (!decoded.ok()) return Now(c, decoded.status());
    auto* call = new UnaryCall();
    std::unique_ptr<InferRequest> r = std::move(*decoded);
    r->route = "grpc ModelInfer";
    r->trace_id = RequestId(c);
    r->deadline = Deadline(c);
    r->cancelled = [flag = call->cancelled] { return flag->load(); };
    r->done = [call, out, model = r->model_name, id = r->id](Result<InferResponse> result) {
      if (result.ok()) Encode(*result, model, id, *out);
      call->Finish(ToGrpc(result.ok() ? Status::Ok() : result.status()));
    };
    if (Status s = Admit(*r); !s.ok()) {
      r->done(s);
      return call;
    }
    service.Submit(std::move(r));
    return call;
  }

  // One bidirectional stream: reads and submits requests as they come, writes answers in the
  // order they are ready (one write in flight at a time), finishes once the client has closed
  // its side and every request it sent has been answered.
  class Stream final
      : public grpc::ServerBidiReactor<pb::ModelInferRequest, pb::ModelStreamInferResponse> {
   public:
    Stream(Impl& impl, CallbackServerContext* context) : impl_(impl), context_(context) {
      if (Status s = impl_.Authorize(context, Scope::kInference); !s.ok()) {
        finished_ = true;
        Finish(ToGrpc(s));
        return;
      }
      StartRead(&request_);
    }

    void OnReadDone(bool ok) override {
      if (!ok) {
        std::lock_guard lock(mu_);
        reads_done_ = true;
        MaybeFinishLocked();
        return;
      }
      auto decoded = Decode(request_);
      const std::string id = request_.id();
      request_.Clear();
      if (!decoded.ok()) {
        pb::ModelStreamInferResponse error;
        error.set_error_message(ToValidUtf8(decoded.status().message()));
        error.mutable_infer_response()->set_id(id);
        std::lock_guard lock(mu_);
        WriteLocked(std::move(error));
      } else {
        Submit(std::move(*decoded));
      }
      StartRead(&request_);
    }

    void OnWriteDone(bool ok) override {
      std::lock_guard lock(mu_);
      out_.pop_front();
      if (!ok) broken_->store(true);
      if (!out_.empty() && !broken_->load()) {
        StartWrite(&out_.front());
        return;
      }
      out_.clear();
      writing_ = false;
      MaybeFinishLocked();
    }

    void OnCancel() override { broken_->store(true); }
    void OnDone() override { delete this; }

   private:
    void Submit(std::unique_ptr<InferRequest> r) {
      {
        std::lock_guard lock(mu_);
        ++pending_;
      }
      r->route = "grpc ModelStreamInfer";
      r->trace_id = Impl::RequestId(context_);
      r->deadline = Impl::Deadline(context_);
      r->cancelled = [flag = broken_] { return flag->load(); };
      const std::string model = r->model_name, id = r->id;
      r->on_partial = [this, model, id](const InferResponse& partial) {
        if (broken_->load()) return false;
        pb::ModelStreamInferResponse msg;
        Encode(partial, model, id, *msg.mutable_infer_response());
        (*msg.mutable_infer_response()->mutable_parameters())["triton_final_response"]
            .set_bool_param(false);
        std::lock_guard lock(mu_);
        WriteLocked(std::move(msg));
        return true;
      };
      r->done = [this, model, id](Result<InferResponse> result) {
        pb::ModelStreamInferResponse msg;
        if (result.ok()) {
          Encode(*result, model, id, *msg.mutable_infer_response());
          (*msg.mutable_infer_response()->mutable_parameters())["triton_final_response"]
              .set_bool_param(true);
        } else {
          msg.set_error_message(ToValidUtf8(result.status().message()));
          msg.mutable_infer_response()->set_model_name(model);
          msg.mutable_infer_response()->set_id(id);
        }
        std::lock_guard lock(mu_);
        WriteLocked(std::move(msg));
        --pending_;
        MaybeFinishLocked();
      };
      if (Status s = impl_.Admit(*r); !s.ok()) return r->done(s);
      impl_.service.Submit(std::move(r));
    }

    // REQUIRES: mu_ held.
    void WriteLocked(pb::ModelStreamInferResponse msg) {
      if (broken_->load() || finished_) return;
      out_.push_back(std::move(msg));
      if (!writing_) {
        writing_ = true;
        StartWrite(&out_.front());
      }
    }

    // REQUIRES: mu_ held.
    void MaybeFinishLocked() {
      if (finished_ || !reads_done_ || pending_ > 0 || writing_) return;
      finished_ = true;
      Finish(broken_->load() ? grpc::Status(grpc::StatusCode::CANCELLED, "the stream broke")
                             : grpc::Status::OK);
    }

    Impl& impl_;
    CallbackServerContext* context_;
    pb::ModelInferRequest request_;  // the read in progress
    // Reactions may run inline with the Start* calls made under it.
    std::recursive_mutex mu_;
    std::deque<pb::ModelStreamInferResponse> out_;  // guarded by mu_; front is being written
    bool writing_ = false;                          // guarded by mu_
    bool reads_done_ = false;                       // guarded by mu_
    bool finished_ = false;                         // guarded by mu_
    int64_t pending_ = 0;                           // guarded by mu_
    std::shared_ptr<std::atomic<bool>> broken_ = std::make_shared<std::atomic<bool>>(false);
  };

  grpc::ServerBidiReactor<pb::ModelInferRequest, pb::ModelStreamInferResponse>* ModelStreamInfer(
      CallbackServerContext* context) override {
    return new Stream(*this, context);
  }
};

GrpcFrontend::GrpcFrontend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<GrpcFrontend>> GrpcFrontend::Create(Options options,
                                                          InferenceService& service) {
  auto impl = std::make_unique<Impl>(service, options.access, options.max_in_flight);
  const std::string where = options.host + ":" + std::to_string(options.port);
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(where, grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(static_cast<int>(options.max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(options.max_message_bytes));
  builder.RegisterService(impl.get());
  impl->server = builder.BuildAndStart();
  if (!impl->server || port == 0) {
    return FailedPrecondition("cannot listen for gRPC on " + where);
  }
  std::unique_ptr<GrpcFrontend> frontend(new GrpcFrontend(std::move(impl)));
  frontend->port_ = port;
  return frontend;
}

GrpcFrontend::~GrpcFrontend() { Shutdown(std::chrono::milliseconds(0)); }

void GrpcFrontend::Shutdown(std::chrono::milliseconds grace) {
  if (!impl_->server) return;
  impl_->server->Shutdown(std::chrono::system_clock::now() + grace);
  impl_->server->Wait();
  impl_->server.reset();
}

}  // namespace mmserve
