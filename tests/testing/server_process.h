// Runs the real mmserve binary as a child process for integration tests: output goes to a log
// file, Start() waits for the "listening on" line and reads the ephemeral port from it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "testing/paths.h"
#include "testing/test_util.h"

namespace mmserve::testing {

class ServerProcess {
 public:
  // `args` follow the binary name, e.g. {"serve", "c.yaml", "--port", "0"}. `program` is the
  // mmserve binary unless given (e.g. "/bin/bash" to run a script that execs it).
  ServerProcess(std::vector<std::string> args, std::filesystem::path log,
                std::string program = MmserveBinary());
  ~ServerProcess();  // SIGKILLs a child still running

  // Starts the child and waits up to `timeout` for it to listen; false if it exited or timed out.
  bool Start(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  int port() const { return port_; }
  pid_t pid() const { return pid_; }

  // Sends `signal` and waits for the exit; returns the exit code (or 128 + signal number).
  int Stop(int signal, std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // Waits for the child to exit on its own; returns the exit code, or -1 on timeout.
  int Wait(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  std::string Log() const;

  // Runs the binary to completion (validate, doctor); returns {exit code, stdout+stderr}.
  static std::pair<int, std::string> Run(const std::vector<std::string>& args);

 private:
  std::string program_;
  std::vector<std::string> args_;
  std::filesystem::path log_;
  pid_t pid_ = -1;
  int port_ = 0;
};

// `mmserve serve` of a YAML config written to a temporary directory of its own, with its own
// lock directory (tests never contend for a device lock) and its log there. `prefix`: a
// program (and its arguments) that runs the server, e.g. {"prlimit", "--nofile=64"}.
class ConfiguredServer {
 public:
  explicit ConfiguredServer(const std::string& yaml, std::vector<std::string> prefix = {});
  bool Start() { return process_->Start(); }
  int port() const { return process_->port(); }
  std::string Log() const { return process_->Log(); }
  ServerProcess& process() { return *process_; }
  const TempDir& dir() const { return dir_; }
  const std::filesystem::path& file() const { return file_; }
  std::filesystem::path lock_dir() const { return dir_.path() / "locks"; }

 private:
  TempDir dir_;  // first: outlives the process
  std::filesystem::path file_;
  std::unique_ptr<ServerProcess> process_;
};

}  // namespace mmserve::testing
