#include "runtime/runtime_guard.h"

#include "common/logging.h"

namespace mmserve {

RuntimeLease& RuntimeLease::operator=(RuntimeLease&& other) noexcept {
  if (this != &other) {
    Release();
    guard_ = std::exchange(other.guard_, nullptr);
    runtime_ = std::exchange(other.runtime_, nullptr);
    device_ = std::exchange(other.device_, -1);
  }
  return *this;
}

void RuntimeLease::Release() {
  if (guard_) std::exchange(guard_, nullptr)->Release(runtime_, device_);
}

RuntimeGuard::~RuntimeGuard() {
  std::lock_guard lock(mu_);
  UnwindLocked(/*final=*/true);
  if (!stack_.empty()) {
    spdlog::error("runtime guard destroyed with live leases: {}", stack_.size());
  }
}

RuntimeGuard::Entry* RuntimeGuard::Find(Runtime* runtime, int device) {
  for (auto& e : stack_) {
    if (e.runtime == runtime && e.device == device) return &e;
  }
  return nullptr;
}

Result<RuntimeLease> RuntimeGuard::Acquire(Runtime& runtime, int device) {
  std::lock_guard lock(mu_);
  Entry* process = Find(&runtime, -1);
  if (!process) {
    auto init = runtime.Initialize();
    if (!init.ok()) return init.status().WithContext("initializing runtime " + runtime.name());
    const bool foreign = *init == Runtime::InitResult::kAlreadyInitialized;
    spdlog::info("runtime {}: {}", runtime.name(),
                 foreign ? "already initialized by someone else in this process; "
                           "mmserve will not finalize it"
                         : "initialized");
    stack_.push_back({&runtime, -1, 0, foreign, !runtime.reinitializable()});
    process = &stack_.back();
  }
  ++process->leases;  // held while the device opens, so a failure below can unwind cleanly
  if (Entry* open = Find(&runtime, device)) {
    ++open->leases;
    return RuntimeLease(this, &runtime, device);
  }
  if (Status s = runtime.OpenDevice(device); !s.ok()) {
    --process->leases;
    UnwindLocked();
    return s.WithContext("opening " + runtime.name() + " device " + std::to_string(device));
  }
  stack_.push_back({&runtime, device, 1, false, false});
  return RuntimeLease(this, &runtime, device);
}

void RuntimeGuard::Release(Runtime* runtime, int device) {
  std::lock_guard lock(mu_);
  Entry* open = Find(runtime, device);
  Entry* process = Find(runtime, -1);
  if (!open || !process) {
    spdlog::error("runtime guard: release of unknown lease {}:{}", runtime->name(), device);
    return;
  }
  --open->leases;
  --process->leases;
  UnwindLocked();
}

void RuntimeGuard::UnwindLocked(bool final) {
  while (!stack_.empty() && stack_.back().leases == 0) {
    if (stack_.back().for_life && !final) return;
    const Entry e = stack_.back();
    stack_.pop_back();
    if (e.device >= 0) {
      if (Status s = e.runtime->CloseDevice(e.device); !s.ok()) {
        spdlog::warn("runtime {}: closing device {}: {}", e.runtime->name(), e.device,
                     s.ToString());
      }
      continue;
    }
    if (e.foreign) {
      spdlog::info("runtime {}: released (left initialized for its owner)", e.runtime->name());
      continue;
    }
    if (Status s = e.runtime->Finalize(); !s.ok()) {
      spdlog::warn("runtime {}: finalize: {}", e.runtime->name(), s.ToString());
    } else {
      spdlog::info("runtime {}: finalized", e.runtime->name());
    }
  }
}

std::string RuntimeGuard::Describe() const {
  std::lock_guard lock(mu_);
  std::string out;
  for (const auto& e : stack_) {
    if (!out.empty()) out += ' ';
    out += e.runtime->name();
    if (e.device >= 0) {
      out += ":" + std::to_string(e.device);
    } else {
      out += e.foreign ? "(foreign)" : "(owned)";
    }
  }
  return out;
}

}  // namespace mmserve
