// A batch channel's shared region: bytes cross it exactly in both directions as it grows, a
// peer can neither lie about a length nor cut the file under the other's mapping, and the
// pages a large payload took go back once a small one follows.
#include "backend/process/shared_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "backend/process/worker_wire.h"

namespace mmserve {
namespace {

using ::testing::HasSubstr;

std::string Pattern(size_t n, char seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(seed + static_cast<char>(i * 31));
  return s;
}

// The server's end and the worker's, as two mappings of one memfd (two processes behave alike).
struct Pair {
  Pair() {
    auto created = SharedRegion::Create();
    EXPECT_TRUE(created.ok()) << created.status().ToString();
    server = std::move(*created);
    auto adopted = SharedRegion::Adopt(::dup(server.fd()));
    EXPECT_TRUE(adopted.ok()) << adopted.status().ToString();
    worker = std::move(*adopted);
  }
  SharedRegion server, worker;
};

TEST(SharedRegionTest, PayloadsCrossBothWaysAsTheRegionGrows) {
  Pair p;
  for (size_t n : {size_t{1}, size_t{1000}, SharedRegion::kInitialBytes, size_t{3} << 20,
                   size_t{100}, size_t{9} << 20}) {
    const std::string batch = Pattern(n, 'a');
    ASSERT_TRUE(p.server.Put(batch).ok());
    auto in = p.worker.Get(n);
    ASSERT_TRUE(in.ok()) << in.status().ToString();
    EXPECT_EQ(*in, batch) << n;
    const std::string results = Pattern(n + 7, 'z');  // the worker grows it past the batch
    ASSERT_TRUE(p.worker.Put(results).ok());
    auto out = p.server.Get(results.size());
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(*out, results) << n;
  }
}

TEST(SharedRegionTest, ALengthBeyondTheRegionIsAnErrorNotAFault) {
  Pair p;
  ASSERT_TRUE(p.worker.Put("abc").ok());
  auto lie = p.server.Get(SharedRegion::kInitialBytes + 1);
  ASSERT_FALSE(lie.ok());
  EXPECT_THAT(lie.status().message(), HasSubstr("in a region of"));
  EXPECT_FALSE(p.server.Get(kMaxFramePayload + 1).ok());
  EXPECT_EQ(*p.server.Get(3), "abc");  // and the region still works
}

TEST(SharedRegionTest, NoPeerCanShrinkOrSealTheRegion) {
  Pair p;
  EXPECT_NE(::ftruncate(p.worker.fd(), 0), 0);
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(::fcntl(p.worker.fd(), F_ADD_SEALS, F_SEAL_WRITE), 0);
  ASSERT_TRUE(p.worker.Put(Pattern(4 << 20, 'q')).ok());  // growing stays allowed
  EXPECT_TRUE(p.server.Get(4 << 20).ok());
}

TEST(SharedRegionTest, AdoptRefusesADescriptorThatIsNotASealedMemfd) {
  const int plain = ::memfd_create("plain", MFD_CLOEXEC);
  auto unsealed = SharedRegion::Adopt(plain);
  ASSERT_FALSE(unsealed.ok());
  EXPECT_THAT(unsealed.status().message(), HasSubstr("not a memfd sealed"));
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  EXPECT_FALSE(SharedRegion::Adopt(pipe_fds[0]).ok());
  ::close(pipe_fds[1]);
}

TEST(SharedRegionTest, ALargePayloadsPagesGoBackOnceASmallOneFollows) {
  Pair p;
  ASSERT_TRUE(p.server.Put(Pattern(16 << 20, 'b')).ok());
  EXPECT_GE(p.server.allocated_bytes(), int64_t{16} << 20);
  ASSERT_TRUE(p.worker.Get(16 << 20).ok());
  ASSERT_TRUE(p.worker.Put("small").ok());
  EXPECT_LE(p.server.allocated_bytes(), static_cast<int64_t>(SharedRegion::kInitialBytes));
  EXPECT_EQ(*p.server.Get(5), "small");
}

TEST(SharedRegionTest, FramesOnTheSocketCarryTheLengthAndOtherKindsComeWhole) {
  Pair p;
  int sockets[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets), 0);
  const std::string batch = Pattern(2 << 20, 'c');
  ASSERT_TRUE(WriteShared(sockets[0], p.server, FrameKind::kBatch, batch).ok());
  FrameReader reader;
  std::string scratch;
  std::string_view payload;
  auto kind = ReadShared(sockets[1], reader, p.worker, scratch, &payload);
  ASSERT_TRUE(kind.ok()) << kind.status().ToString();
  EXPECT_EQ(*kind, FrameKind::kBatch);
  EXPECT_EQ(payload, batch);
  EXPECT_EQ(scratch.size(), 8u);  // only the length crossed the socket

  ASSERT_TRUE(WriteFrame(sockets[0], FrameKind::kFailed, "why").ok());
  kind = ReadShared(sockets[1], reader, p.worker, scratch, &payload);
  ASSERT_TRUE(kind.ok());
  EXPECT_EQ(*kind, FrameKind::kFailed);
  EXPECT_EQ(payload, "why");

  // A results frame whose length is not a number, or beyond the region, is malformed.
  ASSERT_TRUE(WriteFrame(sockets[0], FrameKind::kResults, "xyz").ok());
  EXPECT_FALSE(ReadShared(sockets[1], reader, p.worker, scratch, &payload).ok());
  ASSERT_TRUE(WriteFrame(sockets[0], FrameKind::kResults, EncodeNumber(uint64_t{1} << 40)).ok());
  EXPECT_FALSE(ReadShared(sockets[1], reader, p.worker, scratch, &payload).ok());
  ::close(sockets[0]);
  ::close(sockets[1]);
}

}  // namespace
}  // namespace mmserve
