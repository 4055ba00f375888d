// The simulated libascendcl (sim/ascendcl) for tests: where it is, its extension functions
// (reset, call record, device memory), OM files in its format, and the check of the documented
// teardown order over a call record.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "testing/test_util.h"

namespace mmserve::testing {

// <build>/acl_sim: what ASCEND_HOME_PATH names for the simulator to be found.
std::string AclSimHome();
std::string AclSimLibrary();  // AclSimHome()/lib64/libascendcl.so

class AclSim {
 public:
  // Opens the simulator (the very library AclRuntime opens from AclSimLibrary()) and resets it
  // to a fresh process with `options` (JSON: soc, devices, memory_mb, refcounted_init,
  // desc_from_file).
  static AclSim Reset(const std::string& options = "{}");

  std::vector<std::string> Record() const;
  // The record's lines that start with `call` followed by a space ("aclrtMalloc").
  std::vector<std::string> Calls(const std::string& call) const;
  size_t DeviceUsed(int device) const;
  // An entry point of the library, to act as "someone else" in the process.
  void* Symbol(const char* name) const;

 private:
  explicit AclSim(void* handle) : handle_(handle) {}
  void* handle_;
};

// Writes `name` (an .om file in the simulator's format, see sim/ascendcl/aclsim.h) into `dir`.
std::filesystem::path WriteOm(const TempDir& dir, const std::string& name, const nlohmann::json& spec);

// The value of `key=` in a record line ("" when absent): RecordField(line, "ctx") → "ctx3".
std::string RecordField(const std::string& line, const std::string& key);

// The lines of a record file written through ACLSIM_TRACE.
std::vector<std::string> ReadRecordFile(const std::filesystem::path& path);

// Checks that each context that ran a model was torn down in the documented order — I/O buffers
// and datasets, description, unload, stream, context, then the thread's device reset — and that
// aclFinalize (or aclFinalizeReference), if called, came after all of it. Returns the problems
// found, one per line; "" when there are none. `contexts` counts the contexts checked.
std::string CheckTeardownOrder(const std::vector<std::string>& record, int* contexts = nullptr);

}  // namespace mmserve::testing
