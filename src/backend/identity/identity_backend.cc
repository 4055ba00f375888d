#include "backend/identity/identity_backend.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

namespace mmserve {
namespace {

using namespace std::chrono_literals;

struct EchoPair {
  TensorSpec input;
  std::string output;
};

struct IdentityOptions {
  std::vector<EchoPair> tensors;
  std::chrono::milliseconds latency{0};
  std::chrono::microseconds latency_per_item{0};
  int64_t memory_bytes = 0;
  std::chrono::milliseconds load_time{0};
  int64_t fail_every_n = 0;
  StatusCode fail_code = StatusCode::kInternal;
  std::string fail_message;
  std::string hang_on;
  std::chrono::milliseconds hang_time{60'000};
  Stage hang_stage = Stage::kExecute;
  std::string crash_on;
  int64_t crash_after = 0;
  int crash_signal = SIGSEGV;
  std::string escape;     // a sandbox test: "open", "connect" or "exec"
  std::string escape_on;  // the marker that makes an execution try it
};

std::vector<std::string> DataTypeNames() {
  std::vector<std::string> names;
  for (DataType t : kAllDataTypes) names.emplace_back(DataTypeName(t));
  return names;
}

std::vector<std::string> FailCodeNames() {
  std::vector<std::string> names;
  for (int c = 1; c <= static_cast<int>(StatusCode::kInternal); ++c) {
    names.emplace_back(StatusCodeName(static_cast<StatusCode>(c)));
  }
  return names;
}

// Reads the params once: at validation with errors collected, at load with none expected.
IdentityOptions ReadOptions(const ModelConfig& model, ConfigErrors& errors) {
  ParamReader r(model.params, errors);
  IdentityOptions o;
  for (const Params& t : r.MapList("tensors")) {
    ParamReader tr(t, errors);
    EchoPair pair;
    pair.input.name = tr.String("input", "INPUT" + std::to_string(o.tensors.size()));
    pair.output = tr.String("output", "OUTPUT" + std::to_string(o.tensors.size()));
    pair.input.type = *ParseDataType(tr.String("datatype", "FP32", DataTypeNames()));
    for (int64_t d : tr.IntList("shape", -1, int64_t{1} << 32)) pair.input.shape.push_back(d);
    if (!tr.Has("shape")) pair.input.shape = {-1};
    pair.input.optional = tr.Bool("optional", false);
    tr.Finish();
    o.tensors.push_back(std::move(pair));
  }
  if (!r.Has("tensors")) {
    o.tensors.push_back({{"INPUT0", DataType::kFp32, {-1}, false}, "OUTPUT0"});
  }
  o.latency = std::chrono::milliseconds(r.Int("latency_ms", 0, 0, 600'000));
  o.latency_per_item = std::chrono::microseconds(r.Int("latency_per_item_us", 0, 0, 60'000'000));
  o.memory_bytes = r.Int("memory_mb", 0, 0, 1 << 20) << 20;
  o.load_time = std::chrono::milliseconds(r.Int("load_ms", 0, 0, 600'000));
  o.fail_every_n = r.Int("fail_every_n", 0, 0, int64_t{1} << 40);
  const std::string code = r.String("fail_code", "Internal", FailCodeNames());
  for (int c = 1; c <= static_cast<int>(StatusCode::kInternal); ++c) {
    if (StatusCodeName(static_cast<StatusCode>(c)) == code) o.fail_code = static_cast<StatusCode>(c);
  }
  o.fail_message = r.String("fail_message", "injected failure");
  o.hang_on = r.String("hang_on", "");
  o.hang_time = std::chrono::milliseconds(r.Int("hang_ms", 60'000, 0, 3'600'000));
  const std::string stage = r.String("hang_stage", "execute", {"preprocess", "execute", "postprocess"});
  o.hang_stage = stage == "preprocess" ? Stage::kPreprocess
                 : stage == "postprocess" ? Stage::kPostprocess
                                          : Stage::kExecute;
  o.crash_on = r.String("crash_on", "");
  o.crash_after = r.Int("crash_after", 0, 0, int64_t{1} << 40);
  o.crash_signal = r.String("crash_signal", "segv", {"segv", "abort"}) == "abort" ? SIGABRT : SIGSEGV;
  o.escape = r.String("escape", "", {"", "open", "connect", "exec"});
  o.escape_on = r.String("escape_on", "");
  // A hook that escapes a process must never run in the server's: it proves the sandbox.
  if (!o.escape.empty() && model.isolation != Isolation::kSandbox) {
    r.Error("escape", "no escape hook without isolation: sandbox (it would run unconfined)",
            "\"" + o.escape + "\"");
  }
  r.Finish();
  return o;
}

// The injected crash: the process dies of `signal` as if the engine had faulted (no handler
// runs: the default action is restored first).
[[noreturn]] void Crash(int signal) {
  std::signal(signal, SIG_DFL);
  std::raise(signal);
  std::abort();  // raise() of an unblocked signal with its default action does not return
}

// The sandbox test: what an exploited engine would try. Returns only when it was not stopped
// (the sandbox kills the process first): the error says what got through.
Status Escape(const std::string& how) {
  if (how == "open") {
    const int fd = ::open("/etc/passwd", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) ::close(fd);
    return Internal("escape: open(/etc/passwd) returned " + std::to_string(fd));
  }
  if (how == "connect") {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(9);
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const int rc = fd < 0 ? -1 : ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to);
    if (fd >= 0) ::close(fd);
    return Internal("escape: socket returned " + std::to_string(fd) + ", connect " +
                    std::to_string(rc));
  }
  char* argv[] = {const_cast<char*>("/bin/true"), nullptr};
  ::execv(argv[0], argv);
  return Internal("escape: exec failed: " + std::string(std::strerror(errno)));
}

// An execution that never sleeps: no injected latency, no hang.
bool NeverBlocks(const IdentityOptions& o) {
  return o.latency.count() == 0 && o.latency_per_item.count() == 0 && o.hang_on.empty();
}

class IdentitySession;

class IdentityInstance final : public Instance {
 public:
  explicit IdentityInstance(IdentitySession& session) : session_(session) {}
  Status Execute(Execution& execution) override;
  bool Abort() override;

 private:
  // Sleeps for `d` unless interrupted or aborted first; returns false when cut short.
  bool Wait(std::chrono::nanoseconds d);
  Status MaybeHang(const Execution& execution, Stage stage);

  IdentitySession& session_;  // not owned; outlives its instances
  std::atomic<bool> aborted_{false};
};

class IdentitySession final : public Session {
 public:
  IdentitySession(IdentityOptions options, ModelSignature signature)
      : options_(std::move(options)), signature_(std::move(signature)) {
    if (options_.memory_bytes > 0) {
      // Touch every page so the bytes are resident, not just reserved.
      memory_ = std::make_unique<char[]>(static_cast<size_t>(options_.memory_bytes));
      std::memset(memory_.get(), 0x5a, static_cast<size_t>(options_.memory_bytes));
    }
  }

  const ModelSignature& signature() const override { return signature_; }
  int64_t resident_bytes() const override { return options_.memory_bytes; }
  Result<std::unique_ptr<Instance>> CreateInstance(int) override {
    return std::unique_ptr<Instance>(std::make_unique<IdentityInstance>(*this));
  }
  void Interrupt() override { Wake(&interrupted_); }
  bool executes_inline() const override { return NeverBlocks(options_); }
  std::map<std::string, int64_t> counters() const override {
    return {{"executions", static_cast<int64_t>(calls_.load())},
            {"items", items_.load()},
            {"padded_items", padded_.load()}};
  }

  const IdentityOptions& options() const { return options_; }
  uint64_t NextCall(const Execution& e) {
    items_ += static_cast<int64_t>(e.items.size());
    padded_ += std::max<int64_t>(0, e.tier - static_cast<int64_t>(e.items.size()));
    return ++calls_;
  }
  // Sleeps for `d` unless the session is interrupted or `aborted` turns true first; returns
  // false when cut short.
  bool Wait(std::chrono::nanoseconds d, const std::atomic<bool>& aborted) {
    std::unique_lock lock(mu_);
    return !cv_.wait_for(lock, d, [&] { return interrupted_.load() || aborted.load(); });
  }
  // Sets `flag` and wakes every Wait().
  void Wake(std::atomic<bool>* flag) {
    std::lock_guard lock(mu_);
    flag->store(true);
    cv_.notify_all();
  }

 private:
  const IdentityOptions options_;
  const ModelSignature signature_;
  std::unique_ptr<char[]> memory_;
  std::atomic<uint64_t> calls_{0};
  std::atomic<int64_t> items_{0};
  std::atomic<int64_t> padded_{0};  // rows a fixed-gear engine would have padded
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> interrupted_{false};
};

bool HasMarker(const InferRequest& request, const std::string& marker) {
  if (marker.empty()) return false;
  for (const auto& t : request.inputs) {
    if (t.type() != DataType::kBytes) continue;
    for (auto e : t.BytesElements()) {
      if (e == marker) return true;
    }
  }
  return false;
}

bool IdentityInstance::Wait(std::chrono::nanoseconds d) { return session_.Wait(d, aborted_); }

bool IdentityInstance::Abort() {
  session_.Wake(&aborted_);
  return true;
}

Status IdentityInstance::MaybeHang(const Execution& execution, Stage stage) {
  const IdentityOptions& o = session_.options();
  if (o.hang_stage != stage) return Status::Ok();
  for (const auto& item : execution.items) {
    if (HasMarker(*item.request, o.hang_on) && !Wait(o.hang_time)) {
      return Cancelled("identity execution interrupted while hanging");
    }
  }
  return Status::Ok();
}

Status IdentityInstance::Execute(Execution& execution) {
  const IdentityOptions& o = session_.options();
  BatchView batch = execution.items;
  const uint64_t call = session_.NextCall(execution);
  execution.set_stage(Stage::kPreprocess);
  MMS_RETURN_IF_ERROR(MaybeHang(execution, Stage::kPreprocess));
  execution.set_stage(Stage::kExecute);
  MMS_RETURN_IF_ERROR(MaybeHang(execution, Stage::kExecute));
  if (o.crash_after > 0 && call == static_cast<uint64_t>(o.crash_after)) Crash(o.crash_signal);
  for (const auto& item : batch) {
    if (HasMarker(*item.request, o.crash_on)) Crash(o.crash_signal);
    if (!o.escape.empty() && HasMarker(*item.request, o.escape_on)) return Escape(o.escape);
  }
  const auto latency = o.latency + o.latency_per_item * static_cast<int64_t>(batch.size());
  if (latency.count() > 0 && !Wait(latency)) {
    return Cancelled("identity execution interrupted");
  }
  if (o.fail_every_n > 0 && call % static_cast<uint64_t>(o.fail_every_n) == 0) {
    return Status(o.fail_code, o.fail_message + " (call " + std::to_string(call) + ")");
  }
  execution.set_stage(Stage::kPostprocess);
  MMS_RETURN_IF_ERROR(MaybeHang(execution, Stage::kPostprocess));
  for (auto& item : batch) {
    InferResponse response;
    for (const auto& input : item.request->inputs) {
      for (const auto& pair : o.tensors) {
        if (pair.input.name != input.name()) continue;
        Tensor out = input;
        out.set_name(pair.output);
        response.outputs.push_back(std::move(out));
      }
    }
    item.result = std::move(response);
  }
  return Status::Ok();
}

}  // namespace

void IdentityBackend::Validate(ModelConfig& model, ConfigErrors& errors) const {
  (void)ReadOptions(model, errors);
}

Result<MemoryEstimate> IdentityBackend::Estimate(const ModelConfig& model) const {
  ConfigErrors errors;
  const IdentityOptions o = ReadOptions(model, errors);
  MMS_RETURN_IF_ERROR(errors.ToStatus());
  return MemoryEstimate{.bytes = o.memory_bytes, .source = "identity params.memory_mb"};
}

bool IdentityBackend::ExecutesInline(const ModelConfig& model) const {
  ConfigErrors errors;
  return NeverBlocks(ReadOptions(model, errors));
}

Result<std::unique_ptr<Session>> IdentityBackend::LoadSession(const ModelConfig& model,
                                                              LoadProgress& /*progress*/) {
  ConfigErrors errors;
  IdentityOptions o = ReadOptions(model, errors);
  MMS_RETURN_IF_ERROR(errors.ToStatus());
  if (o.load_time.count() > 0) std::this_thread::sleep_for(o.load_time);
  ModelSignature signature{.platform = "mmserve_identity"};
  for (const auto& pair : o.tensors) {
    signature.inputs.push_back(pair.input);
    signature.outputs.push_back({pair.output, pair.input.type, pair.input.shape, false});
  }
  return std::unique_ptr<Session>(
      std::make_unique<IdentitySession>(std::move(o), std::move(signature)));
}

}  // namespace mmserve
