// mmserve: a multi-model inference server. `mmserve serve|validate|doctor|quantize|version`.
// Exit codes (app/server_builder.h): 0 ok, 1 validate found errors, 2 invalid config, 3 device
// locked, 4 memory plan does not fit, 5 a port cannot be bound, 6 a runtime failed.
#include <signal.h>

#include <iostream>
#include <optional>

#include <CLI/CLI.hpp>

#include "app/remote.h"
#include "app/server_builder.h"
#include "backend/file_probe.h"
#include "backend/llama/llama_quantize.h"
#include "backend/process/worker_main.h"
#include "backend/vision/vision_session.h"
#include "build_info.h"  // generated: cmake/build_info.cmake
#include "common/strings.h"
#include "common/logging.h"
#include "runtime/device_lock.h"

namespace {

// `serve`'s arguments: what to serve (a YAML file, a model directory or file, or --model files:
// one of them) and where to listen.
CLI::App* AddServeCommand(CLI::App& app, mmserve::ServeOptions& serve) {
  auto* serve_cmd = app.add_subcommand(
      "serve", "serve the models of a YAML file, a model directory, or --model files");
  auto* config_opt = serve_cmd->add_option("config", serve.config,
                                           "YAML file, a directory of model files, or one model file")
                          ->check(CLI::ExistingPath);
  auto* model_dir_opt =
      serve_cmd
          ->add_option("--model-dir", serve.config,
                       "serve every model file in this directory, or this one model file "
                       "(KServe's /mnt/models): the same as giving it as the config")
          ->check(CLI::ExistingPath)
          ->excludes(config_opt);
  auto* model_name_opt =
      serve_cmd->add_option("--model-name", serve.model_name,
                            "with a model directory holding one model: its name (KServe passes "
                            "the InferenceService's)");
  auto* model_opt =
      serve_cmd
          ->add_option("--model", serve.models,
                       "[NAME=]PATH of a model file to serve without a YAML file (repeatable; "
                       "NAME defaults to the file's stem)")
          ->allow_extra_args(false)  // one path per --model; a YAML after it is not a model
          ->excludes(config_opt)
          ->excludes(model_dir_opt)
          ->excludes(model_name_opt);
  serve_cmd
      ->add_option("--task", serve.tasks,
                   "with --model: the task (embed, rerank, generate...): one for every model, "
                   "or one per --model in order; default: a GGUF file's own, from its header")
      ->allow_extra_args(false)
      ->needs(model_opt);
  config_opt->excludes(model_dir_opt)->excludes(model_opt);
  model_dir_opt->excludes(model_opt);
  serve_cmd->add_option("--host", serve.host, "address to bind (default: global.host, 127.0.0.1)");
  serve_cmd->add_option("--port", serve.port, "port (default: global.port, 8000; 0 = any free)")
      ->check(CLI::Range(0, 65535));
  serve_cmd->add_option("--grpc-port", serve.grpc_port,
                        "KServe v2 gRPC port (default: global.grpc_port, none; 0 = any free; "
                        "-1 = none)")
      ->check(CLI::Range(-1, 65535));
  serve_cmd
      ->add_option("--allowed-host", serve.allowed_hosts,
                   "a Host name to serve besides IP addresses, localhost and this machine's "
                   "name (repeatable or comma-separated; \".suffix\" or \"*\"): added to "
                   "global.allowed_hosts")
      ->delimiter(',')
      ->check([](const std::string& host) -> std::string {
        if (host.empty() || host.find_first_of(":/ \t[]@") != std::string::npos) {
          return "'" + host + "' is not a host name (no scheme, port or path)";
        }
        return {};
      });
  serve_cmd->add_option("--lock-dir", serve.lock_dir, "device lock directory");

  return serve_cmd;
}

// `ps`, `load NAME`, `unload NAME`: the running server at --url (or MMSERVE_URL).
struct RemoteCommands {
  CLI::App* ps = nullptr;
  CLI::App* load = nullptr;
  CLI::App* unload = nullptr;
  mmserve::RemoteOptions options;
  std::string name;

  void Add(CLI::App& app) {
    ps = app.add_subcommand("ps", "the running server's models: state, memory, keep-alive");
    load = app.add_subcommand("load", "load a model on the running server");
    unload = app.add_subcommand("unload", "unload a model on the running server");
    for (CLI::App* cmd : {ps, load, unload}) {
      cmd->add_option("--url", options.url, "the server (default http://127.0.0.1:8000)")
          ->envname("MMSERVE_URL");
    }
    for (CLI::App* cmd : {load, unload}) {
      cmd->add_option("name", name, "the model's name")->required();
    }
  }
  // The exit code of the command given, or nullopt when none of these was.
  std::optional<int> Run() const {
    if (*ps) return mmserve::Ps(options);
    if (*load) return mmserve::LoadOrUnload(options, name, true);
    if (*unload) return mmserve::LoadOrUnload(options, name, false);
    return std::nullopt;
  }
};

// "5,7,9": descriptors the worker inherited.
bool ParseFds(std::string_view rest, std::vector<int>& fds) {
  while (!rest.empty()) {
    const size_t comma = std::min(rest.find(','), rest.size());
    auto fd = mmserve::ParseInt64(rest.substr(0, comma));
    if (!fd || *fd < 3 || *fd > 1'000'000) return false;
    fds.push_back(static_cast<int>(*fd));
    rest.remove_prefix(std::min(comma + 1, rest.size()));
  }
  return true;
}

// `worker`: started by the server for a model with `isolation: process`, never by hand (hidden
// from --help). Its descriptors are the server's sockets, inherited across exec.
struct WorkerCommand {
  CLI::App* cmd = nullptr;
  int64_t parent = 0;
  int control = -1;
  std::string channels;
  std::string regions;
  std::string model;  // for ps and /proc readers: which model this worker serves
  bool sandbox = false;  // isolation: sandbox (backend/process/sandbox.h)

  void Add(CLI::App& app) {
    cmd = app.add_subcommand("worker", "a model's worker process (started by the server)");
    cmd->group("");
    cmd->add_option("--parent", parent)->required();
    cmd->add_option("--control", control)->required();
    cmd->add_option("--channels", channels)->required();
    cmd->add_option("--regions", regions)->required();
    cmd->add_option("--model", model);
    cmd->add_flag("--sandbox", sandbox);
  }
  int Run() const {
    mmserve::WorkerArgs args{
        .parent = static_cast<pid_t>(parent), .control = control, .sandbox = sandbox};
    if (!ParseFds(channels, args.channels) || !ParseFds(regions, args.regions)) return 1;
    mmserve::BuiltIns builtins;
    mmserve::RuntimeGuard guard;
    return mmserve::RunWorker(args, builtins.backends, guard, mmserve::WithImageStages);
  }
};

// `probe BACKEND FD ARG`: the child a file probe starts (backend/file_probe.h), never by hand
// (hidden from --help). Runs the backend's third-party parser over the inherited file FD and
// writes its answer on stdout; a file that crashes the parser crashes this process only.
struct ProbeCommand {
  CLI::App* cmd = nullptr;
  std::string backend;
  int fd = -1;
  int64_t arg = 0;

  void Add(CLI::App& app) {
    cmd = app.add_subcommand("probe", "a model file's probe (started by the server)");
    cmd->group("");
    cmd->add_option("backend", backend)->required();
    cmd->add_option("fd", fd)->required();
    cmd->add_option("arg", arg)->required();
  }
  int Run() const {
    mmserve::BuiltIns builtins;
    mmserve::RuntimeGuard guard;
    auto answer = [&]() -> mmserve::Result<std::string> {
      MMS_ASSIGN_OR_RETURN(mmserve::Backend * found, builtins.backends.Find(backend));
      MMS_ASSIGN_OR_RETURN(mmserve::RuntimeLease lease, guard.Acquire(found->runtime(), 0));
      return found->ProbeFile(fd, arg);
    }();
    return mmserve::WriteProbeAnswer(answer);
  }
};

// `quantize IN OUT TYPE`: a GGUF file with smaller weights (backend/llama/llama_quantize.h),
// the memory plan's advice for a model that does not fit. Exit 1 on any error.
struct QuantizeCommand {
  CLI::App* cmd = nullptr;
  std::string in, out, type;
  int threads = 0;

  void Add(CLI::App& app) {
    cmd = app.add_subcommand("quantize", "write a GGUF model with quantized weights "
                                         "(llama.cpp's quantizer): e.g. IN.gguf OUT.gguf Q4_K_M");
    cmd->add_option("in", in, "the GGUF file to read (F32, F16 or BF16 weights)")
        ->required()
        ->check(CLI::ExistingFile);
    cmd->add_option("out", out, "the GGUF file to write")->required();
    cmd->add_option("type", type, mmserve::Join(mmserve::QuantizeTypes(), ", "))->required();
    cmd->add_option("--threads", threads, "threads (default: every core)")
        ->check(CLI::Range(0, 1024));
  }
  int Run() const {
    mmserve::BuiltIns builtins;
    mmserve::RuntimeGuard guard;
    const auto done = [&]() -> mmserve::Result<mmserve::Quantized> {
      MMS_ASSIGN_OR_RETURN(mmserve::Backend * llama, builtins.backends.Find("llama"));
      MMS_ASSIGN_OR_RETURN(mmserve::RuntimeLease lease, guard.Acquire(llama->runtime(), 0));
      return mmserve::QuantizeGguf(in, out, type, threads);
    }();
    if (!done.ok()) {
      std::cerr << "quantize: " << done.status().message() << "\n";
      return 1;
    }
    std::cout << "wrote " << out << " (" << type << "): weights "
              << mmserve::FormatMib(done->weights_before) << " -> "
              << mmserve::FormatMib(done->weights_after)
              << "; point the model's path at it and run `mmserve validate` for the plan\n";
    return 0;
  }
};

void PrintVersion() {
  mmserve::BuiltIns builtins;
  std::cout << "mmserve " << MMSERVE_VERSION << " (commit " << MMSERVE_COMMIT << ")\n"
            << "llama.cpp " << MMSERVE_LLAMA_TAG << " (commit " << MMSERVE_LLAMA_COMMIT
            << ", from node-llama-cpp's bundle)\n"
            << "backends: " << mmserve::Join(builtins.backends.BuiltIn(), ", ") << "\n"
            << "build: " << MMSERVE_BUILD_FLAGS << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  // Block the termination and reload signals before any thread starts, so every thread inherits the mask
  // and Serve() alone receives them through sigwait.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);  // reload
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);

  CLI::App app{"mmserve: many models, one server, one YAML file"};
  app.require_subcommand(1);
  std::string log_level;  // empty: global.log_level of the served config, else info
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error (default: the "
                                           "config's global.log_level, else info)")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  std::string log_format = "text";
  app.add_option("--log-format", log_format, "text, or json (one JSON object per line)")
      ->check(CLI::IsMember({"text", "json"}));
  bool access_log = true;
  app.add_flag("--access-log,!--no-access-log", access_log,
               "a line per inference request at info (default: on)");
  app.fallthrough();  // the options above may follow the subcommand too

  mmserve::ServeOptions serve;
  serve.lock_dir = mmserve::DeviceLock::DefaultDir();
  auto* serve_cmd = AddServeCommand(app, serve);

  std::filesystem::path validate_config;
  auto* validate_cmd = app.add_subcommand("validate", "validate a YAML file; load nothing");
  validate_cmd->add_option("config", validate_config, "YAML file, or a directory of model files")
      ->required();
  bool validate_no_plan = false;
  validate_cmd->add_flag("--no-plan", validate_no_plan,
                         "skip the memory plan (by default it is printed per device, and a plan "
                         "that does not fit fails validation as it fails serve)");

  std::filesystem::path doctor_lock_dir = mmserve::DeviceLock::DefaultDir();
  auto* doctor_cmd = app.add_subcommand("doctor", "what this host offers: CPU, memory, runtimes");
  doctor_cmd->add_option("--lock-dir", doctor_lock_dir, "device lock directory");

  auto* version_cmd = app.add_subcommand("version", "print the version");
  RemoteCommands remote;
  remote.Add(app);
  WorkerCommand worker;
  worker.Add(app);
  ProbeCommand probe;
  probe.Add(app);
  QuantizeCommand quantize;
  quantize.Add(app);

  CLI11_PARSE(app, argc, argv);
  if (*serve_cmd && serve.config.empty() && serve.models.empty()) {
    std::cerr << "serve: a YAML file, a model directory or --model is required\n";
    return mmserve::kExitConfig;
  }
  mmserve::ConfigureLogging(log_level.empty() ? "info" : log_level,
                            log_format == "json" ? mmserve::LogFormat::kJson
                                                 : mmserve::LogFormat::kText,
                            access_log);
  serve.log_level_from_config = log_level.empty();
  if (*probe.cmd) return probe.Run();
  mmserve::MarkProbeCapable();  // this binary is its own probe child
  if (*worker.cmd) return worker.Run();
  if (*serve_cmd) return mmserve::Serve(serve);
  if (*validate_cmd) return mmserve::Validate(validate_config, !validate_no_plan);
  if (*doctor_cmd) return mmserve::Doctor(doctor_lock_dir);
  if (*quantize.cmd) return quantize.Run();
  if (*version_cmd) PrintVersion();
  if (auto code = remote.Run()) return *code;
  return 0;
}
