// KServe's hand-over, through the real binary: the storage initializer leaves the model in a
// directory (/mnt/models) and the ServingRuntime's arguments name it and the model; mmserve
// serves what it finds there with no YAML file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "testing/http_client.h"
#include "testing/models.h"
#include "testing/paths.h"
#include "testing/server_process.h"
#include "testing/test_util.h"

namespace mmserve {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ::testing::HasSubstr;

class ModelDirServeTest : public ::testing::Test {
 protected:
  // `name` in the model directory, a copy of the generated model `model`.
  void Put(const std::string& name, const std::string& model) {
    fs::create_directories((models_ / name).parent_path());
    fs::copy_file(testing::GeneratedModel(model), models_ / name);
  }
  std::vector<std::string> Serve(std::vector<std::string> args) const {
    std::vector<std::string> all = {"serve", "--port", "0", "--lock-dir",
                                    (dir_.path() / "locks").string()};
    all.insert(all.end(), args.begin(), args.end());
    return all;
  }

  testing::TempDir dir_;
  fs::path models_ = dir_.path() / "mnt-models";
};

// What the ServingRuntime in deploy/kserve passes for one InferenceService.
TEST_F(ModelDirServeTest, ServesTheOneModelUnderTheInferenceServiceName) {
  Put("model.gguf", "bert-tiny.gguf");
  testing::ServerProcess server(
      Serve({"--model-dir", models_.string(), "--model-name", "my-embedder"}),
      dir_.path() / "server.log");
  ASSERT_TRUE(server.Start()) << server.Log();
  testing::HttpClient http(server.port());
  EXPECT_EQ(http.Get("/v2/health/ready").status, 200);
  EXPECT_EQ(http.Get("/v2/models/my-embedder/ready").status, 200);
  auto infer = http.Post("/v2/models/my-embedder/infer",
                         R"({"inputs":[{"name":"TEXT","datatype":"BYTES","shape":[2],)"
                         R"("data":["hello","world"]}]})");
  ASSERT_EQ(infer.status, 200) << infer.body;
  EXPECT_EQ(json::parse(infer.body)["outputs"][0]["shape"], json::array({2, 64}));
  // The task came from the GGUF header: an encoder without a classification head embeds.
  auto openai = http.Post("/v1/embeddings", R"({"model":"my-embedder","input":"hi"})");
  EXPECT_EQ(openai.status, 200) << openai.body;
  EXPECT_EQ(http.Get("/v2/models/model/ready").status, 404);
  EXPECT_EQ(server.Stop(SIGTERM), 0) << server.Log();
}

// KServe mounts a PVC's sub-path: /mnt/models may be the model file itself.
TEST_F(ModelDirServeTest, ServesAModelFileMountedAsTheDirectory) {
  Put("model.gguf", "rerank-tiny.gguf");
  testing::ServerProcess server(
      Serve({"--model-dir", (models_ / "model.gguf").string(), "--model-name", "ranker"}),
      dir_.path() / "server.log");
  ASSERT_TRUE(server.Start()) << server.Log();
  testing::HttpClient http(server.port());
  auto rerank = http.Post("/v1/rerank", R"({"model":"ranker","query":"q","documents":["a"]})");
  EXPECT_EQ(rerank.status, 200) << rerank.body;
  EXPECT_EQ(server.Stop(SIGTERM), 0) << server.Log();
}

// A Triton-style repository: files and folders become models, version folders versions, and a
// reload sees a version added since.
TEST_F(ModelDirServeTest, ServesARepositoryAndReloadsIt) {
  Put("embedder.gguf", "bert-tiny.gguf");
  Put("ranker/1/model.gguf", "rerank-tiny.gguf");
  Put("classifier/model.onnx", "classifier-tiny.onnx");
  testing::ServerProcess server(Serve({models_.string()}), dir_.path() / "server.log");
  ASSERT_TRUE(server.Start()) << server.Log();
  testing::HttpClient http(server.port());
  auto index = json::parse(http.Post("/v2/repository/index", "{}").body);
  ASSERT_EQ(index.size(), 3u) << index;
  for (const auto& m : index) EXPECT_EQ(m["state"], "READY") << m;
  auto rerank = http.Post("/v1/rerank",
                          R"({"model":"ranker","query":"q","documents":["a","b"]})");
  EXPECT_EQ(rerank.status, 200) << rerank.body;

  Put("ranker/2/model.gguf", "rerank-tiny.gguf");
  auto reload = http.Post("/v2/repository/reload", "{}");
  ASSERT_EQ(reload.status, 200) << reload.body;
  auto ranker = json::parse(http.Get("/v2/models/ranker").body);
  EXPECT_EQ(ranker["versions"], json::array({"2"})) << ranker;  // the latest, as in a YAML
  EXPECT_EQ(server.Stop(SIGTERM), 0) << server.Log();
}

// The one-line start: model files on the command line, no YAML; tasks from the GGUF headers
// unless given.
TEST_F(ModelDirServeTest, ServesModelsNamedOnTheCommandLine) {
  testing::ServerProcess server(
      Serve({"--model", testing::GeneratedModel("bert-tiny.gguf"), "--model",
             "ranker=" + testing::GeneratedModel("rerank-tiny.gguf"), "--model",
             "llm=" + testing::GeneratedModel("llama-tiny.gguf")}),
      dir_.path() / "server.log");
  ASSERT_TRUE(server.Start()) << server.Log();
  testing::HttpClient http(server.port());
  EXPECT_EQ(http.Post("/v1/embeddings", R"({"model":"bert-tiny","input":"hi"})").status, 200);
  EXPECT_EQ(http.Post("/v1/rerank", R"({"model":"ranker","query":"q","documents":["a"]})").status,
            200);
  auto chat = http.Post("/v1/chat/completions",
                        R"({"model":"llm","messages":[{"role":"user","content":"Hi"}],)"
                        R"("max_tokens":4})");
  EXPECT_EQ(chat.status, 200) << chat.body;
  // Nothing to reload: the answer says why.
  auto reload = http.Post("/v2/repository/reload", "{}");
  EXPECT_NE(reload.status, 200);
  EXPECT_THAT(reload.body, HasSubstr("named on the command line"));
  EXPECT_EQ(server.Stop(SIGTERM), 0) << server.Log();
}

TEST_F(ModelDirServeTest, RefusesModelsItCannotServe) {
  // A task the file cannot do: the error names it and says which task fits.
  auto [code, out] = testing::ServerProcess::Run(
      Serve({"--model", testing::GeneratedModel("bert-tiny.gguf"), "--task", "generate"}));
  EXPECT_EQ(code, 2) << out;
  EXPECT_THAT(out, HasSubstr("use task: embed"));
  // A YAML after --model is not taken for a second model.
  std::tie(code, out) = testing::ServerProcess::Run(
      Serve({"--model", testing::GeneratedModel("bert-tiny.gguf"),
             testing::SourceDir() + "/examples/demo.yaml"}));
  EXPECT_NE(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("excludes"));
  std::tie(code, out) = testing::ServerProcess::Run(Serve({"--task", "embed"}));
  EXPECT_NE(code, 0) << out;
}

TEST_F(ModelDirServeTest, RefusesWhatItCannotServe) {
  Put("a.gguf", "bert-tiny.gguf");
  Put("b.gguf", "bert-tiny.gguf");
  auto [code, out] = testing::ServerProcess::Run(
      Serve({"--model-dir", models_.string(), "--model-name", "x"}));
  EXPECT_EQ(code, 2) << out;
  EXPECT_THAT(out, HasSubstr("holds 2 (a, b)"));

  std::tie(code, out) =
      testing::ServerProcess::Run(Serve({models_.string(), "--model-dir", models_.string()}));
  EXPECT_NE(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("excludes"));

  testing::TempDir empty;
  empty.Write("README.md", "x");
  std::tie(code, out) = testing::ServerProcess::Run(Serve({"--model-dir", empty.path().string()}));
  EXPECT_EQ(code, 2) << out;
  EXPECT_THAT(out, HasSubstr("found README.md"));
}

}  // namespace
}  // namespace mmserve
