#include "backend/opencv/opencv_backend.h"

#include <atomic>
#include <cstring>
#include <numeric>
#include <opencv2/core/utils/logger.hpp>
#include <opencv2/dnn.hpp>

#include "backend/file_probe.h"
#include "backend/opencv/onnx_graph.h"
#include "common/files.h"
#include "common/strings.h"
#include "config/params.h"

namespace mmserve {
namespace {

constexpr int64_t kMaxOnnxBytes = (int64_t{1} << 31) - 1;  // protobuf's own limit

struct OpencvOptions {
  int threads = 0;  // 0: OpenCV's default pool
};

OpencvOptions ReadOptions(const ModelConfig& model, ConfigErrors& errors) {
  ParamReader r(model.params, errors);
  OpencvOptions o;
  o.threads = static_cast<int>(r.Int("threads", 0, 0, 1024));
  r.Finish();
  return o;
}

// OpenCV's importer logs each failure at ERROR on stderr before throwing it; the exception
// (turned into an error that names the model) is what mmserve reports.
void QuietOpencv() {
  static std::once_flag once;
  std::call_once(once,
                 [] { cv::utils::logging::setLogLevel(cv::utils::logging::LOG_LEVEL_SILENT); });
}

// The part of OpenCV's multi-line import error a user needs: the node ("Node [Clip@ai.onnx]:
// (onnx_node!clip0)") and what failed (the last "error: (-2:...) <what> in function" or the
// "expected: ..." lines), on one line.
std::string ImportError(const cv::Exception& e) {
  const std::string& text = e.err;
  std::string node;
  if (size_t at = text.find("Node ["); at != std::string::npos) {
    const size_t end = text.find(" parse error", at);
    node = text.substr(at, end == std::string::npos ? std::string::npos : end - at) + ": ";
  }
  std::string what;
  if (size_t at = text.find("(expected:"); at != std::string::npos) {
    what = text.substr(at + 1);
  } else if (size_t at = text.rfind("error: ("); at != std::string::npos) {
    const size_t close = text.find(") ", at);
    what = close == std::string::npos ? text.substr(at) : text.substr(close + 2);
    if (size_t fn = what.find(" in function"); fn != std::string::npos) what.resize(fn);
  } else {
    what = text;
  }
  std::string flat;
  for (char c : node + what) {
    if (c == '\n' || c == '>') {
      if (!flat.empty() && flat.back() != ' ') flat.push_back(' ');
    } else if (c != ' ' || (!flat.empty() && flat.back() != ' ')) {
      flat.push_back(c);
    }
  }
  while (!flat.empty() && flat.back() == ' ') flat.pop_back();
  // "(expected: 'a == b'), where ...": the parenthesis closes what the cut left open.
  if (size_t at = flat.find("'), where"); at != std::string::npos) flat.erase(at + 1, 1);
  return Abbreviate(flat, 400);
}

Result<cv::dnn::Net> Import(const std::string& bytes) {
  QuietOpencv();
  try {
    cv::dnn::Net net = cv::dnn::readNetFromONNX(bytes.data(), bytes.size());
    if (net.empty()) return InvalidArgument("OpenCV 4.6 imported no layers from it");
    net.setPreferableBackend(cv::dnn::DNN_BACKEND_OPENCV);
    net.setPreferableTarget(cv::dnn::DNN_TARGET_CPU);
    return net;
  } catch (const cv::Exception& e) {
    return InvalidArgument("OpenCV 4.6 cannot import it: " + ImportError(e));
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("OpenCV 4.6 cannot import it: ") + e.what());
  }
}

// The graph as mmserve serves it, and how it batches.
struct OnnxModel {
  ModelSignature signature;
  int64_t fixed_batch = 0;  // the graph's first dimension when fixed; 0 when variable
};

Result<OnnxModel> Describe(const OnnxGraph& graph) {
  OnnxModel model;
  model.signature.platform = "onnxruntime_onnx";  // Triton's name for an ONNX model's platform
  if (graph.inputs.empty()) return InvalidArgument("the graph has no inputs");
  if (graph.outputs.empty()) return InvalidArgument("the graph has no outputs");
  for (size_t i = 0; i < graph.inputs.size(); ++i) {
    const OnnxValue& in = graph.inputs[i];
    if (in.elem_type != 1) {
      return InvalidArgument("input '" + in.name + "' is " + OnnxTypeName(in.elem_type) +
                             ": OpenCV DNN takes FLOAT (FP32) inputs only");
    }
    if (!in.has_shape || in.shape.empty()) {
      return InvalidArgument("input '" + in.name +
                             "' has no shape: a batch needs a first "
                             "dimension (re-export with a static or named one)");
    }
    const int64_t first = in.shape[0] > 0 ? in.shape[0] : 0;
    if (i > 0 && first != model.fixed_batch) {
      return InvalidArgument("input '" + in.name + "' has first dimension " +
                             ShapeToString({in.shape[0]}) + ", input '" + graph.inputs[0].name +
                             "' " + ShapeToString({graph.inputs[0].shape[0]}) +
                             ": every input must batch the same way");
    }
    model.fixed_batch = first;
    Shape shape = in.shape;
    shape[0] = -1;
    model.signature.inputs.push_back({in.name, DataType::kFp32, shape, false});
  }
  for (const OnnxValue& out : graph.outputs) {
    Shape shape = out.has_shape && !out.shape.empty() ? out.shape : Shape{-1};
    shape[0] = -1;
    model.signature.outputs.push_back({out.name, DataType::kFp32, shape, false});
  }
  return model;
}

// The bytes of the model's file and what its graph says, checked (without OpenCV).
struct OnnxFile {
  std::string bytes;
  FileIdentity identity;  // of the file the bytes were read from
  OnnxGraph graph;
  OnnxModel model;
};

Result<OnnxFile> DescribeOnnx(std::string bytes) {
  OnnxFile file;
  file.bytes = std::move(bytes);
  MMS_ASSIGN_OR_RETURN(file.graph, ReadOnnxGraph(file.bytes));
  MMS_ASSIGN_OR_RETURN(file.model, Describe(file.graph));
  return file;
}

Result<OnnxFile> ReadOnnxFile(const ModelConfig& config) {
  MMS_ASSIGN_OR_RETURN(FileSnapshot snapshot, ReadSnapshot(config.path, kMaxOnnxBytes));
  MMS_ASSIGN_OR_RETURN(OnnxFile file, DescribeOnnx(std::move(snapshot.bytes)));
  file.identity = snapshot.identity;
  return file;
}

// The input shapes of one forward of `rows` rows; variable dimensions past the first count 1.
std::vector<cv::dnn::MatShape> ForwardShapes(const ModelSignature& signature, int rows) {
  std::vector<cv::dnn::MatShape> shapes;
  for (const TensorSpec& in : signature.inputs) {
    cv::dnn::MatShape shape;
    for (size_t d = 0; d < in.shape.size(); ++d) {
      const int64_t v = d == 0 ? rows : in.shape[d];
      shape.push_back(static_cast<int>(std::clamp<int64_t>(v, 1, 1 << 20)));
    }
    shapes.push_back(shape);
  }
  return shapes;
}

// Weights and activation blobs of one Net running `rows` rows (OpenCV's own accounting).
int64_t NetFootprint(cv::dnn::Net& net, const ModelSignature& signature, int rows) {
  try {
    size_t weights = 0, blobs = 0;
    net.getMemoryConsumption(ForwardShapes(signature, rows), weights, blobs);
    return static_cast<int64_t>(weights + blobs);
  } catch (const cv::Exception&) {
    return 0;
  }
}

// The rows one forward runs for `model`: the graph's fixed batch, else max_batch.
int ForwardRows(const OnnxFile& file, const ModelConfig& model) {
  return file.model.fixed_batch > 0 ? static_cast<int>(file.model.fixed_batch)
                                    : std::max(1, model.max_batch);
}

// OpenCV's importer over `file`'s bytes in a probe child (file_probe.h), once per version of the
// file: the bytes one Net holds at `rows` rows, or why the importer refused (or died of) it.
// Nothing imports the bytes in the server before this has answered.
Result<int64_t> ProbeImport(const OnnxFile& file, const ModelConfig& model, int rows) {
  const int64_t size = static_cast<int64_t>(file.bytes.size());
  ProbeSpec spec{.backend = "opencv",
                 .arg = rows,
                 .what = "OpenCV 4.6's ONNX importer",
                 .file = model.path.filename().string(),
                 .address_space_bytes = (int64_t{4} << 30) + 4 * size};
  MMS_ASSIGN_OR_RETURN(std::string answer, ProbeOnce(spec, file.identity, [&] {
                         return SealedCopy(file.bytes);  // the bytes the server imports
                       }));
  auto footprint = ParseInt64(answer);
  if (!footprint || *footprint < 0) {
    return Internal("the ONNX import probe answered '" + Abbreviate(answer, 40) + "'");
  }
  return *footprint;
}

class OpencvSession;

class OpencvInstance final : public Instance {
 public:
  OpencvInstance(const OpencvSession& session, cv::dnn::Net net)
      : session_(session), net_(std::move(net)) {}
  Status Execute(Execution& execution) override;

 private:
  // One forward over `items` (rows each) that share their inputs' shapes past the first
  // dimension; `total` rows, padded up to the graph's fixed batch when it has one.
  Status Forward(const std::vector<std::pair<BatchItem*, int64_t>>& items, int64_t total);

  const OpencvSession& session_;
  cv::dnn::Net net_;
};

class OpencvSession final : public Session {
 public:
  OpencvSession(OpencvBackend& backend, const ModelConfig& config, OnnxFile file, bool claimed)
      : backend_(backend),
        key_(config.name + ":" + std::to_string(config.version)),
        claimed_(claimed),
        max_rows_(std::max(1, config.max_batch)),
        file_(std::move(file)) {}
  ~OpencvSession() override {
    if (claimed_) backend_.ReleaseThreads(key_);
  }

  const ModelSignature& signature() const override { return file_.model.signature; }
  int64_t resident_bytes() const override {
    return static_cast<int64_t>(file_.bytes.size()) +
           instances_.load() * per_instance_bytes_.load();
  }
  Result<std::unique_ptr<Instance>> CreateInstance(int) override {
    MMS_ASSIGN_OR_RETURN(cv::dnn::Net net, Import(file_.bytes));
    per_instance_bytes_.store(NetFootprint(net, signature(), rows_per_forward()));
    auto instance = std::make_unique<OpencvInstance>(*this, std::move(net));
    instances_.fetch_add(1);
    return std::unique_ptr<Instance>(std::move(instance));
  }
  std::map<std::string, int64_t> counters() const override {
    return {{"forwards", forwards_.load()},
            {"rows", rows_.load()},
            {"padded_rows", padded_rows_.load()}};
  }

  int64_t fixed_batch() const { return file_.model.fixed_batch; }
  // The rows one forward holds: the graph's fixed batch, else the largest batch the server forms.
  int rows_per_forward() const {
    return fixed_batch() > 0 ? static_cast<int>(fixed_batch()) : max_rows_;
  }
  void Count(int64_t rows, int64_t padded) const {
    forwards_.fetch_add(1);
    rows_.fetch_add(rows);
    padded_rows_.fetch_add(padded);
  }

 private:
  OpencvBackend& backend_;
  const std::string key_;
  const bool claimed_;
  const int max_rows_;
  const OnnxFile file_;
  std::atomic<int64_t> instances_{0};
  std::atomic<int64_t> per_instance_bytes_{0};
  mutable std::atomic<int64_t> forwards_{0}, rows_{0}, padded_rows_{0};
};

// The dimensions past the first of every input of `request`, for grouping requests whose
// inputs can be stacked into one blob.
std::vector<Shape> TrailingShapes(const ModelSignature& signature, const InferRequest& request) {
  std::vector<Shape> out;
  for (const TensorSpec& spec : signature.inputs) {
    const Tensor* t = request.input(spec.name);
    out.push_back(t ? Shape(t->shape().begin() + 1, t->shape().end()) : Shape{});
  }
  return out;
}

Status OpencvInstance::Execute(Execution& execution) {
  execution.set_stage(Stage::kExecute);
  const ModelSignature& signature = session_.signature();
  const int64_t fixed = session_.fixed_batch();
  std::vector<std::pair<BatchItem*, int64_t>> runnable;
  for (BatchItem& item : execution.items) {
    int64_t rows = -1;
    Status bad;
    for (const TensorSpec& spec : signature.inputs) {
      const Tensor* t = item.request->input(spec.name);
      if (!t || t->type() != DataType::kFp32 || !ShapeMatches(spec.shape, t->shape()) ||
          !t->Validate().ok()) {
        bad = InvalidArgument("input '" + spec.name + "': expected FP32 " +
                              ShapeToString(spec.shape));
      } else if (std::any_of(t->shape().begin(), t->shape().end(), [](int64_t d) {
                   return d < 1 || d > std::numeric_limits<int>::max();
                 })) {
        bad = InvalidArgument("input '" + spec.name + "' has shape " + ShapeToString(t->shape()) +
                              ": every dimension must be 1 or more");
      } else if (rows >= 0 && t->shape()[0] != rows) {
        bad = InvalidArgument("input '" + spec.name + "' has " + std::to_string(t->shape()[0]) +
                              " rows, the other inputs " + std::to_string(rows) +
                              ": every input needs the same first dimension");
      } else {
        rows = t->shape()[0];
      }
      if (!bad.ok()) break;
    }
    if (bad.ok() && (rows < 1 || (fixed > 0 && rows > fixed))) {
      bad = InvalidArgument("a request may carry 1.." +
                            (fixed > 0 ? std::to_string(fixed) : std::string("any")) +
                            " rows (the graph's first dimension), not " + std::to_string(rows));
    }
    if (!bad.ok()) {
      item.result = bad;
      continue;
    }
    runnable.emplace_back(&item, rows);
  }
  // Consecutive requests whose inputs stack, in chunks that fit one forward.
  const int64_t limit = fixed > 0 ? fixed : std::numeric_limits<int64_t>::max();
  size_t begin = 0;
  while (begin < runnable.size()) {
    const auto trailing = TrailingShapes(signature, *runnable[begin].first->request);
    size_t end = begin;
    int64_t rows = 0;
    while (end < runnable.size() && rows + runnable[end].second <= limit &&
           TrailingShapes(signature, *runnable[end].first->request) == trailing) {
      rows += runnable[end++].second;
    }
    std::vector<std::pair<BatchItem*, int64_t>> chunk(runnable.begin() + begin,
                                                      runnable.begin() + end);
    const Status status = Forward(chunk, rows);
    if (!status.ok()) {
      for (auto& [item, n] : chunk) item->result = status;
    }
    begin = end;
  }
  return Status::Ok();
}

Status OpencvInstance::Forward(const std::vector<std::pair<BatchItem*, int64_t>>& items,
                               int64_t total) {
  const ModelSignature& signature = session_.signature();
  const int64_t rows = std::max(total, session_.fixed_batch());
  try {
    for (const TensorSpec& spec : signature.inputs) {
      const Tensor* first = items.front().first->request->input(spec.name);
      std::vector<int> dims{static_cast<int>(rows)};
      for (size_t d = 1; d < first->shape().size(); ++d) {
        dims.push_back(static_cast<int>(first->shape()[d]));
      }
      cv::Mat blob(static_cast<int>(dims.size()), dims.data(), CV_32F, cv::Scalar(0));
      char* at = reinterpret_cast<char*>(blob.data);
      for (const auto& [item, n] : items) {
        const std::string& data = item->request->input(spec.name)->data();
        std::memcpy(at, data.data(), data.size());
        at += data.size();
      }
      net_.setInput(blob, spec.name);
    }
    std::vector<cv::String> names;
    for (const TensorSpec& spec : signature.outputs) names.push_back(spec.name);
    std::vector<cv::Mat> outs;
    net_.forward(outs, names);
    session_.Count(total, rows - total);
    for (auto& [item, n] : items) item->result = InferResponse{};
    for (size_t o = 0; o < outs.size() && o < names.size(); ++o) {
      cv::Mat out = outs[o];
      if (out.type() != CV_32F) out.convertTo(out, CV_32F);
      if (!out.isContinuous()) out = out.clone();
      if (out.dims < 1 || out.size[0] != rows) {
        return Internal("output '" + names[o] + "' has " +
                        std::to_string(out.dims < 1 ? 0 : out.size[0]) + " rows for a batch of " +
                        std::to_string(rows) + ": it does not batch along its first dimension");
      }
      const size_t row_bytes = out.total() * sizeof(float) / static_cast<size_t>(rows);
      const char* at = reinterpret_cast<const char*>(out.data);
      for (auto& [item, n] : items) {
        Shape shape{n};
        for (int d = 1; d < out.dims; ++d) shape.push_back(out.size[d]);
        const size_t bytes = row_bytes * static_cast<size_t>(n);
        item->result->outputs.emplace_back(names[o], DataType::kFp32, std::move(shape),
                                           std::string(at, bytes));
        at += bytes;
      }
    }
    return Status::Ok();
  } catch (const cv::Exception& e) {
    return Internal("OpenCV forward failed: " + ImportError(e));
  } catch (const std::exception& e) {  // an allocation: this batch fails, not the worker
    return ResourceExhausted(std::string("OpenCV forward failed: ") + e.what());
  }
}

}  // namespace

OpencvBackend::OpencvBackend(Runtime& runtime) : runtime_(runtime) {}

Status OpencvBackend::ClaimThreads(const std::string& model, int threads) {
  std::lock_guard lock(mu_);
  for (const auto& [other, n] : thread_claims_) {
    if (other != model && n != threads) {
      return FailedPrecondition(
          "params.threads: " + std::to_string(threads) + " differs from the " + std::to_string(n) +
          " that loaded model " + other +
          " set; OpenCV's compute pool is process-wide, so opencv models name one value");
    }
  }
  thread_claims_[model] = threads;
  cv::setNumThreads(threads);
  return Status::Ok();
}

void OpencvBackend::ReleaseThreads(const std::string& model) {
  std::lock_guard lock(mu_);
  thread_claims_.erase(model);
}

void OpencvBackend::Validate(ModelConfig& model, ConfigErrors& errors) const {
  (void)ReadOptions(model, errors);
  if (model.path.empty() || !std::filesystem::is_regular_file(model.path)) return;  // reported
  auto file = ReadOnnxFile(model);
  Status status =
      file.ok() ? ProbeImport(*file, model, ForwardRows(*file, model)).status() : file.status();
  if (!status.ok()) {
    errors.Add(
        {.where = model.where,
         .field = model.Field("path"),
         .expected = "an ONNX model OpenCV 4.6 can import (docs/VISION.md)",
         .found = "'" + model.path.filename().string() + "': " + std::string(status.message())});
  }
}

Result<MemoryEstimate> OpencvBackend::Estimate(const ModelConfig& model) const {
  MMS_ASSIGN_OR_RETURN(OnnxFile file, ReadOnnxFile(model));
  const int rows = ForwardRows(file, model);
  // The file stays in memory (instances are rebuilt from it); each worker has its own Net.
  MMS_ASSIGN_OR_RETURN(const int64_t per_instance, ProbeImport(file, model, rows));
  return MemoryEstimate{
      .bytes = static_cast<int64_t>(file.bytes.size()) + model.thread_num * per_instance,
      .source = "ONNX file + " + std::to_string(model.thread_num) +
                " x OpenCV's weights and blobs at " + std::to_string(rows) + " rows"};
}

Result<std::unique_ptr<Session>> OpencvBackend::LoadSession(const ModelConfig& model,
                                                            LoadProgress& /*progress*/) {
  ConfigErrors errors;
  const OpencvOptions o = ReadOptions(model, errors);
  MMS_RETURN_IF_ERROR(errors.ToStatus());
  MMS_ASSIGN_OR_RETURN(OnnxFile file, ReadOnnxFile(model));
  MMS_RETURN_IF_ERROR(ProbeImport(file, model, ForwardRows(file, model)).status());
  const std::string key = model.name + ":" + std::to_string(model.version);
  if (o.threads > 0) MMS_RETURN_IF_ERROR(ClaimThreads(key, o.threads));
  return std::unique_ptr<Session>(
      std::make_unique<OpencvSession>(*this, model, std::move(file), o.threads > 0));
}

Result<std::string> OpencvBackend::ProbeFile(int fd, int64_t rows) const {
  MMS_ASSIGN_OR_RETURN(std::string bytes, ReadWhole(fd, kMaxOnnxBytes));
  MMS_ASSIGN_OR_RETURN(OnnxFile file, DescribeOnnx(std::move(bytes)));
  MMS_ASSIGN_OR_RETURN(cv::dnn::Net net, Import(file.bytes));
  const int forward_rows = static_cast<int>(std::clamp<int64_t>(rows, 1, 1 << 20));
  return std::to_string(NetFootprint(net, file.model.signature, forward_rows));
}

}  // namespace mmserve
