// The shared memory of one batch channel (`isolation: process`): a memfd both processes map,
// through which a batch's tensors go to the worker and its results come back. The socket then
// carries only a small frame that says which way the bytes went and how many there are.
//
// One region serves both directions: the channel is strictly turn-based (the server writes a
// batch and waits; the worker reads it, executes, writes the results over it; the server reads
// them before it writes the next batch), and the frame on the socket passes the turn.
//
// The region starts at kInitialBytes (sparse: pages cost only when touched), grows to the
// next power of two when a payload needs it (the writer grows the file, the reader maps the
// new size when a frame says so) and gives the pages beyond kInitialBytes back after a large
// payload, once a small one follows. The server seals it against shrinking: no worker can cut
// the file under the server's mapping (a read past its end would be SIGBUS). A memfd has no
// name in any filesystem: when both processes are gone, so is the region — nothing is left
// behind by a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/fd.h"
#include "common/result.h"

namespace mmserve {

class FrameReader;
enum class FrameKind : uint32_t;

// Unmaps a mapping of `bytes` (SharedRegion's, as a unique_ptr's deleter).
struct Unmap {
  size_t bytes = 0;
  void operator()(char* at) const;
};

class SharedRegion {
 public:
  static constexpr size_t kInitialBytes = size_t{1} << 20;

  SharedRegion() = default;

  // The server's: a new memfd of kInitialBytes, sealed against shrinking.
  static Result<SharedRegion> Create();
  // The worker's: the region the server passed in `fd` (owned from now on). InvalidArgument
  // when `fd` is not a memfd sealed against shrinking.
  static Result<SharedRegion> Adopt(int fd);

  int fd() const { return fd_.get(); }
  // Copies `payload` to the region's start, growing it when it is too small.
  Status Put(std::string_view payload);
  // The `length` bytes the peer put there. InvalidArgument when the region is shorter (the
  // peer lied about the length); the view lives until the next Put or Get.
  Result<std::string_view> Get(uint64_t length);
  // Bytes of memory the region holds now (its touched pages).
  int64_t allocated_bytes() const;

 private:
  explicit SharedRegion(int fd) : fd_(fd) {}
  // Maps at least `bytes` of the file, whose size is at least that.
  Status Map(size_t bytes);
  size_t mapped() const { return map_.get_deleter().bytes; }
  Result<size_t> FileBytes() const;

  Fd fd_;
  std::unique_ptr<char, Unmap> map_;  // after fd_: unmapped before it closes
  size_t file_ = 0;    // the file's size when last seen (it only grows)
  uint64_t last_ = 0;  // the length of the last payload either side put
};

// A batch channel's two calls. Writes `payload` to `region` and a frame of `kind` with its
// length on socket `fd`.
Status WriteShared(int fd, SharedRegion& region, FrameKind kind, std::string_view payload);
// Reads the next frame on `fd`: kBatch and kResults carry a length, and `*payload` views that
// many bytes of `region`; any other kind comes whole, into `scratch`, which `*payload` views.
Result<FrameKind> ReadShared(int fd, FrameReader& reader, SharedRegion& region,
                             std::string& scratch, std::string_view* payload);

}  // namespace mmserve
