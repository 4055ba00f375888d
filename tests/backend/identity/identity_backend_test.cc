#include "backend/identity/identity_backend.h"

#include <sys/resource.h>

#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/host_runtime.h"
#include "testing/model_config_util.h"

namespace mmserve {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using testing::IdentityModel;

InferRequest FloatRequest(std::vector<float> values) {
  InferRequest r;
  std::string data(reinterpret_cast<const char*>(values.data()), values.size() * 4);
  r.inputs.emplace_back("INPUT0", DataType::kFp32, Shape{static_cast<int64_t>(values.size())},
                        data);
  return r;
}

// One BYTES element `text` as input T.
InferRequest MarkerRequest(const std::string& text) {
  InferRequest r;
  std::string data;
  Tensor::AppendBytesElement(data, text);
  r.inputs.emplace_back("T", DataType::kBytes, Shape{1}, data);
  return r;
}

Status RunBatch(Instance& instance, std::vector<BatchItem>& batch, int tier = 0) {
  Execution execution{.items = BatchView(batch), .tier = tier ? tier : static_cast<int>(batch.size())};
  return instance.Execute(execution);
}

class IdentityBackendTest : public ::testing::Test {
 protected:
  std::unique_ptr<Session> Load(const std::string& params) {
    auto session = backend_.Load(IdentityModel("m", params));
    EXPECT_TRUE(session.ok()) << session.status().ToString();
    return session.ok() ? std::move(*session) : nullptr;
  }
  std::unique_ptr<Instance> NewInstance(Session& s) {
    auto i = s.CreateInstance(0);
    EXPECT_TRUE(i.ok());
    return std::move(*i);
  }

  HostRuntime host_;
  IdentityBackend backend_{host_};
};

TEST_F(IdentityBackendTest, EchoesEveryRequestOfABatch) {
  auto session = Load("{}");
  EXPECT_EQ(session->signature().inputs[0].name, "INPUT0");
  EXPECT_EQ(session->signature().outputs[0].name, "OUTPUT0");
  auto instance = NewInstance(*session);
  InferRequest a = FloatRequest({1, 2}), b = FloatRequest({3});
  std::vector<BatchItem> batch = {{&a}, {&b}};
  ASSERT_TRUE(RunBatch(*instance, batch).ok());
  ASSERT_TRUE(batch[0].result.ok());
  EXPECT_EQ(batch[0].result->outputs[0].name(), "OUTPUT0");
  EXPECT_EQ(batch[0].result->outputs[0].data(), a.inputs[0].data());
  EXPECT_EQ(batch[1].result->outputs[0].shape(), Shape{1});
}

TEST_F(IdentityBackendTest, InjectsLatencyPerCallAndPerItem) {
  auto session = Load("{latency_ms: 20, latency_per_item_us: 10000}");
  auto instance = NewInstance(*session);
  InferRequest a = FloatRequest({1}), b = FloatRequest({2});
  std::vector<BatchItem> batch = {{&a}, {&b}};
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(RunBatch(*instance, batch).ok());
  EXPECT_GE(std::chrono::steady_clock::now() - start, 40ms);
}

TEST_F(IdentityBackendTest, FailsEveryNthCallWithTheConfiguredError) {
  auto session = Load("{fail_every_n: 2, fail_code: Unavailable, fail_message: boom}");
  auto instance = NewInstance(*session);
  InferRequest a = FloatRequest({1});
  std::vector<BatchItem> batch = {{&a}};
  EXPECT_TRUE(RunBatch(*instance, batch).ok());
  Status second = RunBatch(*instance, batch);
  EXPECT_EQ(second.code(), StatusCode::kUnavailable);
  EXPECT_EQ(second.message(), "boom (call 2)");
  EXPECT_TRUE(RunBatch(*instance, batch).ok());
}

TEST_F(IdentityBackendTest, HangsOnTheMarkerUntilInterrupted) {
  auto session = Load(
      "{hang_on: STOP, hang_ms: 60000, tensors: [{input: T, output: U, datatype: BYTES}]}");
  auto instance = NewInstance(*session);
  InferRequest r = MarkerRequest("STOP");
  std::vector<BatchItem> batch = {{&r}};
  const auto start = std::chrono::steady_clock::now();  // before the 50 ms can start counting
  std::jthread interrupter([&] {
    std::this_thread::sleep_for(50ms);
    session->Interrupt();
  });
  Status s = RunBatch(*instance, batch);
  EXPECT_EQ(s.code(), StatusCode::kCancelled) << "the interrupt ended it, not the 60 s";
  EXPECT_GE(std::chrono::steady_clock::now() - start, 50ms);
}

TEST_F(IdentityBackendTest, AbortEndsAHangInTheConfiguredStage) {
  auto session = Load(
      "{hang_on: STOP, hang_stage: postprocess, tensors: [{input: T, output: U, datatype: BYTES}]}");
  auto instance = NewInstance(*session);
  InferRequest r = MarkerRequest("STOP");
  std::vector<BatchItem> batch = {{&r}};
  Execution execution{.items = BatchView(batch), .tier = 1};
  std::jthread aborter([&] {
    while (execution.stage.load() != Stage::kPostprocess) std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(20ms);
    EXPECT_TRUE(instance->Abort());
  });
  EXPECT_EQ(instance->Execute(execution).code(), StatusCode::kCancelled);
  EXPECT_EQ(execution.stage.load(), Stage::kPostprocess);
}

TEST_F(IdentityBackendTest, CountsTheRowsAFixedTierPads) {
  auto session = Load("{}");
  auto instance = NewInstance(*session);
  InferRequest a = FloatRequest({1}), b = FloatRequest({2}), c = FloatRequest({3});
  std::vector<BatchItem> batch = {{&a}, {&b}, {&c}};
  ASSERT_TRUE(RunBatch(*instance, batch, 4).ok());
  const auto counters = session->counters();
  EXPECT_EQ(counters.at("executions"), 1);
  EXPECT_EQ(counters.at("items"), 3);
  EXPECT_EQ(counters.at("padded_items"), 1);
}

long MaxRssKb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

TEST_F(IdentityBackendTest, MemoryFootprintIsReallyResident) {
  auto estimate = backend_.Estimate(IdentityModel("m", "{memory_mb: 64}"));
  ASSERT_TRUE(estimate.ok());
  EXPECT_EQ(estimate->bytes, 64 << 20);
  const long before = MaxRssKb();
  auto session = Load("{memory_mb: 64}");
  EXPECT_EQ(session->resident_bytes(), 64 << 20);
  EXPECT_GE(MaxRssKb() - before, 60 * 1024) << "the pages were not touched";
}

TEST_F(IdentityBackendTest, ValidatesItsParams) {
  ConfigErrors errors;
  ModelConfig m = IdentityModel("m");
  auto locations = std::make_shared<Params::Locations>();
  m.params = Params(nlohmann::json{{"fail_code", "Sometimes"}, {"tensors", 3}}, "models[0].params",
                    locations);
  backend_.Validate(m, errors);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_THAT(errors.errors()[0].ToString(),
              HasSubstr("models[0].params.tensors: expected a list of maps, found 3"));
  EXPECT_THAT(errors.errors()[1].ToString(),
              HasSubstr("models[0].params.fail_code: expected one of InvalidArgument"));
}

}  // namespace
}  // namespace mmserve
