#include "backend/process/shared_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <utility>

#include "backend/process/worker_wire.h"

namespace mmserve {
namespace {

Status Failed(const char* call) {
  return Unavailable(std::string("shared memory: ") + call + ": " + std::strerror(errno));
}

// The size a region takes to hold `bytes`: a power of two, at least kInitialBytes.
size_t RegionBytes(uint64_t bytes) {
  return std::max(SharedRegion::kInitialBytes, std::bit_ceil(static_cast<size_t>(bytes)));
}

}  // namespace

void Unmap::operator()(char* at) const { ::munmap(at, bytes); }

Result<SharedRegion> SharedRegion::Create() {
  const int fd = ::memfd_create("mmserve-channel", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return Failed("memfd_create");
  SharedRegion region(fd);
  if (::ftruncate(fd, static_cast<off_t>(kInitialBytes)) != 0) return Failed("ftruncate");
  region.file_ = kInitialBytes;
  // Neither side may cut the file under the other's mapping, nor seal it further (a write
  // seal would stop the server's next batch).
  if (::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_SEAL) != 0) return Failed("F_ADD_SEALS");
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
  return SharedRegion(fd);
}

Result<size_t> SharedRegion::FileBytes() const {
  struct stat st{};
  if (::fstat(fd_.get(), &st) != 0) return Failed("fstat");
  return static_cast<size_t>(st.st_size);
}

Status SharedRegion::Map(size_t bytes) {
  if (bytes <= mapped()) return Status::Ok();
  void* at = map_ ? ::mremap(map_.get(), mapped(), bytes, MREMAP_MAYMOVE)
                  : ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_.get(), 0);
  if (at == MAP_FAILED) return Failed(map_ ? "mremap" : "mmap");
  (void)map_.release();  // remapped: the old address is no longer there to unmap
  map_ = std::unique_ptr<char, Unmap>(static_cast<char*>(at), Unmap{bytes});
  return Status::Ok();
}

Status SharedRegion::Put(std::string_view payload) {
  const uint64_t n = payload.size();
  if (n > kMaxFramePayload) return InvalidArgument("shared memory: a payload over 8 GiB");
  const size_t want = RegionBytes(n);
  if (file_ < want) {
    MMS_ASSIGN_OR_RETURN(file_, FileBytes());  // the peer may have grown it
    if (file_ < want) {
      if (::ftruncate(fd_.get(), static_cast<off_t>(want)) != 0) return Failed("ftruncate");
      file_ = want;
    }
  }
  if (n <= kInitialBytes && last_ > kInitialBytes) {
    // The large payload before this one has been read: its pages beyond the first go back.
    (void)::fallocate(fd_.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                      static_cast<off_t>(kInitialBytes), static_cast<off_t>(file_ - kInitialBytes));
  }
  MMS_RETURN_IF_ERROR(Map(want));
  if (n > 0) std::memcpy(map_.get(), payload.data(), n);
  last_ = n;
  return Status::Ok();
}

Result<std::string_view> SharedRegion::Get(uint64_t length) {
  if (length > kMaxFramePayload) return InvalidArgument("shared memory: a payload over 8 GiB");
  if (length > mapped()) {
    // The peer grew the region; the seal keeps it from shrinking again after this check.
    MMS_ASSIGN_OR_RETURN(file_, FileBytes());
    if (file_ < length) {
      return InvalidArgument("shared memory: a payload of " + std::to_string(length) +
                             " bytes in a region of " + std::to_string(file_));
    }
    MMS_RETURN_IF_ERROR(Map(std::min(file_, RegionBytes(length))));
  }
  last_ = length;
  return std::string_view(map_.get(), static_cast<size_t>(length));
}

int64_t SharedRegion::allocated_bytes() const {
  struct stat st{};
  return ::fstat(fd_.get(), &st) == 0 ? static_cast<int64_t>(st.st_blocks) * 512 : 0;
}

Status WriteShared(int fd, SharedRegion& region, FrameKind kind, std::string_view payload) {
  MMS_RETURN_IF_ERROR(region.Put(payload));
  return WriteFrame(fd, kind, EncodeNumber(payload.size()));
}

Result<FrameKind> ReadShared(int fd, FrameReader& reader, SharedRegion& region,
                             std::string& scratch, std::string_view* payload) {
  MMS_ASSIGN_OR_RETURN(FrameKind kind, reader.Read(fd, scratch));
  if (kind != FrameKind::kBatch && kind != FrameKind::kResults) {
    *payload = scratch;
    return kind;
  }
  MMS_ASSIGN_OR_RETURN(uint64_t length, DecodeNumber(scratch));
  MMS_ASSIGN_OR_RETURN(*payload, region.Get(length));
  return kind;
}

}  // namespace mmserve
