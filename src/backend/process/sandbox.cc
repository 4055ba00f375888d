#include "backend/process/sandbox.h"

#include <grp.h>
#include <malloc.h>
#include <sys/sysinfo.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#ifdef MMSERVE_HAVE_SECCOMP
#include <seccomp.h>
#endif

namespace mmserve {
namespace {

Status Refused(const std::string& what, int error) {
  return FailedPrecondition("sandbox: " + what + ": " + std::strerror(error));
}

#ifdef MMSERVE_HAVE_SECCOMP
// What inference needs once loaded. Anything absent kills the process.
constexpr const char* kAllowed[] = {
    // memory
    "brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "membarrier",
    // threads and their synchronisation (clone: threads only, below)
    "futex", "set_robust_list", "get_robust_list", "rseq", "gettid", "exit", "exit_group",
    "sched_yield", "sched_getaffinity", "sched_setaffinity", "sched_getparam",
    "sched_getscheduler", "getpriority", "setpriority",
    // time
    "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday",
    // descriptors it already holds: sockets, memfds, stderr
    "read", "write", "readv", "writev", "pread64", "pwrite64", "close", "lseek", "fstat",
    "newfstatat", "fcntl", "poll", "ppoll", "epoll_wait", "epoll_pwait", "epoll_ctl",
    "recvfrom", "recvmsg", "sendto", "sendmsg", "shutdown", "getsockopt", "setsockopt",
    // signals to itself (an abort raises one)
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack", "restart_syscall",
    // what it may ask about itself
    "getpid", "getppid", "getuid", "geteuid", "getgid", "getegid", "getrandom", "getrusage",
    "sysinfo", "uname", "times"};

Status InstallFilter() {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_KILL_PROCESS);
  if (!ctx) return FailedPrecondition("sandbox: seccomp_init failed");
  struct Release {
    scmp_filter_ctx ctx;
    ~Release() { seccomp_release(ctx); }
  } release{ctx};
  int rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);  // every thread, not just this one
  for (const char* name : kAllowed) {
    const int nr = seccomp_syscall_resolve_name(name);
    if (nr != __NR_SCMP_ERROR && rc == 0) rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
  }
  // clone for threads only (a new process has no CLONE_THREAD); clone3 hides its flags in
  // memory a filter cannot read: ENOSYS makes the C library fall back to clone.
  if (rc == 0) {
    rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
                          SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD));
  }
  if (rc == 0) rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
  // prctl to name a thread; tgkill to itself (raise, abort).
  for (int option : {PR_SET_NAME, PR_GET_NAME}) {
    if (rc == 0) {
      rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prctl), 1,
                            SCMP_A0(SCMP_CMP_EQ, static_cast<scmp_datum_t>(option)));
    }
  }
  if (rc == 0) {
    rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(tgkill), 1,
                          SCMP_A0(SCMP_CMP_EQ, static_cast<scmp_datum_t>(::getpid())));
  }
  // ggml asks for the AMX tile state's permission each time it lists its buffer types.
#if defined(__x86_64__)
  for (scmp_datum_t option : {0x1022, 0x1023}) {  // ARCH_GET_XCOMP_PERM, ARCH_REQ_XCOMP_PERM
    if (rc == 0) {
      rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(arch_prctl), 1,
                            SCMP_A0(SCMP_CMP_EQ, option));
    }
  }
#endif
  // getrlimit through prlimit64 on itself, reading only.
  if (rc == 0) {
    rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prlimit64), 2, SCMP_A0(SCMP_CMP_EQ, 0),
                          SCMP_A2(SCMP_CMP_EQ, 0));
  }
  if (rc == 0) rc = seccomp_load(ctx);  // sets no_new_privs first (SCMP_FLTATR_CTL_NNP)
  if (rc != 0) return Refused("seccomp", -rc);
  return Status::Ok();
}
#endif

}  // namespace

Status EnterSandbox() {
#ifndef MMSERVE_HAVE_SECCOMP
  return FailedPrecondition("sandbox: this build has no seccomp");
#else
  const rlimit none{0, 0};
  if (::setrlimit(RLIMIT_CORE, &none) != 0) return Refused("RLIMIT_CORE", errno);
  // The C library counts the CPUs (it reads /sys) the first time a thread needs an arena of its
  // own, to bound their number: bound it now, at its default (8 per CPU).
  ::mallopt(M_ARENA_MAX, 8 * std::max(1, ::get_nprocs()));
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return Refused("no_new_privs", errno);
  if (::geteuid() == 0) {
    constexpr uid_t kNobody = 65534;
    if (::setgroups(0, nullptr) != 0) return Refused("setgroups", errno);
    if (::setresgid(kNobody, kNobody, kNobody) != 0) return Refused("setresgid", errno);
    if (::setresuid(kNobody, kNobody, kNobody) != 0) return Refused("setresuid", errno);
  }
  return InstallFilter();
#endif
}

}  // namespace mmserve
