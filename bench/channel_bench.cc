// channel_bench: one round trip between the server and an isolated model's worker, as the two
// channels carry it — the batch channel's shared region with its futex turn (shared_region.h)
// against the same payload in a memfd with a 24-byte frame on a Unix socket, which the batch
// channel used before — side by side in one run (Google Benchmark). The peer is a forked
// process that echoes each payload back, as a worker answers a batch; a 1 KB payload, as
// P10's identity request.
//
//   build/bench/channel_bench
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <benchmark/benchmark.h>

#include <chrono>
#include <string>

#include "backend/process/shared_region.h"
#include "backend/process/worker_wire.h"

namespace mmserve {
namespace {

const std::string kPayload(1024, 'x');

// Waits for the forked peer to end (it ends when its channel closes).
void Reap(pid_t peer) {
  int status = 0;
  (void)::waitpid(peer, &status, 0);
}

void BM_RoundTrip_RegionTurn(benchmark::State& state) {
  auto server = SharedRegion::Create();
  auto worker = SharedRegion::Adopt(::dup(server->fd()));
  if (!server.ok() || !worker.ok()) return state.SkipWithError("no region");
  const pid_t peer = ::fork();
  if (peer == 0) {
    for (;;) {
      auto turn = worker->Await(SharedRegion::kForever);
      auto in = turn.ok() ? worker->Receive() : Result<std::string_view>(turn.status());
      if (!in.ok() || !worker->Send(*in).ok()) ::_exit(0);
    }
  }
  const auto spin = std::chrono::microseconds(state.range(0));
  for (auto _ : state) {
    if (!server->Send(kPayload).ok()) return state.SkipWithError("send");
    auto turn = server->Await(SharedRegion::kForever, spin);
    auto back = turn.ok() ? server->Receive() : Result<std::string_view>(turn.status());
    if (!back.ok() || back->size() != kPayload.size()) return state.SkipWithError("receive");
  }
  server->Close();
  Reap(peer);
}
BENCHMARK(BM_RoundTrip_RegionTurn)->Arg(0)->Arg(30)->UseRealTime();

// The peer: the payload copied into a memfd and its length in a frame on a socket each way.
void BM_RoundTrip_SocketFrame(benchmark::State& state) {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    return state.SkipWithError("socketpair");
  }
  auto server = SharedRegion::Create();
  if (!server.ok()) return state.SkipWithError("no region");
  std::string copy(kPayload.size(), '\0');  // stands in for the region's copy each way
  const pid_t peer = ::fork();
  if (peer == 0) {
    ::close(pair[0]);
    FrameReader reader(/*spin=*/false);
    std::string frame;
    while (reader.Read(pair[1], frame).ok()) {
      copy.assign(kPayload);
      if (!WriteFrame(pair[1], FrameKind::kResults, EncodeNumber(copy.size())).ok()) break;
    }
    ::_exit(0);
  }
  ::close(pair[1]);
  FrameReader reader(/*spin=*/state.range(0) > 0);
  std::string frame;
  for (auto _ : state) {
    copy.assign(kPayload);
    if (!WriteFrame(pair[0], FrameKind::kBatch, EncodeNumber(copy.size())).ok() ||
        !reader.Read(pair[0], frame).ok()) {
      return state.SkipWithError("round trip");
    }
  }
  ::close(pair[0]);
  Reap(peer);
}
BENCHMARK(BM_RoundTrip_SocketFrame)->Arg(0)->Arg(30)->UseRealTime();

}  // namespace
}  // namespace mmserve

BENCHMARK_MAIN();
