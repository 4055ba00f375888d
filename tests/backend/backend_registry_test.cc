#include "backend/backend_registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "backend/identity/identity_backend.h"
#include "runtime/host_runtime.h"

namespace mmserve {
namespace {

TEST(BackendRegistryTest, KnowsBuiltInAndSchemaOnlyBackends) {
  HostRuntime host;
  BackendRegistry registry;
  registry.Register(std::make_unique<IdentityBackend>(host));
  EXPECT_TRUE(registry.Find("identity").ok());
  EXPECT_EQ(registry.Find("acl").status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(registry.Find("tensorrt").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(registry.DeviceCount("identity"), 1);
  EXPECT_EQ(registry.DeviceCount("acl"), std::nullopt);
  EXPECT_FALSE(registry.NeedsPath("identity"));
  EXPECT_TRUE(registry.NeedsPath("llama"));
  EXPECT_EQ(registry.Tasks("llama").front(), "generate");
}

TEST(BackendRegistryTest, ACompleteRegistryMakesABackendItLacksAValidationError) {
  HostRuntime host;
  BackendRegistry registry;
  registry.Register(std::make_unique<IdentityBackend>(host));
  ModelConfig model;
  model.backend = "opencv";
  model.entry = "models[0]";
  ConfigErrors partial;
  registry.ValidateModel(model, partial);
  EXPECT_TRUE(partial.empty());  // a test's registry: loading reports what is missing
  registry.set_complete(true);
  ConfigErrors complete;
  registry.ValidateModel(model, complete);
  ASSERT_EQ(complete.size(), 1u);
  EXPECT_THAT(std::string(complete.ToStatus().message()),
              ::testing::HasSubstr("models[0].backend: expected a backend built into this mmserve "
                                   "(identity), found \"opencv\", which this build does "
                                   "not have"));
}

// A backend of text, as llama is to the registry.
class TextBackend final : public Backend {
 public:
  explicit TextBackend(Runtime& runtime) : runtime_(runtime) {}
  std::string name() const override { return "text"; }
  std::vector<std::string> tasks() const override { return {"embed"}; }
  bool takes_tensors() const override { return false; }
  Runtime& runtime() override { return runtime_; }
  void Validate(ModelConfig&, ConfigErrors&) const override {}
  Result<MemoryEstimate> Estimate(const ModelConfig&) const override { return MemoryEstimate{}; }
  Result<std::unique_ptr<Session>> LoadSession(const ModelConfig&, LoadProgress&) override {
    return Unimplemented("a test backend");
  }

 private:
  Runtime& runtime_;
};

TEST(BackendRegistryTest, ImageStagesAreRefusedOnTextModels) {
  HostRuntime host;
  BackendRegistry registry;
  registry.Register(std::make_unique<TextBackend>(host));
  registry.Register(std::make_unique<IdentityBackend>(host));
  ModelConfig model;
  model.backend = "text";
  model.entry = "models[0]";
  model.preprocess = PreprocessConfig{};
  ConfigErrors errors;
  registry.ValidateModel(model, errors);
  EXPECT_THAT(std::string(errors.ToStatus().message()),
              ::testing::HasSubstr("models[0].preprocess: expected none for backend text: image "
                                   "stages wrap tensor models"));
  model.backend = "identity";
  ConfigErrors none;
  registry.ValidateModel(model, none);
  EXPECT_TRUE(none.empty());
}

}  // namespace
}  // namespace mmserve
