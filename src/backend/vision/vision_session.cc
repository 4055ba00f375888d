#include "backend/vision/vision_session.h"

#include <algorithm>
#include <atomic>
#include <opencv2/imgcodecs.hpp>
#include <optional>

#include "backend/forwarding.h"
#include "backend/vision/image_postprocess.h"
#include "backend/vision/image_preprocess.h"

namespace mmserve {
namespace {

class VisionSession;

// The network's instance with the stages around it. Every capability of the network's instance
// is forwarded (ForwardingInstance); executions run the stages around the network's, and
// several batches still reach it in one call (an isolated network's one round trip).
class VisionInstance final : public ForwardingInstance {
 public:
  VisionInstance(const VisionSession& session, std::unique_ptr<Instance> network)
      : ForwardingInstance(std::move(network)), session_(session) {}
  Status Execute(Execution& execution) override {
    Status status;
    ExecuteEach(std::span(&execution, 1), std::span(&status, 1));
    return status;
  }
  void ExecuteEach(std::span<Execution> batches, std::span<Status> statuses) override;
  // Not split, on purpose: the post-processing needs the network's results, and the stages keep
  // what they staged only for the length of one ExecuteEach. (Stages run in the worker process
  // of an isolated network, around its engine: the server's proxy, which splits, is outside.)
  bool starts_calls() const override { return false; }
  void StartEach(std::span<Execution>) override {}
  void FinishEach(std::span<Execution> batches, std::span<Status> statuses) override {
    ExecuteEach(batches, statuses);
  }

 private:
  // One batch's requests as the network's, and where each came from.
  struct Staged {
    std::vector<InferRequest> requests;
    std::vector<std::vector<ImageTransform>> transforms;
    std::vector<size_t> runnable;  // the items that passed pre-processing
    std::vector<BatchItem> items;  // the network's items, one per runnable
  };
  void Preprocess(Execution& execution, Staged& staged);
  void Postprocess(Execution& execution, Staged& staged);

  const VisionSession& session_;
};

// The network's session with the stages around it: every capability is the network's
// (ForwardingSession) except the signature (images in, post-processed outputs out), the
// instances (VisionInstance), the counters (the network's plus the stages') and the warm-up
// request (images).
class VisionSession final : public ForwardingSession {
 public:
  VisionSession(std::unique_ptr<Session> network, std::optional<ImagePreprocessor> pre,
                std::optional<ImagePostprocessor> post, std::string image_input, int max_images)
      : ForwardingSession(std::move(network)),
        pre_(std::move(pre)),
        post_(std::move(post)),
        image_input_(std::move(image_input)),
        max_images_(max_images) {
    signature_ = inner().signature();
    if (pre_) {
      for (TensorSpec& in : signature_.inputs) {
        if (in.name == image_input_) in = {kImageInput, DataType::kBytes, {-1}, false};
      }
    }
    if (post_) signature_.outputs = post_->outputs();
  }

  const ModelSignature& signature() const override { return signature_; }
  Result<std::unique_ptr<Instance>> CreateInstance(int index) override {
    MMS_ASSIGN_OR_RETURN(std::unique_ptr<Instance> network, inner().CreateInstance(index));
    return std::unique_ptr<Instance>(std::make_unique<VisionInstance>(*this, std::move(network)));
  }
  std::map<std::string, int64_t> counters() const override {
    auto counters = inner().counters();
    counters["images"] = images_.load();
    counters["preprocess_deadline_stops"] = deadline_stops_.load();
    return counters;
  }
  // Images: `rows` mid-grey PNGs of the network's size, through every stage.
  std::unique_ptr<InferRequest> WarmupRequest(int rows) const override {
    auto request = inner().WarmupRequest(rows);
    if (!request || !pre_) return request;
    std::vector<uint8_t> png;
    const cv::Mat grey(pre_->height(), pre_->width(), CV_8UC3, cv::Scalar::all(128));
    if (!cv::imencode(".png", grey, png)) return nullptr;
    std::string images;
    for (int i = 0; i < rows; ++i) {
      Tensor::AppendBytesElement(
          images, std::string_view(reinterpret_cast<const char*>(png.data()), png.size()));
    }
    std::erase_if(request->inputs, [&](const Tensor& t) { return t.name() == image_input_; });
    request->inputs.emplace_back(kImageInput, DataType::kBytes, Shape{rows}, std::move(images));
    return request;
  }

  // The network's request for `request`, and where each of its rows came from.
  Status Prepare(const InferRequest& request, InferRequest& network,
                 std::vector<ImageTransform>& transforms) const;
  // The request parameter `detection_list: true`, or asking for the output DETECTIONS, adds a
  // detector's JSON list.
  Status Finish(const InferRequest& request, InferResponse& response,
                const std::vector<ImageTransform>& transforms) const {
    if (!post_) return Status::Ok();
    const auto& wanted = request.requested_outputs;
    const bool list = BoolParam(request.parameters, "detection_list", false) ||
                      std::find(wanted.begin(), wanted.end(), "DETECTIONS") != wanted.end();
    return post_->Run(response, transforms, list);
  }

 private:
  const std::optional<ImagePreprocessor> pre_;
  const std::optional<ImagePostprocessor> post_;
  const std::string image_input_;  // the network input the images feed
  const int max_images_;           // per request: the model's max_batch
  ModelSignature signature_;
  mutable std::atomic<int64_t> images_{0};          // pre-processed
  mutable std::atomic<int64_t> deadline_stops_{0};  // requests whose deadline stopped theirs
};

Status VisionSession::Prepare(const InferRequest& request, InferRequest& network,
                              std::vector<ImageTransform>& transforms) const {
  network.id = request.id;
  network.model_name = request.model_name;
  network.parameters = request.parameters;
  network.deadline = request.deadline;
  network.arrival = request.arrival;
  if (!pre_) {
    // One transform per row the client declares: bounded by max_batch before any is allocated
    // (a 90-byte request declaring 15,000,000 rows of nothing cost 0.9 GB here).
    const int64_t rows = request.inputs.empty() || request.inputs[0].shape().empty()
                             ? 1
                             : request.inputs[0].shape()[0];
    if (rows > max_images_) {
      return InvalidArgument("input '" + request.inputs[0].name() + "' declares " +
                             std::to_string(rows) + " rows; a request may carry 1.." +
                             std::to_string(max_images_) + " (the model's max_batch)");
    }
    network.inputs = request.inputs;
    transforms.assign(static_cast<size_t>(std::max<int64_t>(rows, 0)), ImageTransform{});
    return Status::Ok();
  }
  for (const Tensor& t : request.inputs) {
    if (t.name() != kImageInput) network.inputs.push_back(t);
  }
  const Tensor* image = request.input(kImageInput);
  if (!image || image->type() != DataType::kBytes || !image->Validate().ok()) {
    return InvalidArgument("input '" + std::string(kImageInput) +
                           "' is required: BYTES, one encoded image per element");
  }
  const auto encoded = image->BytesElements();
  if (encoded.empty() || encoded.size() > static_cast<size_t>(max_images_)) {
    return InvalidArgument("input '" + std::string(kImageInput) + "' holds " +
                           std::to_string(encoded.size()) + " images; a request may carry 1.." +
                           std::to_string(max_images_) + " (the model's max_batch)");
  }
  const auto bad = [&](size_t i, const Status& status) {
    const std::string which = encoded.size() == 1 ? "" : " element " + std::to_string(i);
    return InvalidArgument("input '" + std::string(kImageInput) + "'" + which + ": " +
                           std::string(status.message()));
  };
  // Every image admitted (header, pixel limit) before the rows are allocated: a hostile element
  // costs nothing.
  std::vector<ImageHeader> headers;
  for (size_t i = 0; i < encoded.size(); ++i) {
    auto header = pre_->Admit(encoded[i]);
    if (!header.ok()) return bad(i, header.status());
    headers.push_back(*header);
  }
  Shape shape{static_cast<int64_t>(encoded.size())};
  shape.insert(shape.end(), pre_->row_shape().begin(), pre_->row_shape().end());
  std::string data(encoded.size() * pre_->row_bytes(), '\0');
  transforms.clear();
  // Past the deadline the client has its 504 already: each image is started only before it,
  // and a JPEG's decode stops at it.
  for (size_t i = 0; i < encoded.size(); ++i) {
    Result<ImageTransform> t =
        Clock::now() < request.deadline
            ? pre_->Run(encoded[i], headers[i], data.data() + i * pre_->row_bytes(),
                        request.deadline)
            : DeadlineExceeded("pre-processing stopped: the request's deadline passed");
    if (!t.ok() && t.status().code() == StatusCode::kDeadlineExceeded) {
      deadline_stops_.fetch_add(1);
      return t.status();
    }
    if (!t.ok()) return bad(i, t.status());
    transforms.push_back(*t);
  }
  images_.fetch_add(static_cast<int64_t>(encoded.size()));
  network.inputs.emplace_back(image_input_, pre_->type(), std::move(shape), std::move(data));
  return Status::Ok();
}

void VisionInstance::Preprocess(Execution& execution, Staged& staged) {
  execution.set_stage(Stage::kPreprocess);
  const size_t n = execution.items.size();
  staged.requests.resize(n);
  staged.transforms.resize(n);
  for (size_t i = 0; i < n; ++i) {
    BatchItem& item = execution.items[i];
    Status status;
    try {  // what OpenCV or an allocation throws fails this request, not the worker
      status = session_.Prepare(*item.request, staged.requests[i], staged.transforms[i]);
    } catch (const std::exception& e) {
      status = ResourceExhausted(std::string("pre-processing failed: ") + e.what());
    }
    if (!status.ok()) {
      item.result = status;
      continue;
    }
    staged.runnable.push_back(i);
  }
  staged.items.assign(staged.runnable.size(), BatchItem{nullptr});
  for (size_t k = 0; k < staged.runnable.size(); ++k) {
    staged.items[k].request = &staged.requests[staged.runnable[k]];
  }
}

void VisionInstance::Postprocess(Execution& execution, Staged& staged) {
  execution.set_stage(Stage::kPostprocess);
  for (size_t k = 0; k < staged.runnable.size(); ++k) {
    Result<InferResponse> result = std::move(staged.items[k].result);
    const size_t i = staged.runnable[k];
    if (result.ok()) {
      Status s;
      try {
        s = session_.Finish(*execution.items[i].request, *result, staged.transforms[i]);
      } catch (const std::exception& e) {
        s = ResourceExhausted(std::string("post-processing failed: ") + e.what());
      }
      if (!s.ok()) result = s;
    }
    execution.items[i].result = std::move(result);
  }
}

void VisionInstance::ExecuteEach(std::span<Execution> batches, std::span<Status> statuses) {
  std::vector<Staged> staged(batches.size());
  std::vector<size_t> ran;  // the batches with a request left for the network
  for (size_t b = 0; b < batches.size(); ++b) {
    statuses[b] = Status::Ok();
    Preprocess(batches[b], staged[b]);
    if (!staged[b].runnable.empty()) ran.push_back(b);
  }
  if (ran.empty()) return;
  std::vector<Execution> network(ran.size());  // made in place: holds an atomic
  std::vector<Status> network_statuses(ran.size());
  for (size_t k = 0; k < ran.size(); ++k) {
    network[k].items = staged[ran[k]].items;
    network[k].tier = batches[ran[k]].tier;
    batches[ran[k]].set_stage(Stage::kExecute);
  }
  ForwardingInstance::ExecuteEach(network, network_statuses);
  for (size_t k = 0; k < ran.size(); ++k) {
    statuses[ran[k]] = network_statuses[k];
    if (network_statuses[k].ok()) Postprocess(batches[ran[k]], staged[ran[k]]);
  }
}

}  // namespace

Result<std::unique_ptr<Session>> WithImageStages(std::unique_ptr<Session> network,
                                                 const ModelConfig& model) {
  if (network->style() != ExecutionStyle::kBatch) {
    return InvalidArgument("preprocess and postprocess apply to tensor models, not to " +
                           model.backend + "'s " + model.task);
  }
  const ModelSignature& s = network->signature();
  std::optional<ImagePreprocessor> pre;
  std::string image_input;
  if (model.preprocess) {
    const TensorSpec* input = nullptr;
    std::string names;
    for (const TensorSpec& in : s.inputs) {
      names += (names.empty() ? "" : ", ") + in.name;
      if (model.preprocess->input.empty() ? s.inputs.size() == 1
                                          : in.name == model.preprocess->input) {
        input = &in;
      }
    }
    if (!input) {
      return InvalidArgument(model.preprocess->input.empty()
                                 ? "the network has " + std::to_string(s.inputs.size()) +
                                       " inputs (" + names +
                                       "): name the image's with preprocess.input"
                                 : "preprocess.input '" + model.preprocess->input +
                                       "' is not a network input (" + names + ")");
    }
    image_input = input->name;
    auto created = ImagePreprocessor::Create(*model.preprocess, *input);
    if (!created.ok()) return created.status();
    pre = std::move(*created);
  }
  std::optional<ImagePostprocessor> post;
  if (model.postprocess) {
    auto created = ImagePostprocessor::Create(*model.postprocess, s.outputs);
    if (!created.ok()) return created.status();
    post = std::move(*created);
  }
  return std::unique_ptr<Session>(std::make_unique<VisionSession>(
      std::move(network), std::move(pre), std::move(post), std::move(image_input),
      std::max(1, model.max_batch)));
}

}  // namespace mmserve
