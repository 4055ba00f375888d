// File probes: a third-party parser run over an untrusted model file in a short-lived child
// process, so that a file that crashes it kills the child, not the server. OpenCV's ONNX
// importer dies of SIGFPE on a Conv with `group: 0`; llama.cpp's loader aborts on files its
// checks miss. No such parser reads a model file in the server before a probe of the same file
// has survived it (docs/RELIABILITY.md, "Hardening round 2", F1).
//
// The child is this binary again (`mmserve probe BACKEND FD ARG`, hidden; Backend::ProbeFile),
// started with fork+exec and resource limits (address space, CPU time, no core file, no file
// written past 1 MiB). Its answer is trusted only if it exits normally with one; a death is the
// file's error: "OpenCV's ONNX importer crashed on 'conv.onnx' (SIGFPE)".
//
// A probe runs once per file version: ProbeOnce keeps the outcome by the file's identity (device,
// inode, size, modification and change times). A write changes the change time, which no user
// can set back, so an unchanged identity means the bytes probed are the bytes read.
//
// Thread-safe.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/fd.h"
#include "common/result.h"

namespace mmserve {

struct FileIdentity {
  dev_t device = 0;
  ino_t inode = 0;
  int64_t size = 0;
  int64_t modified_ns = 0;
  int64_t changed_ns = 0;
  bool operator==(const FileIdentity&) const = default;
};
Result<FileIdentity> IdentityOf(int fd);

struct ProbeSpec {
  // The child runs backend `backend`'s ProbeFile(fd, arg): `/proc/self/exe probe BACKEND FD ARG`
  // (logging errors only).
  std::string backend;
  int64_t arg = 0;
  std::vector<std::string> command;  // instead, when set (tests): argv
  std::string what;                  // for messages: "OpenCV's ONNX importer"
  std::string file;                  // for messages: the file's name
  int fd = -1;                       // inherited by the child (the file, or a SealedCopy)
  int64_t address_space_bytes = int64_t{16} << 30;  // 0: no limit
  std::chrono::seconds cpu{120};
  std::chrono::seconds wall{300};
};

// Says that this binary answers `probe BACKEND FD ARG` as the child (mmserve's main; a test that
// serves its own probes). RunProbe refuses to start any other binary as its own child: a test
// binary that did not would run its whole suite again, and probe again, in each child.
void MarkProbeCapable();

// Whether a child's address space is limited: not in a build with AddressSanitizer or
// ThreadSanitizer, whose shadow memory takes terabytes of it.
bool ProbesLimitAddressSpace();

// Runs the probe in a child and returns what it answered. An error says why: the child's
// answer (the parser's own error: InvalidArgument), or how it died (InvalidArgument naming the
// signal), or that it ran out of time (DeadlineExceeded) or could not start (Unavailable).
Result<std::string> RunProbe(const ProbeSpec& spec);

// RunProbe's outcome for the file at `spec.fd` whose identity is `identity`, kept for the next
// probe of the same file version and command. Outcomes that say nothing of the file (a child
// that could not start, or ran out of time on a loaded machine) are not kept.
// `open_file`, when given, makes the descriptor the child reads (it becomes `spec.fd`), and is
// called only when no outcome is kept: a copy of a large file costs nothing on the next probe.
Result<std::string> ProbeOnce(ProbeSpec spec, const FileIdentity& identity,
                              const std::function<Result<Fd>()>& open_file = nullptr);

// The bytes of the regular file at `path` (at most `max_bytes`) and the identity they were
// read at; an error that names the file when it cannot be read or changed while it was.
struct FileSnapshot {
  std::string bytes;
  FileIdentity identity;
};
Result<FileSnapshot> ReadSnapshot(const std::filesystem::path& path, int64_t max_bytes);
// All of the file at `fd` from its start, at most `max_bytes` (the probe child's read).
Result<std::string> ReadWhole(int fd, int64_t max_bytes);

// A sealed memfd holding `bytes`: what a probe reads when the server holds a file's bytes.
Result<Fd> SealedCopy(std::string_view bytes);

// The child's side: writes `answer` on stdout as the parent reads it; returns the exit code.
int WriteProbeAnswer(const Result<std::string>& answer);

}  // namespace mmserve
