// `isolation: process` against the real binary on 127.0.0.1: a model's worker killed or
// crashed takes that model's in-flight requests (503, with the reason) and nothing else; the
// worker restarts; nothing is left behind; and isolated answers equal in-process ones bit for
// bit. Loads are counted in requests, never timed, except the bound on a restart.
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
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

using namespace std::chrono_literals;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::HttpClient;
using testing::ServerProcess;
using Server = testing::ConfiguredServer;

// The live worker processes `server` started, found through /proc by their command line
// (`mmserve worker --parent <server>`; a zombie's is empty: Zombies() finds those).
std::vector<pid_t> Workers(pid_t server) {
  std::vector<pid_t> out;
  const std::string needle = std::string("worker") + '\0' + "--parent" + '\0' +
                             std::to_string(server) + '\0';
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(in)), {});
    if (cmdline.find(needle) != std::string::npos) out.push_back(std::stoi(name));
  }
  return out;
}

// The children of `server` that exited and were never reaped (state Z in /proc/<pid>/stat).
std::vector<pid_t> Zombies(pid_t server) {
  std::vector<pid_t> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), {});
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses; the last ')' ends it.
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 1));
    std::string state;
    long ppid = 0;
    rest >> state >> ppid;
    if (state == "Z" && ppid == server) out.push_back(std::stoi(name));
  }
  return out;
}

int OpenFds(pid_t pid) {
  int n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return n;
}

// How many of process `pid`'s mappings are a channel's shared region (memfd:mmserve-channel).
int SharedRegionMappings(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/maps");
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    n += line.find("/memfd:mmserve-channel") != std::string::npos;
  }
  return n;
}

std::string TextBody(const std::string& text) {
  return json{{"inputs", {{{"name", "TEXT"}, {"datatype", "BYTES"}, {"shape", {1}},
                           {"data", {text}}}}}}
      .dump();
}

constexpr const char* kEcho = R"(
    backend: identity
    params:
      tensors: [{input: TEXT, output: ECHO, datatype: BYTES, shape: [-1]}]
)";

// Polls `model` until it answers 200: whether it did before the poll gave up (after 5,000
// tries, a minute or more). How fast a worker comes back is measured in docs/BENCHMARKS.md (P10),
// not asserted here, where a loaded machine would stretch it.
bool UntilServing(HttpClient& client, const std::string& model) {
  for (int i = 0; i < 5000; ++i) {
    if (client.Post("/v2/models/" + model + "/infer", TextBody("ping")).status == 200) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

TEST(IsolationTest, KillingAWorkerFailsOnlyItsModelsRequestsAndItServesAgain) {
  Server server(std::string("models:\n  - name: iso\n    isolation: process\n    thread_num: 2") +
                kEcho + "      latency_ms: 2\n  - name: local" + kEcho);
  ASSERT_TRUE(server.process().Start()) << server.process().Log();
  const int port = server.process().port();
  const auto workers = Workers(server.process().pid());
  ASSERT_EQ(workers.size(), 1u) << server.process().Log();

  // Two clients per model; the worker is killed once each iso client is 50 requests in.
  std::atomic<int> local_ok{0}, local_bad{0}, iso_ok{0}, iso_lost{0}, iso_bad{0}, started{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&, c] {
      HttpClient client(port);
      const bool iso = c % 2 == 0;
      for (int i = 0; i < 150; ++i) {
        if (iso && i == 50) ++started;
        auto r = client.Post(std::string("/v2/models/") + (iso ? "iso" : "local") + "/infer",
                             TextBody("t" + std::to_string(i)));
        if (!iso) {
          ++(r.status == 200 ? local_ok : local_bad);
        } else if (r.status == 200) {
          ++iso_ok;
        } else if (r.status == 503 && r.body.find("model worker for 'iso' exited: SIGKILL") !=
                                          std::string::npos) {
          ++iso_lost;
        } else {
          ++iso_bad;
          ADD_FAILURE() << r.status << " " << r.body;
        }
      }
    });
  }
  while (started < 2) std::this_thread::sleep_for(1ms);
  ASSERT_EQ(::kill(workers[0], SIGKILL), 0);
  HttpClient probe(port);
  const auto killed = std::chrono::steady_clock::now();
  const bool back = UntilServing(probe, "iso");
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - killed);
  for (auto& t : clients) t.join();
  EXPECT_EQ(local_ok, 300) << "the in-process model never noticed";
  EXPECT_EQ(local_bad, 0);
  EXPECT_EQ(iso_ok + iso_lost, 300) << "every isolated request answered: 200, or 503 with why";
  EXPECT_LT(iso_lost, 10) << "only what was in flight when the worker died";
  EXPECT_TRUE(back) << "the worker restarts";
  const auto now = Workers(server.process().pid());
  ASSERT_EQ(now.size(), 1u);
  EXPECT_NE(now[0], workers[0]);
  std::cout << "isolated model serving again " << took.count() << " ms after the kill; "
            << iso_lost << " requests lost with it\n";
}

TEST(IsolationTest, TenCrashesAnswerWithTheSignalAndLeaveNothingBehind) {
  Server server(std::string("models:\n  - name: iso\n    isolation: process") + kEcho +
                "      crash_on: boom\n      crash_signal: segv\n  - name: local" + kEcho +
                "  - name: aborts\n    isolation: process" + kEcho +
                "      crash_on: boom\n      crash_signal: abort\n");
  ASSERT_TRUE(server.process().Start()) << server.process().Log();
  const pid_t pid = server.process().pid();
  {
    // The zombie check sees one when there is one: this test's own child, not yet reaped.
    const pid_t child = ::fork();
    if (child == 0) ::_exit(0);
    bool seen = false;
    for (int i = 0; i < 200 && !seen; ++i) {
      const auto zombies = Zombies(::getpid());
      seen = std::find(zombies.begin(), zombies.end(), child) != zombies.end();
      if (!seen) std::this_thread::sleep_for(5ms);
    }
    EXPECT_TRUE(seen);
    ::waitpid(child, nullptr, 0);
  }
  HttpClient client(server.process().port());
  ASSERT_EQ(client.Post("/v2/models/iso/infer", TextBody("warm")).status, 200);
  ASSERT_EQ(client.Post("/v2/models/aborts/infer", TextBody("warm")).status, 200);
  const int fds = OpenFds(pid);
  const int regions = SharedRegionMappings(pid);
  EXPECT_EQ(regions, 2) << "each isolated instance that served maps its channel's region";
  for (int cycle = 0; cycle < 10; ++cycle) {
    auto r = client.Post("/v2/models/iso/infer", TextBody("boom"));
    EXPECT_EQ(r.status, 503) << r.body;
    EXPECT_THAT(r.body, HasSubstr("model worker for 'iso' exited: SIGSEGV"));
    EXPECT_TRUE(UntilServing(client, "iso")) << "cycle " << cycle;
    ASSERT_EQ(client.Post("/v2/models/local/infer", TextBody("x")).status, 200);
  }
  auto r = client.Post("/v2/models/aborts/infer", TextBody("boom"));
  EXPECT_EQ(r.status, 503);
  EXPECT_THAT(r.body, HasSubstr("exited: SIGABRT"));
  EXPECT_TRUE(UntilServing(client, "aborts"));

  const auto workers = Workers(pid);
  EXPECT_EQ(workers.size(), 2u) << "one live worker per isolated model";
  EXPECT_THAT(Zombies(pid), ::testing::IsEmpty()) << "every dead worker reaped";
  // `doctor` names them under the device their server holds.
  auto [code, doctor] = ServerProcess::Run({"doctor", "--lock-dir", server.lock_dir().string()});
  EXPECT_EQ(code, 0);
  EXPECT_THAT(doctor, HasSubstr("held by mmserve pid " + std::to_string(pid)));
  for (pid_t w : workers) {
    EXPECT_THAT(doctor, ::testing::AnyOf(HasSubstr("worker pid " + std::to_string(w) +
                                                   ": model 'iso'"),
                                         HasSubstr("worker pid " + std::to_string(w) +
                                                   ": model 'aborts'")))
        << doctor;
  }
  EXPECT_EQ(OpenFds(pid), fds) << "no socket, memfd or pidfd of a dead worker left open";
  EXPECT_EQ(SharedRegionMappings(pid), regions) << "no dead worker's shared region left mapped";
  auto stats = json::parse(client.Get("/v2/models/iso/stats").body, nullptr, false);
  EXPECT_THAT(stats.dump(), HasSubstr("\"worker_restarts\":10")) << stats.dump();
  EXPECT_THAT(stats.dump(), HasSubstr("\"worker_last_exit\":\"SIGSEGV\"")) << stats.dump();
  const std::string metrics = client.Get("/metrics").body;
  EXPECT_THAT(metrics, HasSubstr("mmserve_worker_restarts_total{model=\"iso\",version=\"1\"} 10"));
  EXPECT_THAT(metrics, HasSubstr("mmserve_worker_last_exit_timestamp_seconds{model=\"iso\","
                                 "version=\"1\",reason=\"SIGSEGV\"} "));
  // Every exit and every restart is an event: why, the delay before the next start, and how
  // long the model was without a worker.
  const auto events = [&](const std::string& kind) {
    std::vector<std::string> out;
    auto list = json::parse(client.Get("/v2/events").body, nullptr, false);
    for (const auto& e : list["events"]) {
      if (e.value("model", "") == "iso" && e["kind"] == kind) out.push_back(e["message"]);
    }
    return out;
  };
  auto exited = events("worker_exited");
  ASSERT_EQ(exited.size(), 10u);
  EXPECT_THAT(exited[0], HasSubstr("model worker for 'iso' exited: SIGSEGV; restarting at once "
                                   "(exit 1 within a minute; the 11th stops the restarts)"));
  EXPECT_THAT(exited[9], HasSubstr("exited: SIGSEGV; restarting in "));
  auto restarted = events("worker_restarted");
  ASSERT_EQ(restarted.size(), 10u);
  EXPECT_THAT(restarted[0], ::testing::ContainsRegex("^pid [0-9]+, serving [0-9]+ ms after the "
                                                     "exit \\(back-off 0 ms, process start "
                                                     "[0-9]+ ms, model load [0-9]+ ms\\)$"));

  // The eleventh exit within a minute: no more restarts. The model says so in the index and in
  // every answer, and the others serve on.
  r = client.Post("/v2/models/iso/infer", TextBody("boom"));
  EXPECT_EQ(r.status, 503);
  bool failed = false;
  for (int i = 0; i < 500 && !failed; ++i) {
    r = client.Post("/v2/models/iso/infer", TextBody("x"));
    failed = r.body.find("no more restarts") != std::string::npos;
    if (!failed) std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(failed) << r.status << " " << r.body;
  EXPECT_EQ(r.status, 503);
  const std::string index = client.Post("/v2/repository/index", "{}").body;
  EXPECT_THAT(index, HasSubstr("\"state\":\"FAILED\""));
  EXPECT_THAT(index, HasSubstr("11 exits within a minute: no more restarts"));
  exited = events("worker_exited");
  ASSERT_EQ(exited.size(), 11u);
  EXPECT_THAT(exited.back(), HasSubstr("exited: SIGSEGV; 11 exits within a minute: no more restarts"));
  EXPECT_EQ(events("worker_restarted").size(), 10u);
  EXPECT_EQ(client.Post("/v2/models/local/infer", TextBody("x")).status, 200);
  // Unloaded and loaded again, it starts afresh.
  EXPECT_EQ(client.Post("/v2/repository/models/iso/unload", "").status, 200);
  EXPECT_EQ(client.Post("/v2/repository/models/iso/load", "").status, 200);
  r = client.Post("/v2/models/iso/infer", TextBody("x"));
  EXPECT_EQ(r.status, 200) << r.body;

  // The server killed outright: its workers die with it (their parent-death signal).
  ASSERT_EQ(server.process().Stop(SIGKILL), 128 + SIGKILL);
  for (int i = 0; i < 500 && !Workers(pid).empty(); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(Workers(pid).empty()) << "a worker outlived its server";
}

// A batch's tensors go through the channel's shared region, which grows for a large one (both
// ways: the echo is as large) and serves small ones after it; every byte comes back.
TEST(IsolationTest, TensorsOfAnySizeCrossTheSharedRegionExactly) {
  Server server(std::string("models:\n  - name: iso\n    isolation: process") + kEcho);
  ASSERT_TRUE(server.process().Start()) << server.process().Log();
  HttpClient client(server.process().port());
  for (size_t size : {size_t{10}, size_t{3} << 20, size_t{100}, size_t{5} << 20, size_t{1}}) {
    std::string text(size, 'a');
    for (size_t i = 0; i < size; i += 4099) text[i] = static_cast<char>('b' + i % 23);
    auto r = client.Post("/v2/models/iso/infer", TextBody(text));
    ASSERT_EQ(r.status, 200) << size;
    auto out = json::parse(r.body, nullptr, false);
    EXPECT_TRUE(out["outputs"][0]["data"][0] == text) << "size " << size;
  }
  const auto workers = Workers(server.process().pid());
  ASSERT_EQ(workers.size(), 1u);
  EXPECT_EQ(SharedRegionMappings(workers[0]), 1);
  EXPECT_EQ(SharedRegionMappings(server.process().pid()), 1);
  // A clean stop stops the worker: no exit to report, no restart.
  EXPECT_EQ(server.process().Stop(SIGTERM), 0);
  EXPECT_THAT(server.process().Log(), ::testing::Not(HasSubstr("exited")));
  EXPECT_THAT(server.process().Log(), ::testing::Not(HasSubstr("restarted")));
}

// Under concurrent load a round trip to the worker carries what queued meanwhile, as several
// batches of max_batch (1 here): each client still gets its own answer, and the engine still
// sees batches of one.
TEST(IsolationTest, ARoundTripCarriesSeveralBatchesAndEveryClientGetsItsOwnAnswer) {
  Server server(std::string("models:\n  - name: iso\n    isolation: process") + kEcho);
  ASSERT_TRUE(server.process().Start()) << server.process().Log();
  const int port = server.process().port();
  constexpr int kClients = 16, kEach = 50;
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      HttpClient client(port);
      for (int i = 0; i < kEach; ++i) {
        const std::string text = "client " + std::to_string(c) + " request " + std::to_string(i);
        auto r = client.Post("/v2/models/iso/infer", TextBody(text));
        auto out = json::parse(r.body, nullptr, false);
        if (r.status == 200 && out["outputs"][0]["data"][0] == text) {
          ++ok;
        } else {
          ADD_FAILURE() << r.status << " " << r.body;
        }
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok, kClients * kEach);
  HttpClient client(port);
  auto stats = json::parse(client.Get("/v2/models/iso/stats").body, nullptr, false);
  const json& model = stats["model_stats"][0];
  const int64_t executions = model["execution_count"].get<int64_t>();
  const int64_t round_trips = model["mmserve"]["counters"]["worker_round_trips"].get<int64_t>();
  EXPECT_EQ(executions, model["inference_count"].get<int64_t>()) << "every batch held one";
  EXPECT_LT(round_trips, executions) << "no round trip carried more than one batch";
  EXPECT_GE(round_trips * 8, executions) << "at most kMaxBatchesPerCall (8) per round trip";
  std::cout << executions << " batches in " << round_trips << " round trips\n";
}

TEST(IsolationTest, AHungExecutionKillsTheWorkerAndTheModelServesAgain) {
  // The watchdog takes the model out of service (breaker) as for any hang; with the worker
  // killed and restarted, the cooldown is all it takes to serve again.
  Server server(std::string("models:\n  - name: iso\n    isolation: process\n    timeout_ms: "
                            "300\n    watchdog_margin_ms: 200\n    breaker: {cooldown_ms: 300}") +
                kEcho + "      hang_on: hang\n      hang_ms: 600000\n");
  ASSERT_TRUE(server.process().Start()) << server.process().Log();
  const pid_t pid = server.process().pid();
  const auto before = Workers(pid);
  ASSERT_EQ(before.size(), 1u);
  HttpClient client(server.process().port());
  auto r = client.Post("/v2/models/iso/infer", TextBody("hang"));
  EXPECT_EQ(r.status, 504) << r.body;
  EXPECT_TRUE(UntilServing(client, "iso"));
  const auto after = Workers(pid);
  ASSERT_EQ(after.size(), 1u);
  EXPECT_NE(after[0], before[0]) << "the hung worker was killed, its memory reclaimed";
  EXPECT_THAT(server.process().Log(), HasSubstr("model worker for 'iso' exited: SIGKILL"));
}

// The embeddings and rerank scores of an isolated model, byte for byte those of the same file
// served in the server's process.
TEST(IsolationTest, IsolatedAnswersEqualInProcessAnswersBitForBit) {
  const std::string bert = testing::GeneratedModel("bert-tiny.gguf");
  const std::string rerank = testing::GeneratedModel("rerank-tiny.gguf");
  Server server("models:\n"
                "  - {name: emb, path: " + bert + ", task: embed}\n"
                "  - {name: emb-iso, path: " + bert + ", task: embed, isolation: process}\n"
                "  - {name: rr, path: " + rerank + ", task: rerank}\n"
                "  - {name: rr-iso, path: " + rerank + ", task: rerank, isolation: process}\n");
  ASSERT_TRUE(server.process().Start()) << server.process().Log();
  HttpClient client(server.process().port());
  const json texts = {"the quick brown fox", "jumps over", "the lazy dog", "a"};
  auto embed = [&](const std::string& model) {
    auto r = client.Post("/v1/embeddings", json{{"model", model}, {"input", texts}}.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body, nullptr, false)["data"];
  };
  const json local = embed("emb"), isolated = embed("emb-iso");
  ASSERT_EQ(local.size(), 4u);
  EXPECT_EQ(local, isolated);
  auto rank = [&](const std::string& model) {
    auto r = client.Post("/v1/rerank", json{{"model", model}, {"query", "a fox"},
                                            {"documents", texts}}.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body, nullptr, false)["results"];
  };
  const json rr = rank("rr");
  ASSERT_EQ(rr.size(), 4u);
  EXPECT_EQ(rr, rank("rr-iso"));
  // The engine's counters come back from the worker: stats and /metrics as in-process.
  const std::string stats = client.Get("/v2/models/emb-iso/stats").body;
  EXPECT_THAT(stats, HasSubstr("\"decodes\":"));
  EXPECT_THAT(stats, HasSubstr("\"worker_pid\":"));
}

// The environment of process `pid`, one "NAME=value" per entry.
std::vector<std::string> Environment(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ");
  std::vector<std::string> out;
  for (std::string entry; std::getline(in, entry, '\0');) out.push_back(entry);
  return out;
}

// `compute_wait` reaches each worker as its OpenMP settings, over whatever the server's
// environment says (spin: libgomp's default, none of the server's; sleep: passive); a model
// without it inherits the server's. The answers do not depend on it.
TEST(IsolationTest, EachWorkerWaitsAsItsModelSaysOverTheServersEnvironment) {
  const std::string bert = testing::GeneratedModel("bert-tiny.gguf");
  const std::string entry = ", path: " + bert + ", task: embed, isolation: process";
  Server server("models:\n"
                "  - {name: spin" + entry + ", compute_wait: spin}\n"
                "  - {name: sleep" + entry + ", compute_wait: sleep}\n"
                "  - {name: inherit" + entry + "}\n",
                {"/usr/bin/env", "OMP_WAIT_POLICY=active", "GOMP_SPINCOUNT=5"});
  ASSERT_TRUE(server.process().Start()) << server.process().Log();
  HttpClient client(server.process().port());
  const auto environment = [&](const std::string& model) {
    auto stats = json::parse(client.Get("/v2/models/" + model + "/stats").body, nullptr, false);
    const int64_t pid = stats["model_stats"][0]["mmserve"]["counters"].value("worker_pid", 0);
    EXPECT_GT(pid, 0) << stats.dump();
    return pid > 0 ? Environment(static_cast<pid_t>(pid)) : std::vector<std::string>{};
  };
  using ::testing::Contains;
  const auto spin = environment("spin"), sleep = environment("sleep"),
             inherit = environment("inherit");
  ASSERT_FALSE(spin.empty());
  EXPECT_THAT(spin, Not(Contains(::testing::StartsWith("OMP_WAIT_POLICY="))));
  EXPECT_THAT(spin, Not(Contains(::testing::StartsWith("GOMP_SPINCOUNT="))));
  EXPECT_THAT(sleep, Contains("OMP_WAIT_POLICY=passive"));
  EXPECT_THAT(sleep, Not(Contains(::testing::StartsWith("GOMP_SPINCOUNT="))));
  EXPECT_THAT(sleep, Not(Contains("OMP_WAIT_POLICY=active")));
  EXPECT_THAT(inherit, Contains("OMP_WAIT_POLICY=active"));
  EXPECT_THAT(inherit, Contains("GOMP_SPINCOUNT=5"));
  const json texts = {"the quick brown fox", "jumps over", "a"};
  json first;
  for (const std::string model : {"spin", "sleep", "inherit"}) {
    auto r = client.Post("/v1/embeddings", json{{"model", model}, {"input", texts}}.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    const json data = json::parse(r.body, nullptr, false)["data"];
    if (first.is_null()) first = data;
    EXPECT_EQ(data, first) << model;
  }
}

// The budget charges an isolated model what its worker holds, from the load on: at least its
// estimate (the worker's own memory is measured from outside, and the model file's pages it
// shares are not its own), and the load's measure is the worker's memory, not the server
// heap's growth (0 for a model loaded elsewhere).
TEST(IsolationTest, AnIsolatedModelIsChargedWhatItsWorkerHoldsFromItsLoadOn) {
  const std::string llm = testing::GeneratedModel("llama-tiny.gguf");
  Server server("models:\n  - {name: local, path: " + llm + ", task: generate}\n" +
                "  - {name: iso, path: " + llm + ", task: generate, isolation: process}\n");
  ASSERT_TRUE(server.process().Start()) << server.process().Log();
  HttpClient client(server.process().port());
  const auto memory = [&](const std::string& model) {
    auto stats = json::parse(client.Get("/v2/models/" + model + "/stats").body, nullptr, false);
    return stats["model_stats"][0]["mmserve"]["memory"];
  };
  const json iso = memory("iso"), local = memory("local");
  EXPECT_GE(iso["resident_bytes"].get<int64_t>(), iso["estimate_bytes"].get<int64_t>());
  EXPECT_GT(iso["measured_bytes"].get<int64_t>(), int64_t{8} << 20) << iso.dump();
  EXPECT_GT(local["measured_bytes"].get<int64_t>(), int64_t{8} << 20) << local.dump();
  // /v2/devices charges the same figure.
  auto devices = json::parse(client.Get("/v2/devices").body, nullptr, false);
  int64_t charged = 0;
  for (const auto& h : devices["devices"][0]["holders"]) {
    if (h["model"] == "iso v1") charged = h["bytes"].get<int64_t>();
  }
  EXPECT_GE(charged, iso["estimate_bytes"].get<int64_t>()) << devices.dump();
  EXPECT_THAT(server.process().Log(), Not(HasSubstr("measured 0.0 MiB")));
}

// An isolated worker parks and frees its idle context itself (the server's scheduler sees only
// the proxy), and its next context answers byte for byte as the first did. The worker's
// counters reach the server with its next results: each round asks again after an idle pause.
TEST(IsolationTest, AnIsolatedWorkerFreesItsIdleContextAndAnswersAlikeWithANewOne) {
  Server server("models:\n  - {name: emb-iso, path: " + testing::GeneratedModel("bert-tiny.gguf") +
                ", task: embed, isolation: process, params: {idle_context_ms: 0}}\n");
  ASSERT_TRUE(server.process().Start()) << server.process().Log();
  HttpClient client(server.process().port());
  auto embed = [&] {
    auto r = client.Post("/v1/embeddings", json{{"model", "emb-iso"}, {"input", "a fox"}}.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body, nullptr, false)["data"];
  };
  const json first = embed();
  json stats;
  for (int round = 0; round < 40; ++round) {
    std::this_thread::sleep_for(300ms);  // past the 200 ms after which an idle worker releases
    EXPECT_EQ(embed(), first) << "round " << round;
    stats = json::parse(client.Get("/v2/models/emb-iso/stats").body, nullptr, false);
    if (stats["model_stats"][0]["mmserve"]["counters"].value("context_releases", 0) > 0) break;
  }
  EXPECT_GT(stats["model_stats"][0]["mmserve"]["counters"].value("context_releases", 0), 0)
      << stats.dump();
}

// The SSE events of a streamed answer: each `data:` line's text.
std::vector<std::string> Events(const std::string& body) {
  std::vector<std::string> out;
  size_t at = 0;
  while ((at = body.find("data: ", at)) != std::string::npos) {
    const size_t end = body.find('\n', at);
    out.push_back(body.substr(at + 6, end - at - 6));
    at = end;
  }
  return out;
}

// Greedy generation, streamed and not, in a worker: the same text as in the server's process,
// several sequences at once (continuous batching in the worker), and clients that leave
// mid-stream cancel their sequences there.
TEST(IsolationTest, IsolatedGenerationEqualsInProcessStreamedOrNot) {
  const std::string llama = testing::GeneratedModel("llama-tiny.gguf");
  Server server("models:\n"
                "  - {name: gen, path: " + llama + ", task: generate}\n"
                "  - {name: gen-iso, path: " + llama + ", task: generate, isolation: process, "
                "params: {n_parallel: 4}}\n");
  ASSERT_TRUE(server.process().Start()) << server.process().Log();
  const int port = server.process().port();
  auto complete = [&](const std::string& model, const std::string& prompt, bool stream) {
    HttpClient client(port);
    auto r = client.Post("/v1/completions", json{{"model", model}, {"prompt", prompt},
                                                 {"max_tokens", 24}, {"temperature", 0},
                                                 {"stream", stream}}.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    if (!stream) return json::parse(r.body, nullptr, false)["choices"][0]["text"].get<std::string>();
    std::string text;
    for (const auto& e : Events(r.body)) {
      if (e == "[DONE]") break;
      text += json::parse(e)["choices"][0].value("text", "");
    }
    return text;
  };
  const std::vector<std::string> prompts = {"Once upon a time", "The capital of", "1 2 3", "Hello"};
  std::vector<std::string> local;
  for (const auto& p : prompts) local.push_back(complete("gen", p, false));
  std::vector<std::thread> clients;
  std::vector<std::string> isolated(prompts.size()), streamed(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    clients.emplace_back([&, i] {
      isolated[i] = complete("gen-iso", prompts[i], false);
      streamed[i] = complete("gen-iso", prompts[i], true);
    });
  }
  for (auto& t : clients) t.join();
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_FALSE(local[i].empty());
    EXPECT_EQ(isolated[i], local[i]) << prompts[i];
    EXPECT_EQ(streamed[i], local[i]) << prompts[i];
  }
  const std::string stats = HttpClient(port).Get("/v2/models/gen-iso/stats").body;
  EXPECT_THAT(stats, HasSubstr("\"generated_tokens\":"));
  // /tokenize and /detokenize ask the worker's vocabulary: the same answers, the same errors.
  auto ask = [&](const std::string& path, json body, const std::string& model) {
    body["model"] = model;
    auto r = HttpClient(port).Post(path, body.dump());
    return std::to_string(r.status) + " " + r.body;
  };
  const json text = {{"content", "Once upon a time, hello"}, {"with_pieces", true},
                     {"add_special", true}};
  const std::string tokens = ask("/tokenize", text, "gen");
  EXPECT_THAT(tokens, ::testing::StartsWith("200 {\"tokens\":[{"));
  EXPECT_EQ(ask("/tokenize", text, "gen-iso"), tokens);
  const json ids = {{"tokens", {1, 2, 300, 4000}}};
  EXPECT_THAT(ask("/detokenize", ids, "gen"), ::testing::StartsWith("200 "));
  EXPECT_EQ(ask("/detokenize", ids, "gen-iso"), ask("/detokenize", ids, "gen"));
  const json bad = {{"tokens", {1, 99999999}}};
  EXPECT_THAT(ask("/detokenize", bad, "gen-iso"), ::testing::StartsWith("400 "));
  EXPECT_EQ(ask("/detokenize", bad, "gen-iso"), ask("/detokenize", bad, "gen"));

  // Time to first token is measured in the worker and comes back with each sequence's end.
  const std::string metrics = HttpClient(port).Get("/metrics").body;
  const std::string ttft = "mmserve_time_to_first_token_seconds_count{model=\"gen-iso\"";
  const size_t at = metrics.find(ttft);
  ASSERT_NE(at, std::string::npos) << metrics;
  const size_t value = metrics.find("} ", at) + 2;
  EXPECT_GE(std::atoi(metrics.c_str() + value), static_cast<int>(2 * prompts.size()))
      << metrics.substr(at, 120);

  // Six streams of 900 tokens dropped once they start: the worker stops each at its next token
  // (counted, not timed: 6 x 900 tokens would take ~20 s here), and its slots serve again.
  const std::string body = json{{"model", "gen-iso"}, {"prompt", "Once upon a time"},
                                {"max_tokens", 900}, {"stream", true}}.dump();
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(testing::PostAndLeave(port, "/v1/completions", body));
  EXPECT_EQ(complete("gen-iso", prompts[0], false), local[0]);
  json mmserve;
  for (int i = 0; i < 200; ++i) {
    mmserve = json::parse(HttpClient(port).Get("/v2/models/gen-iso/stats").body)["model_stats"][0]
                                                                               ["mmserve"];
    if (mmserve["cancelled"] == 6) break;
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(mmserve["cancelled"], 6) << mmserve.dump();
  EXPECT_LT(mmserve["counters"]["generated_tokens"].get<int64_t>(), 6 * 900 / 4) << mmserve.dump();
}

// Round 2, F10: for a generator whose worker had stopped, the watchdog said "has run 4 ms,
// 300 ms past its deadline": the time of the step in progress (the server polls a worker's
// sequences in 5 ms steps), not of the sequence that outlived its deadline.
TEST(IsolationTest, AStoppedGeneratorIsReportedWithItsSequencesTimeNotAStepsTime) {
  const std::string llama = testing::GeneratedModel("llama-tiny.gguf");
  Server server("models:\n  - {name: gen, path: " + llama +
                ", task: generate, isolation: process, timeout_ms: 600, watchdog_margin_ms: 300}\n");
  ASSERT_TRUE(server.process().Start()) << server.process().Log();
  const auto workers = Workers(server.process().pid());
  ASSERT_EQ(workers.size(), 1u);
  HttpClient client(server.process().port());
  const std::string body =
      json{{"model", "gen"}, {"prompt", "Once upon a time"}, {"max_tokens", 8}}.dump();
  ASSERT_EQ(client.Post("/v1/completions", body).status, 200);  // the worker's slots are bound
  ASSERT_EQ(::kill(workers[0], SIGSTOP), 0);
  // Answered at its deadline (#42), not when the stopped worker's step would end.
  auto r = client.Post("/v1/completions", body);
  EXPECT_EQ(r.status, 504) << r.body;
  EXPECT_THAT(r.body, HasSubstr("ran past the request's 600 ms deadline")) << r.body;
  // Still stopped at deadline + margin: the watchdog reports it, with the sequence's time.
  std::string log;
  for (int i = 0; i < 3000 && log.find("has run ") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    log = server.process().Log();
  }
  ::kill(workers[0], SIGCONT);
  const size_t ran = log.find("has run ");
  ASSERT_NE(ran, std::string::npos) << log;
  // The sequence began before its deadline and is reported at least the margin after it.
  EXPECT_GE(std::stol(log.substr(ran + 8)), 300) << log;
}

// A field of /proc/PID/status ("Seccomp", "NoNewPrivs", "Uid"): its value, tabs as spaces.
std::string StatusField(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(field + ":", 0) != 0) continue;
    std::string value = line.substr(field.size() + 1);
    std::replace(value.begin(), value.end(), '\t', ' ');
    return value.substr(value.find_first_not_of(' '));
  }
  return "";
}

// isolation: sandbox (issue #40): embeddings, a generation and a vision model serve from
// sandboxed workers as from process ones; identity hooks that try what an exploited engine
// would (open /etc/passwd, connect a socket, exec) kill their worker with SIGSYS, reported as a
// sandbox violation, while the other models serve on; the workers run as nobody when the server
// runs as root, with no_new_privs and a seccomp filter.
TEST(IsolationTest, ASandboxedWorkerServesAndIsKilledForWhatItMayNotDo) {
  const std::string bert = testing::GeneratedModel("bert-tiny.gguf");
  const std::string llama = testing::GeneratedModel("llama-tiny.gguf");
  const std::string onnx = testing::GeneratedModel("classifier-tiny.onnx");
  std::string yaml = "models:\n"
                     "  - {name: emb, path: " + bert + ", task: embed, isolation: sandbox}\n"
                     "  - {name: emb-iso, path: " + bert + ", task: embed, isolation: process}\n"
                     "  - {name: llm, path: " + llama + ", isolation: sandbox}\n"
                     "  - {name: cls, path: " + onnx + ", isolation: sandbox}\n";
  for (const std::string escape : {"open", "connect", "exec"}) {
    yaml += "  - name: " + escape + "\n    isolation: sandbox" + kEcho + "      escape: " +
            escape + "\n      escape_on: ESCAPE\n";
  }
  Server server(yaml);
  ASSERT_TRUE(server.process().Start()) << server.process().Log();
  HttpClient client(server.process().port());
  const json texts = {"the quick brown fox", "jumps over"};
  auto embed = [&](const std::string& model) {
    auto r = client.Post("/v1/embeddings", json{{"model", model}, {"input", texts}}.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body, nullptr, false)["data"];
  };
  EXPECT_EQ(embed("emb"), embed("emb-iso")) << "the sandbox changes no answer";
  auto gen = client.Post("/v1/completions",
                         json{{"model", "llm"}, {"prompt", "Once upon"}, {"max_tokens", 8}}.dump());
  EXPECT_EQ(gen.status, 200) << gen.body;
  const json image = {{"inputs", {{{"name", "images"}, {"datatype", "FP32"},
                                   {"shape", {1, 3, 32, 32}},
                                   {"data", std::vector<float>(3 * 32 * 32, 0.5f)}}}}};
  EXPECT_EQ(client.Post("/v2/models/cls/infer", image.dump()).status, 200);
  int sandboxed = 0;
  for (const pid_t worker : Workers(server.process().pid())) {
    std::ifstream in("/proc/" + std::to_string(worker) + "/cmdline");
    const std::string cmdline((std::istreambuf_iterator<char>(in)), {});
    if (cmdline.find(std::string("--sandbox") + '\0') == std::string::npos) continue;
    ++sandboxed;
    EXPECT_EQ(StatusField(worker, "NoNewPrivs"), "1") << worker;
    EXPECT_EQ(StatusField(worker, "Seccomp"), "2") << worker;  // filter mode
    if (::geteuid() == 0) {
      EXPECT_THAT(StatusField(worker, "Uid"), ::testing::StartsWith("65534"));
    }
  }
  EXPECT_EQ(sandboxed, 6) << "emb, llm, cls and the three escapes";
  for (const std::string escape : {"open", "connect", "exec"}) {
    SCOPED_TRACE(escape);
    EXPECT_EQ(client.Post("/v2/models/" + escape + "/infer", TextBody("fine")).status, 200);
    auto r = client.Post("/v2/models/" + escape + "/infer", TextBody("ESCAPE"));
    EXPECT_EQ(r.status, 503) << r.body;
    EXPECT_THAT(r.body, HasSubstr("exited: SIGSYS, a sandbox violation")) << r.body;
    EXPECT_TRUE(UntilServing(client, escape)) << "the worker restarts, sandboxed again";
  }
  EXPECT_EQ(embed("emb").size(), 2u) << "the other models served on";
  EXPECT_EQ(client.Post("/v2/models/cls/infer", image.dump()).status, 200);
  gen = client.Post("/v1/completions",
                    json{{"model", "llm"}, {"prompt", "Once upon"}, {"max_tokens", 8}}.dump());
  EXPECT_EQ(gen.status, 200) << gen.body;
  EXPECT_THAT(server.process().Log(), Not(HasSubstr("'emb' exited")));
}

}  // namespace
}  // namespace mmserve
