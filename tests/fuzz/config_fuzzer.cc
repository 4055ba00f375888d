// Fuzzes the YAML configuration parser as validate, start and reload run it, then reload's view
// of the result: each model's fingerprint and its entry parsed again as the repository API does.
#include <cstddef>
#include <cstdint>
#include <string>

#include "backend/backend_registry.h"
#include "common/json.h"
#include "config/config_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static mmserve::BackendRegistry* catalog = new mmserve::BackendRegistry();
  const std::string yaml(reinterpret_cast<const char*>(data), size);
  auto config = mmserve::ParseConfig(yaml, "/tmp/fuzz/models.yaml", *catalog);
  if (!config.ok()) return 0;
  for (const auto& m : config->models) {
    nlohmann::json entry = {{"name", m.name}, {"backend", m.backend},
                            {"params", m.params.value()}};
    (void)mmserve::ParseModelEntry(entry, *config, *catalog);
    (void)mmserve::DumpJson(entry);
  }
  return 0;
}
