#include "testing/model_config_util.h"

#include <gtest/gtest.h>

#include "backend/backend_registry.h"
#include "backend/identity/identity_backend.h"
#include "config/config_parser.h"
#include "runtime/host_runtime.h"

namespace mmserve::testing {

ModelConfig IdentityModel(const std::string& name, const std::string& params_yaml) {
  HostRuntime host;
  BackendRegistry backends;
  backends.Register(std::make_unique<IdentityBackend>(host));
  auto config = ParseConfig("models:\n  - name: " + name +
                                "\n    backend: identity\n    params: " + params_yaml + "\n",
                            "test.yaml", backends);
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  return config.ok() ? config->models[0] : ModelConfig{};
}

}  // namespace mmserve::testing
