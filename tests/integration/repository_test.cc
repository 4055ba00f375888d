// Versions and changes of the served set through the real binary on 127.0.0.1: labels and
// version URLs, a version folder that gains a version while the file watch is on, a broken
// YAML rejected by POST /v2/repository/reload with every error, SIGHUP, and the repository
// extension's index, load and unload.
#include <signal.h>

#include <filesystem>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "testing/http_client.h"
#include "testing/models.h"
#include "testing/server_process.h"
#include "testing/test_util.h"

namespace mmserve {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;
using ::testing::HasSubstr;
using testing::HttpClient;
using testing::ServerProcess;

std::string Config(const std::string& extra = "") {
  return R"(global: {watch: 200ms}
models:
  - name: echo
    backend: identity
    params: {tensors: [{input: X, output: Y, datatype: INT32}]}
    versions: [1, 2]
    labels: {stable: 1}
  - name: embedder
    path: embedder
    task: embed
)" + extra;
}

const std::string kEmbed =
    R"({"inputs":[{"name":"TEXT","datatype":"BYTES","shape":[1],"data":["hello"]}]})";
const std::string kEcho = R"({"inputs":[{"name":"X","datatype":"INT32","shape":[1],"data":[7]}]})";

// The index as {"name vN": state}.
std::map<std::string, std::string> Index(HttpClient& client) {
  std::map<std::string, std::string> out;
  auto res = client.Post("/v2/repository/index", "{}");
  EXPECT_EQ(res.status, 200) << res.body;
  for (const auto& item : json::parse(res.body)) {
    out[item["name"].get<std::string>() + " v" + item["version"].get<std::string>()] =
        item["state"];
  }
  return out;
}

template <typename F>
bool Eventually(F condition, std::chrono::milliseconds limit = 15s) {
  for (auto end = std::chrono::steady_clock::now() + limit;
       std::chrono::steady_clock::now() < end; std::this_thread::sleep_for(50ms)) {
    if (condition()) return true;
  }
  return condition();
}

TEST(RepositoryTest, VersionsLabelsWatchReloadAndTheRepositoryApi) {
  testing::TempDir dir;
  fs::create_directories(dir.path() / "embedder" / "1");
  fs::create_symlink(testing::GeneratedModel("bert-tiny.gguf"),
                     dir.path() / "embedder" / "1" / "model.gguf");
  const auto yaml = dir.Write("m.yaml", Config());
  ServerProcess server({"serve", yaml.string(), "--port", "0", "--lock-dir",
                        (dir.path() / "locks").string()},
                       dir.path() / "server.log");
  ASSERT_TRUE(server.Start()) << server.Log();
  HttpClient client(server.port());

  // Versions and labels.
  json meta = json::parse(client.Get("/v2/models/echo").body);
  EXPECT_EQ(meta["versions"], json({"1", "2"}));
  EXPECT_EQ(meta["labels"]["stable"], 1);
  auto res = client.Post("/v2/models/echo/labels/stable/infer", kEcho);
  ASSERT_EQ(res.status, 200) << res.body;
  EXPECT_EQ(json::parse(res.body)["model_version"], "1");
  res = client.Post("/v2/models/echo/versions/2/infer", kEcho);
  EXPECT_EQ(json::parse(res.body)["model_version"], "2");
  res = client.Post("/v2/models/echo/infer", kEcho);
  EXPECT_EQ(json::parse(res.body)["model_version"], "1");  // stable
  res = client.Post("/v2/models/echo/labels/beta/infer", kEcho);
  EXPECT_EQ(res.status, 404);
  EXPECT_THAT(res.body, HasSubstr("has no label 'beta'"));
  EXPECT_EQ((Index(client)), (std::map<std::string, std::string>{
                                 {"echo v1", "READY"}, {"echo v2", "READY"},
                                 {"embedder v1", "READY"}}));

  // A new version folder: the watch loads version 2, switches to it, and retires version 1.
  fs::create_directories(dir.path() / "embedder" / "2");
  fs::create_symlink(testing::GeneratedModel("bert-tiny.gguf"),
                     dir.path() / "embedder" / "2" / "model.gguf");
  ASSERT_TRUE(Eventually([&] {
    auto index = Index(client);
    return index.count("embedder v2") && index["embedder v2"] == "READY" &&
           !index.count("embedder v1");
  })) << server.Log();
  res = client.Post("/v2/models/embedder/infer", kEmbed);
  ASSERT_EQ(res.status, 200) << res.body;
  EXPECT_EQ(json::parse(res.body)["model_version"], "2");

  // A broken file: rejected with every error; the old set keeps serving.
  dir.Write("m.yaml", "global: {watch: 200ms}\nmodels:\n  - name: echo\n    backend: identity\n"
                      "    thread_num: zero\n    labels: {stable: 5}\n");
  res = client.Post("/v2/repository/reload", "");
  EXPECT_EQ(res.status, 400) << res.body;
  EXPECT_THAT(res.body, HasSubstr("2 configuration errors"));
  EXPECT_THAT(res.body, HasSubstr("m.yaml:5:17: models[0].thread_num"));
  EXPECT_THAT(res.body, HasSubstr("m.yaml:6:22: models[0].labels.stable"));
  EXPECT_EQ(client.Post("/v2/models/echo/infer", kEcho).status, 200);
  EXPECT_EQ(client.Post("/v2/models/embedder/infer", kEmbed).status, 200);

  // SIGHUP: the file, fixed and with one model more, is applied.
  dir.Write("m.yaml", Config("  - name: extra\n    backend: identity\n"
                             "    params: {tensors: [{input: X, output: Y, datatype: INT32}]}\n"));
  ASSERT_EQ(::kill(server.pid(), SIGHUP), 0);
  ASSERT_TRUE(Eventually([&] { return client.Get("/v2/models/extra/ready").status == 200; }))
      << server.Log();
  EXPECT_THAT(server.Log(), HasSubstr("received SIGHUP: reloading"));
  EXPECT_EQ(client.Get("/v2/health/ready").status, 200);

  // The repository extension: unload keeps a model down until it is loaded again.
  res = client.Post("/v2/repository/models/echo/unload", "");
  ASSERT_EQ(res.status, 200) << res.body;
  res = client.Post("/v2/models/echo/infer", kEcho);
  EXPECT_EQ(res.status, 503);
  EXPECT_THAT(res.body, HasSubstr("unloaded through the repository API"));
  EXPECT_THAT(res.body, HasSubstr("load it with `mmserve load echo`"));  // what a user types
  EXPECT_EQ(Index(client)["echo v1"], "UNAVAILABLE");
  res = client.Post("/v2/repository/models/echo/load", "");
  ASSERT_EQ(res.status, 200) << res.body;
  EXPECT_EQ(client.Post("/v2/models/echo/infer", kEcho).status, 200);
  // A load with a config naming a file outside the model roots is refused.
  res = client.Post("/v2/repository/models/stolen/load",
                    json{{"parameters", {{"config", json{{"path", "/etc/hostname"},
                                                         {"backend", "llama"}}.dump()}}}}
                        .dump());
  EXPECT_EQ(res.status, 400) << res.body;
  EXPECT_THAT(res.body, HasSubstr("parameters.config.path: expected a file inside the model roots"));
  EXPECT_EQ(client.Post("/v2/repository/models/nope/unload", "").status, 404);
  EXPECT_EQ(client.Get("/v2/repository/index").status, 405);
  EXPECT_EQ(server.Stop(SIGTERM), 0) << server.Log();
}

}  // namespace
}  // namespace mmserve
