// The server ↔ worker wire: batches, results and the model's spec and facts survive the trip
// exactly, and every malformed payload — each truncation of a valid one, counts beyond it — is
// an error, never a crash.
#include "backend/process/worker_wire.h"

#include <sys/socket.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>
#include <tuple>

#include "backend/process/worker_spec.h"

namespace mmserve {
namespace {

using ::testing::HasSubstr;

InferRequest SampleRequest() {
  InferRequest q;
  q.id = "req-1";
  std::string text;
  Tensor::AppendBytesElement(text, "hello");
  Tensor::AppendBytesElement(text, "");
  q.inputs.emplace_back("TEXT", DataType::kBytes, Shape{2}, text);
  q.inputs.emplace_back("X", DataType::kFp32, Shape{1, 2}, std::string(8, '\x01'));
  q.requested_outputs = {"Y"};
  q.parameters = {{"b", true}, {"i", int64_t{-7}}, {"r", 0.25}, {"s", std::string("x")}};
  return q;
}

TEST(WorkerWireTest, BatchesSurviveTheTripExactlyEachWithItsTier) {
  InferRequest q = SampleRequest();
  InferRequest r;
  r.id = "req-2";
  std::vector<BatchItem> items = {{&q}, {&q}, {&r}};
  std::vector<Execution> sent(2);
  sent[0].items = BatchView(items).first(2);
  sent[0].tier = 4;
  sent[1].items = BatchView(items).subspan(2);
  sent[1].tier = 1;
  std::string payload;
  EncodeBatches(sent, payload);
  auto batches = DecodeBatches(payload);
  ASSERT_TRUE(batches.ok()) << batches.status().ToString();
  ASSERT_EQ(batches->size(), 2u);
  EXPECT_EQ((*batches)[0].tier, 4);
  EXPECT_EQ((*batches)[1].tier, 1);
  ASSERT_EQ((*batches)[0].requests.size(), 2u);
  ASSERT_EQ((*batches)[1].requests.size(), 1u);
  EXPECT_EQ((*batches)[1].requests[0]->id, "req-2");
  const InferRequest& got = *(*batches)[0].requests[1];
  EXPECT_EQ(got.id, "req-1");
  ASSERT_EQ(got.inputs.size(), 2u);
  EXPECT_EQ(got.inputs[0].data(), q.inputs[0].data());
  EXPECT_EQ(got.inputs[0].type(), DataType::kBytes);
  EXPECT_EQ(got.inputs[1].shape(), (Shape{1, 2}));
  EXPECT_EQ(got.requested_outputs, q.requested_outputs);
  EXPECT_EQ(got.parameters, q.parameters);
}

TEST(WorkerWireTest, MoreBatchesThanOneCallTakesAreRefused) {
  InferRequest q = SampleRequest();
  std::vector<BatchItem> items(kMaxBatchesPerCall + 1, BatchItem{&q});
  std::vector<Execution> sent(items.size());
  for (size_t i = 0; i < items.size(); ++i) sent[i].items = BatchView(items).subspan(i, 1);
  std::string payload;
  EncodeBatches(sent, payload);
  EXPECT_FALSE(DecodeBatches(payload).ok());
  EncodeBatches(std::span(sent).first(kMaxBatchesPerCall), payload);
  EXPECT_TRUE(DecodeBatches(payload).ok());
}

TEST(WorkerWireTest, ResultsCarryEachItemsOutcomeAndEachBatchsStatus) {
  InferRequest q = SampleRequest();
  std::vector<BatchItem> sent = {{&q}, {&q}, {&q}};
  InferResponse response;
  response.outputs.emplace_back("Y", DataType::kInt64, Shape{1}, std::string(8, '\x02'));
  response.parameters = {{"tokens", int64_t{3}}};
  sent[0].result = response;
  sent[1].result = Status(StatusCode::kInvalidArgument, "input 'X': too long");
  sent[2].result = response;
  std::vector<Execution> sent_batches(2);
  sent_batches[0].items = BatchView(sent).first(2);
  sent_batches[1].items = BatchView(sent).subspan(2);
  const std::vector<Status> sent_statuses = {Status(StatusCode::kInternal, "half failed"),
                                             Status::Ok()};
  std::string payload;
  Histogram ttft;
  ttft.Record(3'000'000);
  ttft.Record(70'000'000);
  EncodeResults(sent_batches, sent_statuses,
                {{{"decodes", 7}}, {{"time_to_first_token", ttft}}}, payload);

  std::vector<BatchItem> got = {{&q}, {&q}, {&q}};
  std::vector<Execution> batches(2);
  batches[0].items = BatchView(got).first(2);
  batches[1].items = BatchView(got).subspan(2);
  std::vector<Status> statuses(2);
  EngineStats stats;
  ASSERT_TRUE(DecodeResults(payload, batches, statuses, &stats).ok());
  EXPECT_EQ(stats.counters, (Counters{{"decodes", 7}}));
  ASSERT_EQ(stats.histograms.size(), 1u);
  const Histogram& h = stats.histograms["time_to_first_token"];
  EXPECT_EQ(h.counts, ttft.counts);
  EXPECT_EQ(h.count, 2);
  EXPECT_EQ(h.sum_ns, 73'000'000);
  EXPECT_EQ(statuses[0].code(), StatusCode::kInternal);
  EXPECT_EQ(statuses[0].message(), "half failed");
  EXPECT_TRUE(statuses[1].ok());
  ASSERT_TRUE(got[0].result.ok());
  EXPECT_EQ(got[0].result->outputs[0].data(), std::string(8, '\x02'));
  EXPECT_EQ(got[0].result->parameters, response.parameters);
  EXPECT_EQ(got[1].result.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(got[1].result.status().message(), "input 'X': too long");
  ASSERT_TRUE(got[2].result.ok());

  // Counts that do not match what was sent: fewer batches, or the items split otherwise.
  EXPECT_FALSE(DecodeResults(payload, std::span(batches).first(1), std::span(statuses).first(1),
                             &stats)
                   .ok());
  std::vector<Execution> split_otherwise(2);
  split_otherwise[0].items = BatchView(got).first(1);
  split_otherwise[1].items = BatchView(got).subspan(1);
  EXPECT_FALSE(DecodeResults(payload, split_otherwise, statuses, &stats).ok());
}

TEST(WorkerWireTest, EveryTruncationAndEveryFlippedByteIsAnErrorOrAValidBatch) {
  InferRequest q = SampleRequest();
  std::vector<BatchItem> items = {{&q}, {&q}};
  std::vector<Execution> sent(2);
  sent[0].items = BatchView(items).first(1);
  sent[1].items = BatchView(items).subspan(1);
  std::string payload;
  EncodeBatches(sent, payload);
  for (size_t n = 0; n < payload.size(); ++n) {
    EXPECT_FALSE(DecodeBatches(std::string_view(payload).substr(0, n)).ok()) << "cut at " << n;
  }
  for (size_t i = 0; i < payload.size(); ++i) {
    std::string bad = payload;
    bad[i] = static_cast<char>(bad[i] ^ 0xff);
    (void)DecodeBatches(bad);  // must not crash or allocate past the payload
  }
  // A count of 2^20 with nothing after it is refused before anything is reserved.
  std::string huge;
  huge.append("\x01\0\0\0\x01\0\0\0\0\0\x10\0", 12);
  EXPECT_FALSE(DecodeBatches(huge).ok());
}

TEST(WorkerWireTest, FramesCrossASocketOneByOneOrSeveralAtOnceAndAHangUpIsUnavailable) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  FrameReader reader;
  std::string payload;
  ASSERT_TRUE(WriteFrame(fds[0], FrameKind::kReady, "facts").ok());
  auto kind = reader.Read(fds[1], payload);
  ASSERT_TRUE(kind.ok());
  EXPECT_EQ(*kind, FrameKind::kReady);
  EXPECT_EQ(payload, "facts");
  // A streaming worker's pieces arrive together: each is read on its own, none lost.
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(WriteFrame(fds[0], FrameKind::kPartial, std::string(i + 1, 'x')).ok());
  }
  std::thread big([&] {  // larger than the first receive and the socket's buffer: in pieces
    EXPECT_TRUE(WriteFrame(fds[0], FrameKind::kDone, std::string(300'000, 'y')).ok());
  });
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(reader.Ready(fds[1], std::chrono::milliseconds(0)));
    ASSERT_EQ(*reader.Read(fds[1], payload), FrameKind::kPartial);
    EXPECT_EQ(payload, std::string(i + 1, 'x'));
  }
  ASSERT_EQ(*reader.Read(fds[1], payload), FrameKind::kDone);
  big.join();
  EXPECT_EQ(payload.size(), 300'000u);
  EXPECT_FALSE(reader.Ready(fds[1], std::chrono::milliseconds(0)));
  // A header of another kind, or a nonzero reserved word, is malformed.
  const char bad[16] = {99};
  ASSERT_EQ(::write(fds[0], bad, sizeof bad), 16);
  EXPECT_EQ(reader.Read(fds[1], payload).status().code(), StatusCode::kInvalidArgument);
  FrameReader fresh;
  ::close(fds[0]);
  EXPECT_EQ(fresh.Read(fds[1], payload).status().code(), StatusCode::kUnavailable);
  ::close(fds[1]);
}

// Ready() takes what arrived into the reader's buffer (a busy worker's next frame costs one
// receive, not a poll and a receive): the frame, or its start, still reads whole afterwards.
TEST(WorkerWireTest, ReadyTakesWhatArrivedAndTheFrameStillReadsWhole) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  FrameReader reader(/*spin=*/false);
  std::string payload;
  EXPECT_FALSE(reader.Ready(fds[1], std::chrono::milliseconds(0)));
  EXPECT_FALSE(reader.Ready(fds[1], std::chrono::milliseconds(5))) << "nothing came";
  // Half a frame's header: ready (bytes came), and Read() waits for the rest.
  std::string frame;
  {
    int pair[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
    ASSERT_TRUE(WriteFrame(pair[0], FrameKind::kBatch, "abc").ok());
    frame.resize(64);
    frame.resize(static_cast<size_t>(::read(pair[1], frame.data(), frame.size())));
    ::close(pair[0]);
    ::close(pair[1]);
  }
  ASSERT_GT(frame.size(), 8u);
  ASSERT_EQ(::write(fds[0], frame.data(), 8), 8);
  EXPECT_TRUE(reader.Ready(fds[1], std::chrono::milliseconds(0)));
  std::thread rest([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(::write(fds[0], frame.data() + 8, frame.size() - 8),
              static_cast<ssize_t>(frame.size() - 8));
  });
  auto kind = reader.Read(fds[1], payload);
  rest.join();
  ASSERT_TRUE(kind.ok()) << kind.status().ToString();
  EXPECT_EQ(*kind, FrameKind::kBatch);
  EXPECT_EQ(payload, "abc");
  // A frame that arrives during the wait, and a hang-up: both ready, then Read() says which.
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_TRUE(WriteFrame(fds[0], FrameKind::kCancel, "x").ok());
  });
  EXPECT_TRUE(reader.Ready(fds[1], std::chrono::milliseconds(10'000)));
  later.join();
  ASSERT_EQ(*reader.Read(fds[1], payload), FrameKind::kCancel);
  ::close(fds[0]);
  EXPECT_TRUE(reader.Ready(fds[1], std::chrono::milliseconds(10'000)));
  EXPECT_EQ(reader.Read(fds[1], payload).status().code(), StatusCode::kUnavailable);
  ::close(fds[1]);
}

TEST(WorkerWireTest, AnAdmissionKeepsItsDeadlineAndWhetherItStreams) {
  InferRequest q = SampleRequest();
  q.deadline = Clock::now() + std::chrono::seconds(3);
  q.on_partial = [](const InferResponse&) { return true; };
  std::string payload;
  EncodeAdmit(42, q, payload);
  auto a = DecodeAdmit(payload);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->seq, 42u);
  EXPECT_TRUE(a->streaming);
  EXPECT_EQ(a->request->deadline, q.deadline);
  EXPECT_EQ(a->request->inputs[0].data(), q.inputs[0].data());
  for (size_t n = 0; n < payload.size(); ++n) {
    EXPECT_FALSE(DecodeAdmit(std::string_view(payload).substr(0, n)).ok()) << "cut at " << n;
  }
  EncodeEvent(7, Status(StatusCode::kCancelled, "client left"), {{{"tokens", 9}}, {}}, payload);
  uint64_t seq = 0;
  Result<InferResponse> result = InferResponse{};
  EngineStats stats;
  ASSERT_TRUE(DecodeEvent(payload, &seq, &result, &stats).ok());
  EXPECT_EQ(stats.counters["tokens"], 9);
  EXPECT_EQ(seq, 7u);
  EXPECT_EQ(result.status().code(), StatusCode::kCancelled);
  EXPECT_EQ(*DecodeNumber(EncodeNumber(5)), 5u);
  EXPECT_FALSE(DecodeNumber("abc").ok());
}

TEST(WorkerWireTest, TokenizerQueriesAndRepliesSurviveTheTripAndTruncationIsAnError) {
  std::string payload;
  EncodeQuery({.id = 5, .text = "héllo", .add_special = true, .pieces = true}, payload);
  auto q = DecodeQuery(payload);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->id, 5u);
  EXPECT_FALSE(q->detokenize);
  EXPECT_EQ(q->text, "héllo");
  EXPECT_TRUE(q->add_special && q->pieces);
  for (size_t n = 0; n < payload.size(); ++n) EXPECT_FALSE(DecodeQuery(payload.substr(0, n)).ok());
  EncodeQuery({.id = 6, .detokenize = true, .tokens = {1, -2, 300}}, payload);
  q = DecodeQuery(payload);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->tokens, (std::vector<int32_t>{1, -2, 300}));

  EncodeReply({.id = 6, .tokens = {{7, "he"}, {8, "llo"}}, .text = "x"}, payload);
  auto r = DecodeReply(payload);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->id, 6u);
  EXPECT_TRUE(r->status.ok());
  ASSERT_EQ(r->tokens.size(), 2u);
  EXPECT_EQ(r->tokens[1].id, 8);
  EXPECT_EQ(r->tokens[1].piece, "llo");
  EXPECT_EQ(r->text, "x");
  for (size_t n = 0; n < payload.size(); ++n) EXPECT_FALSE(DecodeReply(payload.substr(0, n)).ok());
  EncodeReply({.id = 9, .status = InvalidArgument("tokens[1]: out of range")}, payload);
  r = DecodeReply(payload);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status.message(), "tokens[1]: out of range");
}

TEST(WorkerWireTest, TheSpecKeepsWhatShapesTheLoadAndGarbageIsAnError) {
  ModelConfig m;
  m.name = "emb";
  m.path = "/models/emb.gguf";
  m.backend = "llama";
  m.task = "embed";
  m.max_batch = 8;
  m.thread_num = 2;
  m.isolation = Isolation::kProcess;
  m.params = Params(nlohmann::json{{"n_ctx", 512}}, "params", std::make_shared<Params::Locations>());
  auto back = DecodeWorkerSpec(EncodeWorkerSpec(m));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->name, "emb");
  EXPECT_EQ(back->path, m.path);
  EXPECT_EQ(back->task, "embed");
  EXPECT_EQ(back->max_batch, 8);
  EXPECT_EQ(back->thread_num, 2);
  EXPECT_EQ(back->isolation, Isolation::kNone) << "the worker runs it in its own process";
  EXPECT_EQ(back->params.value(), m.params.value());
  std::string spec = EncodeWorkerSpec(m);
  spec.replace(spec.find("\"max_batch\":8"), 13, "\"max_batch\":1e300");
  EXPECT_THAT(std::string(DecodeWorkerSpec(spec).status().message()), HasSubstr("max_batch"))
      << "a float where an integer belongs is refused, not converted";
  for (const char* garbage : {"", "[]", "{}", R"({"name": 3})", "{\"name\":\"x\""}) {
    EXPECT_EQ(DecodeWorkerSpec(garbage).status().code(), StatusCode::kInvalidArgument) << garbage;
    EXPECT_EQ(DecodeWorkerFacts(garbage).status().code(), StatusCode::kInvalidArgument) << garbage;
  }
}

// The image stages travel with the spec, every field as the server parsed it: the worker wraps
// the network in them, so that an isolated model's images are decoded there.
TEST(WorkerSpecTest, TheImageStagesRoundTrip) {
  ModelConfig m;
  m.name = "det";
  m.backend = "opencv";
  PreprocessConfig pre;
  pre.input = "images";
  pre.resize = PreprocessConfig::Resize::kLetterbox;
  pre.width = 640;
  pre.height = 480;
  pre.short_side = 7;
  pre.interpolation = "area";
  pre.pad = 0.5;
  pre.crop = true;
  pre.crop_width = 3;
  pre.crop_height = 4;
  pre.color = PreprocessConfig::Color::kBgr;
  pre.scale = 0.25;
  pre.mean = {1, 2, 3};
  pre.std = {4, 5, 6};
  pre.layout = PreprocessConfig::Layout::kNhwc;
  pre.datatype = DataType::kFp16;
  pre.max_pixels = 1234;
  PostprocessConfig post;
  post.kind = PostprocessConfig::Kind::kDetect;
  post.output = "out";
  post.activation = PostprocessConfig::Activation::kSigmoid;
  post.top_k = 5;
  post.format = PostprocessConfig::Format::kSsd;
  post.boxes_output = "b";
  post.scores_output = "s";
  post.box_format = PostprocessConfig::BoxFormat::kCxcywh;
  post.normalized = true;
  post.background = 0;
  post.score_threshold = 0.3;
  post.iou_threshold = 0.6;
  post.class_aware = false;
  post.box_scale = PostprocessConfig::BoxScale::kSingleGain;
  post.max_detections = 9;
  post.labels = "/models/labels.txt";
  m.preprocess = pre;
  m.postprocess = post;
  auto back = DecodeWorkerSpec(EncodeWorkerSpec(m));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_TRUE(back->preprocess && back->postprocess);
  const PreprocessConfig& p = *back->preprocess;
  EXPECT_EQ(std::tie(p.input, p.resize, p.width, p.height, p.short_side, p.interpolation, p.pad,
                     p.crop, p.crop_width, p.crop_height, p.color, p.scale, p.mean, p.std,
                     p.layout, p.datatype, p.max_pixels),
            std::tie(pre.input, pre.resize, pre.width, pre.height, pre.short_side,
                     pre.interpolation, pre.pad, pre.crop, pre.crop_width, pre.crop_height,
                     pre.color, pre.scale, pre.mean, pre.std, pre.layout, pre.datatype,
                     pre.max_pixels));
  const PostprocessConfig& q = *back->postprocess;
  EXPECT_EQ(std::tie(q.kind, q.output, q.activation, q.top_k, q.format, q.boxes_output,
                     q.scores_output, q.box_format, q.normalized, q.background,
                     q.score_threshold, q.iou_threshold, q.class_aware, q.box_scale,
                     q.max_detections, q.labels),
            std::tie(post.kind, post.output, post.activation, post.top_k, post.format,
                     post.boxes_output, post.scores_output, post.box_format, post.normalized,
                     post.background, post.score_threshold, post.iou_threshold,
                     post.class_aware, post.box_scale, post.max_detections, post.labels));
  std::string spec = EncodeWorkerSpec(m);
  spec.replace(spec.find("\"resize\":3"), 10, "\"resize\":9");
  EXPECT_THAT(std::string(DecodeWorkerSpec(spec).status().message()), HasSubstr("resize"))
      << "an enum past its last value is refused";
  EXPECT_FALSE(DecodeWorkerSpec(EncodeWorkerSpec(ModelConfig{}))->preprocess);
}

// What the worker tells the server once loaded, its load time included, survives the trip.
TEST(WorkerSpecTest, FactsRoundTrip) {
  class Loaded : public Session {
   public:
    const ModelSignature& signature() const override { return signature_; }
    Result<std::unique_ptr<Instance>> CreateInstance(int) override { return nullptr; }
    int64_t context_length() const override { return 512; }
    int64_t resident_bytes() const override { return 0; }
    ModelSignature signature_{.platform = "test"};
  } session;
  auto facts = DecodeWorkerFacts(EncodeWorkerFacts(session, /*host_memory=*/true, 1234567));
  ASSERT_TRUE(facts.ok()) << facts.status().ToString();
  EXPECT_EQ(facts->signature.platform, "test");
  EXPECT_TRUE(facts->host_memory);
  EXPECT_EQ(facts->context_length, 512);
  EXPECT_EQ(facts->load_us, 1234567);
}

}  // namespace
}  // namespace mmserve
