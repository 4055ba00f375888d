#include "backend/opencv/opencv_backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "backend/backend_registry.h"
#include "config/config_parser.h"
#include "runtime/host_runtime.h"
#include "testing/models.h"
#include "testing/probe_child.h"
#include "testing/test_util.h"

namespace mmserve {
namespace {

using testing::GeneratedModel;
using ::testing::HasSubstr;

// `rows` random images of the classifier's input shape [rows, 3, 32, 32].
InferRequest Images(int rows, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> pixel(0, 1);
  std::vector<float> values(static_cast<size_t>(rows) * 3 * 32 * 32);
  for (float& v : values) v = pixel(rng);
  InferRequest r;
  r.inputs.emplace_back(
      "images", DataType::kFp32, Shape{rows, 3, 32, 32},
      std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
  return r;
}

std::vector<float> Floats(const Tensor& t) {
  std::vector<float> out(t.size_bytes() / sizeof(float));
  std::memcpy(out.data(), t.data().data(), t.size_bytes());
  return out;
}

class OpencvBackendTest : public ::testing::Test {
 protected:
  OpencvBackendTest() { backends_.Register(std::make_unique<OpencvBackend>(host_)); }

  Result<ServerConfig> Parse(const std::string& models) {
    const std::string yaml = "models:\n" + models;
    return ParseConfig(yaml, dir_.Write("m.yaml", yaml).string(), backends_);
  }
  ModelConfig Model(const std::string& file, const std::string& extra = "") {
    auto config = Parse("  - {name: m, path: " + GeneratedModel(file) + extra + "}\n");
    EXPECT_TRUE(config.ok()) << config.status().ToString();
    return config.ok() ? config->models[0] : ModelConfig{};
  }
  std::unique_ptr<Session> Load(const ModelConfig& model) {
    auto session = backend().Load(model);
    EXPECT_TRUE(session.ok()) << session.status().ToString();
    return session.ok() ? std::move(*session) : nullptr;
  }
  Backend& backend() { return **backends_.Find("opencv"); }

  // Runs `requests` as one batch on a fresh instance of `session`.
  std::vector<Result<InferResponse>> Run(Session& session, std::vector<InferRequest>& requests) {
    auto instance = session.CreateInstance(0);
    EXPECT_TRUE(instance.ok()) << instance.status().ToString();
    std::vector<BatchItem> items(requests.size(), BatchItem{nullptr});
    for (size_t i = 0; i < requests.size(); ++i) items[i].request = &requests[i];
    Execution execution{.items = BatchView(items), .tier = static_cast<int>(items.size())};
    EXPECT_TRUE((*instance)->Execute(execution).ok());
    std::vector<Result<InferResponse>> out;
    for (auto& item : items) out.push_back(std::move(item.result));
    return out;
  }

  testing::TempDir dir_;
  HostRuntime host_;
  BackendRegistry backends_;
};

TEST_F(OpencvBackendTest, TheSignatureIsTheGraphs) {
  auto session = Load(Model("classifier-tiny.onnx"));
  ASSERT_TRUE(session);
  const ModelSignature& s = session->signature();
  ASSERT_EQ(s.inputs.size(), 1u);
  EXPECT_EQ(s.inputs[0].name, "images");
  EXPECT_EQ(s.inputs[0].type, DataType::kFp32);
  EXPECT_EQ(s.inputs[0].shape, (Shape{-1, 3, 32, 32}));
  ASSERT_EQ(s.outputs.size(), 1u);
  EXPECT_EQ(s.outputs[0].name, "logits");
  EXPECT_EQ(s.outputs[0].shape, (Shape{-1, 10}));
}

TEST_F(OpencvBackendTest, ABatchAnswersEachRequestAsItsOwnForwardWould) {
  auto session = Load(Model("classifier-tiny.onnx", ", max_batch: 8"));
  ASSERT_TRUE(session);
  std::vector<InferRequest> batch = {Images(1, 1), Images(2, 2), Images(1, 3)};
  auto together = Run(*session, batch);
  for (size_t i = 0; i < batch.size(); ++i) {
    std::vector<InferRequest> alone = {
        Images(static_cast<int>(batch[i].inputs[0].shape()[0]), static_cast<uint32_t>(i + 1))};
    auto single = Run(*session, alone);
    ASSERT_TRUE(together[i].ok()) << together[i].status().ToString();
    ASSERT_TRUE(single[0].ok());
    const Tensor& t = together[i]->outputs.at(0);
    EXPECT_EQ(t.name(), "logits");
    EXPECT_EQ(t.shape(), (Shape{batch[i].inputs[0].shape()[0], 10}));
    const auto a = Floats(t), b = Floats(single[0]->outputs.at(0));
    ASSERT_EQ(a.size(), b.size());
    for (size_t k = 0; k < a.size(); ++k) EXPECT_NEAR(a[k], b[k], 1e-5) << "request " << i;
  }
  EXPECT_EQ(session->counters().at("forwards"), 1 + 3);
  EXPECT_EQ(session->counters().at("rows"), 4 + 4);
}

TEST_F(OpencvBackendTest, AFixedBatchGraphRunsChunksPaddedToItsBatch) {
  auto fixed = Load(Model("classifier-b4-tiny.onnx"));
  auto dynamic = Load(Model("classifier-tiny.onnx"));
  ASSERT_TRUE(fixed && dynamic);
  EXPECT_EQ(fixed->signature().inputs[0].shape, (Shape{-1, 3, 32, 32}));
  std::vector<InferRequest> batch;
  for (uint32_t i = 0; i < 6; ++i) batch.push_back(Images(1, 10 + i));
  batch.push_back(Images(5, 20));  // more rows than the graph's batch: refused alone
  auto chunks = Run(*fixed, batch);
  auto reference = Run(*dynamic, batch);
  for (size_t i = 0; i < 6; ++i) {
    ASSERT_TRUE(chunks[i].ok()) << chunks[i].status().ToString();
    const auto a = Floats(chunks[i]->outputs[0]), b = Floats(reference[i]->outputs[0]);
    for (size_t k = 0; k < a.size(); ++k) EXPECT_NEAR(a[k], b[k], 1e-5);
  }
  ASSERT_FALSE(chunks[6].ok());
  EXPECT_THAT(std::string(chunks[6].status().message()), HasSubstr("1..4 rows"));
  EXPECT_EQ(fixed->counters().at("forwards"), 2);  // 4 + 2 rows
  EXPECT_EQ(fixed->counters().at("padded_rows"), 2);
}

TEST_F(OpencvBackendTest, ValidationNamesTheNodeOpenCvCannotImport) {
  auto config = Parse("  - {name: ocr, path: " + GeneratedModel("unsupported-tiny.onnx") + "}\n");
  ASSERT_FALSE(config.ok());
  const std::string message(config.status().message());
  EXPECT_THAT(message, HasSubstr("models[0].path"));
  EXPECT_THAT(message, HasSubstr("Clip"));
  EXPECT_THAT(message, HasSubstr("clip_0"));
  EXPECT_THAT(message, HasSubstr("OpenCV 4.6 cannot import it"));
}

TEST_F(OpencvBackendTest, ACorruptFileIsAValidationErrorNotACrash) {
  std::string bytes = testing::ReadFile(GeneratedModel("classifier-tiny.onnx"));
  const auto truncated = dir_.Write("cut.onnx", bytes.substr(0, bytes.size() / 2));
  const auto garbage = dir_.Write("junk.onnx", "\x0a\xff\xff\xff\xff\x0f garbage");
  for (const auto& path : {truncated, garbage}) {
    auto config = Parse("  - {name: m, path: " + path.string() + "}\n");
    ASSERT_FALSE(config.ok()) << path;
    EXPECT_THAT(std::string(config.status().message()), HasSubstr("not an ONNX model"));
  }
}

TEST_F(OpencvBackendTest, TheEstimateHoldsTheFileAndEachWorkersNet) {
  const ModelConfig one = Model("classifier-tiny.onnx", ", thread_num: 1, max_batch: 8");
  const ModelConfig two = Model("classifier-tiny.onnx", ", thread_num: 2, max_batch: 8");
  auto a = backend().Estimate(one), b = backend().Estimate(two);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status().ToString();
  const int64_t file = static_cast<int64_t>(std::filesystem::file_size(one.path));
  EXPECT_GT(a->bytes, file);
  EXPECT_EQ(b->bytes - a->bytes, a->bytes - file);  // one more Net
  EXPECT_THAT(a->source, HasSubstr("8 rows"));
  auto session = Load(one);
  ASSERT_TRUE(session);
  EXPECT_EQ(session->resident_bytes(), file);  // no instance yet
  ASSERT_TRUE(session->CreateInstance(0).ok());
  EXPECT_EQ(session->resident_bytes(), a->bytes);
}

TEST_F(OpencvBackendTest, TheProcessWideThreadPoolTakesOneValue) {
  auto a = Load(Model("classifier-tiny.onnx", ", params: {threads: 2}"));
  ASSERT_TRUE(a);
  ModelConfig other = Model("detector-tiny.onnx", ", params: {threads: 1}");
  other.name = "other";
  auto b = backend().Load(other);
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("process-wide"));
  a.reset();  // its claim goes with it
  EXPECT_TRUE(backend().Load(other).ok());
}

}  // namespace
}  // namespace mmserve

// The importer's probes run in this binary started again (file_probe.h).
int main(int argc, char** argv) {
  return mmserve::testing::ProbeOrTest(argc, argv, [](int fd, int64_t rows) {
    mmserve::HostRuntime host;
    return mmserve::OpencvBackend(host).ProbeFile(fd, rows);
  });
}
