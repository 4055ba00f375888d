#include "backend/backend_registry.h"

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

}  // namespace
}  // namespace mmserve
