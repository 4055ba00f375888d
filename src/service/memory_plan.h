// The memory plan: what each device's models will take before anything loads, against the
// device's budget. Preflight refuses to start a server whose start-up models do not fit;
// `mmserve validate` prints the same table without loading (and fails the same way).
//
// One rule, the template's:
//   capacity = global.memory_pool (MB) when set, else what the device reports
//   budget   = capacity × preflight.max_fill (0.9)      — also the budget loads are held to
//   required = Σ(estimates of the start-up models on the device) × preflight.factor (1.2)
//   fits     = required ≤ budget, and required ≤ the device's free memory now (when known:
//              another process may hold part of the capacity), and every model, on-demand ones
//              too, fits alone: estimate × factor ≤ budget (else it could never load)
#pragma once

#include <string>
#include <vector>

#include "backend/backend_registry.h"
#include "config/model_config.h"

namespace mmserve {

struct PlanEntry {
  std::string model;
  int64_t version = 0;
  bool startup = true;  // on-demand models are listed, not counted
  int64_t bytes = 0;
  std::string backend;  // for the advice: `mmserve quantize` takes llama's (GGUF) files
  std::string path;     // the model file
  std::string source;   // where the estimate came from, or why there is none
  // The config asks what the model file cannot do (an estimate refused as InvalidArgument, e.g.
  // batch_tiers that are not an OM's gears): serve would fail to load it.
  Status problem;
};

struct DevicePlan {
  std::string domain;          // models on the same memory share a plan ("host", "cuda:0")
  int64_t capacity = 0;        // memory_pool, else the device's total
  int64_t device_total = 0;    // what the device reports (0: unknown)
  int64_t device_free = 0;     // free now, before mmserve loads anything (0: unknown)
  int64_t budget = 0;          // capacity × max_fill
  std::string budget_source;
  double factor = 1.2;
  double max_fill = 0.9;
  std::vector<PlanEntry> entries;
  int64_t startup_bytes = 0;   // Σ estimates of the start-up models
  int64_t required() const { return static_cast<int64_t>(static_cast<double>(startup_bytes) * factor); }
  bool within_budget() const { return required() <= budget; }
  bool within_free() const { return device_free <= 0 || required() <= device_free; }
  // Whether `e` could load with the device to itself.
  bool fits_alone(const PlanEntry& e) const {
    return static_cast<double>(e.bytes) * factor <= static_cast<double>(budget);
  }
  bool each_fits_alone() const {
    for (const auto& e : entries) {
      if (!fits_alone(e)) return false;
    }
    return true;
  }
  bool fits() const { return within_budget() && within_free() && each_fits_alone(); }
};

// The memory `model`'s device draws from (the host's RAM when its backend is not built in).
DeviceMemory MemoryOf(const ModelConfig& model, const BackendRegistry& backends);
// The budget of `memory`: (global.memory_pool when set, else its total) x preflight.max_fill;
// with `source`, says which.
int64_t BudgetFor(const DeviceMemory& memory, const GlobalConfig& global,
                  std::string* source = nullptr);

// One plan per memory domain, in the order the config first uses them. A model whose backend
// is missing or cannot estimate is listed with the reason and 0 bytes.
std::vector<DevicePlan> PlanMemory(const ServerConfig& config, const BackendRegistry& backends);

// Every entry's problem, one per line ("model 'x' v1: ..."); empty when none.
std::string PlanProblems(const std::vector<DevicePlan>& plans);

// The plans as a table per device, with a verdict line each and, for a plan that does not fit,
// what to change, with the numbers.
std::string FormatPlan(const std::vector<DevicePlan>& plans);

}  // namespace mmserve
