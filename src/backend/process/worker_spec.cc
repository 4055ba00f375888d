#include "backend/process/worker_spec.h"

#include <exception>

#include "common/json.h"

namespace mmserve {
namespace {

using nlohmann::json;

json SpecJson(const TensorSpec& t) {
  return {{"name", t.name}, {"datatype", DataTypeName(t.type)}, {"shape", t.shape},
          {"optional", t.optional}};
}
TensorSpec ReadSpec(const json& j) {
  TensorSpec t;
  t.name = j.at("name").get<std::string>();
  auto type = ParseDataType(j.at("datatype").get<std::string>());
  if (!type) throw std::invalid_argument("datatype");
  t.type = *type;
  t.shape = j.at("shape").get<Shape>();
  t.optional = j.at("optional").get<bool>();
  return t;
}

// Runs `read` over the parsed payload; a missing field or one of the wrong type (nlohmann
// throws) is a malformed message, never an exception that escapes.
template <typename T, typename F>
Result<T> ReadJson(std::string_view payload, const char* what, F read) {
  JsonError error{};
  json j = ParseJson(payload, &error);
  if (!j.is_object()) {
    return InvalidArgument(std::string("malformed worker ") + what + ": " +
                           DescribeJsonError(error));
  }
  try {
    return read(j);
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("malformed worker ") + what + ": " + e.what());
  }
}

}  // namespace

std::string EncodeWorkerSpec(const ModelConfig& m) {
  json j = {{"name", m.name},
            {"path", m.path.string()},
            {"backend", m.backend},
            {"task", m.task},
            {"version", m.version},
            {"device_id", m.device_id},
            {"batch_size", m.batch_size},
            {"max_batch", m.max_batch},
            {"batch_tiers", m.batch_tiers},
            {"thread_num", m.thread_num},
            {"params", m.params.value()}};
  if (m.dynamic_batch) j["dynamic_batch"] = *m.dynamic_batch;
  if (m.warmup) j["warmup"] = *m.warmup;
  return DumpJson(j);
}

Result<ModelConfig> DecodeWorkerSpec(std::string_view payload) {
  return ReadJson<ModelConfig>(payload, "spec", [](const json& j) {
    ModelConfig m;
    m.name = j.at("name").get<std::string>();
    m.path = j.at("path").get<std::string>();
    m.backend = j.at("backend").get<std::string>();
    m.task = j.at("task").get<std::string>();
    m.task_set = true;
    m.version = j.at("version").get<int64_t>();
    m.device_id = j.at("device_id").get<int>();
    m.batch_size = j.at("batch_size").get<int>();
    m.max_batch = j.at("max_batch").get<int>();
    m.batch_tiers = j.at("batch_tiers").get<std::vector<int>>();
    m.thread_num = j.at("thread_num").get<int>();
    if (m.thread_num < 1 || m.thread_num > 256) throw std::invalid_argument("thread_num");
    if (j.contains("dynamic_batch")) m.dynamic_batch = j.at("dynamic_batch").get<bool>();
    if (j.contains("warmup")) m.warmup = j.at("warmup").get<int>();
    const json& params = j.at("params");
    if (!params.is_object()) throw std::invalid_argument("params");
    m.params = Params(params, "params", std::make_shared<Params::Locations>());
    return m;
  });
}

std::string EncodeWorkerFacts(const Session& session, bool host_memory) {
  const ModelSignature& sig = session.signature();
  json inputs = json::array(), outputs = json::array();
  for (const auto& t : sig.inputs) inputs.push_back(SpecJson(t));
  for (const auto& t : sig.outputs) outputs.push_back(SpecJson(t));
  return DumpJson({{"platform", sig.platform},
                   {"inputs", inputs},
                   {"outputs", outputs},
                   {"resident_bytes", session.resident_bytes()},
                   {"batch_tiers", session.batch_tiers()},
                   {"default_warmup", session.default_warmup()},
                   {"context_length", session.context_length()},
                   {"executions_share_device", session.executions_share_device()},
                   {"host_memory", host_memory},
                   {"continuous", session.style() == ExecutionStyle::kContinuous}});
}

Result<WorkerFacts> DecodeWorkerFacts(std::string_view payload) {
  return ReadJson<WorkerFacts>(payload, "facts", [](const json& j) {
    WorkerFacts f;
    f.signature.platform = j.at("platform").get<std::string>();
    for (const auto& t : j.at("inputs")) f.signature.inputs.push_back(ReadSpec(t));
    for (const auto& t : j.at("outputs")) f.signature.outputs.push_back(ReadSpec(t));
    f.resident_bytes = j.at("resident_bytes").get<int64_t>();
    f.batch_tiers = j.at("batch_tiers").get<std::vector<int>>();
    f.default_warmup = j.at("default_warmup").get<int>();
    f.context_length = j.at("context_length").get<int64_t>();
    f.executions_share_device = j.at("executions_share_device").get<bool>();
    f.host_memory = j.at("host_memory").get<bool>();
    f.continuous = j.at("continuous").get<bool>();
    return f;
  });
}

}  // namespace mmserve
