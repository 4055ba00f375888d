#include "testing/acl_sim.h"

#include <dlfcn.h>

#include <fstream>
#include <map>
#include <regex>

#include <gtest/gtest.h>

namespace mmserve::testing {

std::string AclSimHome() { return MMSERVE_ACL_SIM_HOME; }
std::string AclSimLibrary() { return AclSimHome() + "/lib64/libascendcl.so"; }

AclSim AclSim::Reset(const std::string& options) {
  void* handle = ::dlopen(AclSimLibrary().c_str(), RTLD_NOW | RTLD_LOCAL);
  EXPECT_NE(handle, nullptr) << ::dlerror();
  AclSim sim(handle);
  reinterpret_cast<void (*)(const char*)>(sim.Symbol("aclsimReset"))(options.c_str());
  return sim;
}

void* AclSim::Symbol(const char* name) const {
  void* fn = handle_ ? ::dlsym(handle_, name) : nullptr;
  EXPECT_NE(fn, nullptr) << name;
  return fn;
}

std::vector<std::string> AclSim::Record() const {
  auto count = reinterpret_cast<size_t (*)()>(Symbol("aclsimRecordCount"));
  auto line = reinterpret_cast<const char* (*)(size_t)>(Symbol("aclsimRecordLine"));
  std::vector<std::string> out;
  const size_t n = count();
  for (size_t i = 0; i < n; ++i) out.emplace_back(line(i));
  return out;
}

std::vector<std::string> AclSim::Calls(const std::string& call) const {
  std::vector<std::string> out;
  for (auto& l : Record()) {
    if (l.rfind(call + " ", 0) == 0) out.push_back(std::move(l));
  }
  return out;
}

size_t AclSim::DeviceUsed(int device) const {
  return reinterpret_cast<size_t (*)(int32_t)>(Symbol("aclsimDeviceUsed"))(device);
}

std::filesystem::path WriteOm(const TempDir& dir, const std::string& name, const nlohmann::json& spec) {
  return dir.Write(name, "ACLSIM-OM 1\n" + spec.dump(2) + "\n");
}

std::vector<std::string> ReadRecordFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::string RecordField(const std::string& line, const std::string& key) {
  const std::regex re("(?:^| )" + key + "=([^ ]+)");
  std::smatch m;
  return std::regex_search(line, m, re) ? m[1].str() : "";
}

namespace {

std::string CallOf(const std::string& line) { return line.substr(0, line.find(' ')); }

}  // namespace

std::string CheckTeardownOrder(const std::vector<std::string>& record, int* contexts) {
  std::string problems;
  int checked = 0;
  size_t last_teardown = 0;
  for (size_t i = 0; i < record.size(); ++i) {
    if (CallOf(record[i]) != "aclrtCreateContext" || !record[i].ends_with("-> 0")) continue;
    const std::string ctx = RecordField(record[i], "new");
    const std::string tid = RecordField(record[i], "tid");
    // The calls made with this context current, from its first free on.
    std::vector<size_t> lines;
    bool ran_model = false;
    for (size_t j = i + 1; j < record.size(); ++j) {
      if (RecordField(record[j], "ctx") != ctx) continue;
      const std::string call = CallOf(record[j]);
      if (call == "aclrtCreateStream") ran_model = true;
      if (!lines.empty() || call == "aclrtFree" || call == "aclmdlDestroyDataset") lines.push_back(j);
    }
    if (!ran_model) continue;  // a scratch context that only read a description
    ++checked;
    const std::map<std::string, int> rank = {
        {"aclrtFree", 1},        {"aclDestroyDataBuffer", 1}, {"aclrtFreeHost", 1},
        {"aclmdlDestroyDataset", 2}, {"aclmdlDestroyDesc", 3},  {"aclmdlUnload", 4},
        {"aclrtDestroyStream", 5},   {"aclrtDestroyContext", 6}};
    int at = 0;
    bool unloaded = false;
    std::map<std::string, int> seen;
    size_t end = 0;
    for (size_t j : lines) {
      const std::string call = CallOf(record[j]);
      auto it = rank.find(call);
      if (it == rank.end()) continue;
      int r = it->second;
      if (call == "aclrtFree" && unloaded) r = 4;  // pool-mode work memory, after the unload
      if (call == "aclmdlUnload") unloaded = true;
      if (r < at) problems += ctx + ": " + record[j] + " after a later teardown step\n";
      at = std::max(at, r);
      ++seen[call];
      if (!record[j].ends_with("-> 0")) problems += ctx + ": failed: " + record[j] + "\n";
      end = j;
    }
    for (const char* step : {"aclmdlDestroyDataset", "aclmdlDestroyDesc", "aclmdlUnload",
                             "aclrtDestroyStream", "aclrtDestroyContext"}) {
      if (!seen.count(step)) problems += ctx + ": no " + step + "\n";
    }
    // The device reference of the thread goes right after its context.
    for (size_t j = end + 1; j < record.size(); ++j) {
      if (RecordField(record[j], "tid") != tid) continue;
      if (CallOf(record[j]) != "aclrtResetDevice") {
        problems += ctx + ": after its context, thread " + tid + " called " + record[j] + "\n";
      }
      end = j;
      break;
    }
    last_teardown = std::max(last_teardown, end);
  }
  for (size_t i = 0; i < record.size(); ++i) {
    const std::string call = CallOf(record[i]);
    if ((call == "aclFinalize" || call == "aclFinalizeReference") && i < last_teardown) {
      problems += "finalized before a model's teardown ended: " + record[i] + "\n";
    }
  }
  if (contexts) *contexts = checked;
  return problems;
}

}  // namespace mmserve::testing
