#include "backend/process/process_session.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <fstream>
#include <thread>

#include <spdlog/spdlog.h>

#include "backend/process/worker_spec.h"
#include "backend/process/worker_wire.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/mutex.h"
#include "common/strings.h"

namespace mmserve {
namespace {

using namespace std::chrono_literals;

// Restarts: the first kQuickRestarts exits within kRestartWindow restart at once, the next
// after 100 ms doubling up to kMaxBackoff; exit kMaxRestarts + 1 within the window stops them.
constexpr int kMaxRestarts = 10;
constexpr int kQuickRestarts = 3;
constexpr auto kRestartWindow = 60s;
constexpr auto kMaxBackoff = 5s;
constexpr auto kExitGrace = 5s;       // a worker told to stop gets this long before SIGKILL

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) reset(std::exchange(o.fd_, -1));
    return *this;
  }
  ~Fd() { reset(); }
  int get() const { return fd_; }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// The server's log level, as `--log-level` spells it, for its workers.
std::string LogLevelName() {
  auto name = spdlog::level::to_string_view(spdlog::get_level());
  return name == "warning" ? "warn" : std::string(name.data(), name.size());
}

// "SIGSEGV", "exit code 3".
std::string DescribeExit(int status) {
  if (WIFSIGNALED(status)) {
    const char* abbrev = sigabbrev_np(WTERMSIG(status));
    return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(WTERMSIG(status));
  }
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  return "status " + std::to_string(status);
}

// Private_Clean + Private_Dirty of process `pid` (/proc/<pid>/smaps_rollup), in bytes; 0 when
// it cannot be read.
int64_t PrivateBytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/smaps_rollup");
  std::string line;
  int64_t kib = 0;
  while (std::getline(in, line)) {
    if (line.rfind("Private_Clean:", 0) != 0 && line.rfind("Private_Dirty:", 0) != 0) continue;
    const size_t colon = line.find(':');
    const size_t start = line.find_first_not_of(' ', colon + 1);
    const size_t end = line.find(' ', start);
    if (start == std::string::npos) continue;
    if (auto v = ParseInt64(std::string_view(line).substr(start, end - start)); v && *v >= 0) {
      kib += std::min<int64_t>(*v, int64_t{1} << 40);
    }
  }
  return kib * 1024;
}

// Waits until `fd` is readable or `timeout` passes (negative: forever); false on timeout.
bool WaitReadable(int fd, std::chrono::milliseconds timeout, int also = -1) {
  pollfd fds[2] = {{fd, POLLIN, 0}, {also, POLLIN, 0}};
  for (;;) {
    const int n = ::poll(fds, also >= 0 ? 2 : 1, static_cast<int>(timeout.count()));
    if (n < 0 && errno == EINTR) continue;
    return n > 0;
  }
}

// One started worker process: its pid (reaped by the supervisor only), its pidfd, and the
// server's ends of its sockets.
struct Worker {
  pid_t pid = -1;
  Fd pidfd;
  Fd control;
  std::vector<Fd> channels;  // one per instance
  WorkerFacts facts;
  std::atomic<bool> exited{false};
  std::string exit_reason;  // set once, before `exited`
  void Kill() const { (void)::syscall(SYS_pidfd_send_signal, pidfd.get(), SIGKILL, nullptr, 0); }
};

class ProcessSession;

class ProcessInstance final : public Instance {
 public:
  ProcessInstance(ProcessSession& session, int index) : session_(session), index_(index) {}
  Status Execute(Execution& execution) override;
  bool Abort() override;

 private:
  ProcessSession& session_;  // outlives its instances
  const int index_;
  std::string buffer_;       // reused for every batch and its results
  Counters counters_;
  Mutex mu_;
  std::shared_ptr<Worker> running_ GUARDED_BY(mu_);  // the worker of the execution in flight
};

class ProcessSession final : public Session {
 public:
  explicit ProcessSession(const ModelConfig& model)
      : model_(model), spec_(EncodeWorkerSpec(model)), stop_(::eventfd(0, EFD_CLOEXEC)) {}
  ~ProcessSession() override {
    (void)::eventfd_write(stop_.get(), 1);
    {
      MutexLock lock(mu_);
      if (spawning_) spawning_->Kill();  // a restart's load would hold the join up
    }
    if (supervisor_.joinable()) supervisor_.join();
  }

  // Starts the supervisor and waits for the first worker's load.
  Status Start() {
    supervisor_ = std::thread([this] { Supervise(); });
    MutexLock lock(mu_);
    cv_.wait(lock, [&]() REQUIRES(mu_) { return current_ || !failed_.ok(); });
    if (current_) facts_ = current_->facts;
    return current_ ? Status::Ok() : failed_;
  }

  const ModelSignature& signature() const override { return facts_.signature; }
  // On the host: the worker's private memory (what it alone holds: the model, its contexts,
  // the process's own heap), measured at most once a second; at least what the session says.
  int64_t resident_bytes() const override {
    if (!facts_.host_memory) return facts_.resident_bytes;
    MutexLock lock(mu_);
    const auto now = Clock::now();
    if (current_ && now - measured_at_ >= 1s) {
      measured_at_ = now;
      measured_ = PrivateBytes(current_->pid);
    }
    return std::max(facts_.resident_bytes, measured_);
  }
  Result<std::unique_ptr<Instance>> CreateInstance(int index) override {
    return std::unique_ptr<Instance>(std::make_unique<ProcessInstance>(*this, index));
  }
  void Interrupt() override {
    MutexLock lock(mu_);
    if (current_) current_->Kill();
  }
  std::vector<int> batch_tiers() const override { return facts_.batch_tiers; }
  int64_t context_length() const override { return facts_.context_length; }
  bool executions_share_device() const override { return facts_.executions_share_device; }
  int default_warmup() const override { return facts_.default_warmup; }
  // The engine's, as the worker last reported them (they restart from zero with it), and the
  // worker's pid and restarts.
  std::map<std::string, int64_t> counters() const override {
    MutexLock lock(mu_);
    Counters out = engine_counters_;
    out["worker_pid"] = current_ ? current_->pid : 0;
    out["worker_restarts"] = restarts_;
    return out;
  }
  void set_engine_counters(Counters counters) {
    MutexLock lock(mu_);
    engine_counters_ = std::move(counters);
  }

  // The worker serving now; while it restarts, waits for it until `until`. Unavailable with the
  // last exit reason when there is none by then, or when the model stopped restarting.
  Result<std::shared_ptr<Worker>> Current(Clock::time_point until) {
    MutexLock lock(mu_);
    cv_.wait_until(lock, until, [&]() REQUIRES(mu_) { return current_ || !failed_.ok(); });
    if (current_) return current_;
    return failed_.ok() ? Unavailable(last_exit_ + "; restarting") : failed_;
  }

  // What became of `worker` after its socket failed: it died (the supervisor reaps it, at
  // once), or it broke the protocol (it is killed). Unavailable, with the reason.
  Status Lost(Worker& worker) {
    MutexLock lock(mu_);
    if (!cv_.wait_for(lock, 2s, [&] { return worker.exited.load(); })) {
      worker.Kill();
      cv_.wait(lock, [&] { return worker.exited.load(); });
    }
    return Unavailable(ExitMessage(worker.exit_reason));
  }
  std::string ExitMessage(const std::string& reason) const {
    return "model worker for '" + model_.name + "' exited: " + reason;
  }

 private:
  void Supervise();
  Result<std::shared_ptr<Worker>> Spawn();
  Status Handshake(Worker& worker);
  // Waits for `worker` to exit (or the session to stop: then stops it), reaps it and records why.
  void Watch(Worker& worker);

  const ModelConfig model_;
  const std::string spec_;
  const Fd stop_;  // readable once the session is being destroyed
  WorkerFacts facts_;  // the first worker's; set before any instance exists
  std::thread supervisor_;
  mutable Mutex mu_;
  std::condition_variable_any cv_;
  std::shared_ptr<Worker> current_ GUARDED_BY(mu_);
  std::shared_ptr<Worker> spawning_ GUARDED_BY(mu_);  // started, loading
  Status failed_ GUARDED_BY(mu_);
  std::string last_exit_ GUARDED_BY(mu_);
  int64_t restarts_ GUARDED_BY(mu_) = 0;
  Counters engine_counters_ GUARDED_BY(mu_);
  mutable Clock::time_point measured_at_ GUARDED_BY(mu_);
  mutable int64_t measured_ GUARDED_BY(mu_) = 0;
};

Result<std::shared_ptr<Worker>> ProcessSession::Spawn() {
  auto worker = std::make_shared<Worker>();
  const int n = model_.thread_num;
  std::vector<Fd> theirs;  // the worker's ends: control first
  for (int i = 0; i <= n; ++i) {
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
      return Unavailable(std::string("socketpair: ") + std::strerror(errno));
    }
    (i == 0 ? worker->control : worker->channels.emplace_back()) = Fd(pair[0]);
    theirs.emplace_back(pair[1]);
  }
  // Everything the child needs is built before fork: between fork and exec only
  // async-signal-safe calls run.
  std::string channels;
  for (int i = 1; i <= n; ++i) channels += (i > 1 ? "," : "") + std::to_string(theirs[i].get());
  std::vector<std::string> args = {"mmserve",   "worker",  "--parent",
                                   std::to_string(::getpid()), "--control",
                                   std::to_string(theirs[0].get()), "--channels", channels,
                                   "--model", model_.name,
                                   "--log-level", LogLevelName(), "--log-format",
                                   CurrentLogFormat() == LogFormat::kJson ? "json" : "text",
                                   "--no-access-log"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return Unavailable(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);  // nothing of the server's leaks into the worker
    for (const Fd& fd : theirs) ::fcntl(fd.get(), F_SETFD, 0);
    ::execv("/proc/self/exe", argv.data());
    ::_exit(127);
  }
  worker->pid = pid;
  worker->pidfd = Fd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  theirs.clear();
  if (worker->pidfd.get() < 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return Unavailable(std::string("pidfd_open: ") + std::strerror(errno));
  }
  {
    MutexLock lock(mu_);
    spawning_ = worker;
  }
  Status s = Handshake(*worker);
  {
    MutexLock lock(mu_);
    spawning_.reset();
  }
  if (!s.ok()) {
    // A worker that hung up without a word died loading: its exit says how. Otherwise it
    // answered (kFailed, or nonsense) and is stopped.
    const bool died = s.code() == StatusCode::kUnavailable && s.message().empty();
    if (!died) worker->Kill();
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (died) s = Unavailable(ExitMessage(DescribeExit(status)) + " while loading");
    return s;
  }
  return worker;
}

// Sends the model's spec and waits for the worker to load it: kReady, or kFailed with why.
Status ProcessSession::Handshake(Worker& worker) {
  std::string payload;
  Status sent = WriteFrame(worker.control.get(), FrameKind::kInit, spec_);
  auto kind = sent.ok() ? ReadFrame(worker.control.get(), payload) : Result<FrameKind>(sent);
  if (!kind.ok()) return Unavailable("");  // it hung up: Spawn() reads its exit
  if (*kind == FrameKind::kFailed) return DecodeStatus(payload);
  if (*kind != FrameKind::kReady) return Internal("model worker answered the load out of turn");
  MMS_ASSIGN_OR_RETURN(worker.facts, DecodeWorkerFacts(payload));
  return Status::Ok();
}

void ProcessSession::Watch(Worker& worker) {
  if (!WaitReadable(worker.pidfd.get(), -1ms, stop_.get()) ||
      !WaitReadable(worker.pidfd.get(), 0ms)) {
    // Stopping: closing the control socket tells the worker to finish and exit.
    worker.control.reset();
    for (auto& c : worker.channels) (void)::shutdown(c.get(), SHUT_RDWR);
    if (!WaitReadable(worker.pidfd.get(), kExitGrace)) worker.Kill();
  }
  int status = 0;
  while (::waitpid(worker.pid, &status, 0) < 0 && errno == EINTR) {
  }
  MutexLock lock(mu_);
  worker.exit_reason = DescribeExit(status);
  worker.exited = true;
  if (current_.get() == &worker) current_.reset();
  last_exit_ = ExitMessage(worker.exit_reason);
  cv_.notify_all();
}

void ProcessSession::Supervise() {
  std::deque<Clock::time_point> exits;
  for (bool first = true;; first = false) {
    auto worker = Spawn();
    if (!worker.ok() && first) {
      MutexLock lock(mu_);
      failed_ = worker.status();
      cv_.notify_all();
      return;
    }
    if (worker.ok()) {
      {
        MutexLock lock(mu_);
        current_ = *worker;
        cv_.notify_all();
      }
      if (!first) spdlog::info("model {}: worker restarted (pid {})", model_.name, (*worker)->pid);
      Watch(**worker);
      if (WaitReadable(stop_.get(), 0ms)) return;
    }
    const std::string why =
        worker.ok() ? ExitMessage((*worker)->exit_reason) : std::string(worker.status().message());
    spdlog::error("model {}: {}", model_.name, why);
    const auto now = Clock::now();
    exits.push_back(now);
    while (!exits.empty() && now - exits.front() > kRestartWindow) exits.pop_front();
    {
      MutexLock lock(mu_);
      last_exit_ = why;
      if (exits.size() > static_cast<size_t>(kMaxRestarts)) {
        failed_ = Unavailable(why + "; " + std::to_string(exits.size()) +
                              " exits within a minute: no more restarts");
        spdlog::error("model {}: {}", model_.name, failed_.message());
        cv_.notify_all();
        return;
      }
      ++restarts_;
    }
    const int slow = static_cast<int>(exits.size()) - kQuickRestarts;
    const auto backoff = slow <= 0 ? 0ms
                                   : std::min<std::chrono::milliseconds>(
                                         100ms * (int64_t{1} << std::min(slow - 1, 10)), kMaxBackoff);
    if (WaitReadable(stop_.get(), backoff)) return;
  }
}

Status ProcessInstance::Execute(Execution& execution) {
  // A worker that is restarting is waited for as long as the batch's first deadline allows.
  Clock::time_point until = Clock::time_point::max();
  for (const auto& item : execution.items) until = std::min(until, item.request->deadline);
  MMS_ASSIGN_OR_RETURN(std::shared_ptr<Worker> worker, session_.Current(until));
  {
    MutexLock lock(mu_);
    running_ = worker;
  }
  const int fd = worker->channels[static_cast<size_t>(index_)].get();
  execution.set_stage(Stage::kExecute);
  EncodeBatch(execution.tier, execution.items, buffer_);
  Status sent = WriteFrame(fd, FrameKind::kBatch, buffer_);
  auto kind = sent.ok() ? ReadFrame(fd, buffer_) : Result<FrameKind>(sent);
  Status batch;
  Status decoded = !kind.ok()                         ? kind.status()
                   : *kind != FrameKind::kResults     ? Internal("results out of turn")
                                                      : DecodeResults(buffer_, execution.items, &batch, &counters_);
  {
    MutexLock lock(mu_);
    running_.reset();
  }
  if (decoded.ok()) {
    session_.set_engine_counters(counters_);
    return batch;
  }
  if (kind.ok()) {
    spdlog::error("model worker broke the protocol: {}; killing it", decoded.message());
    worker->Kill();
  }
  return session_.Lost(*worker);
}

bool ProcessInstance::Abort() {
  MutexLock lock(mu_);
  if (running_) running_->Kill();
  return true;
}

}  // namespace

Result<std::unique_ptr<Session>> LoadIsolated(const ModelConfig& model) {
  auto session = std::make_unique<ProcessSession>(model);
  MMS_RETURN_IF_ERROR(session->Start());
  return std::unique_ptr<Session>(std::move(session));
}

}  // namespace mmserve
