// The image stages are a decorator: every capability of the network's session and instance
// reaches the scheduler through them (backend/forwarding.h), and several batches still reach an
// engine that takes them in one call. A fake network whose every capability differs from
// Session's and Instance's defaults shows each one, through the Forwarding bases and through
// WithImageStages.
#include "backend/vision/vision_session.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "backend/forwarding.h"

namespace mmserve {
namespace {

using ::testing::ElementsAre;

struct Calls {
  int execute = 0, execute_each = 0, batches_seen = 0, abort = 0, park = 0, release = 0;
  int interrupt = 0, start_each = 0, finish_each = 0;
  bool finish_had_yield_point = false;
};

class FakeInstance final : public Instance {
 public:
  explicit FakeInstance(Calls& calls) : calls_(calls) {}
  Status Execute(Execution& execution) override {
    ++calls_.execute;
    for (auto& item : execution.items) {
      InferResponse response;
      const Tensor& x = item.request->inputs.at(0);
      response.outputs.emplace_back("logits", DataType::kFp32, x.shape(),
                                    std::string(x.data().begin(), x.data().end()));
      item.result = std::move(response);
    }
    return Status::Ok();
  }
  void ExecuteEach(std::span<Execution> batches, std::span<Status> statuses) override {
    ++calls_.execute_each;
    calls_.batches_seen += static_cast<int>(batches.size());
    for (size_t i = 0; i < batches.size(); ++i) {
      statuses[i] = Execute(batches[i]);
      --calls_.execute;  // counted as one ExecuteEach
    }
  }
  int batches_per_call() const override { return 4; }
  bool starts_calls() const override { return true; }
  void StartEach(std::span<Execution>) override { ++calls_.start_each; }
  void FinishEach(std::span<Execution> batches, std::span<Status> statuses) override {
    ++calls_.finish_each;
    calls_.finish_had_yield_point = yield_point() != nullptr;
    ExecuteEach(batches, statuses);
  }
  bool Abort() override { return ++calls_.abort > 0; }
  void Park() override { ++calls_.park; }
  void Release() override { ++calls_.release; }
  std::optional<std::chrono::milliseconds> release_after() const override {
    return std::chrono::milliseconds(1234);
  }

 private:
  Calls& calls_;
};

class FakeSession final : public Session {
 public:
  explicit FakeSession(Calls& calls) : calls_(calls) {
    signature_.inputs = {{"X", DataType::kFp32, {-1, 3}}};
    signature_.outputs = {{"logits", DataType::kFp32, {-1, 3}}};
  }
  const ModelSignature& signature() const override { return signature_; }
  int64_t resident_bytes() const override { return 4242; }
  int64_t ShedCache(int64_t bytes) override { return bytes / 2; }
  Result<std::unique_ptr<Instance>> CreateInstance(int) override {
    return std::unique_ptr<Instance>(std::make_unique<FakeInstance>(calls_));
  }
  void Interrupt() override { ++calls_.interrupt; }
  std::vector<int> batch_tiers() const override { return {1, 4}; }
  std::map<std::string, int64_t> counters() const override { return {{"engine", 7}}; }
  std::map<std::string, std::string> notes() const override { return {{"worker", "exited"}}; }
  Result<std::vector<Token>> Tokenize(std::string_view, bool, bool) const override {
    return std::vector<Token>{{.id = 9, .piece = "x"}};
  }
  Result<std::string> Detokenize(std::span<const int32_t>) const override {
    return std::string("text");
  }
  int64_t context_length() const override { return 77; }
  std::map<std::string, Histogram> histograms() const override { return {{"h", Histogram{}}}; }
  bool executes_inline() const override { return true; }
  bool executions_share_device() const override { return true; }
  int default_warmup() const override { return 3; }
  Status health() const override { return Unavailable("the worker stopped restarting"); }

 private:
  Calls& calls_;
  ModelSignature signature_;
};

// Every Session capability of `session` is the fake's.
void ExpectSessionCapabilities(Session& session, Calls& calls) {
  EXPECT_EQ(session.resident_bytes(), 4242);
  EXPECT_EQ(session.ShedCache(10), 5);
  EXPECT_THAT(session.batch_tiers(), ElementsAre(1, 4));
  EXPECT_EQ(session.notes().at("worker"), "exited");
  EXPECT_EQ(session.Tokenize("x", false, true)->at(0).id, 9);
  EXPECT_EQ(*session.Detokenize({}), "text");
  EXPECT_EQ(session.context_length(), 77);
  EXPECT_TRUE(session.histograms().contains("h"));
  EXPECT_TRUE(session.executes_inline());
  EXPECT_TRUE(session.executions_share_device());
  EXPECT_EQ(session.default_warmup(), 3);
  EXPECT_EQ(session.health().code(), StatusCode::kUnavailable);
  EXPECT_EQ(session.counters().at("engine"), 7);
  session.Interrupt();
  EXPECT_EQ(calls.interrupt, 1);
}

// Every Instance capability of `instance` is the fake's.
void ExpectInstanceCapabilities(Instance& instance, Calls& calls) {
  EXPECT_EQ(instance.batches_per_call(), 4);
  EXPECT_TRUE(instance.Abort());
  instance.Park();
  instance.Release();
  EXPECT_EQ(instance.release_after(), std::chrono::milliseconds(1234));
  EXPECT_EQ(calls.park, 1);
  EXPECT_EQ(calls.release, 1);
}

TEST(ForwardingTest, TheBasesForwardEveryCapability) {
  Calls calls;
  ForwardingSession session(std::make_unique<FakeSession>(calls));
  ExpectSessionCapabilities(session, calls);
  EXPECT_EQ(session.signature().inputs[0].name, "X");
  auto instance = session.CreateInstance(0);
  ASSERT_TRUE(instance.ok());
  ForwardingInstance wrapped(std::move(*instance));
  ExpectInstanceCapabilities(wrapped, calls);
  // A split call reaches the fake in its two halves, and the second (where an inner that
  // does not split executes) with the scheduler's yield point.
  struct NeverYield final : YieldPoint {
    bool MayYield() const override { return false; }
    bool ShouldYield() const override { return false; }
    void Yield() override {}
  } yield;
  EXPECT_TRUE(wrapped.starts_calls());
  wrapped.StartEach({});
  wrapped.set_yield_point(&yield);  // set after the first half: the second still passes it on
  wrapped.FinishEach({}, {});
  EXPECT_EQ(calls.start_each, 1);
  EXPECT_EQ(calls.finish_each, 1);
  EXPECT_TRUE(calls.finish_had_yield_point);
}

TEST(VisionSessionTest, TheImageStagesForwardEveryCapabilityTheyDoNotChange) {
  Calls calls;
  ModelConfig model;
  model.backend = "fake";
  model.max_batch = 4;
  model.postprocess =
      PostprocessConfig{.activation = PostprocessConfig::Activation::kSoftmax, .top_k = 2};
  auto staged = WithImageStages(std::make_unique<FakeSession>(calls), model);
  ASSERT_TRUE(staged.ok()) << staged.status().ToString();
  Session& session = **staged;
  ExpectSessionCapabilities(session, calls);
  // What the stages change on purpose: the outputs are the post-processor's, and the counters
  // add the stages' own.
  EXPECT_EQ(session.signature().outputs[0].name, "SCORES");
  EXPECT_TRUE(session.counters().contains("images"));

  auto instance = session.CreateInstance(0);
  ASSERT_TRUE(instance.ok());
  ExpectInstanceCapabilities(**instance, calls);
  // Three batches in one call reach the network in one call too (an isolated network's one
  // round trip), each post-processed.
  std::vector<InferRequest> requests(3);
  std::vector<BatchItem> items(3, BatchItem{nullptr});
  for (size_t i = 0; i < 3; ++i) {
    requests[i].inputs.emplace_back("X", DataType::kFp32, Shape{1, 3}, std::string(12, '\0'));
    items[i].request = &requests[i];
  }
  std::vector<Execution> batches(3);
  for (size_t i = 0; i < 3; ++i) batches[i].items = std::span(&items[i], 1);
  std::vector<Status> statuses(3);
  (*instance)->ExecuteEach(batches, statuses);
  EXPECT_EQ(calls.execute_each, 1);
  EXPECT_EQ(calls.batches_seen, 3);
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(statuses[i].ok());
    ASSERT_TRUE(items[i].result.ok()) << items[i].result.status().ToString();
    EXPECT_EQ(items[i].result->outputs[0].name(), "SCORES");
  }
  // What the stages decide on purpose: a call does not split around them (the post-processing
  // needs the network's results), and the scheduler's FinishEach runs the stages whole.
  EXPECT_FALSE((*instance)->starts_calls());
  (*instance)->StartEach(batches);
  (*instance)->FinishEach(batches, statuses);
  EXPECT_EQ(calls.start_each, 0);
  EXPECT_EQ(calls.execute_each, 2);
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(items[i].result.ok()) << items[i].result.status().ToString();
    EXPECT_EQ(items[i].result->outputs[0].name(), "SCORES");
  }
}

}  // namespace
}  // namespace mmserve
