// `mmserve worker`: the process side of `isolation: process` (process_session.h). Started by
// the server only, with fork+exec; serves one model over the sockets it inherited.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <vector>

#include "backend/backend_registry.h"
#include "runtime/runtime_guard.h"

namespace mmserve {

struct WorkerArgs {
  pid_t parent = 0;           // the server that started it: any other parent is refused
  int control = -1;           // the control socket: kInit in, kReady/kFailed out
  std::vector<int> channels;  // one socket per instance: kBatch in, kResults out
  std::vector<int> regions;   // one memfd per channel (shared_region.h), as many as channels
  bool sandbox = false;       // `isolation: sandbox`: enter it once the instances are made
};

// Loads the model the control socket names (its runtime's only initialization in this
// process), answers batches on each channel with an instance on a thread of its own, and
// returns, with everything torn down in reverse, once the server closes the control socket.
// With `sandbox`, every instance is made first, then the process enters the sandbox
// (sandbox.h), then the channels serve.
// `stages` wraps the loaded session in what the model's config puts around it (the image
// stages, vision_session.h): the same function the server applies in-process, so that an
// isolated model's images are decoded here, in the worker, never in the server. May be empty.
// The process's exit code: 0, or 1 when the parent is not the server or the load failed.
using SessionStages = std::function<Result<std::unique_ptr<Session>>(std::unique_ptr<Session>,
                                                                     const ModelConfig&)>;
int RunWorker(const WorkerArgs& args, const BackendRegistry& backends, RuntimeGuard& guard,
              const SessionStages& stages);

}  // namespace mmserve
