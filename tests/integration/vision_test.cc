// Vision models end to end, through the real binary on 127.0.0.1: the template's detector entry
// (resize_256_center_crop, nms_threshold_0.45) with a generated ONNX detector in place of the
// OM, and a classifier with the map form; real photos (opencv-doc's samples) over REST (binary
// tensors and Content-Type: image/jpeg) and gRPC, compared with the Python reference (OpenCV's
// bindings: the network and NMSBoxes); bad images answered 400 with the server unaffected.
#include <signal.h>

#include <cstring>
#include <future>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/strings.h"
#include "testing/acl_sim.h"
#include "testing/grpc_python.h"
#include "testing/http_client.h"
#include "testing/models.h"
#include "testing/server_process.h"
#include "testing/test_util.h"
#include "testing/vision_reference.h"

namespace mmserve {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

const char* const kPhotos[] = {"fruits.jpg", "baboon.jpg", "squirrel_cls.jpg", "home.jpg"};

std::string Photo(const std::string& name) {
  return "/usr/share/doc/opencv-doc/examples/data/" + name;
}

// The detections of one image: boxes (x1, y1, x2, y2), scores and classes, flat.
struct Detections {
  std::vector<double> boxes, scores;
  std::vector<int64_t> classes;
};

// The detections the reference wrote under `prefix`.
Detections LoadDetections(const std::string& prefix) {
  const auto boxes = testing::ReadRaw<float>(prefix + ".boxes");
  const auto scores = testing::ReadRaw<float>(prefix + ".scores");
  return {{boxes.begin(), boxes.end()},
          {scores.begin(), scores.end()},
          testing::ReadRaw<int64_t>(prefix + ".classes")};
}

void ExpectSame(const Detections& got, const Detections& want, const std::string& what) {
  ASSERT_EQ(got.classes, want.classes) << what;
  ASSERT_EQ(got.boxes.size(), want.boxes.size()) << what;
  for (size_t i = 0; i < want.boxes.size(); ++i) {
    EXPECT_NEAR(got.boxes[i], want.boxes[i], std::max(1e-3, 1e-4 * std::abs(want.boxes[i])))
        << what << " box value " << i;
  }
  for (size_t i = 0; i < want.scores.size(); ++i) {
    EXPECT_NEAR(got.scores[i], want.scores[i], 1e-4) << what << " score " << i;
  }
}

Detections FromJson(const json& outputs) {
  Detections d;
  for (const auto& o : outputs) {
    if (o["name"] == "BOXES") d.boxes = o["data"].get<std::vector<double>>();
    if (o["name"] == "SCORES") d.scores = o["data"].get<std::vector<double>>();
    if (o["name"] == "CLASSES") d.classes = o["data"].get<std::vector<int64_t>>();
  }
  return d;
}

class VisionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* photo : kPhotos) {
      ASSERT_TRUE(std::filesystem::exists(Photo(photo)))
          << Photo(photo) << " is missing: scripts/setup.sh --with-reference-tools installs "
          << "opencv-doc";
    }
    dir_.Write("labels.txt", "zero\none\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\n");
    const std::string yaml = "global:\n  device: 0\n  memory_pool: 1024\n  thread_num: 8\n"
                             "  grpc_port: 0\nmodels:\n"
                             // The template's entry, verbatim but for the path and the deadline
                             // (a loaded test machine).
                             "  - name: person_det\n    path: " +
                             testing::GeneratedModel("detector-tiny.onnx") +
                             "\n    device_id: 0\n    batch_size: 1\n    max_batch: 8\n"
                             "    dynamic_batch: true\n    preprocess: resize_256_center_crop\n"
                             "    postprocess: nms_threshold_0.45\n    timeout_ms: 5000\n"
                             "    priority: high\n    thread_num: 2\n"
                             "  - name: classifier\n    path: " +
                             testing::GeneratedModel("classifier-tiny.onnx") +
                             "\n    max_batch: 8\n"
                             "    preprocess: {resize: {width: 32, height: 32},\n"
                             "                 scale: 0.00392156862745098}\n"
                             "    postprocess: {softmax: true, top_k: 3, labels: labels.txt}\n"
                             // The same two in a worker process, and in a sandboxed one: their
                             // images are decoded there.
                             "  - name: person_det_isolated\n    path: " +
                             testing::GeneratedModel("detector-tiny.onnx") +
                             "\n    max_batch: 8\n    isolation: process\n"
                             "    preprocess: resize_256_center_crop\n"
                             "    postprocess: nms_threshold_0.45\n    timeout_ms: 5000\n"
                             "  - name: classifier_sandboxed\n    path: " +
                             testing::GeneratedModel("classifier-tiny.onnx") +
                             "\n    max_batch: 8\n    isolation: sandbox\n"
                             "    preprocess: {resize: {width: 32, height: 32},\n"
                             "                 scale: 0.00392156862745098}\n"
                             "    postprocess: {softmax: true, top_k: 3, labels: labels.txt}\n"
                             // Post-processing alone: the client sends the network's tensor
                             // (identity: any row length, so only max_batch bounds the rows).
                             "  - name: scores\n    backend: identity\n    max_batch: 8\n"
                             "    params: {tensors: [{input: images, output: logits, "
                             "datatype: FP32, shape: [-1, -1]}]}\n"
                             "    postprocess: {softmax: true, top_k: 3}\n";
    server_ = std::make_unique<testing::ServerProcess>(
        std::vector<std::string>{"serve", dir_.Write("models.yaml", yaml).string(), "--port", "0",
                                 "--lock-dir", (dir_.path() / "locks").string()},
        dir_.path() / "server.log");
    ASSERT_TRUE(server_->Start()) << server_->Log();
    client_ = std::make_unique<testing::HttpClient>(server_->port());
  }

  // The Python reference's detections of `photo` by the template's person_det.
  Detections Reference(const std::string& photo) {
    const std::string out = (dir_.path() / ("ref-" + photo)).string();
    json cases = json::array({{{"kind", "detect"},
                               {"image", Photo(photo)},
                               {"model", testing::GeneratedModel("detector-tiny.onnx")},
                               {"out", out},
                               {"resize", "short_side"},
                               {"short_side", 256},
                               {"crop", {64, 64}},
                               {"format", "yolov5"},
                               {"score_threshold", 0.25},
                               {"iou_threshold", 0.45},
                               {"class_aware", true},
                               {"max_detections", 100}}});
    if (!testing::RunVisionReference(dir_, cases)) return {};
    return LoadDetections(out);
  }

  // person_det's answer to `image` sent as a binary BYTES tensor.
  testing::HttpResult InferBinary(const std::string& model, const std::string& image) {
    const std::string header =
        json{{"inputs", {{{"name", "IMAGE"}, {"datatype", "BYTES"}, {"shape", {1}},
                          {"parameters", {{"binary_data_size", image.size() + 4}}}}}}}
            .dump();
    std::string body = header;
    const uint32_t n = static_cast<uint32_t>(image.size());
    body.append(reinterpret_cast<const char*>(&n), 4).append(image);
    return client_->Post("/v2/models/" + model + "/infer", body,
                         {{"Inference-Header-Content-Length", std::to_string(header.size())}});
  }

  testing::TempDir dir_;
  std::unique_ptr<testing::ServerProcess> server_;
  std::unique_ptr<testing::HttpClient> client_;
};

TEST_F(VisionTest, TheTemplatesDetectorAnswersPhotosAsThePythonReferenceOverRestAndGrpc) {
  std::vector<std::string> paths;
  for (const char* photo : kPhotos) {
    SCOPED_TRACE(photo);
    const Detections want = Reference(photo);
    EXPECT_FALSE(want.classes.empty());  // the photos are not blank to this detector
    const std::string jpeg = testing::ReadFile(Photo(photo));
    auto binary = InferBinary("person_det", jpeg);
    ASSERT_EQ(binary.status, 200) << binary.body;
    ExpectSame(FromJson(json::parse(binary.body)["outputs"]), want, "binary tensor");
    auto body =
        client_->Post("/v2/models/person_det/infer", jpeg, {{"Content-Type", "image/jpeg"}});
    ASSERT_EQ(body.status, 200) << body.body;
    ExpectSame(FromJson(json::parse(body.body)["outputs"]), want, "image/jpeg body");
    paths.push_back(Photo(photo));
  }
  // On request, the same detections as one JSON list.
  const std::string header = json{{"parameters", {{"detection_list", true}}},
                                  {"inputs", {{{"name", "IMAGE"}, {"datatype", "BYTES"},
                                               {"shape", {1}},
                                               {"parameters", {{"binary_data_size", 0}}}}}}}
                                 .dump();
  const std::string jpeg = testing::ReadFile(Photo("fruits.jpg"));
  json request = json::parse(header);
  request["inputs"][0]["parameters"]["binary_data_size"] = jpeg.size() + 4;
  std::string body = request.dump();
  const uint32_t n = static_cast<uint32_t>(jpeg.size());
  body.append(reinterpret_cast<const char*>(&n), 4).append(jpeg);
  auto listed = client_->Post("/v2/models/person_det/infer", body,
                              {{"Inference-Header-Content-Length",
                                std::to_string(request.dump().size())}});
  ASSERT_EQ(listed.status, 200) << listed.body;
  const json outputs = json::parse(listed.body)["outputs"];
  const Detections tensors = FromJson(outputs);
  json list;
  for (const auto& o : outputs) {
    if (o["name"] == "DETECTIONS") list = json::parse(o["data"][0].get<std::string>());
  }
  ASSERT_EQ(list.size(), tensors.classes.size());
  for (size_t i = 0; i < list.size(); ++i) {
    EXPECT_EQ(list[i]["class"], tensors.classes[i]);
    EXPECT_NEAR(list[i]["box"][2].get<double>(), tensors.boxes[4 * i + 2], 1e-3);
  }
  std::string args = "vision person_det";
  for (const auto& p : paths) args += " " + p;
  const json grpc = testing::RunGrpcClient(dir_, testing::GrpcPort(server_->Log()), args);
  for (const char* photo : kPhotos) {
    const json& o = grpc[Photo(photo)];
    Detections got{o["BOXES"].get<std::vector<double>>(), o["SCORES"].get<std::vector<double>>(),
                   o["CLASSES"].get<std::vector<int64_t>>()};
    ExpectSame(got, Reference(photo), std::string("gRPC ") + photo);
  }
}

TEST_F(VisionTest, MetadataShowsThePipelinesSignature) {
  auto res = client_->Get("/v2/models/person_det");
  ASSERT_EQ(res.status, 200) << res.body;
  const json meta = json::parse(res.body);
  EXPECT_EQ(meta["inputs"], json::parse(R"([{"name":"IMAGE","datatype":"BYTES","shape":[-1]}])"));
  std::vector<std::string> outputs;
  for (const auto& o : meta["outputs"]) outputs.push_back(o["name"]);
  EXPECT_EQ(outputs, (std::vector<std::string>{"BOXES", "SCORES", "CLASSES", "IMAGE_INDEX",
                                               "DETECTIONS"}));
  auto cls = json::parse(client_->Get("/v2/models/classifier").body);
  EXPECT_EQ(cls["outputs"][2],
            json::parse(R"({"name":"LABELS","datatype":"BYTES","shape":[-1,3]})"));
}

TEST_F(VisionTest, AClassifierRanksSeveralImagesOfOneRequestWithLabels) {
  const std::string a = testing::ReadFile(Photo("fruits.jpg"));
  const std::string b = testing::ReadFile(Photo("baboon.jpg"));
  const std::string header =
      json{{"inputs", {{{"name", "IMAGE"}, {"datatype", "BYTES"}, {"shape", {2}},
                        {"parameters", {{"binary_data_size", a.size() + b.size() + 8}}}}}}}
          .dump();
  std::string body = header;
  for (const std::string* image : {&a, &b}) {
    const uint32_t n = static_cast<uint32_t>(image->size());
    body.append(reinterpret_cast<const char*>(&n), 4).append(*image);
  }
  auto res = client_->Post("/v2/models/classifier/infer", body,
                           {{"Inference-Header-Content-Length", std::to_string(header.size())}});
  ASSERT_EQ(res.status, 200) << res.body;
  const json out = json::parse(res.body)["outputs"];
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0]["shape"], json::array({2, 3}));
  double sum = 0;
  for (double s : out[0]["data"]) sum += s;
  EXPECT_GT(sum, 0.0);
  EXPECT_LE(sum, 2.0 + 1e-6);  // softmax probabilities, three of ten per image
  const auto classes = out[1]["data"].get<std::vector<int64_t>>();
  const char* const names[] = {"zero", "one", "two", "three", "four",
                               "five", "six", "seven", "eight", "nine"};
  for (size_t i = 0; i < classes.size(); ++i) {
    EXPECT_EQ(out[2]["data"][i], names[classes[i]]);
  }
  // The Python reference: the same network through cv2.dnn, numpy's softmax, the top 3.
  json cases = json::array();
  for (const char* photo : {"fruits.jpg", "baboon.jpg"}) {
    cases.push_back({{"kind", "classify"}, {"image", Photo(photo)},
                     {"model", testing::GeneratedModel("classifier-tiny.onnx")},
                     {"out", (dir_.path() / photo).string()}, {"resize", "exact"},
                     {"width", 32}, {"height", 32}, {"scale", 1.0 / 255}, {"top_k", 3}});
  }
  ASSERT_TRUE(testing::RunVisionReference(dir_, cases));
  for (size_t image = 0; image < 2; ++image) {
    const std::string prefix = cases[image]["out"];
    const auto scores = testing::ReadRaw<float>(prefix + ".scores");
    const auto want = testing::ReadRaw<int64_t>(prefix + ".classes");
    for (size_t k = 0; k < 3; ++k) {
      EXPECT_EQ(classes[image * 3 + k], want[k]) << "image " << image;
      EXPECT_NEAR(out[0]["data"][image * 3 + k].get<double>(), scores[k], 1e-4);
    }
  }
}

// KServe JSON carries binary bytes as base64 text when the input says so
// (parameters.content_type: "base64", MLServer's and KServe's codec): the same answer as the
// binary tensor extension.
TEST_F(VisionTest, AnImageInJsonAsBase64AnswersAsTheBinaryTensor) {
  const std::string image = testing::ReadFile(Photo("fruits.jpg"));
  auto binary = InferBinary("classifier", image);
  ASSERT_EQ(binary.status, 200) << binary.body;
  const auto post = [&](const json& data, const json& parameters) {
    json input = {{"name", "IMAGE"}, {"datatype", "BYTES"}, {"shape", {1}}, {"data", {data}}};
    if (!parameters.is_null()) input["parameters"] = parameters;
    return client_->Post("/v2/models/classifier/infer", json{{"inputs", {input}}}.dump());
  };
  auto res = post(Base64Encode(image), {{"content_type", "base64"}});
  ASSERT_EQ(res.status, 200) << res.body;
  EXPECT_EQ(json::parse(res.body)["outputs"], json::parse(binary.body)["outputs"]);
  res = post("not base64!", {{"content_type", "base64"}});
  EXPECT_EQ(res.status, 400);
  EXPECT_THAT(res.body, HasSubstr("inputs[0] ('IMAGE').data[0]: not base64 text"));
  res = post(Base64Encode(image), {{"content_type", "np"}});
  EXPECT_EQ(res.status, 400);
  EXPECT_THAT(res.body, HasSubstr("parameters.content_type: expected \\\"base64\\\""));
  // Without it, base64 text is not an image: the error says what to add.
  res = post(Base64Encode(image), nullptr);
  EXPECT_EQ(res.status, 400);
  EXPECT_THAT(res.body, HasSubstr("it reads as base64 text of one"));
}

TEST_F(VisionTest, BadImagesAre400NamingTheInputAndTheServerCarriesOn) {
  const std::string jpeg = testing::ReadFile(Photo("fruits.jpg"));
  // A 100-megapixel PNG header: refused before anything decodes it.
  std::string png = "\x89PNG\r\n\x1a\n";
  png += std::string("\0\0\0\x0dIHDR", 8);
  for (uint32_t v : {10000u, 10000u}) {
    for (int i = 3; i >= 0; --i) png.push_back(static_cast<char>(v >> (8 * i)));
  }
  png += std::string("\x08\x02\0\0\0", 5) + std::string(64, '\0');
  std::string zero = png;
  zero[16] = zero[17] = zero[18] = zero[19] = 0;
  const std::pair<std::string, std::string> cases[] = {
      {"undecodable bytes", "this is not an image"},
      {"truncated JPEG", jpeg.substr(0, jpeg.size() / 2)},
      {"truncated JPEG with an end marker appended", jpeg.substr(0, jpeg.size() / 2) + "\xFF\xD9"},
      {"100 MP image", png},
      {"zero-size image", zero}};
  for (const auto& [what, bytes] : cases) {
    auto res = InferBinary("person_det", bytes);
    EXPECT_EQ(res.status, 400) << what << ": " << res.body;
    EXPECT_THAT(res.body, HasSubstr("IMAGE")) << what;
  }
  // A million empty elements (4 MB): refused by count before any row is allocated.
  const std::string many_header =
      json{{"inputs", {{{"name", "IMAGE"}, {"datatype", "BYTES"}, {"shape", {1000000}},
                        {"parameters", {{"binary_data_size", 4000000}}}}}}}
          .dump();
  auto many = client_->Post(
      "/v2/models/classifier/infer", many_header + std::string(4000000, '\0'),
      {{"Inference-Header-Content-Length", std::to_string(many_header.size())}});
  EXPECT_EQ(many.status, 400) << many.body;
  EXPECT_THAT(many.body, HasSubstr("holds 1000000 images; a request may carry 1..8"));
  auto gif = client_->Post("/v2/models/person_det/infer", jpeg, {{"Content-Type", "image/gif"}});
  EXPECT_EQ(gif.status, 400) << gif.body;
  EXPECT_THAT(gif.body, HasSubstr("image/gif is not served"));
  auto mislabelled =
      client_->Post("/v2/models/person_det/infer", jpeg, {{"Content-Type", "image/png"}});
  EXPECT_EQ(mislabelled.status, 400);
  EXPECT_THAT(mislabelled.body, HasSubstr("the body is a JPEG image"));
  EXPECT_EQ(InferBinary("person_det", jpeg).status, 200);  // still serving
  EXPECT_EQ(client_->Get("/v2/health/ready").status, 200);
}

// Hardening round 2, F5: without pre-processing, the rows a client declares were allocated
// (64 bytes each) before anything checked them against the model.
TEST_F(VisionTest, F5RowsDeclaredPastMaxBatchAreRefusedBeforeAnythingIsAllocated) {
  auto peak_kib = [&] { return testing::ProcessMemoryKib(server_->pid(), "VmHWM"); };
  const long before = peak_kib();
  const json hostile = {{"inputs", {{{"name", "images"}, {"datatype", "FP32"},
                                     {"shape", {15000000, 0}}, {"data", json::array()}}}}};
  auto res = client_->Post("/v2/models/scores/infer", hostile.dump());
  // (c620ef6 answered 200 with 15,000,000 rows of scores: hundreds of MB, not printed here.)
  EXPECT_EQ(res.status, 400) << res.body.substr(0, 300);
  EXPECT_NE(res.body.find("declares 15000000 rows; a request may carry 1..8"), std::string::npos)
      << res.body.substr(0, 300);
  EXPECT_LT(peak_kib() - before, 256 * 1024) << "KiB of peak memory for a 100-byte request";
  // A request within max_batch is served as before.
  const json one = {{"inputs", {{{"name", "images"}, {"datatype", "FP32"}, {"shape", {1, 4}},
                                 {"data", {1, 2, 3, 4}}}}}};
  res = client_->Post("/v2/models/scores/infer", one.dump());
  EXPECT_EQ(res.status, 200) << res.body;
  EXPECT_THAT(res.body, HasSubstr("\"CLASSES\""));
}

// Hardening round 2, F10: a JPEG cut short with an end-of-image marker appended was decoded with
// grey for what it lacked, and pre-processing went on after its request's 504 (eight 40 MP
// progressive JPEGs held the only worker for 6 s).
TEST_F(VisionTest, F10TruncatedJpegsAre400AndPreprocessingStopsAtTheDeadline) {
  const std::string jpeg = testing::ReadFile(Photo("fruits.jpg"));
  auto cut = InferBinary("classifier", jpeg.substr(0, jpeg.size() / 2) + "\xFF\xD9");
  EXPECT_EQ(cut.status, 400) << cut.body;
  EXPECT_THAT(cut.body, HasSubstr("JPEG image that is truncated or corrupt"));

  // Eight 36 MP progressive JPEGs (smooth, so small) with a 500 ms deadline: seconds of decoding.
  const std::string big = (dir_.path() / "big.jpg").string();
  const auto [rc, out] = testing::RunShell(
      "/usr/bin/python3 -c 'import cv2, numpy as np\n"
      "x = np.linspace(0, 255, 6000).astype(np.uint8)\n"
      "img = np.dstack([np.tile(x, (6000, 1)), np.tile(x[:, None], (1, 6000)),"
      " np.full((6000, 6000), 128, np.uint8)])\n"
      "cv2.imwrite(\"" + big + "\", img, [cv2.IMWRITE_JPEG_PROGRESSIVE, 1])' 2>&1");
  ASSERT_EQ(rc, 0) << out;
  const std::string image = testing::ReadFile(big);
  const std::string header =
      json{{"parameters", {{"timeout", 500000}}},
           {"inputs", {{{"name", "IMAGE"}, {"datatype", "BYTES"}, {"shape", {8}},
                        {"parameters", {{"binary_data_size", 8 * (image.size() + 4)}}}}}}}
          .dump();
  std::string body = header;
  for (int i = 0; i < 8; ++i) {
    const uint32_t n = static_cast<uint32_t>(image.size());
    body.append(reinterpret_cast<const char*>(&n), 4).append(image);
  }
  const auto stats = [&] {
    return json::parse(client_->Get("/v2/models/classifier/stats").body)["model_stats"][0]
        ["mmserve"];
  };
  const int64_t images_before = stats()["counters"]["images"];
  auto res = client_->Post("/v2/models/classifier/infer", body,
                           {{"Inference-Header-Content-Length", std::to_string(header.size())}});
  EXPECT_EQ(res.status, 504) << res.body;
  json after = stats();
  for (int i = 0; i < 1000 && after["executing"] != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    after = stats();
  }
  // Stopped inside its first images: none of the eight was pre-processed whole.
  EXPECT_EQ(after["counters"]["preprocess_deadline_stops"], 1) << after.dump();
  EXPECT_EQ(after["counters"]["images"], images_before) << after.dump();
  EXPECT_EQ(after["watchdog_reports"], 0);
  EXPECT_EQ(InferBinary("classifier", jpeg).status, 200);
}

// An isolated model's image stages run in its worker, so that a hostile image is decoded there,
// never in the server: the answers equal the in-process model's, and a corrupt image sent while
// the worker is stopped gets no 400 until the worker runs again (the server did not decode it).
TEST_F(VisionTest, AnIsolatedModelsImagesAreDecodedInItsWorker) {
  for (const char* photo : kPhotos) {
    const std::string jpeg = testing::ReadFile(Photo(photo));
    for (const auto& [plain, isolated] :
         {std::pair{"person_det", "person_det_isolated"},
          std::pair{"classifier", "classifier_sandboxed"}}) {
      auto want = InferBinary(plain, jpeg);
      auto got = InferBinary(isolated, jpeg);
      ASSERT_EQ(got.status, 200) << isolated << " " << photo << ": " << got.body;
      EXPECT_EQ(json::parse(got.body)["outputs"], json::parse(want.body)["outputs"])
          << isolated << " " << photo;
    }
  }
  const json stats = json::parse(client_->Get("/v2/models/person_det_isolated/stats").body);
  const pid_t worker = stats["model_stats"][0]["mmserve"]["counters"]["worker_pid"];
  ASSERT_GT(worker, 0) << stats.dump();
  const std::string jpeg = testing::ReadFile(Photo("fruits.jpg"));
  const std::string corrupt = jpeg.substr(0, jpeg.size() / 2) + "\xFF\xD9";
  EXPECT_EQ(InferBinary("person_det", corrupt).status, 400) << "decoded in the server";
  ASSERT_EQ(::kill(worker, SIGSTOP), 0);
  auto pending = std::async(std::launch::async, [&] {
    return InferBinary("person_det_isolated", corrupt);
  });
  const bool answered =
      pending.wait_for(std::chrono::milliseconds(1500)) == std::future_status::ready;
  ASSERT_EQ(::kill(worker, SIGCONT), 0);
  auto late = pending.get();
  EXPECT_FALSE(answered) << "the server answered a corrupt image its stopped worker never saw: "
                         << late.body;
  EXPECT_EQ(late.status, 400) << late.body;
  EXPECT_THAT(late.body, HasSubstr("JPEG image that is truncated or corrupt"));
  EXPECT_EQ(InferBinary("person_det_isolated", jpeg).status, 200);
}

// The acl backend runs the same stages: an OM-like detector on the simulated device, whose output
// is known (the simulator's OM computes input x scale + bias over the first values), answers a
// photo as the Python reference computes it from the same pre-processing.
TEST(VisionAclTest, AnOmDetectorOnTheSimulatedDeviceRunsTheSameStages) {
  testing::TempDir dir;
  ::setenv("ASCEND_HOME_PATH", testing::AclSimHome().c_str(), 1);
  testing::WriteOm(dir, "det.om",
                   {{"soc_version", "Ascend310P3"},
                    {"inputs",
                     {{{"name", "images"}, {"datatype", "FLOAT"}, {"dims", {-1, 3, 64, 64}}}}},
                    {"outputs",
                     {{{"name", "output0"}, {"datatype", "FLOAT"}, {"dims", {-1, 16, 8}}}}},
                    {"dynamic_batch", {1, 2, 4, 8}},
                    {"work_size", 1 << 20},
                    {"weight_size", 1 << 20},
                    {"scale", 64.0},
                    {"bias", 0.5}});
  const std::string yaml =
      "models:\n  - name: det\n    path: det.om\n    max_batch: 8\n"
      "    preprocess: {resize: {letterbox: true}, scale: 0.00392156862745098}\n"
      "    postprocess: {detect: yolov5, score_threshold: 0.3, nms_threshold: 0.45}\n"
      "  - name: det-gain\n    path: det.om\n    max_batch: 8\n"
      "    preprocess: {resize: {letterbox: true}, scale: 0.00392156862745098}\n"
      "    postprocess: {detect: yolov5, score_threshold: 0.3, nms_threshold: 0.45, "
      "box_scale: single_gain}\n";
  testing::ServerProcess server({"serve", dir.Write("models.yaml", yaml).string(), "--port", "0",
                                 "--lock-dir", (dir.path() / "locks").string()},
                                dir.path() / "server.log");
  ASSERT_TRUE(server.Start()) << server.Log();
  testing::HttpClient client(server.port());
  const std::string out = (dir.path() / "ref").string();
  const json cases = json::array({{{"kind", "detect"},
                                   {"image", Photo("fruits.jpg")},
                                   {"om", {{"scale", 64.0}, {"bias", 0.5}, {"shape", {16, 8}}}},
                                   {"out", out},
                                   {"resize", "letterbox"},
                                   {"width", 64},
                                   {"height", 64},
                                   {"scale", 1.0 / 255},
                                   {"format", "yolov5"},
                                   {"score_threshold", 0.3},
                                   {"iou_threshold", 0.45},
                                   {"class_aware", true},
                                   {"max_detections", 100}}});
  ASSERT_TRUE(testing::RunVisionReference(dir, cases));
  const Detections want = LoadDetections(out);
  EXPECT_FALSE(want.classes.empty());
  auto res = client.Post("/v2/models/det/infer", testing::ReadFile(Photo("fruits.jpg")),
                         {{"Content-Type", "image/jpeg"}});
  ASSERT_EQ(res.status, 200) << res.body << server.Log();
  ExpectSame(FromJson(json::parse(res.body)["outputs"]), want, "acl");

  // box_scale: single_gain maps boxes back as Ultralytics does: one gain and its rounded pad.
  // On building.jpg (868x600) the two conventions differ along y.
  json gain_case = cases[0];
  gain_case["image"] = Photo("building.jpg");
  gain_case["box_scale"] = "single_gain";
  gain_case["out"] = (dir.path() / "ref-gain").string();
  ASSERT_TRUE(testing::RunVisionReference(dir, json::array({gain_case})));
  const std::string building = testing::ReadFile(Photo("building.jpg"));
  auto gain = client.Post("/v2/models/det-gain/infer", building, {{"Content-Type", "image/jpeg"}});
  ASSERT_EQ(gain.status, 200) << gain.body;
  const Detections single = FromJson(json::parse(gain.body)["outputs"]);
  EXPECT_FALSE(single.classes.empty());
  ExpectSame(single, LoadDetections(gain_case["out"]), "single_gain");
  auto axis = client.Post("/v2/models/det/infer", building, {{"Content-Type", "image/jpeg"}});
  ASSERT_EQ(axis.status, 200) << axis.body;
  const Detections per_axis = FromJson(json::parse(axis.body)["outputs"]);
  ASSERT_EQ(per_axis.boxes.size(), single.boxes.size());
  double most = 0;
  for (size_t i = 0; i < single.boxes.size(); ++i) {
    most = std::max(most, std::abs(double{single.boxes[i]} - per_axis.boxes[i]));
  }
  EXPECT_GT(most, 0.01) << "the conventions differ on this photo";
  ::unsetenv("ASCEND_HOME_PATH");
}

}  // namespace
}  // namespace mmserve
