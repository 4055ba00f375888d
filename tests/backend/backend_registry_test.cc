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
              ::testing::HasSubstr("models[0].backend: expected a backend built into this mmserve (identity), found "
            "\"opencv\", which this build does not have"));
}

}  // namespace
}  // namespace mmserve
