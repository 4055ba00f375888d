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
#include <array>
#include <charconv>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include <spdlog/spdlog.h>

#include "backend/process/process_internal.h"
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
constexpr auto kQueryTimeout = 2s;    // a tokenizer query's reply, at most

// The server's log level, as `--log-level` spells it, for its workers.
std::string LogLevelName() {
  auto name = spdlog::level::to_string_view(spdlog::get_level());
  return name == "warning" ? "warn" : std::string(name.data(), name.size());
}

// "812 ms".
std::string MillisText(Clock::duration d) { return std::to_string(Millis(d)) + " ms"; }

// "SIGSEGV", "exit code 3".
std::string DescribeExit(int status) {
  if (WIFSIGNALED(status)) return SignalName(WTERMSIG(status));
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

// The server's environment, with the model's `compute_wait` for its OpenMP threads. Unset, a
// worker's threads sleep (unless the server's environment names a policy): a worker shares the
// cores with the server and the other workers, which libgomp cannot see from inside one
// process (spinning teams made llama-server's router 40-80x slower; docs/BENCHMARKS.md). Spin
// leaves libgomp its default, a bounded spin before it sleeps, with none of the server's
// settings for it.
std::vector<std::string> WorkerEnvironment(std::optional<ComputeWait> wait) {
  std::vector<std::string> envp;
  bool server_policy = false;  // the server's environment names OMP_WAIT_POLICY
  for (char** e = environ; *e; ++e) {
    const std::string_view entry(*e);
    const bool policy = entry.starts_with("OMP_WAIT_POLICY=");
    server_policy = server_policy || policy;
    if (!wait || !(policy || entry.starts_with("GOMP_SPINCOUNT="))) envp.emplace_back(entry);
  }
  if (wait == ComputeWait::kSleep || (!wait && !server_policy)) {
    envp.emplace_back("OMP_WAIT_POLICY=passive");
  }
  return envp;
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

}  // namespace

ProcessSession::~ProcessSession() {
  (void)::eventfd_write(stop_.get(), 1);
  {
    MutexLock lock(mu_);
    if (spawning_) spawning_->Kill();  // a restart's load would hold the join up
  }
  if (supervisor_.joinable()) supervisor_.join();
}

Status ProcessSession::Start() {
  supervisor_ = std::thread([this] { Supervise(); });
  MutexLock lock(mu_);
  cv_.wait(lock, [&]() REQUIRES(mu_) { return current_ || !failed_.ok(); });
  if (current_) facts_ = current_->facts;
  return current_ ? Status::Ok() : failed_;
}

int64_t ProcessSession::ShedCache(int64_t bytes) {
  auto reply = Ask({.shed_bytes = bytes});
  if (!reply.ok() || !reply->status.ok()) return 0;
  int64_t shed = 0;
  const std::string& text = reply->text;
  (void)std::from_chars(text.data(), text.data() + text.size(), shed);
  shed = std::clamp<int64_t>(shed, 0, bytes);  // a worker's word is not trusted
  shed_.fetch_add(shed);
  return shed;
}

int64_t ProcessSession::resident_bytes() const {
  const int64_t said = std::max<int64_t>(0, facts_.resident_bytes - shed_.load());
  if (!facts_.host_memory) return said;
  MutexLock lock(mu_);
  const auto now = Clock::now();
  if (current_ && now - measured_at_ >= 1s) {
    measured_at_ = now;
    measured_ = PrivateBytes(current_->pid);
  }
  return std::max(said, measured_);
}

Result<std::shared_ptr<Worker>> ProcessSession::Current(Clock::time_point until) {
  MutexLock lock(mu_);
  cv_.wait_until(lock, until, [&]() REQUIRES(mu_) { return current_ || !failed_.ok(); });
  if (current_) return current_;
  return failed_.ok() ? Unavailable(last_exit_ + "; restarting") : failed_;
}

Status ProcessSession::Lost(Worker& worker) {
  MutexLock lock(mu_);
  // Stopping (Interrupt): an execution still in flight is not waited for.
  const auto grace = WaitReadable(stop_.get(), 0ms) ? 0s : 2s;
  if (!cv_.wait_for(lock, grace, [&] { return worker.exited.load(); })) {
    worker.Kill();
    cv_.wait(lock, [&] { return worker.exited.load(); });
  }
  return Unavailable(ExitMessage(worker.exit_reason));
}

Result<TokenizerReply> ProcessSession::Ask(TokenizerQuery query) const {
  std::shared_ptr<Worker> worker;
  {
    MutexLock lock(mu_);
    if (!failed_.ok()) return failed_;
    if (!current_) return Unavailable(last_exit_ + "; restarting");
    worker = current_;
  }
  MutexLock lock(query_mu_);
  query.id = ++last_query_;
  std::string payload;
  EncodeQuery(query, payload);
  const int fd = worker->control.get();
  MMS_RETURN_IF_ERROR(WriteFrame(fd, FrameKind::kQuery, payload));
  const auto until = Clock::now() + kQueryTimeout;
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now());
    if (left <= 0ms || !worker->control_reader.Ready(fd, left)) {
      return Unavailable("model worker for '" + model_.name + "' did not answer within " +
                         std::to_string(std::chrono::milliseconds(kQueryTimeout).count()) + " ms");
    }
    MMS_ASSIGN_OR_RETURN(FrameKind kind, worker->control_reader.Read(fd, payload));
    if (kind != FrameKind::kReply) return Internal("model worker answered out of turn");
    MMS_ASSIGN_OR_RETURN(TokenizerReply reply, DecodeReply(payload));
    if (reply.id == query.id) return reply;
    // An older query's reply, which came after that query gave up: skipped.
  }
}

Result<std::vector<Session::Token>> ProcessSession::Tokenize(std::string_view text,
                                                             bool add_special,
                                                             bool pieces) const {
  MMS_ASSIGN_OR_RETURN(TokenizerReply reply, Ask({.text = std::string(text),
                                                  .add_special = add_special,
                                                  .pieces = pieces}));
  MMS_RETURN_IF_ERROR(reply.status);
  return std::move(reply.tokens);
}

Result<std::string> ProcessSession::Detokenize(std::span<const int32_t> tokens) const {
  MMS_ASSIGN_OR_RETURN(TokenizerReply reply,
                       Ask({.detokenize = true, .tokens = {tokens.begin(), tokens.end()}}));
  MMS_RETURN_IF_ERROR(reply.status);
  return std::move(reply.text);
}

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
  std::string channels, regions;
  std::vector<int> inherited;  // cleared of close-on-exec in the child
  for (const Fd& fd : theirs) inherited.push_back(fd.get());
  for (int i = 1; i <= n; ++i) {
    MMS_ASSIGN_OR_RETURN(SharedRegion region, SharedRegion::Create());
    channels += (i > 1 ? "," : "") + std::to_string(theirs[i].get());
    regions += (i > 1 ? "," : "") + std::to_string(region.fd());
    inherited.push_back(region.fd());
    worker->regions.push_back(std::move(region));
  }
  std::vector<std::string> args = {"mmserve",   "worker",  "--parent",
                                   std::to_string(::getpid()), "--control",
                                   std::to_string(theirs[0].get()), "--channels", channels,
                                   "--regions", regions, "--model", model_.name,
                                   "--log-level", LogLevelName(), "--log-format",
                                   CurrentLogFormat() == LogFormat::kJson ? "json" : "text",
                                   "--no-access-log"};
  if (model_.isolation == Isolation::kSandbox) args.push_back("--sandbox");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> environment = WorkerEnvironment(model_.compute_wait);
  std::vector<char*> envp;
  for (auto& e : environment) envp.push_back(e.data());
  envp.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return Unavailable(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);  // nothing of the server's leaks into the worker
    for (int fd : inherited) ::fcntl(fd, F_SETFD, 0);
    ::execve("/proc/self/exe", argv.data(), envp.data());
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
  bool hung_up = false;
  Status s = Handshake(*worker, &hung_up);
  {
    MutexLock lock(mu_);
    spawning_.reset();
  }
  if (!s.ok()) {
    // A worker that hung up without a word died loading: its exit says how. Otherwise it
    // answered (kFailed, or nonsense) and is stopped.
    if (!hung_up) worker->Kill();
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (hung_up) s = Unavailable(ExitMessage(DescribeExit(status)) + " while loading");
    return s;
  }
  return worker;
}

// Sends the model's spec and waits for the worker to load it: kReady, or kFailed with why.
Status ProcessSession::Handshake(Worker& worker, bool* hung_up) {
  std::string payload;
  Status sent = WriteFrame(worker.control.get(), FrameKind::kInit, spec_);
  FrameReader reader;
  auto kind = sent.ok() ? reader.Read(worker.control.get(), payload) : Result<FrameKind>(sent);
  if (!kind.ok()) {
    *hung_up = true;  // Spawn() reads why from its exit
    return kind.status();
  }
  if (*kind == FrameKind::kFailed) return DecodeStatus(payload);
  if (*kind != FrameKind::kReady) return Internal("model worker answered the load out of turn");
  MMS_ASSIGN_OR_RETURN(worker.facts, DecodeWorkerFacts(payload));
  return Status::Ok();
}

void ProcessSession::Watch(Worker& worker) {
  if (!WaitReadable(worker.pidfd.get(), -1ms, stop_.get()) ||
      !WaitReadable(worker.pidfd.get(), 0ms)) {
    // Stopping: shutting the control socket tells the worker to finish and exit (closed with
    // the Worker: a tokenizer query may be using it).
    (void)::shutdown(worker.control.get(), SHUT_RDWR);
    for (auto& c : worker.channels) (void)::shutdown(c.get(), SHUT_RDWR);
    for (SharedRegion& r : worker.regions) r.Close();
    if (!WaitReadable(worker.pidfd.get(), kExitGrace)) worker.Kill();
  }
  int status = 0;
  while (::waitpid(worker.pid, &status, 0) < 0 && errno == EINTR) {
  }
  // A batch instance waiting for the dead worker's results hears of it now.
  for (SharedRegion& r : worker.regions) r.Close();
  MutexLock lock(mu_);
  worker.exit_reason = DescribeExit(status);
  if (model_.isolation == Isolation::kSandbox && WIFSIGNALED(status) &&
      WTERMSIG(status) == SIGSYS) {
    worker.exit_reason += ", a sandbox violation: a system call isolation: sandbox forbids";
  }
  worker.exited = true;
  if (current_.get() == &worker) current_.reset();
  // Its counts stay counted: the next worker's start from zero.
  AddSessionCounts(exited_engine_.counters, exited_engine_.histograms, engine_.counters,
                   engine_.histograms);
  engine_ = {};
  NoteExit(worker.exit_reason, ExitMessage(worker.exit_reason));
  cv_.notify_all();
}

void ProcessSession::Supervise() {
  std::deque<Clock::time_point> exits;
  Clock::time_point exited_at, spawned_at;  // of the last exit, and of the start after it
  for (bool first = true;; first = false) {
    spawned_at = Clock::now();
    auto worker = Spawn();
    if (!worker.ok() && first) {
      MutexLock lock(mu_);
      failed_ = worker.status();
      cv_.notify_all();
      return;
    }
    if (worker.ok()) {
      if (!first) {  // the event first: whoever sees the new worker serve finds it recorded
        const auto ready = Clock::now();
        const auto load = std::min<Clock::duration>(
            std::chrono::microseconds((*worker)->facts.load_us), ready - spawned_at);
        const std::string message =
            "pid " + std::to_string((*worker)->pid) + ", serving " + MillisText(ready - exited_at) +
            " after the exit (back-off " + MillisText(spawned_at - exited_at) + ", process start " +
            MillisText(ready - spawned_at - load) + ", model load " + MillisText(load) + ")";
        spdlog::info("model {}: worker restarted: {}", model_.name, message);
        on_event_("worker_restarted", message);
      }
      {
        MutexLock lock(mu_);
        current_ = *worker;
        cv_.notify_all();
      }
      if (const int64_t shed = shed_.load(); shed > 0) (void)Ask({.shed_bytes = shed});
      Watch(**worker);
      if (WaitReadable(stop_.get(), 0ms)) return;
    }
    const std::string reason =
        worker.ok() ? (*worker)->exit_reason : std::string(worker.status().message());
    const std::string why = worker.ok() ? ExitMessage(reason) : reason;
    spdlog::error("model {}: {}", model_.name, why);
    exited_at = Clock::now();
    exits.push_back(exited_at);
    while (!exits.empty() && exited_at - exits.front() > kRestartWindow) exits.pop_front();
    const bool stop = exits.size() > static_cast<size_t>(kMaxRestarts);
    const int slow = static_cast<int>(exits.size()) - kQuickRestarts;
    const auto backoff = slow <= 0 ? 0ms
                                   : std::min<std::chrono::milliseconds>(
                                         100ms * (int64_t{1} << std::min(slow - 1, 10)), kMaxBackoff);
    const std::string stopped =
        why + "; " + std::to_string(exits.size()) + " exits within a minute: no more restarts";
    // The event before the state it explains: whoever sees the model failed finds it recorded.
    on_event_("worker_exited",
              stop ? stopped
                   : why + "; restarting " +
                         (backoff.count() == 0 ? std::string("at once")
                                               : "in " + MillisText(backoff)) +
                         " (exit " + std::to_string(exits.size()) + " within a minute; the " +
                         std::to_string(kMaxRestarts + 1) + "th stops the restarts)");
    {
      MutexLock lock(mu_);
      NoteExit(reason, why);
      if (stop) {
        failed_ = Unavailable(stopped);
        spdlog::error("model {}: {}", model_.name, stopped);
        cv_.notify_all();
        return;
      }
      ++restarts_;
    }
    if (WaitReadable(stop_.get(), backoff)) return;
  }
}

Result<std::unique_ptr<Session>> LoadIsolated(const ModelConfig& model,
                                              WorkerEventSink on_event) {
  auto session = std::make_unique<ProcessSession>(model, std::move(on_event));
  MMS_RETURN_IF_ERROR(session->Start());
  return std::unique_ptr<Session>(std::move(session));
}

std::vector<WorkerProcess> FindWorkerProcesses(pid_t server) {
  std::vector<WorkerProcess> out;
  const std::string parent = std::to_string(server);
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    const auto pid = ParseInt64(it->path().filename().native());
    if (!pid || *pid <= 0 || *pid > INT32_MAX) continue;
    std::ifstream in(it->path() / "cmdline", std::ios::binary);
    std::array<char, 4096> buf{};
    in.read(buf.data(), buf.size());
    // The arguments, each ended by a NUL (a cut-off last one is dropped).
    std::vector<std::string_view> args;
    const std::string_view all(buf.data(), static_cast<size_t>(in.gcount()));
    for (size_t at = 0, nul; (nul = all.find('\0', at)) != std::string_view::npos; at = nul + 1) {
      args.push_back(all.substr(at, nul - at));
    }
    auto value = [&](std::string_view flag) -> std::string_view {
      for (size_t i = 0; i + 1 < args.size(); ++i) {
        if (args[i] == flag) return args[i + 1];
      }
      return {};
    };
    if (args.size() < 2 || args[1] != "worker" || value("--parent") != parent) continue;
    out.push_back({static_cast<pid_t>(*pid), std::string(value("--model"))});
  }
  std::sort(out.begin(), out.end(),
            [](const WorkerProcess& a, const WorkerProcess& b) { return a.pid < b.pid; });
  return out;
}

}  // namespace mmserve
