// Overload and faults against the real binary on 127.0.0.1 (docs/RELIABILITY.md): load far past
// capacity, descriptor exhaustion, streams dropped mid-generation, SIGTERM under load, SIGKILL
// and restart, and model files corrupted, truncated or deleted under a running server. Loads
// are bounded by request counts, never by wall time, so a loaded machine only makes them slower.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "testing/http_client.h"
#include "testing/models.h"
#include "testing/server_process.h"
#include "testing/test_util.h"

namespace mmserve {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::HttpClient;
using testing::ServerProcess;
using Server = testing::ConfiguredServer;  // a server on `yaml` in a fresh temporary folder

// A field of /proc/<pid>/status in kB (VmRSS), or of /proc/<pid>/stat (CPU ticks).
int64_t RssKb(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}
double CpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), {});
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));
  std::string f;
  int64_t utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> f; ++i) {
    if (i == 14) utime = std::stoll(f);
    if (i == 15) stime = std::stoll(f);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

std::string EchoBody(int value) {
  return json{{"inputs", {{{"name", "X"}, {"datatype", "INT32"}, {"shape", {1}},
                           {"data", {value}}}}}}
      .dump();
}

TEST(FaultTest, FarPastCapacityEveryAcceptedRequestIsAnsweredAndTheRestRefused) {
  // One worker at 20 ms a request (50/s), a queue of 8, at most 24 requests in flight; 48
  // clients push 960 requests as fast as they are answered.
  Server server(R"(global: {max_in_flight: 24}
models:
  - name: echo
    backend: identity
    queue: {max_size: 8}
    params: {latency_ms: 20, tensors: [{input: X, output: Y, datatype: INT32}]}
)");
  ASSERT_TRUE(server.process().Start()) << server.process().Log();
  const int port = server.process().port();
  std::atomic<int> ok{0}, refused{0}, wrong{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 48; ++c) {
    clients.emplace_back([&, c] {
      HttpClient client(port);
      for (int i = 0; i < 20; ++i) {
        const int value = c * 1000 + i;
        auto r = client.Post("/v2/models/echo/infer", EchoBody(value));
        if (r.status == 200) {
          const json j = json::parse(r.body, nullptr, false);
          if (!j.is_discarded() && j["outputs"][0]["data"][0] == value) {
            ++ok;
          } else {
            ++wrong;
          }
        } else if ((r.status == 429 || r.status == 503) && r.headers.count("retry-after")) {
          ++refused;
        } else {
          ++wrong;
        }
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(ok + refused, 960);
  EXPECT_GT(ok.load(), 0);
  EXPECT_GT(refused.load(), 0) << "48 clients against room for 24 must be refused sometimes";
  const int64_t rss_kb = RssKb(server.process().pid());
  EXPECT_LT(rss_kb, 512 * 1024) << "bounded memory";
  std::cout << "overload: " << ok << " answered, " << refused << " refused, server RSS "
            << rss_kb / 1024 << " MiB\n";
  HttpClient client(port);
  EXPECT_EQ(client.Get("/v2/health/live").status, 200);
}

TEST(FaultTest, OutOfDescriptorsTheServerBacksOffAndHealthProbesStillAnswer) {
  // 40 descriptors: max_connections (1024 by default) is fitted to them, with a warning, and
  // the connections past it still exhaust them: accept() fails with EMFILE.
  Server server("models:\n  - {name: echo, backend: identity}\n",
                {"/usr/bin/prlimit", "--nofile=40:40"});
  ASSERT_TRUE(server.process().Start()) << server.process().Log();
  const int port = server.process().port();
  EXPECT_THAT(server.process().Log(), HasSubstr("may open only 40 files"));
  // 60 connections that never send a byte: more than the descriptors left.
  std::vector<int> held;
  for (int i = 0; i < 60; ++i) {
    const int fd = testing::Connect(port);
    if (fd >= 0) held.push_back(fd);
  }
  const pid_t pid = server.process().pid();
  const double cpu_before = CpuSeconds(pid);
  // A probe is answered within a few tries (connections over the limit are closed within 2 s).
  bool answered = false;
  for (int attempt = 0; attempt < 40 && !answered; ++attempt) {
    try {
      HttpClient probe(port);
      answered = probe.Get("/v2/health/live").status == 200;
    } catch (const std::exception&) {
    }
    if (!answered) std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  EXPECT_TRUE(answered) << server.process().Log();
  EXPECT_LT(CpuSeconds(pid) - cpu_before, 2.0) << "the accept loop must not spin";
  EXPECT_THAT(server.process().Log(), HasSubstr("retrying with back-off"));
  for (int fd : held) ::close(fd);
}

TEST(FaultTest, StreamsDroppedMidGenerationFreeTheirSlots) {
  Server server("models:\n  - name: llm\n    path: " + testing::GeneratedModel("llama-tiny.gguf") +
                "\n    task: generate\n    params: {n_ctx: 1024, n_parallel: 2}\n");
  ASSERT_TRUE(server.process().Start()) << server.process().Log();
  const int port = server.process().port();
  const std::string body =
      json{{"inputs", {{{"name", "PROMPT"}, {"datatype", "BYTES"}, {"shape", {1}},
                        {"data", {"Once upon a time"}}}}},
           {"parameters", {{"max_tokens", 900}, {"stream", true}}}}
          .dump();
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(testing::PostAndLeave(port, "/v2/models/llm/infer", body));
  }
  // Both slots are free again: a short generation is answered, and the abandoned ones stopped
  // after a few tokens (counted, not timed: 6 x 900 tokens would take ~20 s here).
  HttpClient client(port);
  auto r = client.Post("/v2/models/llm/infer",
                       json{{"inputs", {{{"name", "PROMPT"}, {"datatype", "BYTES"}, {"shape", {1}},
                                         {"data", {"hi"}}}}},
                            {"parameters", {{"max_tokens", 4}}}}
                           .dump());
  EXPECT_EQ(r.status, 200) << r.body;
  json stats;
  for (int i = 0; i < 200; ++i) {  // the last cancellations land at their next token
    stats = json::parse(client.Get("/v2/models/llm/stats").body)["model_stats"][0]["mmserve"];
    if (stats["cancelled"] == 6) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(stats["cancelled"], 6) << stats.dump();
  EXPECT_LT(stats["counters"]["generated_tokens"].get<int64_t>(), 6 * 900 / 4) << stats.dump();
}

TEST(FaultTest, SigtermUnderLoadAnswersEveryRequestItReadAndExitsCleanly) {
  Server server(R"(models:
  - name: echo
    backend: identity
    thread_num: 2
    params: {latency_ms: 5, tensors: [{input: X, output: Y, datatype: INT32}]}
)");
  ASSERT_TRUE(server.process().Start()) << server.process().Log();
  const int port = server.process().port();
  std::atomic<int> answered{0}, refused{0}, wrong{0}, closed{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> clients;
  for (int c = 0; c < 16; ++c) {
    clients.emplace_back([&, c] {
      // Each client sends until the server is gone (at most 2,000 requests).
      for (int i = 0; i < 2000 && !stop; ++i) {
        try {
          HttpClient client(port);
          auto r = client.Post("/v2/models/echo/infer", EchoBody(c * 10000 + i));
          const json j = json::parse(r.body, nullptr, false);
          if (r.status == 200 && !j.is_discarded() &&
              j["outputs"][0]["data"][0] == c * 10000 + i) {
            ++answered;
          } else if (r.status == 503) {
            ++refused;  // "the server is shutting down"
          } else {
            ++wrong;
          }
        } catch (const std::exception&) {
          ++closed;  // not accepted: the listener is closed
          if (closed > 64) stop = true;
        }
      }
    });
  }
  while (answered < 200) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(server.process().Stop(SIGTERM), 0) << server.process().Log();
  stop = true;
  for (auto& t : clients) t.join();
  EXPECT_EQ(wrong.load(), 0) << answered << " answered, " << refused << " refused";
  EXPECT_GE(answered.load(), 200);
  EXPECT_THAT(server.process().Log(), Not(HasSubstr("[error]")));
}

TEST(FaultTest, SigkillAndRestartTenTimesLeavesNothingThatBlocksTheNext) {
  testing::TempDir dir;
  const auto file = dir.Write("models.yaml", "models:\n  - name: embedder\n    path: " +
                                                 testing::GeneratedModel("bert-tiny.gguf") +
                                                 "\n    task: embed\n");
  const std::string body = json{{"inputs", {{{"name", "TEXT"}, {"datatype", "BYTES"},
                                             {"shape", {1}}, {"data", {"hello"}}}}}}
                               .dump();
  for (int round = 0; round < 10; ++round) {
    ServerProcess server({"serve", file.string(), "--port", "0", "--lock-dir",
                          (dir.path() / "locks").string()},
                         dir.path() / ("server" + std::to_string(round) + ".log"));
    ASSERT_TRUE(server.Start()) << "round " << round << ": " << server.Log();
    HttpClient client(server.port());
    EXPECT_EQ(client.Post("/v2/models/embedder/infer", body).status, 200) << round;
    EXPECT_EQ(server.Stop(SIGKILL), 128 + SIGKILL);
  }
}

// The model file of a running server is truncated, corrupted or deleted, then the server is told
// to reload: the error names the file and the loaded version keeps serving.
class ModelFileFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = dir_.path() / "embedder.gguf";
    std::filesystem::copy_file(testing::GeneratedModel("bert-tiny.gguf"), model_);
    server_ = std::make_unique<Server>("global: {model_roots: [" + dir_.path().string() +
                                       "]}\nmodels:\n  - name: embedder\n    path: " +
                                       model_.string() + "\n    task: embed\n");
    ASSERT_TRUE(server_->process().Start()) << server_->process().Log();
    client_ = std::make_unique<HttpClient>(server_->process().port());
  }

  void ExpectStillServing() {
    auto r = client_->Post("/v2/models/embedder/infer",
                           json{{"inputs", {{{"name", "TEXT"}, {"datatype", "BYTES"},
                                             {"shape", {1}}, {"data", {"hello"}}}}}}
                               .dump());
    EXPECT_EQ(r.status, 200) << r.body;
  }

  void ExpectReloadNamesTheFile() {
    // The reload answers what it kept and why (or, for a file it cannot even describe, an
    // error); either way it names the file.
    auto r = client_->Post("/v2/repository/reload", "");
    EXPECT_THAT(r.body, HasSubstr("embedder.gguf")) << r.body;
    if (r.status == 200) {
      EXPECT_THAT(r.body, HasSubstr("failed to load")) << r.body;
    }
    ExpectStillServing();
  }

  testing::TempDir dir_;
  std::filesystem::path model_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<HttpClient> client_;
};

TEST_F(ModelFileFaultTest, ATruncatedFile) {
  std::filesystem::resize_file(model_, 4096);
  ExpectReloadNamesTheFile();
}

TEST_F(ModelFileFaultTest, ACorruptVocabulary) {
  std::string bytes = testing::ReadFile(model_);
  bytes.replace(bytes.find("[unused1]"), 9, "[unused0]");
  std::ofstream(model_, std::ios::binary | std::ios::trunc) << bytes;
  ExpectReloadNamesTheFile();
}

TEST_F(ModelFileFaultTest, ADeletedFile) {
  std::filesystem::remove(model_);
  ExpectReloadNamesTheFile();
}

TEST_F(ModelFileFaultTest, ARepositoryLoadOfATruncatedCopy) {
  const auto copy = dir_.path() / "copy.gguf";
  std::filesystem::copy_file(model_, copy);
  std::filesystem::resize_file(copy, 100);
  auto r = client_->Post(
      "/v2/repository/models/other/load",
      json{{"parameters", {{"config", {{"path", copy.string()}, {"task", "embed"}}}}}}.dump());
  EXPECT_NE(r.status, 200) << r.body;
  EXPECT_THAT(r.body, HasSubstr("copy.gguf"));
  ExpectStillServing();
}

}  // namespace
}  // namespace mmserve
