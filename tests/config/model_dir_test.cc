#include "config/model_dir.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "testing/test_util.h"

namespace mmserve {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

// The (name, path) of each model the generated YAML holds, read back by yaml-cpp.
std::vector<std::pair<std::string, std::string>> Models(const std::string& yaml) {
  std::vector<std::pair<std::string, std::string>> out;
  const YAML::Node root = YAML::Load(yaml);
  EXPECT_EQ(root.size(), 1u) << yaml;  // models: only, every setting left at its default
  for (const auto& m : root["models"]) {
    EXPECT_EQ(m.size(), 2u) << yaml;
    out.emplace_back(m["name"].as<std::string>(), m["path"].as<std::string>());
  }
  return out;
}

class ModelDirTest : public ::testing::Test {
 protected:
  std::string At(const std::string& name) const { return (dir_.path() / name).string(); }
  testing::TempDir dir_;
};

TEST_F(ModelDirTest, FilesFoldersAndVersionFoldersAreModels) {
  dir_.Write("embedder.gguf", "x");
  dir_.Write("detector/model.onnx", "x");    // a folder with one model file
  dir_.Write("detector/config.pbtxt", "x");  // Triton's config beside it: skipped
  dir_.Write("ranker/1/model.gguf", "x");    // Triton's layout: the folder is the model
  dir_.Write("ranker/2/model.gguf", "x");
  dir_.Write("tokenizer/vocab.txt", "x");  // a folder without a model: skipped
  dir_.Write("README.md", "x");            // not a model file: skipped
  dir_.Write("..data/hidden.gguf", "x");   // a ConfigMap's internals: skipped
  dir_.Write(".cache.gguf", "x");
  auto yaml = ModelDirYaml(dir_.path(), "");
  ASSERT_TRUE(yaml.ok()) << yaml.status().ToString();
  EXPECT_THAT(Models(*yaml),
              ElementsAre(Pair("detector", At("detector/model.onnx")),
                          Pair("embedder", At("embedder.gguf")), Pair("ranker", At("ranker"))));
}

TEST_F(ModelDirTest, ModelNameRenamesTheOneModel) {
  dir_.Write("model.om", "x");
  auto yaml = ModelDirYaml(dir_.path(), "resnet");
  ASSERT_TRUE(yaml.ok()) << yaml.status().ToString();
  EXPECT_THAT(Models(*yaml), ElementsAre(Pair("resnet", At("model.om"))));

  dir_.Write("other.gguf", "x");
  auto two = ModelDirYaml(dir_.path(), "resnet");
  ASSERT_FALSE(two.ok());
  EXPECT_THAT(two.status().message(), HasSubstr("holds 2 (model, other)"));
}

// KServe's storage initializer leaves one model's version folders at /mnt/models: the
// directory is that model, its folders its versions.
TEST_F(ModelDirTest, VersionFoldersAtTheTopAreVersionsOfOneModel) {
  dir_.Write("1/model.onnx", "x");
  dir_.Write("2/model.onnx", "x");
  dir_.Write("config.pbtxt", "x");
  const std::string root = fs::absolute(dir_.path()).lexically_normal().string();
  auto named = ModelDirYaml(dir_.path(), "classifier");
  ASSERT_TRUE(named.ok()) << named.status().ToString();
  EXPECT_THAT(Models(*named), ElementsAre(Pair("classifier", root)));
  auto unnamed = ModelDirYaml(dir_.path(), "");
  ASSERT_TRUE(unnamed.ok()) << unnamed.status().ToString();
  EXPECT_THAT(Models(*unnamed), ElementsAre(Pair(dir_.path().filename().string(), root)));

  dir_.Write("other.gguf", "x");  // versions and a model beside them: which is which?
  auto mixed = ModelDirYaml(dir_.path(), "classifier");
  ASSERT_FALSE(mixed.ok());
  EXPECT_THAT(mixed.status().message(), HasSubstr("mixes version folders (1, 2) with models"));
}

// KServe mounts a PVC's sub-path at /mnt/models: that may be the model file itself.
TEST_F(ModelDirTest, OneModelFileIsThatModel) {
  const auto file = dir_.Write("embedder.gguf", "x");
  auto yaml = ModelDirYaml(file, "");
  ASSERT_TRUE(yaml.ok()) << yaml.status().ToString();
  EXPECT_THAT(Models(*yaml), ElementsAre(Pair("embedder", At("embedder.gguf"))));
  auto named = ModelDirYaml(file, "my-embedder");
  ASSERT_TRUE(named.ok()) << named.status().ToString();
  EXPECT_THAT(Models(*named), ElementsAre(Pair("my-embedder", At("embedder.gguf"))));
  EXPECT_FALSE(ModelDirYaml(dir_.Write("notes.txt", "x"), "").ok());
}

TEST_F(ModelDirTest, HostileFileNamesStayStrings) {
  // A name that would be YAML syntax if pasted: it must come back as one plain string.
  const std::string name = "a\", backend: identity, b: \"#x";
  dir_.Write(name + ".gguf", "x");
  auto yaml = ModelDirYaml(dir_.path(), "");
  ASSERT_TRUE(yaml.ok()) << yaml.status().ToString();
  EXPECT_THAT(Models(*yaml), ElementsAre(Pair(name, At(name + ".gguf"))));
}

TEST_F(ModelDirTest, NothingToServeNamesWhatWasThere) {
  dir_.Write("notes.txt", "x");
  dir_.Write("weights/data.bin", "x");
  auto yaml = ModelDirYaml(dir_.path(), "");
  ASSERT_FALSE(yaml.ok());
  EXPECT_THAT(yaml.status().message(),
              HasSubstr("expected a model file (.gguf, .onnx or .om) or a folder holding one, "
                        "found notes.txt, weights/"));
  EXPECT_FALSE(ModelDirYaml(dir_.path() / "absent", "").ok());
}

TEST_F(ModelDirTest, SplitGgufIsRefusedWithTheFix) {
  dir_.Write("llm-00001-of-00002.gguf", "x");
  dir_.Write("llm-00002-of-00002.gguf", "x");
  auto yaml = ModelDirYaml(dir_.path(), "");
  ASSERT_FALSE(yaml.ok());
  EXPECT_THAT(yaml.status().message(), HasSubstr("llama-gguf-split --merge"));
  // Names that merely look alike are models.
  testing::TempDir other;
  other.Write("x-of-00002.gguf", "x");
  other.Write("llm-0001-of-00002.gguf", "x");
  auto ok = ModelDirYaml(other.path(), "");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(Models(*ok).size(), 2u);
}

TEST(ModelArgsTest, NamesPathsAndTasks) {
  auto args = ParseModelArgs({"a/embedder.gguf", "ranker=/m/rerank.gguf", "/x/k=v/llm.gguf"},
                             {"embed", "rerank", "generate"});
  ASSERT_TRUE(args.ok()) << args.status().ToString();
  ASSERT_EQ(args->size(), 3u);
  EXPECT_EQ((*args)[0].name, "embedder");
  EXPECT_EQ((*args)[0].path, fs::current_path() / "a/embedder.gguf");
  EXPECT_EQ((*args)[1].name, "ranker");
  EXPECT_EQ((*args)[1].path, "/m/rerank.gguf");
  EXPECT_EQ((*args)[2].name, "llm");  // the '=' is inside the path
  EXPECT_EQ((*args)[2].path, "/x/k=v/llm.gguf");
  EXPECT_EQ((*args)[2].task, "generate");
  const YAML::Node node = YAML::Load(ModelArgsYaml(*args));
  EXPECT_EQ(node["models"][1]["name"].as<std::string>(), "ranker");
  EXPECT_EQ(node["models"][1]["path"].as<std::string>(), "/m/rerank.gguf");
  EXPECT_EQ(node["models"][1]["task"].as<std::string>(), "rerank");
}

TEST(ModelArgsTest, OneTaskForAllOrOnePerModel) {
  auto all = ParseModelArgs({"a.gguf", "b.gguf"}, {"embed"});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ((*all)[1].task, "embed");
  auto none = ParseModelArgs({"a.gguf"}, {});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ((*none)[0].task, "");  // the file's own
  auto wrong = ParseModelArgs({"a.gguf", "b.gguf", "c.gguf"}, {"embed", "rerank"});
  ASSERT_FALSE(wrong.ok());
  EXPECT_THAT(wrong.status().message(), HasSubstr("found 2 for 3 models"));
  EXPECT_FALSE(ParseModelArgs({"name="}, {}).ok());
}

TEST(IsModelFileTest, ByExtension) {
  EXPECT_TRUE(IsModelFile("a/b.gguf"));
  EXPECT_TRUE(IsModelFile("b.onnx"));
  EXPECT_TRUE(IsModelFile("b.om"));
  EXPECT_FALSE(IsModelFile("b.gguf.part"));
  EXPECT_FALSE(IsModelFile("gguf"));
}

}  // namespace
}  // namespace mmserve
