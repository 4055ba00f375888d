#include "backend/file_probe.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>

#include "common/strings.h"

namespace mmserve {
namespace {

constexpr size_t kMaxAnswerBytes = 64 * 1024;  // what is read back of the child's stdout
constexpr size_t kMaxKept = 256;               // outcomes ProbeOnce keeps
constexpr rlim_t kMaxWrittenBytes = 1 << 20;   // the largest file the child may write

// ProbesLimitAddressSpace().
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif
// Starts the child's answer on stdout: "ok <what it found>" or "error <why>", one line.
constexpr std::string_view kAnswerMarker = "\n\x1emmserve-probe ";

Status Errno(const std::string& what) {
  return Unavailable("cannot run a file probe: " + what + ": " + std::strerror(errno));
}

Result<Fd> Memfd(const char* name) {
  Fd fd(::memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (fd.get() < 0) return Errno("memfd_create");
  return fd;
}

// At most `max` bytes of what `fd` (a memfd) holds, from its start.
std::string ReadBack(int fd, size_t max) {
  std::string out(max, '\0');
  const ssize_t n = ::pread(fd, out.data(), max, 0);
  out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return out;
}

// The last non-empty line of what the child wrote on stderr (its own last words: an assertion),
// escaped and bounded.
std::string LastWords(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size <= 0) return "";
  const off_t from = std::max<off_t>(0, st.st_size - 4096);
  std::string tail(static_cast<size_t>(st.st_size - from), '\0');
  const ssize_t n = ::pread(fd, tail.data(), tail.size(), from);
  tail.resize(n > 0 ? static_cast<size_t>(n) : 0);
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == '\r')) tail.pop_back();
  if (const size_t nl = tail.rfind('\n'); nl != std::string::npos) tail.erase(0, nl + 1);
  return Abbreviate(EscapeControl(tail), 300);
}

// Waits for `pid` (via its pidfd) at most `wall`; kills it past that. Its wait status, or
// nullopt when it ran out of time.
std::optional<int> Reap(pid_t pid, int pidfd, std::chrono::seconds wall) {
  pollfd p{.fd = pidfd, .events = POLLIN, .revents = 0};
  const auto until = std::chrono::steady_clock::now() + wall;
  bool exited = false;
  while (!exited) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    const int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 60'000)));
    exited = r > 0 || (r < 0 && errno != EINTR && errno != EAGAIN);
  }
  if (!exited) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!exited) return std::nullopt;
  return status;
}

}  // namespace

Result<FileIdentity> IdentityOf(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return NotFound(std::string("fstat: ") + std::strerror(errno));
  const auto ns = [](const timespec& t) { return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec; };
  return FileIdentity{.device = st.st_dev,
                      .inode = st.st_ino,
                      .size = static_cast<int64_t>(st.st_size),
                      .modified_ns = ns(st.st_mtim),
                      .changed_ns = ns(st.st_ctim)};
}

namespace {
std::atomic<bool> probe_capable{false};
}  // namespace

void MarkProbeCapable() { probe_capable = true; }

bool ProbesLimitAddressSpace() { return !kSanitized; }

namespace {

// Starts the child: `args`, with `in`, `out` and `err` as its standard descriptors and
// `spec.fd` inherited, under the spec's limits.
Result<pid_t> Spawn(const ProbeSpec& spec, std::vector<std::string>& args, int in, int out,
                    int err) {
  // Everything the child needs is built before fork: between fork and exec only
  // async-signal-safe calls run.
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const rlimit memory{static_cast<rlim_t>(spec.address_space_bytes),
                      static_cast<rlim_t>(spec.address_space_bytes)};
  // SIGXCPU at the soft limit (reported as the CPU limit), SIGKILL a little later if ignored.
  const rlimit cpu{static_cast<rlim_t>(spec.cpu.count()), static_cast<rlim_t>(spec.cpu.count() + 5)};
  const rlimit none{0, 0};
  const rlimit written{kMaxWrittenBytes, kMaxWrittenBytes};
  sigset_t all;
  sigemptyset(&all);
  const pid_t pid = ::fork();
  if (pid < 0) return Errno("fork");
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::sigprocmask(SIG_SETMASK, &all, nullptr);  // the server blocks its own signals
    if (spec.address_space_bytes > 0 && !kSanitized) ::setrlimit(RLIMIT_AS, &memory);
    ::setrlimit(RLIMIT_CPU, &cpu);
    ::setrlimit(RLIMIT_CORE, &none);  // a crash leaves no core file of a hostile input
    // Its answer and log are files (memfds) too: no file it writes grows past a bound, and a
    // write past it fails rather than killing the child (an ignored signal stays so in exec).
    ::setrlimit(RLIMIT_FSIZE, &written);
    ::signal(SIGXFSZ, SIG_IGN);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);  // nothing of the server's leaks into it
    if (spec.fd >= 0) ::fcntl(spec.fd, F_SETFD, 0);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

// What the child's wait `status`, its stdout (`out`) and stderr (`err`) say.
Result<std::string> Outcome(const ProbeSpec& spec, const std::string& program, int status,
                            int out, int err) {
  const std::string on = " on '" + spec.file + "'";
  const std::string words = LastWords(err);
  const std::string said = words.empty() ? "" : ": " + words;
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const std::string name = SignalName(sig);
    const char* why = sig == SIGXCPU ? "its CPU time limit"
                      : sig == SIGKILL ? "killed, likely for memory"
                                       : strsignal(sig);
    return InvalidArgument(spec.what + " crashed" + on + " (" + name + ", " + why + ")" + said);
  }
  const int code = WEXITSTATUS(status);
  // The answer is the last line that starts with the marker; what the child logged on stdout
  // before or after it is not (the answer holds no newline: WriteProbeAnswer escapes it).
  const std::string out_text = ReadBack(out, kMaxAnswerBytes);
  const size_t at = out_text.rfind(kAnswerMarker);
  if (code == 0 && at != std::string::npos) {
    const size_t from = at + kAnswerMarker.size();
    const std::string answer = out_text.substr(from, out_text.find('\n', from) - from);
    if (answer.starts_with("ok ")) return answer.substr(3);
    if (answer.starts_with("error ")) return InvalidArgument(answer.substr(6) + said);
  }
  if (code == 127) return Unavailable("cannot run a file probe: " + program + said);
  return InvalidArgument(spec.what + " exited with code " + std::to_string(code) + on +
                         " without an answer" + said);
}

}  // namespace

Result<std::string> RunProbe(const ProbeSpec& spec) {
  if (spec.command.empty() && !probe_capable) {
    return Internal("this binary does not run file probes (MarkProbeCapable, file_probe.h)");
  }
  // Standard input is an empty file: the server's /dev may not exist (a distroless container).
  MMS_ASSIGN_OR_RETURN(Fd in, Memfd("mmserve-probe-in"));
  MMS_ASSIGN_OR_RETURN(Fd out, Memfd("mmserve-probe-out"));
  MMS_ASSIGN_OR_RETURN(Fd err, Memfd("mmserve-probe-err"));
  std::vector<std::string> args = spec.command;
  if (args.empty()) {
    // Its log would bury the parser's last words on stderr: errors only.
    args = {"/proc/self/exe", "probe",       spec.backend,      std::to_string(spec.fd),
            std::to_string(spec.arg), "--log-level", "error", "--no-access-log"};
  }
  MMS_ASSIGN_OR_RETURN(const pid_t pid, Spawn(spec, args, in.get(), out.get(), err.get()));
  Fd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  if (pidfd.get() < 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return Errno("pidfd_open");
  }
  const std::optional<int> status = Reap(pid, pidfd.get(), spec.wall);
  if (!status) {
    return DeadlineExceeded(spec.what + " did not finish on '" + spec.file + "' within " +
                            std::to_string(spec.wall.count()) + " s");
  }
  return Outcome(spec, args[0], *status, out.get(), err.get());
}

Result<std::string> ProbeOnce(ProbeSpec spec, const FileIdentity& identity,
                              const std::function<Result<Fd>()>& open_file) {
  using Key = std::tuple<dev_t, ino_t, int64_t, int64_t, int64_t, std::string, int64_t,
                         std::vector<std::string>>;
  static std::mutex mu;
  static std::map<Key, Result<std::string>> kept;
  const Key key{identity.device,      identity.inode,      identity.size,
                identity.modified_ns, identity.changed_ns, spec.backend,
                spec.arg,             spec.command};
  {
    std::lock_guard lock(mu);
    if (auto it = kept.find(key); it != kept.end()) return it->second;
  }
  Fd opened;
  if (open_file) {
    MMS_ASSIGN_OR_RETURN(opened, open_file());
    spec.fd = opened.get();
  }
  Result<std::string> outcome = RunProbe(spec);
  const StatusCode code = outcome.ok() ? StatusCode::kOk : outcome.status().code();
  if (code == StatusCode::kOk || code == StatusCode::kInvalidArgument) {
    std::lock_guard lock(mu);
    if (kept.size() >= kMaxKept) kept.clear();
    kept.emplace(key, outcome);
  }
  return outcome;
}

Result<std::string> ReadWhole(int fd, int64_t max_bytes) {
  MMS_ASSIGN_OR_RETURN(FileIdentity id, IdentityOf(fd));
  if (id.size < 0 || id.size > max_bytes) {
    return InvalidArgument("holds " + std::to_string(id.size) + " bytes, more than the " +
                           std::to_string(max_bytes) + " allowed");
  }
  std::string bytes(static_cast<size_t>(id.size), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::pread(fd, bytes.data() + done, bytes.size() - done,
                              static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return NotFound("could not be read whole");
    done += static_cast<size_t>(n);
  }
  return bytes;
}

Result<FileSnapshot> ReadSnapshot(const std::filesystem::path& path, int64_t max_bytes) {
  const std::string name = "'" + path.string() + "'";
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return NotFound(name + ": " + std::strerror(errno));
  FileSnapshot snapshot;
  MMS_ASSIGN_OR_RETURN(snapshot.identity, IdentityOf(fd.get()));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return NotFound(name + " is not a readable file");
  }
  auto bytes = ReadWhole(fd.get(), max_bytes);
  if (!bytes.ok()) return bytes.status().WithContext(name);
  snapshot.bytes = std::move(*bytes);
  auto after = IdentityOf(fd.get());
  if (!after.ok() || !(*after == snapshot.identity)) {
    return Unavailable(name + " changed while it was read");
  }
  return snapshot;
}

Result<Fd> SealedCopy(std::string_view bytes) {
  MMS_ASSIGN_OR_RETURN(Fd fd, Memfd("mmserve-probe-file"));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Errno("writing a memfd");
    done += static_cast<size_t>(n);
  }
  if (::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) !=
      0) {
    return Errno("sealing a memfd");
  }
  return fd;
}

int WriteProbeAnswer(const Result<std::string>& answer) {
  const std::string text =
      std::string(kAnswerMarker) +
      (answer.ok() ? "ok " + EscapeControl(*answer)
                   : "error " + EscapeControl(answer.status().message())) +
      "\n";
  std::fwrite(text.data(), 1, text.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace mmserve
