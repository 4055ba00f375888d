// `isolation: process`: a model whose engine runs in a worker process of its own — the same
// binary's `mmserve worker` subcommand, started with fork+exec — so that a crash or a hang in
// the engine takes down that model's worker, never the server or its other models.
//
// The server side is a Session like any other: the scheduler above it (queues, priorities,
// batching, deadlines, breaker, statistics) is unchanged; each of its instances hands its
// batches to the worker over a socket of its own (worker_wire.h) and waits for the results.
//
//   supervisor thread   one per session: starts the worker, learns of its death at once (its
//                       pidfd), reaps it, and starts it again after a back-off (50 ms, doubling
//                       to 5 s; reset after 30 s of service). More than kMaxRestarts exits within
//                       kRestartWindow: the model stops restarting and every request answers
//                       503 with the last exit reason. It is also the only thread that forks,
//                       because the worker's parent-death signal follows the thread that forked.
//   instances           an execution in flight when the worker dies answers 503 "model worker
//                       for 'm' exited: SIGSEGV"; one that starts while the worker restarts
//                       waits for it, up to its requests' deadline. Abort() (the watchdog found
//                       an execution hung) kills the worker: its memory comes back with it.
//
// The worker dies with the server: its parent-death signal is SIGKILL, and it checks at start
// that its parent is the server that started it.
#pragma once

#include <memory>

#include "backend/backend.h"
#include "common/result.h"
#include "config/model_config.h"

namespace mmserve {

// Starts `model`'s worker and loads the model there; the load's error when it fails (the worker
// has exited by then).
Result<std::unique_ptr<Session>> LoadIsolated(const ModelConfig& model);

}  // namespace mmserve
