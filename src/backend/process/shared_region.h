// The shared memory of one batch channel (`isolation: process`): a memfd both processes map,
// through which a batch's tensors go to the worker and its results come back, and whose first
// page holds the channel's turn.
//
// The channel is strictly turn-based: the server writes a batch and passes the turn; the worker
// waits for it, reads the batch, executes, writes the results over it and passes the turn back.
// The turn is a counter in shared memory that each side advances by one (the server to odd
// numbers, the worker to even ones) and waits on with a futex: a side that spins or has not yet
// gone to sleep is not woken by a system call, and no socket carries anything per batch (a
// round trip over a socket measured twice the time, docs/BENCHMARKS.md P10). Either side may
// close the channel from any thread (Close): whoever waits, or sends next, hears Unavailable —
// the server closes a dead worker's channels as it reaps it, a worker closes its own when the
// server is done with it.
//
// The payload starts at kHeaderBytes. The file starts at kInitialBytes of payload (sparse: pages
// cost only when touched), grows to the next power of two when a payload needs it (the writer
// grows the file) and gives the pages beyond kInitialBytes back after a large payload, once a
// small one follows. Each side maps the largest region once (address space only), so the
// mapping never moves under the turn. The server seals the file against shrinking: no worker
// can cut it under the server's mapping (a read past its end would be SIGBUS). A memfd has no
// name in any filesystem: when both processes are gone, so is the region — nothing is left
// behind by a crash.
//
// Every word the peer writes is hostile: a turn out of order and a length beyond the file are
// errors, never a fault.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "common/fd.h"
#include "common/result.h"

namespace mmserve {

// Unmaps a mapping of `bytes` (SharedRegion's, as a unique_ptr's deleter).
struct Unmap {
  size_t bytes = 0;
  void operator()(char* at) const;
};

class SharedRegion {
 public:
  static constexpr size_t kInitialBytes = size_t{1} << 20;
  static constexpr size_t kHeaderBytes = 4096;  // the turn; the payload follows
  static constexpr auto kForever = std::chrono::nanoseconds::max();

  SharedRegion() = default;

  // The server's: a new memfd of kInitialBytes, sealed against shrinking. The server sends first.
  static Result<SharedRegion> Create();
  // The worker's: the region the server passed in `fd` (owned from now on). InvalidArgument
  // when `fd` is not a memfd sealed against shrinking.
  static Result<SharedRegion> Adopt(int fd);

  int fd() const { return fd_.get(); }
  // Writes `payload` and passes the turn to the peer, waking it when it sleeps. Only on this
  // side's turn: the server's first, then after each Await() that said true. Unavailable when
  // the channel was closed.
  Status Send(std::string_view payload);
  // Waits up to `timeout` (kForever: no limit) for the peer to pass the turn back, spinning for
  // `spin` first: true once it has (at once while this side holds the turn: until it sends),
  // false when the time ran out. Unavailable when the channel was closed, InvalidArgument when
  // the turn holds a number the peer could not have written.
  Result<bool> Await(std::chrono::nanoseconds timeout, std::chrono::nanoseconds spin = {});
  // The peer's payload, once Await() said true: the view lives until the next Send().
  // InvalidArgument when the peer's length is beyond the region.
  Result<std::string_view> Receive();
  // Closes the channel for both sides and wakes whoever waits. Any thread, any time.
  void Close();
  // Bytes of memory the region holds now (its touched pages).
  int64_t allocated_bytes() const;

 private:
  struct Turn;  // the header's words
  explicit SharedRegion(int fd, bool server) : fd_(fd), server_(server) {}
  // Maps the largest region the file may grow to.
  Status Map();
  Turn& turn() const;
  // Whether this side has the turn: the server's numbers are odd, the worker's even.
  bool holding() const { return (turn_ % 2 == 0) == server_; }
  char* bytes() const { return map_.get() + kHeaderBytes; }
  Result<size_t> FileBytes() const;

  Fd fd_;
  std::unique_ptr<char, Unmap> map_;  // after fd_: unmapped before it closes
  bool server_ = false;
  size_t file_ = 0;    // the file's size when last seen (it only grows)
  uint64_t last_ = 0;  // the length of the last payload either side put
  uint32_t turn_ = 0;  // the turn's number as this side last wrote or read it
};

}  // namespace mmserve
