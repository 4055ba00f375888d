// The seeds' checklist, through the real binary: ten times over, start the demo's models (an
// embedder, a reranker, an LLM, an identity model) → ready → one request to every model →
// SIGTERM. Each run exits 0 with a clean shutdown log (no warning or error line, every model
// unloaded, the runtimes finalized) and leaves no lock file or temp file behind.
#include <signal.h>

#include <filesystem>
#include <regex>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/http_client.h"
#include "testing/models.h"
#include "testing/server_process.h"
#include "testing/test_util.h"

namespace mmserve {
namespace {

using ::testing::HasSubstr;
using testing::HttpClient;
using testing::ServerProcess;

// Every file under `dir`, as paths relative to it.
std::vector<std::string> FilesUnder(const std::filesystem::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir, ec)) {
    if (e.is_regular_file()) out.push_back(std::filesystem::relative(e.path(), dir).string());
  }
  return out;
}

TEST(RestartTest, TenCleanStartsAndStopsLeaveACleanLogAndNothingBehind) {
  testing::TempDir dir;
  const std::string config = dir.Write("models.yaml", "models:\n"
      "  - {name: embedder, path: " + testing::GeneratedModel("bert-tiny.gguf") + ", task: embed}\n"
      "  - {name: reranker, path: " + testing::GeneratedModel("rerank-tiny.gguf") + ", task: rerank}\n"
      "  - name: llm\n    path: " + testing::GeneratedModel("llama-tiny.gguf") + "\n"
      "    task: generate\n    params: {n_ctx: 256, n_parallel: 1}\n"
      "  - name: echo\n    backend: identity\n"
      "    params: {tensors: [{input: X, output: Y, datatype: INT32, shape: [-1]}]}\n").string();
  const auto locks = dir.path() / "locks";
  const auto tmp = dir.path() / "tmp";
  std::filesystem::create_directories(tmp);
  ::setenv("TMPDIR", tmp.c_str(), 1);
  const std::regex warning_or_error(R"(^\S+ [WEC] \[)");
  for (int run = 0; run < 10; ++run) {
    const auto log = dir.path() / ("run" + std::to_string(run) + ".log");
    ServerProcess server({"serve", config, "--port", "0", "--lock-dir", locks.string()}, log);
    ASSERT_TRUE(server.Start()) << server.Log();
    {
      HttpClient client(server.port());
      ASSERT_EQ(client.Get("/v2/health/ready").status, 200) << server.Log();
      EXPECT_EQ(client.Post("/v1/embeddings", R"({"model":"embedder","input":"hello"})").status,
                200);
      EXPECT_EQ(client.Post("/v1/rerank",
                            R"({"model":"reranker","query":"q","documents":["a","b"]})")
                    .status,
                200);
      EXPECT_EQ(client.Post("/v1/chat/completions",
                            R"({"model":"llm","messages":[{"role":"user","content":"Hi"}],)"
                            R"("max_tokens":2})")
                    .status,
                200);
      EXPECT_EQ(client.Post("/v2/models/echo/infer",
                            R"({"inputs":[{"name":"X","datatype":"INT32","shape":[2],"data":[1,2]}]})")
                    .status,
                200);
    }
    ASSERT_EQ(server.Stop(SIGTERM), 0) << server.Log();
    const std::string text = server.Log();
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      EXPECT_FALSE(std::regex_search(line, warning_or_error)) << "run " << run << ": " << line;
    }
    EXPECT_THAT(text, HasSubstr("received SIGTERM: shutting down"));
    for (const char* model : {"embedder", "reranker", "llm", "echo"}) {
      EXPECT_THAT(text, HasSubstr(std::string("model ") + model + ": unloaded version 1"));
    }
    EXPECT_THAT(text, HasSubstr("finalized"));
    EXPECT_THAT(text, HasSubstr("shutdown complete"));
    EXPECT_THAT(FilesUnder(locks), ::testing::IsEmpty()) << "run " << run;
    EXPECT_THAT(FilesUnder(tmp), ::testing::IsEmpty()) << "run " << run;
    if (HasFailure()) break;
  }
  ::unsetenv("TMPDIR");
}

}  // namespace
}  // namespace mmserve
