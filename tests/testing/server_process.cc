#include "testing/server_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <regex>
#include <thread>

#include "testing/test_util.h"

namespace mmserve::testing {
namespace {

pid_t Spawn(std::string binary, const std::vector<std::string>& args,
            const std::filesystem::path& log) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ::dup2(fd, 1);
  ::dup2(fd, 2);
  // The test runner may block signals; the server sets its own mask.
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  std::vector<char*> argv;
  argv.push_back(binary.data());
  std::vector<std::string> copy = args;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(binary.c_str(), argv.data());
  ::_exit(127);
}

int ExitCode(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

ServerProcess::ServerProcess(std::vector<std::string> args, std::filesystem::path log,
                             std::string program)
    : program_(std::move(program)), args_(std::move(args)), log_(std::move(log)) {}

ConfiguredServer::ConfiguredServer(const std::string& yaml, std::vector<std::string> prefix)
    : file_(dir_.Write("models.yaml", yaml)) {
  std::vector<std::string> args = {"serve", file_.string(), "--port", "0", "--lock-dir",
                                   lock_dir().string()};
  const auto log = dir_.path() / "server.log";
  if (prefix.empty()) {
    process_ = std::make_unique<ServerProcess>(std::move(args), log);
    return;
  }
  const std::string program = prefix.front();
  prefix.erase(prefix.begin());
  prefix.push_back(MmserveBinary());
  prefix.insert(prefix.end(), args.begin(), args.end());
  process_ = std::make_unique<ServerProcess>(std::move(prefix), log, program);
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

bool ServerProcess::Start(std::chrono::milliseconds timeout) {
  pid_ = Spawn(program_, args_, log_);
  static const std::regex kListening(R"(listening on http://[0-9.]+:([0-9]+))");
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    std::smatch m;
    const std::string log = Log();
    if (std::regex_search(log, m, kListening)) {
      port_ = std::stoi(m[1].str());
      return true;
    }
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

int ServerProcess::Wait(std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (pid_ > 0 && std::chrono::steady_clock::now() < end) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return ExitCode(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

int ServerProcess::Stop(int signal, std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return -1;
  ::kill(pid_, signal);
  return Wait(timeout);
}

std::string ServerProcess::Log() const { return ReadFile(log_); }

std::pair<int, std::string> ServerProcess::Run(const std::vector<std::string>& args) {
  TempDir dir;
  const auto log = dir.path() / "out.log";
  ServerProcess p(args, log);
  p.pid_ = Spawn(MmserveBinary(), args, log);
  const int code = p.Wait(std::chrono::seconds(60));
  return {code, p.Log()};
}

}  // namespace mmserve::testing
