#include "server/triton_config.h"

#include <chrono>

namespace mmserve {
namespace {

using nlohmann::json;

std::string TritonType(DataType type) {
  if (type == DataType::kBytes) return "TYPE_STRING";
  return "TYPE_" + std::string(DataTypeName(type));
}

json Tensors(const std::vector<TensorSpec>& specs, bool inputs) {
  json out = json::array();
  for (const auto& s : specs) {
    json t = {{"name", s.name}, {"data_type", TritonType(s.type)}, {"dims", s.shape}};
    if (inputs && s.optional) t["optional"] = true;
    out.push_back(std::move(t));
  }
  return out;
}

int64_t Micros(std::chrono::milliseconds ms) { return ms.count() * 1000; }

}  // namespace

std::string PlatformOf(const ModelInfo& info) {
  return info.signature.platform.empty() ? "mmserve_" + info.config.backend
                                         : info.signature.platform;
}

json TritonModelConfig(const ModelInfo& info) {
  const ModelConfig& m = info.config;
  json versions = json::array();
  for (int64_t v : info.versions) versions.push_back(v);
  json config = {
      {"name", m.name},
      {"platform", PlatformOf(info)},
      {"backend", m.backend},
      {"version_policy", {{"specific", {{"versions", versions}}}}},
      {"max_batch_size", 0},
      {"input", Tensors(info.signature.inputs, true)},
      {"output", Tensors(info.signature.outputs, false)},
      {"instance_group",
       json::array({{{"name", m.name},
                     {"kind", m.backend == "acl" ? "KIND_MODEL" : "KIND_CPU"},
                     {"count", m.thread_num}}})},
      {"default_model_filename", m.path.filename().string()},
  };
  json queue = {{"timeout_action", "REJECT"},
                {"default_timeout_microseconds", Micros(m.timeout)},
                {"allow_timeout_override", true},
                {"max_queue_size", m.queue.max_size}};
  json dynamic = {{"max_queue_delay_microseconds", Micros(m.max_queue_delay)},
                  {"preserve_ordering", m.preserve_ordering},
                  {"priority_levels", kMaxPriorityLevel},
                  {"default_priority_level", m.priority},
                  {"default_queue_policy", queue}};
  if (!m.batch_tiers.empty()) dynamic["preferred_batch_size"] = m.batch_tiers;
  if (m.max_batch > 1 || m.dynamic_batch.value_or(false)) config["dynamic_batching"] = dynamic;
  auto param = [](const std::string& v) { return json{{"string_value", v}}; };
  config["parameters"] = {{"task", param(m.task)},
                          {"max_batch", param(std::to_string(m.max_batch))},
                          {"device_id", param(std::to_string(m.device_id))},
                          {"version", param(std::to_string(m.version))}};
  return config;
}

}  // namespace mmserve
