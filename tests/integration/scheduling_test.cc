// Scheduling through the real binary on 127.0.0.1: the hang watchdog and breaker while another
// model keeps serving, request priority and timeout parameters, async jobs, statistics, and a
// queued request dropped when its client disconnects.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <regex>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "testing/http_client.h"
#include "testing/server_process.h"
#include "testing/test_util.h"

namespace mmserve {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using ::testing::HasSubstr;
using testing::HttpClient;
using testing::HttpResult;
using testing::ServerProcess;

constexpr const char* kConfig = R"(global:
  thread_num: 4
  jobs: {max: 3, ttl: 1s}
models:
  - name: guarded          # hangs on "HANG" in preprocess until aborted
    backend: identity
    timeout_ms: 300
    watchdog_margin_ms: 200
    breaker: {failures: 3, cooldown_ms: 60000}
    params:
      hang_on: HANG
      hang_stage: preprocess
      tensors: [{input: TEXT, output: ECHO, datatype: BYTES, shape: [-1]}]
  - name: steady
    backend: identity
    params:
      tensors: [{input: TEXT, output: ECHO, datatype: BYTES, shape: [-1]}]
  - name: queued           # one request at a time, 200 ms each
    backend: identity
    timeout_ms: 300
    params:
      latency_ms: 200
      tensors: [{input: TEXT, output: ECHO, datatype: BYTES, shape: [-1]}]
  - name: overrun          # every execution takes 4 s, forty times its timeout
    backend: identity
    timeout_ms: 100
    thread_num: 3
    watchdog_margin_ms: 60000
    breaker: {timeouts: 3, cooldown_ms: 60000}
    params:
      latency_ms: 4000
      tensors: [{input: TEXT, output: ECHO, datatype: BYTES, shape: [-1]}]
  - name: batched
    backend: identity
    batch_tiers: [1, 2, 4, 8]
    max_queue_delay_ms: 100
    params:
      tensors: [{input: TEXT, output: ECHO, datatype: BYTES, shape: [-1]}]
)";

std::string Body(const std::string& text, const json& parameters = json::object()) {
  json body = {{"inputs", {{{"name", "TEXT"}, {"datatype", "BYTES"}, {"shape", {1}},
                            {"data", {text}}}}}};
  if (!parameters.empty()) body["parameters"] = parameters;
  return body.dump();
}

class SchedulingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    server_ = new ServerProcess({"serve", dir_->Write("models.yaml", kConfig).string(), "--port",
                                 "0", "--lock-dir", (dir_->path() / "locks").string()},
                                dir_->path() / "server.log");
    ASSERT_TRUE(server_->Start()) << server_->Log();
  }
  static void TearDownTestSuite() {
    delete server_;
    delete dir_;
  }
  void SetUp() override { ASSERT_GT(server_->port(), 0) << server_->Log(); }

  static HttpResult Infer(const std::string& model, const std::string& body) {
    HttpClient client(server_->port());
    return client.Post("/v2/models/" + model + "/infer", body);
  }
  static std::future<HttpResult> InferAsync(const std::string& model, const std::string& body) {
    return std::async(std::launch::async, [model, body] { return Infer(model, body); });
  }
  static json Stats(const std::string& model) {
    HttpClient client(server_->port());
    auto res = client.Get("/v2/models/" + model + "/stats");
    EXPECT_EQ(res.status, 200) << res.body;
    return json::parse(res.body)["model_stats"][0];
  }

  static testing::TempDir* dir_;
  static ServerProcess* server_;
};

testing::TempDir* SchedulingTest::dir_ = nullptr;
ServerProcess* SchedulingTest::server_ = nullptr;

TEST_F(SchedulingTest, AHungExecutionIsReportedOnceAndFencedOffWhileOthersServe) {
  const auto start = std::chrono::steady_clock::now();
  auto hung = InferAsync("guarded", Body("HANG"));
  // While it hangs, the other model answers.
  HttpClient client(server_->port());
  for (int i = 0; i < 20; ++i) {
    auto res = client.Post("/v2/models/steady/infer", Body("hello"));
    ASSERT_EQ(res.status, 200) << res.body;
    std::this_thread::sleep_for(10ms);
  }
  // The client is answered at its deadline; the hang is reported at deadline + margin.
  HttpResult res = hung.get();
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(res.status, 504) << res.body;
  EXPECT_THAT(res.body, HasSubstr("ran past the request's 300 ms deadline"));
  EXPECT_GE(elapsed, 300ms);
  for (int i = 0; i < 200 && Stats("guarded")["mmserve"]["watchdog_reports"] == 0; ++i) {
    std::this_thread::sleep_for(10ms);
  }

  // Quarantined: not ready, metadata says why, requests are refused at once.
  EXPECT_EQ(client.Get("/v2/models/guarded/ready").status, 400);
  json meta = json::parse(client.Get("/v2/models/guarded").body);
  EXPECT_EQ(meta["state"], "UNAVAILABLE");
  EXPECT_THAT(meta["reason"].get<std::string>(), HasSubstr("circuit breaker open: watchdog"));
  res = client.Post("/v2/models/guarded/infer", Body("fine"));
  EXPECT_EQ(res.status, 503);
  EXPECT_THAT(res.body, HasSubstr("out of service"));
  EXPECT_EQ(client.Post("/v2/models/steady/infer", Body("still")).status, 200);

  // One report, naming model, version, batch size and stage; the instance was replaced.
  const std::string log = server_->Log();
  std::regex report("\\] watchdog: model 'guarded' version 1: an execution of a batch of 1 in "
                    "stage preprocess has run [0-9]+ ms");
  EXPECT_EQ(std::distance(std::sregex_iterator(log.begin(), log.end(), report),
                          std::sregex_iterator()),
            1)
      << log;
  json stats = Stats("guarded")["mmserve"];
  EXPECT_EQ(stats["breaker"]["state"], "open");
  EXPECT_EQ(stats["watchdog_reports"], 1);
  for (int i = 0; i < 100 && stats["workers"][0]["restarts"] == 0; ++i) {
    std::this_thread::sleep_for(20ms);
    stats = Stats("guarded")["mmserve"];
  }
  EXPECT_EQ(stats["workers"][0]["restarts"], 1);
}

TEST_F(SchedulingTest, ExecutionsPastTheirDeadlineAre504AtTheDeadlineAndOpenTheBreaker) {
  // Three at once, one per worker: each is answered at its 100 ms deadline, long before its
  // 4 s execution ends, and counts as a timeout.
  std::vector<std::future<HttpResult>> calls;
  for (int i = 0; i < 3; ++i) calls.push_back(InferAsync("overrun", Body("x")));
  for (auto& c : calls) {
    HttpResult res = c.get();
    EXPECT_EQ(res.status, 504) << res.body;
    EXPECT_THAT(res.body, HasSubstr("ran past the request's 100 ms deadline"));
    EXPECT_THAT(res.body, HasSubstr("its result is discarded"));
  }
  // Answered before the results: the three executions are still running (counted, not timed).
  EXPECT_EQ(Stats("overrun")["mmserve"]["executing"], 3);
  // breaker: {timeouts: 3}: the model is out of service; Retry-After is the cool-down left.
  HttpResult res = Infer("overrun", Body("x"));
  EXPECT_EQ(res.status, 503) << res.body;
  EXPECT_THAT(res.body, HasSubstr("3 consecutive timeouts"));
  ASSERT_TRUE(res.headers.contains("retry-after"));
  const int retry_after = std::stoi(res.headers["retry-after"]);
  EXPECT_GT(retry_after, 50);
  EXPECT_LE(retry_after, 60);
  json stats = Stats("overrun");
  EXPECT_EQ(stats["inference_stats"]["fail"]["count"], 3);
  EXPECT_EQ(stats["mmserve"]["watchdog_reports"], 0) << "a timeout, not a hang";
  EXPECT_EQ(stats["mmserve"]["breaker"]["state"], "open");
}

TEST_F(SchedulingTest, RequestTimeoutCanOnlyShortenTheModelTimeout) {
  // timeout_ms 300, 200 ms per request, one worker: of three at once (even though each asked
  // for ten seconds) the second ends at 400 ms, past its deadline, and the third is still
  // queued at its deadline.
  std::vector<std::future<HttpResult>> calls;
  for (int i = 0; i < 3; ++i) {
    calls.push_back(InferAsync("queued", Body("x" + std::to_string(i), {{"timeout", 10'000'000}})));
    std::this_thread::sleep_for(20ms);
  }
  std::vector<HttpResult> results;
  for (auto& c : calls) results.push_back(c.get());
  EXPECT_EQ(results[0].status, 200);
  EXPECT_EQ(results[1].status, 504);
  EXPECT_THAT(results[1].body, HasSubstr("ran past the request's 300 ms deadline"));
  EXPECT_EQ(results[2].status, 504);
  EXPECT_THAT(results[2].body, HasSubstr("it was not executed"));

  // A shorter timeout is honoured: 50 ms behind a 200 ms request expires without executing.
  auto busy = InferAsync("queued", Body("busy"));
  std::this_thread::sleep_for(20ms);
  HttpResult res = Infer("queued", Body("short", {{"timeout", 50'000}}));
  EXPECT_EQ(res.status, 504);
  EXPECT_THAT(res.body, HasSubstr("it was not executed"));
  EXPECT_EQ(busy.get().status, 200);
}

TEST_F(SchedulingTest, BadSchedulingParametersNameTheField) {
  HttpResult res = Infer("steady", Body("x", {{"priority", 12}}));
  EXPECT_EQ(res.status, 400);
  EXPECT_THAT(res.body, HasSubstr("parameters.priority: expected a level in 1..9"));
  res = Infer("steady", Body("x", {{"timeout", "soon"}}));
  EXPECT_EQ(res.status, 400);
  EXPECT_THAT(res.body, HasSubstr("parameters.timeout"));
  res = Infer("steady", Body("x", {{"async", "yes"}}));
  EXPECT_EQ(res.status, 400);
  EXPECT_THAT(res.body, HasSubstr("parameters.async"));
  EXPECT_EQ(Infer("steady", Body("x", {{"priority", 1}})).status, 200);
}

TEST_F(SchedulingTest, AsyncJobLifecycle) {
  HttpClient client(server_->port());
  HttpResult res = client.Post("/v2/models/queued/infer", Body("later", {{"async", true}}));
  ASSERT_EQ(res.status, 202) << res.body;
  json accepted = json::parse(res.body);
  const std::string url = accepted["url"];
  EXPECT_EQ(res.headers["location"], url);
  EXPECT_EQ(accepted["status"], "PENDING");
  EXPECT_EQ(json::parse(client.Get(url).body)["status"], "PENDING");

  json job;
  for (int i = 0; i < 100; ++i) {
    job = json::parse(client.Get(url).body);
    if (job["status"] != "PENDING") break;
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_EQ(job["status"], "SUCCEEDED") << job.dump();
  EXPECT_EQ(job["result"]["model_name"], "queued");
  EXPECT_EQ(job["result"]["outputs"][0]["data"][0], "later");
  EXPECT_EQ(json::parse(client.Get(url).body)["status"], "SUCCEEDED") << "fetched again";

  // Kept for the configured time (1 s), then gone.
  std::this_thread::sleep_for(1100ms);
  EXPECT_EQ(client.Get(url).status, 404);
  EXPECT_EQ(client.Get("/v2/jobs/0123456789abcdef").status, 404);

  // The header form, a failed job, and deletion.
  res = client.Post("/v2/models/queued/infer", Body("x", {{"timeout", 1}}),
                    {{"Prefer", "respond-async"}});
  ASSERT_EQ(res.status, 202);
  const std::string failed_url = json::parse(res.body)["url"];
  for (int i = 0; i < 100; ++i) {
    job = json::parse(client.Get(failed_url).body);
    if (job["status"] != "PENDING") break;
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(job["status"], "FAILED");
  EXPECT_EQ(job["error_code"], 504);
  EXPECT_EQ(client.Delete(failed_url).status, 200);
  EXPECT_EQ(client.Get(failed_url).status, 404);
}

TEST_F(SchedulingTest, AsyncJobsAreBoundedAndAPendingOneCanBeCancelled) {
  HttpClient client(server_->port());
  std::vector<std::string> urls;
  for (int i = 0; i < 3; ++i) {
    HttpResult res = client.Post("/v2/models/queued/infer", Body("j", {{"async", true}}));
    ASSERT_EQ(res.status, 202) << res.body;
    urls.push_back(json::parse(res.body)["url"]);
  }
  HttpResult res = client.Post("/v2/models/queued/infer", Body("j", {{"async", true}}));
  EXPECT_EQ(res.status, 429);
  EXPECT_THAT(res.body, HasSubstr("global.jobs.max"));
  // The last one is still queued behind the others: cancelling it means it never runs.
  res = client.Delete(urls[2]);
  ASSERT_EQ(res.status, 200);
  EXPECT_EQ(json::parse(res.body)["status"], "CANCELLED");
  for (const auto& url : urls) {
    for (int i = 0; i < 100 && json::parse(client.Get(url).body)["status"] == "PENDING"; ++i) {
      std::this_thread::sleep_for(20ms);
    }
  }
  EXPECT_EQ(json::parse(client.Get(urls[2]).body)["status"], "CANCELLED");
  std::this_thread::sleep_for(1100ms);  // let the finished jobs expire for the other tests
}

TEST_F(SchedulingTest, StatisticsShowBatchTiersAndWorkers) {
  std::vector<std::future<HttpResult>> calls;
  for (int i = 0; i < 3; ++i) calls.push_back(InferAsync("batched", Body("b")));
  for (auto& c : calls) EXPECT_EQ(c.get().status, 200);
  json stats = Stats("batched");
  EXPECT_EQ(stats["name"], "batched");
  EXPECT_EQ(stats["inference_count"], 3);
  EXPECT_EQ(stats["execution_count"], 1);
  EXPECT_EQ(stats["batch_stats"][0]["batch_size"], 4) << stats.dump();
  EXPECT_EQ(stats["inference_stats"]["success"]["count"], 3);
  // Triton's tools divide success.ns by its count for the average latency: it is each request's
  // whole time in the model (queue and compute), not a placeholder.
  const json& inference = stats["inference_stats"];
  EXPECT_GE(inference["success"]["ns"].get<int64_t>(),
            inference["queue"]["ns"].get<int64_t>() +
                inference["compute_infer"]["ns"].get<int64_t>())
      << inference.dump();
  EXPECT_GT(inference["compute_infer"]["ns"].get<int64_t>(), 0) << inference.dump();
  EXPECT_EQ(stats["mmserve"]["counters"]["padded_items"], 1);
  EXPECT_FALSE(stats["mmserve"]["workers"][0]["cores"].empty());
  HttpClient client(server_->port());
  json all = json::parse(client.Get("/v2/models/stats").body);
  EXPECT_EQ(all["model_stats"].size(), 5u);
  EXPECT_THAT(json::parse(client.Get("/v2").body)["extensions"].get<std::vector<std::string>>(),
              ::testing::IsSupersetOf({"statistics", "async_jobs"}));
}

TEST_F(SchedulingTest, AQueuedRequestWhoseClientLeftIsNotExecuted) {
  const int64_t before = Stats("queued")["mmserve"]["counters"]["items"];
  auto busy = InferAsync("queued", Body("busy"));
  std::this_thread::sleep_for(30ms);
  {
    // Send a request and hang up without waiting for the answer.
    const std::string body = Body("never");
    const std::string request = "POST /v2/models/queued/infer HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                "Content-Type: application/json\r\nContent-Length: " +
                                std::to_string(body.size()) + "\r\n\r\n" + body;
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(server_->port()));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ASSERT_EQ(::write(fd, request.data(), request.size()), static_cast<ssize_t>(request.size()));
    std::this_thread::sleep_for(30ms);
    ::close(fd);
  }
  EXPECT_EQ(busy.get().status, 200);
  std::this_thread::sleep_for(300ms);
  json stats = Stats("queued")["mmserve"];
  EXPECT_EQ(stats["counters"]["items"].get<int64_t>() - before, 1) << stats.dump();
  EXPECT_GE(stats["cancelled"], 1);
}

}  // namespace
}  // namespace mmserve
