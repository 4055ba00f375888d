// The sandbox of `isolation: sandbox`: what a model's worker process (`mmserve worker
// --sandbox`) enters once its model is loaded and its instances are made, for every thread it
// has and will have. Process isolation contains a crash; the sandbox contains an exploit of the
// engine (a model file or an image that takes over a native parser) — it can compute, allocate
// and answer on the sockets the worker holds, and nothing else:
//   - no new privileges (PR_SET_NO_NEW_PRIVS) and no core file;
//   - started as root, it becomes nobody (uid and gid 65534, no supplementary groups);
//   - a seccomp filter on every thread (TSYNC) allows what inference needs — memory, threads,
//     futexes, time, reads and writes on descriptors it holds, signals to itself — and kills
//     the process (SIGSYS) on anything else: opening a path, a new socket, connect, exec, fork,
//     ptrace, mount. The server reports that death as a sandbox violation.
#pragma once

#include "common/status.h"

namespace mmserve {

// Enters the sandbox; an error when the kernel refused part of it (nothing is half-entered that
// the caller could rely on: it must exit).
Status EnterSandbox();

}  // namespace mmserve
