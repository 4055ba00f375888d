#include "service/memory_plan.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "common/strings.h"

namespace mmserve {

DeviceMemory MemoryOf(const ModelConfig& model, const BackendRegistry& backends) {
  if (auto backend = backends.Find(model.backend); backend.ok()) {
    if (auto device = (*backend)->runtime().Memory(model.device_id); device.ok()) return *device;
  }
  return HostMemory();
}

namespace {

int64_t CapacityOf(const DeviceMemory& memory, const GlobalConfig& global) {
  return global.memory_pool_mb > 0 ? global.memory_pool_mb << 20 : memory.total;
}

}  // namespace

int64_t BudgetFor(const DeviceMemory& memory, const GlobalConfig& global, std::string* source) {
  const int64_t capacity = CapacityOf(memory, global);
  if (source) {
    char text[128];
    std::snprintf(text, sizeof(text), "%s %s x preflight.max_fill %.2f",
                  global.memory_pool_mb > 0 ? "memory_pool" : "capacity",
                  FormatMib(capacity).c_str(), global.preflight.max_fill);
    *source = text;
  }
  return static_cast<int64_t>(static_cast<double>(capacity) * global.preflight.max_fill);
}

std::vector<DevicePlan> PlanMemory(const ServerConfig& config, const BackendRegistry& backends) {
  std::vector<DevicePlan> plans;
  auto plan_for = [&](const DeviceMemory& memory) -> DevicePlan& {
    for (auto& p : plans) {
      if (p.domain == memory.domain) return p;
    }
    DevicePlan p{.domain = memory.domain,
                 .capacity = CapacityOf(memory, config.global),
                 .device_total = memory.total,
                 .device_free = memory.free,
                 .factor = config.global.preflight.factor,
                 .max_fill = config.global.preflight.max_fill};
    p.budget = BudgetFor(memory, config.global, &p.budget_source);
    plans.push_back(std::move(p));
    return plans.back();
  };
  for (const auto& m : config.models) {
    PlanEntry entry{.model = m.name,
                    .version = m.version,
                    .startup = m.load == LoadMode::kStartup,
                    .backend = m.backend,
                    .path = m.path};
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
        if (estimate.status().code() == StatusCode::kInvalidArgument) {
          entry.problem = estimate.status();
        }
      }
    }
    DevicePlan& plan = plan_for(memory);
    if (entry.startup) plan.startup_bytes += entry.bytes;
    plan.entries.push_back(std::move(entry));
  }
  return plans;
}

namespace {

// What shrinks a model's own estimate: the one command that quantizes a GGUF file (beside it,
// "NAME-Q4_K_M.gguf"), and the llama params the KV cache depends on.
void AdviseShrinking(const PlanEntry& e, std::ostream& out) {
  if (e.backend == "llama") {
    const std::filesystem::path in(e.path);
    const auto quantized = in.parent_path() / (in.stem().string() + "-Q4_K_M.gguf");
    out << "    - quantize it (Q4_K_M is about a third of F16) and point its path at the "
           "output:\n        mmserve quantize " << e.path << " " << quantized.string()
        << " Q4_K_M\n"
        << "    - a smaller params.n_ctx or n_parallel (its KV cache is part of the estimate)\n";
  } else {
    out << "    - a smaller or quantized model file, or fewer thread_num instances\n";
  }
}

// For a plan that does not fit: each model that could never load, with what shrinks it; then
// which start-up models to make on_demand (largest first, only those that fit alone) to cover
// the excess, and what else shrinks an estimate.
void AdviseOn(const DevicePlan& p, int64_t limit, std::ostream& out) {
  for (const auto& e : p.entries) {
    if (p.fits_alone(e)) continue;
    const auto need = static_cast<int64_t>(static_cast<double>(e.bytes) * p.factor);
    out << "  model '" << e.model << "' v" << e.version << " alone needs " << FormatMib(e.bytes)
        << " x " << p.factor << " = " << FormatMib(need) << ", more than the whole budget ("
        << FormatMib(p.budget) << "): it could never load, on_demand or not. To fit:\n";
    AdviseShrinking(e, out);
  }
  if (p.within_budget() && p.within_free()) return;
  const int64_t excess = p.required() - limit;
  out << "  to fit, remove " << FormatMib(excess) << " from the start-up total x "
      << p.factor << ", e.g.:\n";
  std::vector<const PlanEntry*> startup;
  for (const auto& e : p.entries) {
    if (e.startup && e.bytes > 0 && p.fits_alone(e)) startup.push_back(&e);
  }
  std::sort(startup.begin(), startup.end(),
            [](const PlanEntry* a, const PlanEntry* b) { return a->bytes > b->bytes; });
  int64_t saved = 0;
  for (const PlanEntry* e : startup) {
    if (saved >= excess) break;
    const auto by = static_cast<int64_t>(static_cast<double>(e->bytes) * p.factor);
    out << "    - load: on_demand for '" << e->model << "' (saves " << FormatMib(by)
        << "; it loads on its first request, evicting idle models)\n";
    saved += by;
  }
  out << "    - a smaller params.n_ctx or n_parallel for llama models (the KV cache is part of "
         "the estimate), fewer thread_num instances, or a quantized file (`mmserve quantize "
         "IN.gguf OUT.gguf Q4_K_M`: about a third of F16)\n"
      << "    - or a larger global.memory_pool / preflight.max_fill, if the device really has "
         "the room\n";
}

}  // namespace

std::string PlanProblems(const std::vector<DevicePlan>& plans) {
  std::string out;
  for (const auto& p : plans) {
    for (const auto& e : p.entries) {
      if (e.problem.ok()) continue;
      out += "model '" + e.model + "' v" + std::to_string(e.version) + ": " +
             std::string(e.problem.message()) + "\n";
    }
  }
  return out;
}

std::string FormatPlan(const std::vector<DevicePlan>& plans) {
  std::ostringstream out;
  for (const auto& p : plans) {
    out << "device " << p.domain << ": budget " << FormatMib(p.budget) << " (" << p.budget_source
        << ")";
    if (p.device_total > 0) {
      out << "; the device has " << FormatMib(p.device_total) << ", " << FormatMib(p.device_free)
          << " free now";
      if (p.device_free > 0 && p.device_free < p.device_total) {
        out << " (" << FormatMib(p.device_total - p.device_free) << " held by others)";
      }
    }
    out << "\n";
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
                  "  start-up total %s x %.2f = %s %s the budget (%s, %.0f%% of %s)",
                  FormatMib(p.startup_bytes).c_str(), p.factor, FormatMib(p.required()).c_str(),
                  p.within_budget() ? "within" : "exceeds", FormatMib(p.budget).c_str(),
                  p.max_fill * 100, FormatMib(p.capacity).c_str());
    out << verdict;
    if (!p.within_free()) out << " and exceeds the " << FormatMib(p.device_free) << " free now";
    if (!p.each_fits_alone()) out << ", but a model alone exceeds the budget";
    out << ": " << (p.fits() ? "fits" : "DOES NOT FIT") << "\n";
    if (!p.fits()) {
      AdviseOn(p, p.within_budget() ? p.device_free : p.budget, out);
    }
  }
  return out.str();
}

}  // namespace mmserve
