// A batch channel's shared region: bytes cross it exactly in both directions as it grows, the
// turn passes strictly back and forth (within a process and across two), a peer can neither
// lie about a turn or a length nor cut the file under the other's mapping, closing wakes a
// sleeping side, and the pages a large payload took go back once a small one follows.
#include "backend/process/shared_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

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

// `from` sends `payload`; `to` has the turn at once and reads it back.
std::string Cross(SharedRegion& from, SharedRegion& to, std::string_view payload) {
  EXPECT_TRUE(from.Send(payload).ok());
  auto turn = to.Await(std::chrono::seconds(5));
  EXPECT_TRUE(turn.ok() && *turn);
  auto in = to.Receive();
  EXPECT_TRUE(in.ok()) << in.status().ToString();
  return in.ok() ? std::string(*in) : std::string();
}

// A hostile peer's view of the header: the turn's number, then (at 8) the payload's length.
struct Header {
  explicit Header(int fd)
      : at(static_cast<char*>(
            ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0))) {}
  ~Header() { ::munmap(at, 4096); }
  uint32_t& number() { return *reinterpret_cast<uint32_t*>(at); }
  uint64_t& length() { return *reinterpret_cast<uint64_t*>(at + 8); }
  char* at;
};

TEST(SharedRegionTest, PayloadsCrossBothWaysAsTheRegionGrows) {
  Pair p;
  for (size_t n : {size_t{0}, size_t{1000}, SharedRegion::kInitialBytes, size_t{3} << 20,
                   size_t{100}, size_t{9} << 20}) {
    const std::string batch = Pattern(n, 'a');
    EXPECT_EQ(Cross(p.server, p.worker, batch), batch) << n;
    const std::string results = Pattern(n + 7, 'z');  // the worker grows it past the batch
    EXPECT_EQ(Cross(p.worker, p.server, results), results) << n;
  }
}

TEST(SharedRegionTest, TheTurnPassesBackAndForthAndNeverTwiceToOneSide) {
  Pair p;
  EXPECT_FALSE(p.worker.Send("first").ok()) << "the server sends first";
  auto early = p.worker.Await(std::chrono::milliseconds(1));
  ASSERT_TRUE(early.ok());
  EXPECT_FALSE(*early) << "nothing comes before the server sends";
  ASSERT_TRUE(p.server.Send("batch").ok());
  EXPECT_THAT(p.server.Send("again").message(), HasSubstr("out of turn"));
  auto none = p.server.Await(std::chrono::milliseconds(2));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(*none) << "the worker has not answered: the wait times out";
  auto turn = p.worker.Await(std::chrono::seconds(1));
  ASSERT_TRUE(turn.ok() && *turn);
  turn = p.worker.Await(std::chrono::milliseconds(0));
  ASSERT_TRUE(turn.ok() && *turn) << "the worker holds the turn until it sends";
  EXPECT_EQ(*p.worker.Receive(), "batch");
  EXPECT_EQ(Cross(p.worker, p.server, "results"), "results");
  EXPECT_EQ(Cross(p.server, p.worker, "next"), "next");
}

TEST(SharedRegionTest, ATurnTheWorkerCouldNotHaveGivenIsAnError) {
  Pair p;
  Header h(p.server.fd());
  ASSERT_TRUE(p.server.Send("batch").ok());
  h.number() = 7;  // expected 2
  auto turn = p.server.Await(std::chrono::seconds(1));
  ASSERT_FALSE(turn.ok());
  EXPECT_THAT(turn.status().message(), HasSubstr("out of order"));
}

TEST(SharedRegionTest, ALengthBeyondTheRegionIsAnErrorNotAFault) {
  Pair p;
  Header h(p.server.fd());
  ASSERT_EQ(Cross(p.server, p.worker, "batch"), "batch");
  ASSERT_TRUE(p.worker.Send("abc").ok());
  h.length() = SharedRegion::kInitialBytes + 1;  // the worker lies about what it wrote
  ASSERT_TRUE(*p.server.Await(std::chrono::seconds(1)));
  auto lie = p.server.Receive();
  ASSERT_FALSE(lie.ok());
  EXPECT_THAT(lie.status().message(), HasSubstr("in a region of"));
  h.length() = kMaxFramePayload + 1;
  EXPECT_FALSE(p.server.Receive().ok());
  h.length() = 3;
  EXPECT_EQ(*p.server.Receive(), "abc");  // and the region still works
}

TEST(SharedRegionTest, NoPeerCanShrinkOrSealTheRegion) {
  Pair p;
  EXPECT_NE(::ftruncate(p.worker.fd(), 0), 0);
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(::fcntl(p.worker.fd(), F_ADD_SEALS, F_SEAL_WRITE), 0);
  ASSERT_EQ(Cross(p.server, p.worker, "batch"), "batch");
  const std::string big = Pattern(4 << 20, 'q');  // growing stays allowed
  EXPECT_EQ(Cross(p.worker, p.server, big), big);
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
  const std::string big = Pattern(16 << 20, 'b');
  ASSERT_EQ(Cross(p.server, p.worker, big), big);
  EXPECT_GE(p.server.allocated_bytes(), int64_t{16} << 20);
  ASSERT_EQ(Cross(p.worker, p.server, "small"), "small");
  EXPECT_LE(p.server.allocated_bytes(),
            static_cast<int64_t>(SharedRegion::kInitialBytes + SharedRegion::kHeaderBytes));
}

// Close wakes a side asleep on the turn, from another thread, and refuses every later call.
TEST(SharedRegionTest, ClosingWakesASleepingPeerWithUnavailable) {
  Pair p;
  Result<bool> turn = false;
  std::thread worker([&] { turn = p.worker.Await(SharedRegion::kForever); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // asleep by now, usually
  p.server.Close();
  worker.join();
  ASSERT_FALSE(turn.ok());
  EXPECT_EQ(turn.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(p.server.Send("batch").message(), HasSubstr("closed"));
  EXPECT_FALSE(p.worker.Await(std::chrono::milliseconds(1)).ok());
}

// Across processes: a forked peer sleeps on the turn and echoes each batch back reversed.
TEST(SharedRegionTest, TheTurnWakesAPeerInAnotherProcess) {
  Pair p;
  constexpr int kRounds = 2000;
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    for (int i = 0; i < kRounds; ++i) {
      auto turn = p.worker.Await(SharedRegion::kForever);
      auto in = turn.ok() ? p.worker.Receive() : Result<std::string_view>(turn.status());
      if (!in.ok()) ::_exit(1);
      const std::string out(in->rbegin(), in->rend());
      if (!p.worker.Send(out).ok()) ::_exit(2);
    }
    ::_exit(0);
  }
  for (int i = 0; i < kRounds; ++i) {
    const std::string batch = std::to_string(i) + "-" + std::to_string(i * 7);
    ASSERT_TRUE(p.server.Send(batch).ok());
    auto turn = p.server.Await(SharedRegion::kForever, i % 2 ? std::chrono::microseconds(30)
                                                              : std::chrono::microseconds(0));
    ASSERT_TRUE(turn.ok() && *turn) << i;
    EXPECT_EQ(*p.server.Receive(), std::string(batch.rbegin(), batch.rend())) << i;
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

}  // namespace
}  // namespace mmserve
