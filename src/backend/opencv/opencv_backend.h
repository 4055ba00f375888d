// OpenCV DNN backend: ONNX models (`.onnx`, `backend: opencv`) on OpenCV 4.6's CPU target.
//
//   - name: classifier
//     path: classifier.onnx
//     thread_num: 2          # worker threads, each with its own cv::dnn::Net
//     params:
//       threads: 4           # OpenCV's compute pool (process-wide: every loaded opencv model
//                            # must name the same value, or none)
//
// The signature comes from the graph (onnx_graph.h): its inputs (FP32 only: what OpenCV's
// setInput takes) and outputs (always FP32: what OpenCV's forward produces). A batch runs along
// the first dimension: requests' rows are stacked into one blob; a graph with a fixed first
// dimension B runs chunks of B rows, the last padded with zeros. Validation imports the graph
// with OpenCV, so a model it cannot import (an operator or a form of one its 4.6 importer lacks)
// is refused before anything loads, with the node and the operator named. That import runs in a
// probe child (file_probe.h), once per version of the file: a file that crashes OpenCV's
// importer is refused with the signal named, and the server imports only bytes a probe survived.
#pragma once

#include <map>
#include <mutex>

#include "backend/backend.h"

namespace mmserve {

class OpencvBackend final : public Backend {
 public:
  // `runtime` (the host's) is not owned and outlives the backend.
  explicit OpencvBackend(Runtime& runtime);

  std::string name() const override { return "opencv"; }
  std::vector<std::string> tasks() const override { return {"infer"}; }
  Runtime& runtime() override { return runtime_; }
  bool RunsIsolated(const ModelConfig&) const override { return true; }

  void Validate(ModelConfig& model, ConfigErrors& errors) const override;
  Result<MemoryEstimate> Estimate(const ModelConfig& model) const override;
  // OpenCV's importer over an ONNX file: the bytes one Net holds at `rows` rows.
  Result<std::string> ProbeFile(int fd, int64_t rows) const override;

  // The process-wide compute pool: sessions that set `threads` hold a claim on it.
  Status ClaimThreads(const std::string& model, int threads);
  void ReleaseThreads(const std::string& model);

 private:
  Result<std::unique_ptr<Session>> LoadSession(const ModelConfig& model,
                                               LoadProgress& progress) override;
  Runtime& runtime_;
  std::mutex mu_;
  std::map<std::string, int> thread_claims_;  // model → threads, for loaded sessions
};

}  // namespace mmserve
