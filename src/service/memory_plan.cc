#include "service/memory_plan.h"

#include <cstdio>
#include <sstream>

#include "common/strings.h"

namespace mmserve {

DeviceMemory MemoryOf(const ModelConfig& model, const BackendRegistry& backends) {
  if (auto backend = backends.Find(model.backend); backend.ok()) {
    if (auto device = (*backend)->runtime().Memory(model.device_id); device.ok()) return *device;
  }
  return HostMemory();
}

int64_t BudgetFor(const DeviceMemory& memory, const GlobalConfig& global, std::string* source) {
  if (global.memory_pool_mb > 0) {
    if (source) *source = "global.memory_pool";
    return global.memory_pool_mb << 20;
  }
  if (source) {
    char text[96];
    std::snprintf(text, sizeof(text), "capacity %s x memory_headroom %.2f",
                  FormatMib(memory.total).c_str(), global.memory_headroom);
    *source = text;
  }
  return static_cast<int64_t>(static_cast<double>(memory.total) * global.memory_headroom);
}

std::vector<DevicePlan> PlanMemory(const ServerConfig& config, const BackendRegistry& backends) {
  std::vector<DevicePlan> plans;
  auto plan_for = [&](const DeviceMemory& memory) -> DevicePlan& {
    for (auto& p : plans) {
      if (p.domain == memory.domain) return p;
    }
    DevicePlan p{.domain = memory.domain,
                 .factor = config.global.preflight.factor,
                 .max_fill = config.global.preflight.max_fill};
    p.budget = BudgetFor(memory, config.global, &p.budget_source);
    plans.push_back(std::move(p));
    return plans.back();
  };
  for (const auto& m : config.models) {
    PlanEntry entry{.model = m.name, .version = m.version, .startup = m.load == LoadMode::kStartup};
    const DeviceMemory memory = MemoryOf(m, backends);
    auto backend = backends.Find(m.backend);
    if (!backend.ok()) {
      entry.source = std::string(backend.status().message());
    } else {
      if (auto estimate = (*backend)->Estimate(m); estimate.ok()) {
        entry.bytes = estimate->bytes;
        entry.source = estimate->source;
      } else {
        entry.source = "no estimate: " + std::string(estimate.status().message());
      }
    }
    DevicePlan& plan = plan_for(memory);
    if (entry.startup) plan.startup_bytes += entry.bytes;
    plan.entries.push_back(std::move(entry));
  }
  return plans;
}

std::string FormatPlan(const std::vector<DevicePlan>& plans) {
  std::ostringstream out;
  for (const auto& p : plans) {
    out << "device " << p.domain << ": budget " << FormatMib(p.budget) << " (" << p.budget_source
        << ")\n";
    char row[512];
    std::snprintf(row, sizeof(row), "  %-24s %-10s %12s  %s\n", "model", "load", "estimate",
                  "source");
    out << row;
    for (const auto& e : p.entries) {
      const std::string name = e.model + " v" + std::to_string(e.version);
      std::snprintf(row, sizeof(row), "  %-24s %-10s %12s  %s\n", name.c_str(),
                    e.startup ? "startup" : "on_demand", FormatMib(e.bytes).c_str(), e.source.c_str());
      out << row;
    }
    char verdict[256];
    std::snprintf(verdict, sizeof(verdict),
                  "  start-up total %s x %.2f = %s %s %.0f%% of the budget (%s): %s\n",
                  FormatMib(p.startup_bytes).c_str(), p.factor, FormatMib(p.required()).c_str(),
                  p.fits() ? "within" : "exceeds", p.max_fill * 100, FormatMib(p.limit()).c_str(),
                  p.fits() ? "fits" : "DOES NOT FIT");
    out << verdict;
  }
  return out.str();
}

}  // namespace mmserve
