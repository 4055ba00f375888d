// RuntimeGuard: the single owner of every device runtime in the process.
//
// Acquire(runtime, device) returns an RAII RuntimeLease. The first lease of a runtime
// initializes it, the first lease of a device opens it; when the last lease of each is gone they
// are closed and finalized — always in reverse order of initialization (LIFO): an entry whose
// last lease is released while something initialized after it is still held is torn down only
// once everything above it is. A runtime that answers "already initialized" (AscendCL 100002)
// belongs to someone else in the process and is never finalized by mmserve. A runtime that
// cannot be initialized twice in a process (Runtime::reinitializable() false: AscendCL) stays
// initialized when its last lease goes — its devices still close — and is finalized by the
// guard's destructor, after everything initialized later.
//
//   acquire A:0, B:0      stack: [A] [A:0] [B] [B:0]
//   release A:0 lease     A and A:0 idle, but B is above them: nothing is torn down yet
//   release B:0 lease     close B:0, finalize B, close A:0, finalize A
//
// Thread-safe: Acquire and lease release may run on any thread; init and finalize calls are
// serialized under the guard's lock. The guard must outlive every lease it hands out.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/result.h"
#include "runtime/runtime.h"

namespace mmserve {

class RuntimeGuard;

// Keeps one (runtime, device) open while it lives. Move-only.
class RuntimeLease {
 public:
  RuntimeLease() = default;
  RuntimeLease(RuntimeLease&& other) noexcept { *this = std::move(other); }
  RuntimeLease& operator=(RuntimeLease&& other) noexcept;
  RuntimeLease(const RuntimeLease&) = delete;
  RuntimeLease& operator=(const RuntimeLease&) = delete;
  ~RuntimeLease() { Release(); }

  Runtime* runtime() const { return runtime_; }
  int device() const { return device_; }
  bool held() const { return guard_ != nullptr; }
  void Release();

 private:
  friend class RuntimeGuard;
  RuntimeLease(RuntimeGuard* guard, Runtime* runtime, int device)
      : guard_(guard), runtime_(runtime), device_(device) {}

  RuntimeGuard* guard_ = nullptr;  // not owned; outlives the lease
  Runtime* runtime_ = nullptr;     // not owned
  int device_ = -1;
};

class RuntimeGuard {
 public:
  RuntimeGuard() = default;
  RuntimeGuard(const RuntimeGuard&) = delete;
  RuntimeGuard& operator=(const RuntimeGuard&) = delete;
  ~RuntimeGuard();  // REQUIRES: no lease outstanding. Finalizes what is kept for life.

  // `runtime` is not owned and must outlive the guard's use of it (until its last lease ends).
  Result<RuntimeLease> Acquire(Runtime& runtime, int device);

  // A snapshot for `doctor`, stats and tests: "acl(owned) acl:0 host(foreign)".
  std::string Describe() const;

 private:
  friend class RuntimeLease;

  struct Entry {
    Runtime* runtime;
    int device;     // -1: the process-wide runtime itself
    int leases;     // live leases on this entry
    bool foreign;   // initialized by someone else: never finalized
    bool for_life;  // not reinitializable: finalized only by the guard's destructor
  };

  void Release(Runtime* runtime, int device);
  Entry* Find(Runtime* runtime, int device);
  // Tears down idle entries from the top of the stack, stopping at one kept for life unless
  // `final`.
  void UnwindLocked(bool final = false);

  mutable std::mutex mu_;
  std::vector<Entry> stack_;  // guarded by mu_; in initialization order
};

}  // namespace mmserve
