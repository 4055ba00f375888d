// `isolation: process`: a model whose engine runs in a worker process of its own — the same
// binary's `mmserve worker` subcommand, started with fork+exec — so that a crash or a hang in
// the engine takes down that model's worker, never the server or its other models.
//
// The server side is a Session like any other: the scheduler above it (queues, priorities,
// batching, deadlines, breaker, statistics) is unchanged; each of its instances hands its
// batches to the worker over a socket of its own (worker_wire.h) and waits for the results.
//
//   supervisor thread   one per session: starts the worker, learns of its death at once (its
//                       pidfd), reaps it, and starts it again: at once for the first three
//                       exits within a minute, then after 100 ms doubling to 5 s. The eleventh
//                       exit within a minute stops the restarts: every request answers 503
//                       with the last exit reason, and the model shows FAILED. It is also
//                       the only thread that forks, because the worker's parent-death signal
//                       follows the thread that forked.
//   instances           an execution in flight when the worker dies answers 503 "model worker
//                       for 'm' exited: SIGSEGV"; one that starts while the worker restarts
//                       waits for it, up to its requests' deadline. Abort() (the watchdog found
//                       an execution hung) kills the worker: its memory comes back with it.
//
// The worker dies with the server: its parent-death signal is SIGKILL, and it checks at start
// that its parent is the server that started it.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "common/result.h"
#include "config/model_config.h"

namespace mmserve {

// What the supervisor reports beyond a request's answer, for the server's event log: kind
// "worker_exited" (why — a signal or an exit code — and the delay before the next start, or
// that restarts stopped) and "worker_restarted" (the new pid and how long the model was without
// a worker, split into the back-off, the new process's start and its model load). Called on the
// supervisor thread, with no lock of the session held.
using WorkerEventSink = std::function<void(std::string kind, std::string message)>;

// Starts `model`'s worker and loads the model there; the load's error when it fails (the worker
// has exited by then).
Result<std::unique_ptr<Session>> LoadIsolated(const ModelConfig& model,
                                              WorkerEventSink on_event = {});

// A worker process of a running server, found through /proc by its command line.
struct WorkerProcess {
  pid_t pid = 0;
  std::string model;
};
// The worker processes that server `server` started and that are still there (for `doctor`).
std::vector<WorkerProcess> FindWorkerProcesses(pid_t server);

}  // namespace mmserve
