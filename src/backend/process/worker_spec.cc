#include "backend/process/worker_spec.h"

#include <cstdint>
#include <exception>
#include <stdexcept>

#include "common/json.h"

namespace mmserve {
namespace {

using nlohmann::json;

json SpecJson(const TensorSpec& t) {
  return {{"name", t.name}, {"datatype", DataTypeName(t.type)}, {"shape", t.shape},
          {"optional", t.optional}};
}
// An integer field within [lo, hi]: nlohmann would convert a float (1e300) to an integer type
// with undefined behaviour, so only integers are taken.
int64_t Int(const json& v, int64_t lo, int64_t hi, const char* what) {
  if (!v.is_number_integer()) throw std::invalid_argument(std::string(what) + ": not an integer");
  const int64_t i = v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX}
                        ? INT64_MAX
                        : v.get<int64_t>();
  if (i < lo || i > hi) throw std::invalid_argument(std::string(what) + ": out of range");
  return i;
}
int Int32(const json& j, const char* key, int lo, int hi) {
  return static_cast<int>(Int(j.at(key), lo, hi, key));
}
std::vector<int64_t> Ints(const json& list, int64_t lo, int64_t hi, const char* what) {
  if (!list.is_array()) throw std::invalid_argument(std::string(what) + ": not a list");
  std::vector<int64_t> out;
  for (const json& v : list) out.push_back(Int(v, lo, hi, what));
  return out;
}
std::vector<int> Int32s(const json& list, const char* what) {
  std::vector<int> out;
  for (int64_t v : Ints(list, 0, 1 << 20, what)) out.push_back(static_cast<int>(v));
  return out;
}

double Double(const json& j, const char* key) {
  const json& v = j.at(key);
  if (!v.is_number()) throw std::invalid_argument(std::string(key) + ": not a number");
  return v.get<double>();
}
std::vector<double> Doubles(const json& j, const char* key) {
  const json& list = j.at(key);
  if (!list.is_array()) throw std::invalid_argument(std::string(key) + ": not a list");
  std::vector<double> out;
  for (const json& v : list) {
    if (!v.is_number()) throw std::invalid_argument(std::string(key) + ": not a number");
    out.push_back(v.get<double>());
  }
  return out;
}
// An enum sent as its integer value, checked against its last enumerator.
template <typename E>
E Enum(const json& j, const char* key, E last) {
  return static_cast<E>(Int(j.at(key), 0, static_cast<int64_t>(last), key));
}
template <typename E>
int64_t EnumValue(E e) {
  return static_cast<int64_t>(e);
}

// The image stages travel as their parsed fields, so that the worker runs what the server
// parsed and checked (a labels path stays the one the server resolved).
json PreprocessJson(const PreprocessConfig& p) {
  json j = {{"input", p.input},         {"resize", EnumValue(p.resize)},
            {"width", p.width},         {"height", p.height},
            {"short_side", p.short_side}, {"interpolation", p.interpolation},
            {"pad", p.pad},             {"crop", p.crop},
            {"crop_width", p.crop_width}, {"crop_height", p.crop_height},
            {"color", EnumValue(p.color)}, {"scale", p.scale},
            {"mean", p.mean},           {"std", p.std},
            {"layout", EnumValue(p.layout)}, {"max_pixels", p.max_pixels}};
  if (p.datatype) j["datatype"] = DataTypeName(*p.datatype);
  return j;
}
PreprocessConfig ReadPreprocessJson(const json& j) {
  using P = PreprocessConfig;
  P p;
  p.input = j.at("input").get<std::string>();
  p.resize = Enum(j, "resize", P::Resize::kLetterbox);
  p.width = Int32(j, "width", 0, 1 << 20);
  p.height = Int32(j, "height", 0, 1 << 20);
  p.short_side = Int32(j, "short_side", 0, 1 << 20);
  p.interpolation = j.at("interpolation").get<std::string>();
  p.pad = Double(j, "pad");
  p.crop = j.at("crop").get<bool>();
  p.crop_width = Int32(j, "crop_width", 0, 1 << 20);
  p.crop_height = Int32(j, "crop_height", 0, 1 << 20);
  p.color = Enum(j, "color", P::Color::kGray);
  p.scale = Double(j, "scale");
  p.mean = Doubles(j, "mean");
  p.std = Doubles(j, "std");
  p.layout = Enum(j, "layout", P::Layout::kNhwc);
  p.max_pixels = Int(j.at("max_pixels"), 0, INT64_MAX, "max_pixels");
  if (j.contains("datatype")) {
    p.datatype = ParseDataType(j.at("datatype").get<std::string>());
    if (!p.datatype) throw std::invalid_argument("datatype");
  }
  return p;
}
json PostprocessJson(const PostprocessConfig& p) {
  return {{"kind", EnumValue(p.kind)},
          {"output", p.output},
          {"activation", EnumValue(p.activation)},
          {"top_k", p.top_k},
          {"format", EnumValue(p.format)},
          {"boxes_output", p.boxes_output},
          {"scores_output", p.scores_output},
          {"box_format", EnumValue(p.box_format)},
          {"normalized", p.normalized},
          {"background", p.background},
          {"score_threshold", p.score_threshold},
          {"iou_threshold", p.iou_threshold},
          {"class_aware", p.class_aware},
          {"box_scale", EnumValue(p.box_scale)},
          {"max_detections", p.max_detections},
          {"labels", p.labels.string()}};
}
PostprocessConfig ReadPostprocessJson(const json& j) {
  using P = PostprocessConfig;
  P p;
  p.kind = Enum(j, "kind", P::Kind::kDetect);
  p.output = j.at("output").get<std::string>();
  p.activation = Enum(j, "activation", P::Activation::kSigmoid);
  p.top_k = Int32(j, "top_k", 0, 1 << 20);
  p.format = Enum(j, "format", P::Format::kSsd);
  p.boxes_output = j.at("boxes_output").get<std::string>();
  p.scores_output = j.at("scores_output").get<std::string>();
  p.box_format = Enum(j, "box_format", P::BoxFormat::kCxcywh);
  p.normalized = j.at("normalized").get<bool>();
  p.background = Int32(j, "background", -1, 1 << 20);
  p.score_threshold = Double(j, "score_threshold");
  p.iou_threshold = Double(j, "iou_threshold");
  p.class_aware = j.at("class_aware").get<bool>();
  p.box_scale = Enum(j, "box_scale", P::BoxScale::kSingleGain);
  p.max_detections = Int32(j, "max_detections", 0, 1 << 20);
  p.labels = j.at("labels").get<std::string>();
  return p;
}

TensorSpec ReadSpec(const json& j) {
  TensorSpec t;
  t.name = j.at("name").get<std::string>();
  auto type = ParseDataType(j.at("datatype").get<std::string>());
  if (!type) throw std::invalid_argument("datatype");
  t.type = *type;
  t.shape = Ints(j.at("shape"), -1, INT64_MAX, "shape");
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
  if (m.preprocess) j["preprocess"] = PreprocessJson(*m.preprocess);
  if (m.postprocess) j["postprocess"] = PostprocessJson(*m.postprocess);
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
    m.version = Int(j.at("version"), 0, INT64_MAX, "version");
    m.device_id = Int32(j, "device_id", 0, 1023);
    m.batch_size = Int32(j, "batch_size", 1, 1 << 20);
    m.max_batch = Int32(j, "max_batch", 1, 1 << 20);
    m.batch_tiers = Int32s(j.at("batch_tiers"), "batch_tiers");
    m.thread_num = Int32(j, "thread_num", 1, 256);
    if (j.contains("dynamic_batch")) m.dynamic_batch = j.at("dynamic_batch").get<bool>();
    if (j.contains("warmup")) m.warmup = Int32(j, "warmup", 0, 100);
    if (j.contains("preprocess")) m.preprocess = ReadPreprocessJson(j.at("preprocess"));
    if (j.contains("postprocess")) m.postprocess = ReadPostprocessJson(j.at("postprocess"));
    const json& params = j.at("params");
    if (!params.is_object()) throw std::invalid_argument("params");
    m.params = Params(params, "params", std::make_shared<Params::Locations>());
    return m;
  });
}

std::string EncodeWorkerFacts(const Session& session, bool host_memory, int64_t load_us) {
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
                   {"continuous", session.style() == ExecutionStyle::kContinuous},
                   {"load_us", load_us}});
}

Result<WorkerFacts> DecodeWorkerFacts(std::string_view payload) {
  return ReadJson<WorkerFacts>(payload, "facts", [](const json& j) {
    WorkerFacts f;
    f.signature.platform = j.at("platform").get<std::string>();
    for (const auto& t : j.at("inputs")) f.signature.inputs.push_back(ReadSpec(t));
    for (const auto& t : j.at("outputs")) f.signature.outputs.push_back(ReadSpec(t));
    f.resident_bytes = Int(j.at("resident_bytes"), 0, INT64_MAX, "resident_bytes");
    f.batch_tiers = Int32s(j.at("batch_tiers"), "batch_tiers");
    f.default_warmup = Int32(j, "default_warmup", 0, 100);
    f.context_length = Int(j.at("context_length"), 0, INT64_MAX, "context_length");
    f.executions_share_device = j.at("executions_share_device").get<bool>();
    f.host_memory = j.at("host_memory").get<bool>();
    f.continuous = j.at("continuous").get<bool>();
    f.load_us = Int(j.at("load_us"), 0, INT64_MAX, "load_us");
    return f;
  });
}

}  // namespace mmserve
