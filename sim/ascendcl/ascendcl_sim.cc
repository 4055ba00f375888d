// A simulated libascendcl for tests and demos without Ascend hardware: see aclsim.h for what it
// reproduces. Every definition below is checked against mmserve's own declarations of the API
// (src/runtime/acl/acl_api.h), so the server and the simulator agree on the ABI.
//
// One mutex guards the whole simulated process; a stream synchronization waits on a condition
// variable with it released.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "aclsim.h"
#include "runtime/acl/acl_api.h"

using namespace mmserve::acl;  // NOLINT: the simulator implements exactly these declarations
using Clock = std::chrono::steady_clock;
using nlohmann::json;

// The opaque types of the API, defined here.
struct mmserve::acl::aclDataBuffer {
  void* data;
  size_t size;
  int id;
};

namespace {

struct TensorDesc {
  std::string name;
  int datatype = kAclFloat;
  std::vector<int64_t> dims;
};

struct OmModel {
  std::string soc;
  std::vector<TensorDesc> inputs;   // without the dynamic-batch input
  std::vector<TensorDesc> outputs;
  std::vector<uint64_t> gears;      // empty: static batch dims[0]
  size_t work_size = 0;
  size_t weight_size = 0;
  double scale = 1.0;
  double bias = 0.0;
  int64_t latency_us = 0;
  int64_t latency_per_item_us = 0;
  std::optional<double> hang_on;
  // fail_on {value, code}: an execution whose first input holds `value` fails with `code`.
  std::optional<std::pair<double, aclError>> fail_on;
};

constexpr size_t kDynamicTensorBytes = 16;

size_t ElementSize(int datatype) {
  switch (datatype) {
    case kAclFloat: case kAclInt32: case kAclUint32: return 4;
    case kAclFloat16: case kAclInt16: case kAclUint16: case kAclBf16: return 2;
    case kAclInt8: case kAclUint8: case kAclBool: return 1;
    case kAclInt64: case kAclUint64: case kAclDouble: return 8;
    default: return 0;
  }
}

std::optional<int> ParseDatatype(const std::string& name) {
  static const std::map<std::string, int> kNames = {
      {"FLOAT", kAclFloat},   {"FLOAT16", kAclFloat16}, {"INT8", kAclInt8},
      {"INT32", kAclInt32},   {"UINT8", kAclUint8},     {"INT16", kAclInt16},
      {"UINT16", kAclUint16}, {"UINT32", kAclUint32},   {"INT64", kAclInt64},
      {"UINT64", kAclUint64}, {"DOUBLE", kAclDouble},   {"BOOL", kAclBool},
      {"BF16", kAclBf16}};
  auto it = kNames.find(name);
  if (it == kNames.end()) return std::nullopt;
  return it->second;
}

// Elements per batch row (every dim but the first).
size_t RowElements(const TensorDesc& t) {
  size_t n = 1;
  for (size_t i = 1; i < t.dims.size(); ++i) n *= static_cast<size_t>(t.dims[i]);
  return n;
}
size_t RowBytes(const TensorDesc& t) { return RowElements(t) * ElementSize(t.datatype); }

uint64_t MaxBatch(const OmModel& m) {
  if (!m.gears.empty()) return m.gears.back();
  const auto& t = m.inputs.empty() ? m.outputs.front() : m.inputs.front();
  return t.dims.empty() ? 1 : static_cast<uint64_t>(t.dims[0]);
}

size_t InputCount(const OmModel& m) { return m.inputs.size() + (m.gears.empty() ? 0 : 1); }

double Load(int datatype, const char* p, size_t i) {
  switch (datatype) {
    case kAclFloat: { float v; std::memcpy(&v, p + i * 4, 4); return v; }
    case kAclDouble: { double v; std::memcpy(&v, p + i * 8, 8); return v; }
    case kAclInt32: { int32_t v; std::memcpy(&v, p + i * 4, 4); return v; }
    case kAclUint32: { uint32_t v; std::memcpy(&v, p + i * 4, 4); return v; }
    case kAclInt64: { int64_t v; std::memcpy(&v, p + i * 8, 8); return static_cast<double>(v); }
    case kAclUint64: { uint64_t v; std::memcpy(&v, p + i * 8, 8); return static_cast<double>(v); }
    case kAclInt16: { int16_t v; std::memcpy(&v, p + i * 2, 2); return v; }
    case kAclUint16: { uint16_t v; std::memcpy(&v, p + i * 2, 2); return v; }
    case kAclInt8: return static_cast<int8_t>(p[i]);
    case kAclUint8: case kAclBool: return static_cast<uint8_t>(p[i]);
    default: return 0;
  }
}

void Store(int datatype, char* p, size_t i, double v) {
  switch (datatype) {
    case kAclFloat: { float x = static_cast<float>(v); std::memcpy(p + i * 4, &x, 4); return; }
    case kAclDouble: std::memcpy(p + i * 8, &v, 8); return;
    case kAclInt32: { auto x = static_cast<int32_t>(v); std::memcpy(p + i * 4, &x, 4); return; }
    case kAclUint32: { auto x = static_cast<uint32_t>(v); std::memcpy(p + i * 4, &x, 4); return; }
    case kAclInt64: { auto x = static_cast<int64_t>(v); std::memcpy(p + i * 8, &x, 8); return; }
    case kAclUint64: { auto x = static_cast<uint64_t>(v); std::memcpy(p + i * 8, &x, 8); return; }
    case kAclInt16: { auto x = static_cast<int16_t>(v); std::memcpy(p + i * 2, &x, 2); return; }
    case kAclUint16: { auto x = static_cast<uint16_t>(v); std::memcpy(p + i * 2, &x, 2); return; }
    case kAclInt8: p[i] = static_cast<char>(static_cast<int8_t>(v)); return;
    case kAclUint8: p[i] = static_cast<char>(static_cast<uint8_t>(v)); return;
    case kAclBool: p[i] = v != 0 ? 1 : 0; return;
    default: std::memset(p + i * ElementSize(datatype), 0, ElementSize(datatype)); return;
  }
}

struct Options {
  std::string soc = "Ascend310P3";
  int devices = 1;
  int64_t memory_mb = 4096;
  int64_t others_mb = 0;  // held by other processes: not free, not this process's
  bool refcounted_init = false;
  bool desc_from_file = true;
  // What a load really takes on the device, as a multiple of what aclmdlQuerySize says
  // (workspace rounding, runtime overhead): a budget that copies the estimate is caught.
  double load_charge = 1.0;
  // One device runs one execution at a time, as its AI cores do: a task starts when the one
  // queued before it on the same device (any stream) ends. Off, streams run side by side.
  bool serial_device = false;
  std::string trace;
};

Options EnvOptions() {
  Options o;
  if (const char* v = std::getenv("ACLSIM_SOC"); v && *v) o.soc = v;
  if (const char* v = std::getenv("ACLSIM_DEVICES"); v && *v) o.devices = std::atoi(v);
  if (const char* v = std::getenv("ACLSIM_MEMORY_MB"); v && *v) o.memory_mb = std::atoll(v);
  if (const char* v = std::getenv("ACLSIM_OTHERS_MB"); v && *v) o.others_mb = std::atoll(v);
  if (const char* v = std::getenv("ACLSIM_REFCOUNTED_INIT"); v && *v) o.refcounted_init = *v == '1';
  if (const char* v = std::getenv("ACLSIM_DESC_FROM_FILE"); v && *v) o.desc_from_file = *v != '0';
  if (const char* v = std::getenv("ACLSIM_LOAD_CHARGE"); v && *v) o.load_charge = std::atof(v);
  if (const char* v = std::getenv("ACLSIM_SERIAL_DEVICE"); v && *v) o.serial_device = *v == '1';
  if (const char* v = std::getenv("ACLSIM_TRACE"); v && *v) o.trace = v;
  return o;
}

struct Allocation {
  size_t size;
  int device;  // -1: host (aclrtMallocHost)
  int id;
};

struct Context {
  int id;
  int device;
  bool is_default;
};

struct Task {
  uint32_t model;
  std::vector<aclDataBuffer> inputs;
  std::vector<aclDataBuffer> outputs;
  uint64_t batch;
  Clock::time_point ready;  // max(): never (a hang)
};

struct Stream {
  int id;
  int context;
  std::deque<Task> tasks;
};

struct Model {
  uint32_t id;
  int context;
  std::string path;
  OmModel om;
  size_t owned_bytes;  // work/weight memory ACL allocated for it
};

struct Device {
  int set_count = 0;
  int default_context = 0;  // 0: none
  size_t used = 0;
  std::chrono::steady_clock::time_point busy_until;  // serial_device: the last task's end
};

}  // namespace

struct mmserve::acl::aclmdlDesc {
  OmModel om;
  bool filled = false;
  std::vector<std::string> names;  // storage for the name getters
};

struct mmserve::acl::aclmdlDataset {
  std::vector<aclDataBuffer*> buffers;
  uint64_t dynamic_batch = 0;  // set by aclmdlSetDynamicBatchSize
};

namespace {

struct Sim {
  std::mutex mu;
  std::condition_variable cv;
  bool configured = false;
  Options options;
  uint64_t epoch = 1;  // bumped by aclsimReset: thread bindings of older epochs are void
  bool initialized = false;
  bool finalized = false;
  int init_count = 0;
  std::vector<Device> devices;
  std::map<int, Context> contexts;
  std::map<int, Stream> streams;
  std::map<uint32_t, Model> models;
  std::map<const char*, Allocation> memory;  // by start address
  int next_id = 1;
  uint32_t next_model = 1;
  int next_tid = 1;
  std::vector<std::string> record;
  std::string record_line;  // aclsimRecordLine's storage
  std::ofstream trace;
};

Sim& S() {
  static Sim* sim = new Sim;  // never destroyed: AscendCL state outlives static destructors
  return *sim;
}

struct ThreadState {
  uint64_t epoch = 0;
  int context = 0;
  int tid = 0;
  std::string error;         // accumulated by failed calls
  std::string error_return;  // aclGetRecentErrMsg's storage
};
thread_local ThreadState t_state;

// REQUIRES: S().mu held.
void ConfigureLocked(Sim& s, const Options& o) {
  s.options = o;
  s.devices.assign(static_cast<size_t>(std::max(o.devices, 0)), Device{});
  s.trace.close();
  if (!o.trace.empty()) s.trace.open(o.trace, std::ios::app);
  s.configured = true;
}

Sim& Locked(std::unique_lock<std::mutex>& lock) {
  Sim& s = S();
  lock = std::unique_lock(s.mu);
  if (!s.configured) ConfigureLocked(s, EnvOptions());
  if (t_state.tid == 0) t_state.tid = s.next_tid++;
  if (t_state.epoch != s.epoch) {
    t_state.epoch = s.epoch;
    t_state.context = 0;
  }
  return s;
}

std::string Name(const char* prefix, int id) { return prefix + std::to_string(id); }

std::string MemName(const Sim& s, const void* p) {
  if (!p) return "null";
  auto it = s.memory.find(static_cast<const char*>(p));
  return it == s.memory.end() ? "unknown" : Name("mem", it->second.id);
}

// Records the call and returns `rc`. REQUIRES: S().mu held.
aclError Rec(Sim& s, const std::string& call, aclError rc) {
  std::string line = call + " ctx=" + (t_state.context ? Name("ctx", t_state.context) : "none") +
                     " tid=" + std::to_string(t_state.tid) + " -> " + std::to_string(rc);
  if (s.trace.is_open()) s.trace << line << std::endl;
  if (s.record.size() < 200'000) s.record.push_back(std::move(line));
  return rc;
}

// Records a failure with its error text (read back by aclGetRecentErrMsg).
aclError Fail(Sim& s, const std::string& call, aclError rc, const std::string& message) {
  t_state.error = message + (t_state.error.empty() ? "" : "\n" + t_state.error);
  return Rec(s, call, rc);
}

Context* Current(Sim& s) {
  auto it = s.contexts.find(t_state.context);
  return it == s.contexts.end() ? nullptr : &it->second;
}

const Allocation* Find(const Sim& s, const void* p, size_t bytes, int* offset_ok) {
  const char* c = static_cast<const char*>(p);
  auto it = s.memory.upper_bound(c);
  if (it == s.memory.begin()) return nullptr;
  --it;
  if (c < it->first || c + bytes > it->first + it->second.size) return nullptr;
  if (offset_ok) *offset_ok = 1;
  return &it->second;
}

// The common preconditions: aclInit done, and (with `context`) a context bound to this thread.
aclError Check(Sim& s, const std::string& call, bool context) {
  if (!s.initialized) return Fail(s, call, 100001, "EH9999: aclInit has not been called");
  if (context && !Current(s)) {
    return Fail(s, call, kErrorRtContextNull,
                "EE1001: the current thread has no context (call aclrtSetDevice or "
                "aclrtSetCurrentContext on this thread first)");
  }
  return kSuccess;
}

// Reads an OM file of the simulator's format; on failure sets `code` and `error`.
std::optional<OmModel> ParseOm(const std::string& path, aclError* code, std::string* error) {
  std::ifstream in(path);
  if (!in) {
    *code = kErrorInvalidFile;
    *error = "cannot open model file " + path;
    return std::nullopt;
  }
  std::string magic;
  std::getline(in, magic);
  if (magic != "ACLSIM-OM 1") {
    *code = 100013;  // ACL_ERROR_PARSE_MODEL
    *error = path + " is not an OM file of this simulator";
    return std::nullopt;
  }
  try {
    json j = json::parse(in);
    OmModel m;
    m.soc = j.value("soc_version", "");
    auto tensors = [](const json& list, std::vector<TensorDesc>& out) {
      for (const auto& t : list) {
        auto type = ParseDatatype(t.at("datatype").get<std::string>());
        if (!type) throw std::runtime_error("unknown datatype " + t.at("datatype").dump());
        out.push_back({t.at("name").get<std::string>(), *type,
                       t.at("dims").get<std::vector<int64_t>>()});
        if (out.back().dims.empty()) throw std::runtime_error("a tensor needs dims");
      }
    };
    tensors(j.at("inputs"), m.inputs);
    tensors(j.at("outputs"), m.outputs);
    if (m.outputs.empty()) throw std::runtime_error("a model needs an output");
    m.gears = j.value("dynamic_batch", std::vector<uint64_t>{});
    m.work_size = j.value("work_size", size_t{0});
    m.weight_size = j.value("weight_size", size_t{0});
    m.scale = j.value("scale", 1.0);
    m.bias = j.value("bias", 0.0);
    m.latency_us = j.value("latency_us", int64_t{0});
    m.latency_per_item_us = j.value("latency_per_item_us", int64_t{0});
    if (j.contains("hang_on")) m.hang_on = j["hang_on"].get<double>();
    if (j.contains("fail_on")) {
      m.fail_on = std::make_pair(j["fail_on"].at("value").get<double>(),
                                 j["fail_on"].at("code").get<aclError>());
    }
    for (auto* list : {&m.inputs, &m.outputs}) {
      for (auto& t : *list) {
        if (!m.gears.empty() && t.dims[0] != -1) {
          throw std::runtime_error("dynamic batch needs -1 as the first dim of " + t.name);
        }
        for (size_t i = 1; i < t.dims.size(); ++i) {
          if (t.dims[i] <= 0) throw std::runtime_error("only the batch dim may vary: " + t.name);
        }
      }
    }
    return m;
  } catch (const std::exception& e) {
    *code = 100013;
    *error = path + ": " + e.what();
    return std::nullopt;
  }
}

// Computes a task's outputs. REQUIRES: S().mu held.
void RunTask(const Model& model, const Task& task) {
  const OmModel& om = model.om;
  const TensorDesc* in = om.inputs.empty() ? nullptr : &om.inputs.front();
  const size_t in_row = in ? RowElements(*in) : 0;
  for (size_t k = 0; k < om.outputs.size(); ++k) {
    const TensorDesc& out = om.outputs[k];
    const size_t out_row = RowElements(out);
    char* dst = static_cast<char*>(task.outputs[k].data);
    for (uint64_t b = 0; b < task.batch; ++b) {
      for (size_t j = 0; j < out_row; ++j) {
        double x = 0;
        if (in && in_row > 0) {
          x = Load(in->datatype, static_cast<const char*>(task.inputs[0].data), b * in_row + j % in_row);
        }
        Store(out.datatype, dst, b * out_row + j, om.scale * x + om.bias + static_cast<double>(k));
      }
    }
  }
}

bool Holds(const OmModel& om, const aclDataBuffer& input0, uint64_t batch,
           std::optional<double> value) {
  if (!value || om.inputs.empty()) return false;
  const size_t n = RowElements(om.inputs[0]) * batch;
  for (size_t i = 0; i < n; ++i) {
    if (Load(om.inputs[0].datatype, static_cast<const char*>(input0.data), i) == *value) {
      return true;
    }
  }
  return false;
}

void FreeModelLocked(Sim& s, Model& m) {
  s.devices[static_cast<size_t>(s.contexts.at(m.context).device)].used -= m.owned_bytes;
  for (auto& [id, stream] : s.streams) {
    std::erase_if(stream.tasks, [&](const Task& t) { return t.model == m.id; });
  }
}

void ReleaseAllLocked(Sim& s) {
  for (auto& [p, a] : s.memory) std::free(const_cast<char*>(p));
  s.memory.clear();
  s.models.clear();
  s.streams.clear();
  s.contexts.clear();
  for (auto& d : s.devices) d = Device{};
  ++s.epoch;
  t_state.epoch = s.epoch;
  t_state.context = 0;
  s.cv.notify_all();
}

Model* FindModel(Sim& s, uint32_t id) {
  auto it = s.models.find(id);
  return it == s.models.end() ? nullptr : &it->second;
}

size_t InputBytes(const OmModel& om, size_t index, uint64_t batch) {
  if (index == om.inputs.size()) return kDynamicTensorBytes;
  return RowBytes(om.inputs[index]) * batch;
}

// Allocates device memory of `bytes` for a load, or fails like the device does.
aclError Reserve(Sim& s, const std::string& call, int device, size_t bytes) {
  Device& d = s.devices[static_cast<size_t>(device)];
  const size_t capacity = static_cast<size_t>(s.options.memory_mb - s.options.others_mb) << 20;
  if (d.used + bytes > capacity) {
    return Fail(s, call, kErrorRtMemoryAllocation,
                "EL0004: Memory_Allocation_Failure: device " + std::to_string(device) +
                    " has " + std::to_string(capacity - d.used) + " bytes free, " +
                    std::to_string(bytes) + " requested (rtMalloc failed)");
  }
  d.used += bytes;
  return kSuccess;
}

aclError LoadModel(const char* path, uint32_t* model_id, void* work, size_t work_size,
                   void* weight, size_t weight_size, bool with_mem) {
  std::unique_lock<std::mutex> lock;
  Sim& s = Locked(lock);
  std::string call = std::string(with_mem ? "aclmdlLoadFromFileWithMem" : "aclmdlLoadFromFile") +
                     " path=" + (path ? path : "null");
  if (aclError rc = Check(s, call, true)) return rc;
  if (!path || !model_id) return Fail(s, call, kErrorInvalidParam, "EH0001: null argument");
  aclError code = 0;
  std::string error;
  auto om = ParseOm(path, &code, &error);
  if (!om) return Fail(s, call, code, "EE3001: " + error);
  Context* ctx = Current(s);
  if (om->soc != s.options.soc) {
    return Fail(s, call, kErrorRtSocVersion,
                "EE1001: ModelCheckCompatibility failed, supported socVersion=" + s.options.soc +
                    ", but the model socVersion=" + om->soc);
  }
  size_t owned = 0;
  if (with_mem) {
    int ok = 0;
    if (work && (!Find(s, work, om->work_size, &ok) || work_size < om->work_size)) {
      return Fail(s, call, kErrorInvalidParam, "EH0001: work memory smaller than the model needs");
    }
    if (weight && (!Find(s, weight, om->weight_size, &ok) || weight_size < om->weight_size)) {
      return Fail(s, call, kErrorInvalidParam, "EH0001: weight memory smaller than the model needs");
    }
    owned = (work ? 0 : om->work_size) + (weight ? 0 : om->weight_size);
  } else {
    owned = om->work_size + om->weight_size;
  }
  owned = static_cast<size_t>(static_cast<double>(owned) * s.options.load_charge);
  if (aclError rc = Reserve(s, call, ctx->device, owned)) return rc;
  const uint32_t id = s.next_model++;
  s.models[id] = Model{id, ctx->id, path, std::move(*om), owned};
  *model_id = id;
  return Rec(s, call + " model=" + std::to_string(id) + " bytes=" + std::to_string(owned), kSuccess);
}

aclError FillDims(const TensorDesc& t, aclmdlIODims* dims) {
  if (!dims) return kErrorInvalidParam;
  std::memset(dims, 0, sizeof(*dims));
  std::snprintf(dims->name, sizeof(dims->name), "%s", t.name.c_str());
  dims->dimCount = t.dims.size();
  for (size_t i = 0; i < t.dims.size() && i < kMaxDimCount; ++i) dims->dims[i] = t.dims[i];
  return kSuccess;
}
const TensorDesc kDynamicTensor{kDynamicTensorName, kAclInt64, {2}};
}  // namespace

extern "C" {

aclError aclInit(const char* config_path) {
  std::unique_lock<std::mutex> lock;
  Sim& s = Locked(lock);
  const std::string call = "aclInit";
  if (s.finalized) {
    // CANN cannot initialize a process again once finalized.
    return Fail(s, call, kErrorRepeatInitialize,
                "EH0002: aclInit after aclFinalize in the same process is not supported");
  }
  if (s.initialized) {
    if (s.options.refcounted_init) {
      ++s.init_count;
      return Rec(s, call + " refcount=" + std::to_string(s.init_count), kSuccess);
    }
    return Fail(s, call, kErrorRepeatInitialize, "EH0002: aclInit was already called in this process");
  }
  s.initialized = true;
  s.finalized = false;
  s.init_count = 1;
  return Rec(s, call + " refcount=1", kSuccess);
}

aclError aclFinalize() {
  std::unique_lock<std::mutex> lock;
  Sim& s = Locked(lock);
  if (!s.initialized) {
    return Fail(s, "aclFinalize", s.finalized ? 100037 : 100001, "EH0003: not initialized");
  }
  ReleaseAllLocked(s);
  s.initialized = false;
  s.finalized = true;
  s.init_count = 0;
  return Rec(s, "aclFinalize", kSuccess);
}

aclError aclFinalizeReference(uint64_t* ref_count) {
  std::unique_lock<std::mutex> lock;
  Sim& s = Locked(lock);
  if (!s.initialized) return Fail(s, "aclFinalizeReference", 100001, "EH0003: not initialized");
  if (--s.init_count == 0) {
    ReleaseAllLocked(s);
    s.initialized = false;
    s.finalized = true;
  }
  if (ref_count) *ref_count = static_cast<uint64_t>(s.init_count);
  return Rec(s, "aclFinalizeReference refcount=" + std::to_string(s.init_count), kSuccess);
}

aclError aclGetVersion(int32_t* major, int32_t* minor, int32_t* patch) {
  if (major) *major = 1;
  if (minor) *minor = 15;
  if (patch) *patch = 0;
  return kSuccess;
}

const char* aclGetRecentErrMsg() {
  if (t_state.error.empty()) return nullptr;
  t_state.error_return = std::move(t_state.error);
  t_state.error.clear();
  return t_state.error_return.c_str();
}

const char* aclrtGetSocName() {
  std::unique_lock<std::mutex> lock;
  Sim& s = Locked(lock);
  return s.options.soc.c_str();
}

aclError aclrtGetDeviceCount(uint32_t* count) {
  std::unique_lock<std::mutex> lock;
  Sim& s = Locked(lock);
  if (!count) return kErrorInvalidParam;
  *count = static_cast<uint32_t>(s.devices.size());
  return kSuccess;
}

aclError aclrtSetDevice(int32_t device_id) {
  std::unique_lock<std::mutex> lock;
  Sim& s = Locked(lock);
  const std::string call = "aclrtSetDevice device=" + std::to_string(device_id);
  if (aclError rc = Check(s, call, false)) return rc;
  if (device_id < 0 || static_cast<size_t>(device_id) >= s.devices.size()) {
    return Fail(s, call, 107001, "EE1001: invalid device id " + std::to_string(device_id));
  }
  Device& d = s.devices[static_cast<size_t>(device_id)];
  if (d.default_context == 0) {
    const int id = s.next_id++;
    s.contexts[id] = Context{id, device_id, true};
    d.default_context = id;
  }
  ++d.set_count;
  t_state.context = d.default_context;
  return Rec(s, call + " count=" + std::to_string(d.set_count), kSuccess);
}

aclError aclrtResetDevice(int32_t device_id) {
  std::unique_lock<std::mutex> lock;
  Sim& s = Locked(lock);
  const std::string call = "aclrtResetDevice device=" + std::to_string(device_id);
  if (aclError rc = Check(s, call, false)) return rc;
  if (device_id < 0 || static_cast<size_t>(device_id) >= s.devices.size() ||
      s.devices[static_cast<size_t>(device_id)].set_count == 0) {
    return Fail(s, call, 107001, "EE1001: device " + std::to_string(device_id) + " is not set");
  }
  Device& d = s.devices[static_cast<size_t>(device_id)];
  if (--d.set_count == 0) {
    // The default context and its streams go with the last reset.
    const int ctx = d.default_context;
    std::erase_if(s.streams, [&](const auto& e) { return e.second.context == ctx; });
    s.contexts.erase(ctx);
    d.default_context = 0;
  }
  if (Context* c = Current(s); c && c->device == device_id && d.set_count == 0) t_state.context = 0;
  return Rec(s, call + " count=" + std::to_string(d.set_count), kSuccess);
}

aclError aclrtGetMemInfo(int attr, size_t* free, size_t* total) {
  std::unique_lock<std::mutex> lock;
  Sim& s = Locked(lock);
  const std::string call = "aclrtGetMemInfo attr=" + std::to_string(attr);
  if (aclError rc = Check(s, call, true)) return rc;
  if (!free || !total) return Fail(s, call, kErrorInvalidParam, "EH0001: null argument");
  const Device& d = s.devices[static_cast<size_t>(Current(s)->device)];
  *total = static_cast<size_t>(s.options.memory_mb) << 20;
  *free = *total - d.used - (static_cast<size_t>(s.options.others_mb) << 20);
  return Rec(s, call, kSuccess);
}

aclError aclrtCreateContext(aclrtContext* context, int32_t device_id) {
  std::unique_lock<std::mutex> lock;
  Sim& s = Locked(lock);
  const std::string call = "aclrtCreateContext device=" + std::to_string(device_id);
  if (aclError rc = Check(s, call, false)) return rc;
  if (!context) return Fail(s, call, kErrorInvalidParam, "EH0001: null argument");
  if (device_id < 0 || static_cast<size_t>(device_id) >= s.devices.size()) {
    return Fail(s, call, 107001, "EE1001: invalid device id " + std::to_string(device_id));
  }
  const int id = s.next_id++;
  s.contexts[id] = Context{id, device_id, false};
  *context = reinterpret_cast<aclrtContext>(static_cast<intptr_t>(id));
  t_state.context = id;
  return Rec(s, call + " new=" + Name("ctx", id), kSuccess);
}

aclError aclrtDestroyContext(aclrtContext context) {
  std::unique_lock<std::mutex> lock;
  Sim& s = Locked(lock);
  const int id = static_cast<int>(reinterpret_cast<intptr_t>(context));
  const std::string call = "aclrtDestroyContext context=" + Name("ctx", id);
  if (aclError rc = Check(s, call, false)) return rc;
  auto it = s.contexts.find(id);
  if (it == s.contexts.end() || it->second.is_default) {
    return Fail(s, call, kErrorInvalidParam, "EH0001: not an explicitly created context");
  }
  for (const auto& [sid, stream] : s.streams) {
    if (stream.context == id) {
      return Fail(s, call, 148051, "EE1001: stream" + std::to_string(sid) + " still exists in it");
    }
  }
  for (const auto& [mid, model] : s.models) {
    if (model.context == id) {
      return Fail(s, call, 148051, "EE1001: model " + std::to_string(mid) + " is still loaded in it");
    }
  }
  s.contexts.erase(it);
  const aclError rc = Rec(s, call, kSuccess);
  if (t_state.context == id) t_state.context = 0;
  return rc;
}

aclError aclrtSetCurrentContext(aclrtContext context) {
  std::unique_lock<std::mutex> lock;
  Sim& s = Locked(lock);
  const int id = static_cast<int>(reinterpret_cast<intptr_t>(context));
  const std::string call = "aclrtSetCurrentContext context=" + Name("ctx", id);
  if (aclError rc = Check(s, call, false)) return rc;
  if (!s.contexts.count(id)) return Fail(s, call, kErrorInvalidParam, "EH0001: unknown context");
  t_state.context = id;
  return Rec(s, call, kSuccess);
}

aclError aclrtCreateStream(aclrtStream* stream) {
  std::unique_lock<std::mutex> lock;
  Sim& s = Locked(lock);
  const std::string call = "aclrtCreateStream";
  if (aclError rc = Check(s, call, true)) return rc;
  if (!stream) return Fail(s, call, kErrorInvalidParam, "EH0001: null argument");
  const int id = s.next_id++;
  s.streams[id] = Stream{id, t_state.context, {}};
  *stream = reinterpret_cast<aclrtStream>(static_cast<intptr_t>(id));
  return Rec(s, call + " new=" + Name("stream", id), kSuccess);
}

aclError aclrtDestroyStream(aclrtStream stream) {
  std::unique_lock<std::mutex> lock;
  Sim& s = Locked(lock);
  const int id = static_cast<int>(reinterpret_cast<intptr_t>(stream));
  const std::string call = "aclrtDestroyStream stream=" + Name("stream", id);
  if (aclError rc = Check(s, call, true)) return rc;
  auto it = s.streams.find(id);
  if (it == s.streams.end()) return Fail(s, call, kErrorInvalidParam, "EH0001: unknown stream");
  if (it->second.context != t_state.context) {
    return Fail(s, call, kErrorRtStreamContext, "EE1001: the stream belongs to another context");
  }
  const size_t dropped = it->second.tasks.size();
  s.streams.erase(it);
  s.cv.notify_all();
  return Rec(s, call + " dropped_tasks=" + std::to_string(dropped), kSuccess);
}

aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout) {
  std::unique_lock<std::mutex> lock;
  Sim& s = Locked(lock);
  const int id = static_cast<int>(reinterpret_cast<intptr_t>(stream));
  const std::string call = "aclrtSynchronizeStreamWithTimeout stream=" + Name("stream", id) +
                           " timeout=" + std::to_string(timeout);
  if (aclError rc = Check(s, call, true)) return rc;
  auto found = s.streams.find(id);
  if (found == s.streams.end()) return Fail(s, call, kErrorInvalidParam, "EH0001: unknown stream");
  if (found->second.context != t_state.context) {
    return Fail(s, call, kErrorRtStreamContext, "EE1001: the stream belongs to another context");
  }
  const auto end = timeout < 0 ? Clock::time_point::max()
                               : Clock::now() + std::chrono::milliseconds(timeout);
  const uint64_t epoch = s.epoch;
  while (true) {
    auto it = s.streams.find(id);
    if (it == s.streams.end() || s.epoch != epoch) {
      return Fail(s, call, 507000, "EE9999: the stream was destroyed while synchronizing");
    }
    auto& tasks = it->second.tasks;
    const auto now = Clock::now();
    while (!tasks.empty() && tasks.front().ready <= now) {
      if (const Model* m = FindModel(s, tasks.front().model)) RunTask(*m, tasks.front());
      tasks.pop_front();
    }
    if (tasks.empty()) return Rec(s, call, kSuccess);
    if (now >= end) {
      return Fail(s, call, kErrorRtStreamSyncTimeout,
                  "EE9999: stream" + std::to_string(id) + " did not complete within " +
                      std::to_string(timeout) + " ms (a task of model " +
                      std::to_string(tasks.front().model) + " is still running)");
    }
    s.cv.wait_until(lock, std::min(end, tasks.front().ready));
  }
}

aclError aclrtMalloc(void** dev_ptr, size_t size, int policy) {
  std::unique_lock<std::mutex> lock;
  Sim& s = Locked(lock);
  const std::string call = "aclrtMalloc size=" + std::to_string(size);
  if (aclError rc = Check(s, call, true)) return rc;
  if (!dev_ptr || size == 0) return Fail(s, call, kErrorInvalidParam, "EH0001: bad argument");
  const int device = Current(s)->device;
  if (aclError rc = Reserve(s, call, device, size)) return rc;
  char* p = static_cast<char*>(std::malloc(size));
  std::memset(p, 0xA5, size);  // device memory is not zeroed
  const int id = s.next_id++;
  s.memory[p] = Allocation{size, device, id};
  *dev_ptr = p;
  return Rec(s, call + " new=" + Name("mem", id), kSuccess);
}

aclError aclrtFree(void* dev_ptr) {
  std::unique_lock<std::mutex> lock;
  Sim& s = Locked(lock);
  const std::string call = "aclrtFree mem=" + MemName(s, dev_ptr);
  if (aclError rc = Check(s, call, true)) return rc;
  auto it = s.memory.find(static_cast<const char*>(dev_ptr));
  if (it == s.memory.end() || it->second.device < 0) {
    return Fail(s, call, kErrorInvalidParam, "EH0001: not device memory from aclrtMalloc");
  }
  s.devices[static_cast<size_t>(it->second.device)].used -= it->second.size;
  std::free(dev_ptr);
  s.memory.erase(it);
  return Rec(s, call, kSuccess);
}

aclError aclrtMallocHost(void** host_ptr, size_t size) {
  std::unique_lock<std::mutex> lock;
  Sim& s = Locked(lock);
  const std::string call = "aclrtMallocHost size=" + std::to_string(size);
  if (aclError rc = Check(s, call, true)) return rc;
  if (!host_ptr || size == 0) return Fail(s, call, kErrorInvalidParam, "EH0001: bad argument");
  char* p = static_cast<char*>(std::malloc(size));
  const int id = s.next_id++;
  s.memory[p] = Allocation{size, -1, id};
  *host_ptr = p;
  return Rec(s, call + " new=" + Name("mem", id), kSuccess);
}

aclError aclrtFreeHost(void* host_ptr) {
  std::unique_lock<std::mutex> lock;
  Sim& s = Locked(lock);
  const std::string call = "aclrtFreeHost mem=" + MemName(s, host_ptr);
  if (aclError rc = Check(s, call, true)) return rc;
  auto it = s.memory.find(static_cast<const char*>(host_ptr));
  if (it == s.memory.end() || it->second.device >= 0) {
    return Fail(s, call, kErrorInvalidParam, "EH0001: not host memory from aclrtMallocHost");
  }
  std::free(host_ptr);
  s.memory.erase(it);
  return Rec(s, call, kSuccess);
}

aclError aclrtMemcpy(void* dst, size_t dest_max, const void* src, size_t count, int kind) {
  std::unique_lock<std::mutex> lock;
  Sim& s = Locked(lock);
  const std::string call = "aclrtMemcpy kind=" + std::to_string(kind) + " count=" + std::to_string(count);
  if (aclError rc = Check(s, call, true)) return rc;
  if (!dst || !src || count > dest_max) {
    return Fail(s, call, kErrorInvalidParam, "EH0001: null pointer or count beyond destMax");
  }
  const Allocation* d = Find(s, dst, count, nullptr);
  const Allocation* from = Find(s, src, count, nullptr);
  const bool dst_device = d && d->device >= 0;
  const bool src_device = from && from->device >= 0;
  if ((kind == kMemcpyHostToDevice && (!dst_device || src_device)) ||
      (kind == kMemcpyDeviceToHost && (dst_device || !src_device))) {
    return Fail(s, call, kErrorInvalidParam,
                "EH0001: the pointers do not match the copy kind (or lie outside device memory)");
  }
  std::memcpy(dst, src, count);
  return Rec(s, call, kSuccess);
}

aclError aclmdlQuerySize(const char* file_name, size_t* work_size, size_t* weight_size) {
  std::unique_lock<std::mutex> lock;
  Sim& s = Locked(lock);
  const std::string call = std::string("aclmdlQuerySize path=") + (file_name ? file_name : "null");
  if (aclError rc = Check(s, call, false)) return rc;
  if (!file_name || !work_size || !weight_size) {
    return Fail(s, call, kErrorInvalidParam, "EH0001: null argument");
  }
  aclError code = 0;
  std::string error;
  auto om = ParseOm(file_name, &code, &error);
  if (!om) return Fail(s, call, code, "EE3001: " + error);
  *work_size = om->work_size;
  *weight_size = om->weight_size;
  return Rec(s, call, kSuccess);
}

aclError aclmdlLoadFromFile(const char* model_path, uint32_t* model_id) {
  return LoadModel(model_path, model_id, nullptr, 0, nullptr, 0, false);
}

aclError aclmdlLoadFromFileWithMem(const char* model_path, uint32_t* model_id, void* work_ptr,
                                   size_t work_size, void* weight_ptr, size_t weight_size) {
  return LoadModel(model_path, model_id, work_ptr, work_size, weight_ptr, weight_size, true);
}

aclError aclmdlUnload(uint32_t model_id) {
  std::unique_lock<std::mutex> lock;
  Sim& s = Locked(lock);
  const std::string call = "aclmdlUnload model=" + std::to_string(model_id);
  if (aclError rc = Check(s, call, true)) return rc;
  Model* m = FindModel(s, model_id);
  if (!m) return Fail(s, call, 100011, "EH0001: model not loaded");
  if (m->context != t_state.context) {
    return Fail(s, call, kErrorRtModelContext, "EE1001: the model was loaded in another context");
  }
  FreeModelLocked(s, *m);
  s.models.erase(model_id);
  return Rec(s, call, kSuccess);
}

aclmdlDesc* aclmdlCreateDesc() {
  std::unique_lock<std::mutex> lock;
  Sim& s = Locked(lock);
  Rec(s, "aclmdlCreateDesc", kSuccess);
  return new aclmdlDesc;
}

aclError aclmdlDestroyDesc(aclmdlDesc* desc) {
  std::unique_lock<std::mutex> lock;
  Sim& s = Locked(lock);
  if (!desc) return Fail(s, "aclmdlDestroyDesc", kErrorInvalidParam, "EH0001: null desc");
  delete desc;
  return Rec(s, "aclmdlDestroyDesc", kSuccess);
}

aclError aclmdlGetDesc(aclmdlDesc* desc, uint32_t model_id) {
  std::unique_lock<std::mutex> lock;
  Sim& s = Locked(lock);
  const std::string call = "aclmdlGetDesc model=" + std::to_string(model_id);
  if (aclError rc = Check(s, call, false)) return rc;
  const Model* m = FindModel(s, model_id);
  if (!desc || !m) return Fail(s, call, 100011, "EH0001: model not loaded");
  desc->om = m->om;
  desc->filled = true;
  return Rec(s, call, kSuccess);
}

aclError aclmdlGetDescFromFile(aclmdlDesc* desc, const char* model_path) {
  std::unique_lock<std::mutex> lock;
  Sim& s = Locked(lock);
  const std::string call = std::string("aclmdlGetDescFromFile path=") + (model_path ? model_path : "null");
  if (aclError rc = Check(s, call, false)) return rc;
  if (!s.options.desc_from_file) {
    return Fail(s, call, kErrorApiNotSupport, "EH0004: aclmdlGetDescFromFile is not supported");
  }
  if (!desc || !model_path) return Fail(s, call, kErrorInvalidParam, "EH0001: null argument");
  aclError code = 0;
  std::string error;
  auto om = ParseOm(model_path, &code, &error);
  if (!om) return Fail(s, call, code, "EE3001: " + error);
  desc->om = std::move(*om);
  desc->filled = true;
  return Rec(s, call, kSuccess);
}

size_t aclmdlGetNumInputs(aclmdlDesc* desc) { return desc ? InputCount(desc->om) : 0; }
size_t aclmdlGetNumOutputs(aclmdlDesc* desc) { return desc ? desc->om.outputs.size() : 0; }

size_t aclmdlGetInputSizeByIndex(aclmdlDesc* desc, size_t index) {
  if (!desc || index >= InputCount(desc->om)) return 0;
  return InputBytes(desc->om, index, MaxBatch(desc->om));
}

size_t aclmdlGetOutputSizeByIndex(aclmdlDesc* desc, size_t index) {
  if (!desc || index >= desc->om.outputs.size()) return 0;
  return RowBytes(desc->om.outputs[index]) * MaxBatch(desc->om);
}

aclError aclmdlGetInputDims(const aclmdlDesc* desc, size_t index, aclmdlIODims* dims) {
  if (!desc || index >= InputCount(desc->om)) return kErrorInvalidParam;
  return FillDims(index == desc->om.inputs.size() ? kDynamicTensor : desc->om.inputs[index], dims);
}

aclError aclmdlGetOutputDims(const aclmdlDesc* desc, size_t index, aclmdlIODims* dims) {
  if (!desc || index >= desc->om.outputs.size()) return kErrorInvalidParam;
  return FillDims(desc->om.outputs[index], dims);
}

int aclmdlGetInputDataType(const aclmdlDesc* desc, size_t index) {
  if (!desc || index >= InputCount(desc->om)) return -1;
  return index == desc->om.inputs.size() ? kAclInt64 : desc->om.inputs[index].datatype;
}

int aclmdlGetOutputDataType(const aclmdlDesc* desc, size_t index) {
  if (!desc || index >= desc->om.outputs.size()) return -1;
  return desc->om.outputs[index].datatype;
}

const char* aclmdlGetInputNameByIndex(const aclmdlDesc* desc, size_t index) {
  if (!desc || index >= InputCount(desc->om)) return nullptr;
  return index == desc->om.inputs.size() ? kDynamicTensorName : desc->om.inputs[index].name.c_str();
}

const char* aclmdlGetOutputNameByIndex(const aclmdlDesc* desc, size_t index) {
  if (!desc || index >= desc->om.outputs.size()) return nullptr;
  return desc->om.outputs[index].name.c_str();
}

aclError aclmdlGetInputIndexByName(const aclmdlDesc* desc, const char* name, size_t* index) {
  if (!desc || !name || !index) return kErrorInvalidParam;
  for (size_t i = 0; i < InputCount(desc->om); ++i) {
    if (std::strcmp(aclmdlGetInputNameByIndex(desc, i), name) == 0) {
      *index = i;
      return kSuccess;
    }
  }
  return kErrorInvalidParam;
}

aclError aclmdlGetDynamicBatch(const aclmdlDesc* desc, aclmdlBatch* batch) {
  if (!desc || !batch) return kErrorInvalidParam;
  std::memset(batch, 0, sizeof(*batch));
  batch->batchCount = desc->om.gears.size();
  for (size_t i = 0; i < desc->om.gears.size() && i < kMaxBatchCount; ++i) {
    batch->batch[i] = desc->om.gears[i];
  }
  return kSuccess;
}

aclError aclmdlSetDynamicBatchSize(uint32_t model_id, aclmdlDataset* dataset, size_t index,
                                   uint64_t batch_size) {
  std::unique_lock<std::mutex> lock;
  Sim& s = Locked(lock);
  const std::string call = "aclmdlSetDynamicBatchSize model=" + std::to_string(model_id) +
                           " batch=" + std::to_string(batch_size);
  if (aclError rc = Check(s, call, true)) return rc;
  const Model* m = FindModel(s, model_id);
  if (!m) return Fail(s, call, 100011, "EH0001: model not loaded");
  if (m->om.gears.empty()) return Fail(s, call, 100019, "EH0001: the model has no dynamic batch");
  if (!dataset || index != m->om.inputs.size() || index >= dataset->buffers.size()) {
    return Fail(s, call, kErrorInvalidParam,
                "EH0001: index is not that of ascend_mbatch_shape_data in the dataset");
  }
  bool gear = false;
  for (uint64_t g : m->om.gears) gear = gear || g == batch_size;
  if (!gear) {
    return Fail(s, call, kErrorGeDynamicBatchSizeInvalid,
                "E10001: batch size " + std::to_string(batch_size) + " is not a compiled gear");
  }
  aclDataBuffer* b = dataset->buffers[index];
  if (b->size < kDynamicTensorBytes) return Fail(s, call, kErrorInvalidParam, "EH0001: buffer too small");
  std::memset(b->data, 0, kDynamicTensorBytes);
  std::memcpy(b->data, &batch_size, sizeof(batch_size));  // ACL fills this input itself
  dataset->dynamic_batch = batch_size;
  return Rec(s, call, kSuccess);
}

aclmdlDataset* aclmdlCreateDataset() {
  std::unique_lock<std::mutex> lock;
  Sim& s = Locked(lock);
  Rec(s, "aclmdlCreateDataset", kSuccess);
  return new aclmdlDataset;
}

aclError aclmdlDestroyDataset(const aclmdlDataset* dataset) {
  std::unique_lock<std::mutex> lock;
  Sim& s = Locked(lock);
  if (!dataset) return Fail(s, "aclmdlDestroyDataset", kErrorInvalidParam, "EH0001: null dataset");
  delete dataset;
  return Rec(s, "aclmdlDestroyDataset", kSuccess);
}

aclError aclmdlAddDatasetBuffer(aclmdlDataset* dataset, aclDataBuffer* buffer) {
  if (!dataset || !buffer) return kErrorInvalidParam;
  dataset->buffers.push_back(buffer);
  return kSuccess;
}

aclDataBuffer* aclCreateDataBuffer(void* data, size_t size) {
  std::unique_lock<std::mutex> lock;
  Sim& s = Locked(lock);
  const int id = s.next_id++;
  Rec(s, "aclCreateDataBuffer mem=" + MemName(s, data) + " size=" + std::to_string(size) +
             " new=" + Name("buf", id), kSuccess);
  return new aclDataBuffer{data, size, id};
}

aclError aclDestroyDataBuffer(const aclDataBuffer* buffer) {
  std::unique_lock<std::mutex> lock;
  Sim& s = Locked(lock);
  if (!buffer) return Fail(s, "aclDestroyDataBuffer", kErrorInvalidParam, "EH0001: null buffer");
  const std::string call = "aclDestroyDataBuffer buffer=" + Name("buf", buffer->id);
  delete buffer;
  return Rec(s, call, kSuccess);
}

aclError aclmdlExecuteAsync(uint32_t model_id, const aclmdlDataset* input, aclmdlDataset* output,
                            aclrtStream stream) {
  std::unique_lock<std::mutex> lock;
  Sim& s = Locked(lock);
  const int sid = static_cast<int>(reinterpret_cast<intptr_t>(stream));
  std::string call = "aclmdlExecuteAsync model=" + std::to_string(model_id) + " stream=" + Name("stream", sid);
  if (aclError rc = Check(s, call, true)) return rc;
  const Model* m = FindModel(s, model_id);
  if (!m) return Fail(s, call, 100011, "EH0001: model not loaded");
  if (m->context != t_state.context) {
    return Fail(s, call, kErrorRtModelContext, "EE1001: the model was loaded in another context");
  }
  auto st = s.streams.find(sid);
  if (st == s.streams.end()) return Fail(s, call, kErrorInvalidParam, "EH0001: unknown stream");
  if (st->second.context != t_state.context) {
    return Fail(s, call, kErrorRtStreamContext, "EE1001: the stream belongs to another context");
  }
  for (const auto& [id, other] : s.streams) {
    if (id == sid) continue;
    for (const auto& t : other.tasks) {
      if (t.model == model_id) {
        return Fail(s, call, 507011, "EE1001: the model is already executing on another stream");
      }
    }
  }
  const OmModel& om = m->om;
  const uint64_t batch = om.gears.empty() ? MaxBatch(om)
                         : input && input->dynamic_batch ? input->dynamic_batch : MaxBatch(om);
  if (!input || input->buffers.size() != InputCount(om)) {
    return Fail(s, call, 100017, "EE1001: the input dataset has " +
                                     std::to_string(input ? input->buffers.size() : 0) +
                                     " buffers, the model " + std::to_string(InputCount(om)));
  }
  for (size_t i = 0; i < InputCount(om); ++i) {
    const aclDataBuffer* b = input->buffers[i];
    if (b->size < InputBytes(om, i, batch) || !Find(s, b->data, InputBytes(om, i, batch), nullptr)) {
      return Fail(s, call, 100017, "EE1001: input " + std::to_string(i) + " is not device memory of its size");
    }
  }
  if (!output || output->buffers.size() != om.outputs.size()) {
    return Fail(s, call, 100018, "EE1001: the output dataset does not match the model");
  }
  for (size_t i = 0; i < om.outputs.size(); ++i) {
    const aclDataBuffer* b = output->buffers[i];
    const size_t need = RowBytes(om.outputs[i]) * batch;
    if (b->size < need || !Find(s, b->data, need, nullptr)) {
      return Fail(s, call, 100018, "EE1001: output " + std::to_string(i) + " is not device memory of its size");
    }
  }
  Task task{model_id, {}, {}, batch, {}};
  for (const auto* b : input->buffers) task.inputs.push_back(*b);
  for (const auto* b : output->buffers) task.outputs.push_back(*b);
  if (om.fail_on && Holds(om, task.inputs[0], batch, om.fail_on->first)) {
    return Fail(s, call, om.fail_on->second,
                "EE9999: simulated failure " + std::to_string(om.fail_on->second) +
                    " (the OM's fail_on)");
  }
  const bool hang = Holds(om, task.inputs[0], batch, om.hang_on);
  const auto cost =
      std::chrono::microseconds(om.latency_us + om.latency_per_item_us * static_cast<int64_t>(batch));
  if (hang) {
    task.ready = Clock::time_point::max();
  } else if (s.options.serial_device) {
    Device& device = s.devices[static_cast<size_t>(s.contexts.at(st->second.context).device)];
    task.ready = std::max(Clock::now(), device.busy_until) + cost;
    device.busy_until = task.ready;
  } else {
    task.ready = Clock::now() + cost;
  }
  st->second.tasks.push_back(std::move(task));
  s.cv.notify_all();
  return Rec(s, call + " batch=" + std::to_string(batch) + (hang ? " hang=1" : ""), kSuccess);
}

// The simulator's own extensions (aclsim.h).

void aclsimReset(const char* options_json) {
  std::unique_lock<std::mutex> lock;
  Sim& s = Locked(lock);
  ReleaseAllLocked(s);
  Options o = EnvOptions();
  if (options_json && *options_json) {
    json j = json::parse(options_json);
    o.soc = j.value("soc", o.soc);
    o.devices = j.value("devices", o.devices);
    o.memory_mb = j.value("memory_mb", o.memory_mb);
    o.others_mb = j.value("others_mb", o.others_mb);
    o.refcounted_init = j.value("refcounted_init", o.refcounted_init);
    o.desc_from_file = j.value("desc_from_file", o.desc_from_file);
    o.load_charge = j.value("load_charge", o.load_charge);
    o.serial_device = j.value("serial_device", o.serial_device);
  }
  ConfigureLocked(s, o);
  s.initialized = false;
  s.finalized = false;
  s.init_count = 0;
  s.record.clear();
  s.next_model = 1;
}

size_t aclsimRecordCount() {
  std::unique_lock<std::mutex> lock;
  Sim& s = Locked(lock);
  return s.record.size();
}

const char* aclsimRecordLine(size_t index) {
  std::unique_lock<std::mutex> lock;
  Sim& s = Locked(lock);
  s.record_line = index < s.record.size() ? s.record[index] : std::string();
  return s.record_line.c_str();
}

size_t aclsimDeviceUsed(int32_t device) {
  std::unique_lock<std::mutex> lock;
  Sim& s = Locked(lock);
  return device >= 0 && static_cast<size_t>(device) < s.devices.size()
             ? s.devices[static_cast<size_t>(device)].used
             : 0;
}

}  // extern "C"

// Every entry point has exactly the type mmserve declares for it.
#define ACLSIM_CHECK(required, ret, name, params) \
  static_assert(std::is_same_v<decltype(&::name), ret(*) params>, #name " differs from acl_api.h");
MMS_ACL_FUNCTIONS(ACLSIM_CHECK)
#undef ACLSIM_CHECK
