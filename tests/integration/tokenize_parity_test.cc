// /tokenize and /detokenize answer what llama-server answers on the same GGUF files, through
// both real binaries on 127.0.0.1: ids, pieces (byte pieces as byte arrays, so that pieces join
// into the text) and detokenized text, for the SentencePiece, WordPiece and byte-level BPE
// tokenizers of the generated models, in-process and isolated.
#include <filesystem>
#include <memory>
#include <thread>
#include <utility>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "testing/http_client.h"
#include "testing/models.h"
#include "testing/server_process.h"
#include "testing/test_util.h"

namespace mmserve {
namespace {

using json = nlohmann::json;
using testing::GeneratedModel;
using testing::HttpClient;
using testing::LlamaTool;
using testing::ServerProcess;

// Twelve texts: spaces where SentencePiece and BERT differ, punctuation, accents, CJK, emoji
// spelt with byte tokens, control characters and special-token text.
const std::vector<std::string> kTexts = {
    "Hello world",      " Hello world",         "Hello, world! How are you?",
    "  two  spaces  ",  "line\nbreak\ttab",     "\xc3\x80\xc3\x89\xc3\x8e\xc3\xb5\xc3\xbc accents",
    "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae\xe3\x83\x86\xe3\x82\xad\xe3\x82\xb9\xe3\x83\x88",
    "party \xf0\x9f\x8e\x89 time", "\xf0\x9f\x8e\x89", "emoji\xf0\x9f\xa4\x96robots",
    "<s> special </s> [CLS]", "12345 + 67.89 = ?"};

// The generated models by tokenizer.
const std::vector<std::pair<std::string, std::string>> kModels = {
    {"spm", "llama-tiny.gguf"}, {"wpm", "bert-tiny.gguf"}, {"bpe", "chat-qwen2.gguf"}};

class TokenizeParityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(LlamaTool("llama-server")))
        << "scripts/setup.sh --with-reference-tools builds llama-server";
    std::string yaml = "models:\n";
    for (const auto& [name, file] : kModels) {
      const std::string task = name == "wpm" ? "embed" : "generate";
      for (const std::string& isolation : {std::string("none"), std::string("process")}) {
        yaml += "  - {name: " + name + (isolation == "none" ? "" : "-isolated") + ", path: " +
                GeneratedModel(file) + ", task: " + task + ", isolation: " + isolation +
                (task == "generate" ? ", params: {n_ctx: 256, n_parallel: 1}" : "") + "}\n";
      }
    }
    server_ = std::make_unique<ServerProcess>(
        std::vector<std::string>{"serve", dir_.Write("m.yaml", yaml).string(), "--port", "0",
                                 "--grpc-port", "-1", "--lock-dir", dir_.path().string()},
        dir_.path() / "mmserve.log");
    ASSERT_TRUE(server_->Start()) << server_->Log();
  }

  // llama-server on `file`, started and healthy.
  std::unique_ptr<ServerProcess> StartPeer(const std::string& file, int& port) {
    port = testing::FreePort();
    std::vector<std::string> args = {"-m", GeneratedModel(file), "--host", "127.0.0.1",
                                     "--port", std::to_string(port), "-c", "256", "-np", "1"};
    if (file.starts_with("bert")) args.push_back("--embedding");
    auto peer = std::make_unique<ServerProcess>(args, dir_.path() / (file + ".log"),
                                                LlamaTool("llama-server"));
    EXPECT_TRUE(peer->Start(std::chrono::seconds(60))) << peer->Log();
    HttpClient client(port);
    for (int i = 0; i < 400 && client.Get("/health").status != 200; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return peer;
  }

  static json Post(HttpClient& client, const std::string& target, const json& body) {
    auto res = client.Post(target, body.dump());
    EXPECT_EQ(res.status, 200) << target << " " << body.dump() << ": " << res.body;
    return json::parse(res.body, nullptr, false);
  }

  testing::TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(TokenizeParityTest, IdsPiecesAndTextEqualLlamaServers) {
  HttpClient ours(server_->port());
  int cases = 0, byte_pieces = 0;
  for (const auto& [name, file] : kModels) {
    int port = 0;
    auto peer = StartPeer(file, port);
    HttpClient theirs(port);
    std::vector<json> bodies;
    for (const auto& text : kTexts) {
      bodies.push_back({{"content", text}});
      bodies.push_back({{"content", text}, {"with_pieces", true}});
    }
    bodies.push_back({{"content", "Hello world"}, {"add_special", true}, {"with_pieces", true}});
    bodies.push_back({{"content", {"Hello", 42, " world", 7}}, {"with_pieces", true}});
    for (const json& body : bodies) {
      const json expected = Post(theirs, "/tokenize", body);
      for (const std::string& model : {name, name + "-isolated"}) {
        json asked = body;
        asked["model"] = model;
        const json got = Post(ours, "/tokenize", asked);
        EXPECT_EQ(got, expected) << model << " " << body.dump();
        for (const auto& t : got["tokens"]) {
          if (t.is_object() && t["piece"].is_array()) ++byte_pieces;
        }
      }
      if (body.contains("with_pieces")) continue;
      // The ids back into text: llama-server joins the pieces as they are.
      const json ids = {{"tokens", expected["tokens"]}};
      const json text = Post(theirs, "/detokenize", ids);
      for (const std::string& model : {name, name + "-isolated"}) {
        json asked = ids;
        asked["model"] = model;
        EXPECT_EQ(Post(ours, "/detokenize", asked), text) << model << " " << body.dump();
      }
      ++cases;
    }
  }
  EXPECT_EQ(cases, 36) << "12 texts x 3 tokenizers";
  // The emoji are byte tokens in SentencePiece's vocabulary: their pieces are byte arrays.
  EXPECT_GT(byte_pieces, 0);
}

TEST_F(TokenizeParityTest, MixedContentIdsAreCheckedAndNamed) {
  HttpClient ours(server_->port());
  for (const std::string& model : {std::string("spm"), std::string("spm-isolated")}) {
    auto res = ours.Post("/tokenize", json{{"model", model},
                                           {"content", {"a", 99999999}}}.dump());
    EXPECT_EQ(res.status, 400) << res.body;
    const json e = json::parse(res.body, nullptr, false);
    EXPECT_EQ(e["error"]["param"], "content[1]") << res.body;
    EXPECT_THAT(e["error"]["message"].get<std::string>(), ::testing::HasSubstr("0..31999"));
    res = ours.Post("/tokenize", json{{"model", model}, {"content", {"a", true}}}.dump());
    EXPECT_EQ(res.status, 400) << res.body;
  }
}

}  // namespace
}  // namespace mmserve
