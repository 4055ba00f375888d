#include "backend/process/shared_region.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <climits>
#include <cstring>
#include <string>
#include <utility>

#include "backend/process/worker_wire.h"

namespace mmserve {

// The header's words. `number` is the futex both sides wait on.
struct SharedRegion::Turn {
  uint32_t number;    // the turn: odd after the server's send, even after the worker's; kClosed
  uint32_t sleeping;  // which sides wait in the kernel for `number` to change (kServer, kWorker)
  uint64_t length;    // the payload's bytes, written before the turn passes
};

namespace {

static_assert(sizeof(void*) == 8, "a region maps its largest size: 64-bit address space only");
static_assert(std::atomic_ref<uint32_t>::is_always_lock_free &&
              std::atomic_ref<uint64_t>::is_always_lock_free);

constexpr uint32_t kClosed = 1u << 31;
constexpr uint32_t kServer = 1, kWorker = 2;  // bits of Turn::sleeping
constexpr uint32_t Next(uint32_t n) { return (n + 1) & ~kClosed; }

Status Failed(const char* call) {
  return Unavailable(std::string("shared memory: ") + call + ": " + std::strerror(errno));
}
Status Closed() { return Unavailable("shared memory: the channel was closed"); }

// The file's size that holds a payload of `bytes`: the header, then a power of two of at least
// kInitialBytes.
size_t FileFor(uint64_t bytes) {
  return SharedRegion::kHeaderBytes +
         std::max(SharedRegion::kInitialBytes, std::bit_ceil(static_cast<size_t>(bytes)));
}

long Futex(uint32_t* word, int op, uint32_t value, const timespec* until) {
  return ::syscall(SYS_futex, word, op, value, until, nullptr, FUTEX_BITSET_MATCH_ANY);
}

void CpuRelax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

timespec MonotonicNow() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return now;
}

// `now` + `d`, for FUTEX_WAIT_BITSET's absolute CLOCK_MONOTONIC time; `d` is at most a year.
timespec Plus(timespec now, std::chrono::nanoseconds d) {
  const int64_t ns = static_cast<int64_t>(now.tv_nsec) + d.count() % 1'000'000'000;
  now.tv_sec += static_cast<time_t>(d.count() / 1'000'000'000 + ns / 1'000'000'000);
  now.tv_nsec = static_cast<long>(ns % 1'000'000'000);
  return now;
}

bool Reached(const timespec& now, const timespec& until) {
  return now.tv_sec != until.tv_sec ? now.tv_sec > until.tv_sec : now.tv_nsec >= until.tv_nsec;
}

}  // namespace

void Unmap::operator()(char* at) const { ::munmap(at, bytes); }

Result<SharedRegion> SharedRegion::Create() {
  const int fd = ::memfd_create("mmserve-channel", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return Failed("memfd_create");
  SharedRegion region(fd, /*server=*/true);
  region.file_ = FileFor(0);
  if (::ftruncate(fd, static_cast<off_t>(region.file_)) != 0) return Failed("ftruncate");
  // Neither side may cut the file under the other's mapping, nor seal it further (a write
  // seal would stop the server's next batch).
  if (::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_SEAL) != 0) return Failed("F_ADD_SEALS");
  MMS_RETURN_IF_ERROR(region.Map());
  return region;
}

Result<SharedRegion> SharedRegion::Adopt(int fd) {
  const int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
    ::close(fd);
    return InvalidArgument("descriptor " + std::to_string(fd) +
                           " is not a memfd sealed against shrinking");
  }
  (void)::fcntl(fd, F_SETFD, FD_CLOEXEC);  // nothing this worker starts inherits it
  SharedRegion region(fd, /*server=*/false);
  MMS_ASSIGN_OR_RETURN(region.file_, region.FileBytes());
  if (region.file_ < FileFor(0)) return InvalidArgument("shared memory: a region without room");
  MMS_RETURN_IF_ERROR(region.Map());
  return region;
}

Status SharedRegion::Map() {
  // Address space only: pages beyond the file are never touched (Receive checks the file).
  const size_t bytes = FileFor(kMaxFramePayload);
  void* at = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE,
                    fd_.get(), 0);
  if (at == MAP_FAILED) return Failed("mmap");
  map_ = std::unique_ptr<char, Unmap>(static_cast<char*>(at), Unmap{bytes});
  return Status::Ok();
}

SharedRegion::Turn& SharedRegion::turn() const { return *reinterpret_cast<Turn*>(map_.get()); }

Result<size_t> SharedRegion::FileBytes() const {
  struct stat st{};
  if (::fstat(fd_.get(), &st) != 0) return Failed("fstat");
  return static_cast<size_t>(st.st_size);
}

Status SharedRegion::Send(std::string_view payload) {
  if (!map_) return Closed();
  if (!holding()) return Internal("shared memory: sent out of turn");
  const uint64_t n = payload.size();
  if (n > kMaxFramePayload) return InvalidArgument("shared memory: a payload over 8 GiB");
  const size_t want = FileFor(n);
  if (file_ < want) {
    MMS_ASSIGN_OR_RETURN(file_, FileBytes());  // the peer may have grown it
    if (file_ < want) {
      if (::ftruncate(fd_.get(), static_cast<off_t>(want)) != 0) return Failed("ftruncate");
      file_ = want;
    }
  }
  if (n <= kInitialBytes && last_ > kInitialBytes) {
    // The large payload before this one has been read: its pages beyond the first go back.
    const size_t keep = FileFor(0);
    (void)::fallocate(fd_.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                      static_cast<off_t>(keep), static_cast<off_t>(file_ - keep));
  }
  if (n > 0) std::memcpy(bytes(), payload.data(), n);
  last_ = n;
  Turn& t = turn();
  std::atomic_ref<uint64_t>(t.length).store(n, std::memory_order_relaxed);
  uint32_t seen = turn_;
  if (!std::atomic_ref<uint32_t>(t.number).compare_exchange_strong(seen, Next(turn_))) {
    return (seen & kClosed) ? Closed() : InvalidArgument("shared memory: the turn moved out of order");
  }
  turn_ = Next(turn_);
  // After the exchange (a full barrier): a peer that went to sleep before it is woken; one that
  // checks the turn after it sees the new number.
  if (std::atomic_ref<uint32_t>(t.sleeping).load() & (server_ ? kWorker : kServer)) {
    (void)Futex(&t.number, FUTEX_WAKE, 1, nullptr);
  }
  return Status::Ok();
}

Result<bool> SharedRegion::Await(std::chrono::nanoseconds timeout, std::chrono::nanoseconds spin) {
  if (!map_) return Closed();
  if (holding()) return true;  // passed already: the wait before this one saw it
  Turn& t = turn();
  std::atomic_ref<uint32_t> number(t.number);
  const auto passed = [&](uint32_t n) -> Result<bool> {
    if (n & kClosed) return Closed();
    if (n != Next(turn_)) return InvalidArgument("shared memory: the turn moved out of order");
    turn_ = n;
    return true;
  };
  if (const uint32_t n = number.load(std::memory_order_acquire); n != turn_) return passed(n);
  if (spin.count() > 0) {
    const auto until = std::chrono::steady_clock::now() + spin;
    do {
      for (int i = 0; i < 64; ++i) CpuRelax();
      if (const uint32_t n = number.load(std::memory_order_acquire); n != turn_) return passed(n);
    } while (std::chrono::steady_clock::now() < until);
  }
  const bool forever = timeout == kForever;
  const timespec until =
      forever ? timespec{} : Plus(MonotonicNow(), std::min(timeout, std::chrono::nanoseconds(
                                                                       std::chrono::hours(24 * 365))));
  const uint32_t me = server_ ? kServer : kWorker;
  std::atomic_ref<uint32_t> sleeping(t.sleeping);
  sleeping.fetch_or(me);
  uint32_t n = number.load();
  while (n == turn_ && (forever || !Reached(MonotonicNow(), until))) {
    // Returns when woken, when the number is no longer turn_ (EAGAIN), or at `until`.
    (void)Futex(&t.number, FUTEX_WAIT_BITSET, turn_, forever ? nullptr : &until);
    n = number.load();
  }
  sleeping.fetch_and(~me);
  if (n == turn_) return false;
  return passed(n);
}

Result<std::string_view> SharedRegion::Receive() {
  if (!map_) return Closed();
  const uint64_t length = std::atomic_ref<uint64_t>(turn().length).load(std::memory_order_relaxed);
  if (length > kMaxFramePayload) return InvalidArgument("shared memory: a payload over 8 GiB");
  if (kHeaderBytes + length > file_) {
    // The peer grew the region; the seal keeps it from shrinking again after this check.
    MMS_ASSIGN_OR_RETURN(file_, FileBytes());
    if (kHeaderBytes + length > file_) {
      return InvalidArgument("shared memory: a payload of " + std::to_string(length) +
                             " bytes in a region of " + std::to_string(file_ - kHeaderBytes));
    }
  }
  last_ = length;
  return std::string_view(bytes(), static_cast<size_t>(length));
}

void SharedRegion::Close() {
  if (!map_) return;
  Turn& t = turn();
  std::atomic_ref<uint32_t>(t.number).fetch_or(kClosed);
  (void)Futex(&t.number, FUTEX_WAKE, INT_MAX, nullptr);
}

int64_t SharedRegion::allocated_bytes() const {
  struct stat st{};
  return ::fstat(fd_.get(), &st) == 0 ? static_cast<int64_t>(st.st_blocks) * 512 : 0;
}

}  // namespace mmserve
