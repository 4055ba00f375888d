#include "backend/process/worker_main.h"

#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include <spdlog/spdlog.h>

#include "backend/process/worker_spec.h"
#include "backend/process/worker_wire.h"

namespace mmserve {
namespace {

// One channel: batches in, results out, on the instance this thread created. Ends when the
// server closes the channel.
void ServeChannel(Session& session, int index, int fd) {
  auto instance = session.CreateInstance(index);
  if (!instance.ok()) {
    spdlog::error("worker instance {}: {}", index, instance.status().ToString());
  }
  std::string in, out;
  for (;;) {
    auto kind = ReadFrame(fd, in);
    if (!kind.ok()) return;  // the server closed it, or sent nonsense: either way, done
    auto batch = *kind == FrameKind::kBatch ? DecodeBatch(in)
                                            : Result<DecodedBatch>(Internal("not a batch"));
    if (!batch.ok()) {
      spdlog::error("worker instance {}: {}", index, batch.status().ToString());
      return;  // the server sees the channel close and restarts the worker
    }
    std::vector<BatchItem> items;
    items.reserve(batch->requests.size());
    for (const auto& request : batch->requests) items.push_back({request.get()});
    Execution execution{.items = items, .tier = batch->tier};
    const Status status =
        instance.ok() ? (*instance)->Execute(execution) : instance.status();
    EncodeResults(status, items, session.counters(), out);
    if (!WriteFrame(fd, FrameKind::kResults, out).ok()) return;
  }
}

// The model's session, loaded as the server's spec says; the error is told to the server.
Result<std::unique_ptr<Session>> LoadFromSpec(int control, const BackendRegistry& backends,
                                              RuntimeGuard& guard, RuntimeLease& lease,
                                              size_t channels, bool& host_memory) {
  std::string payload;
  MMS_ASSIGN_OR_RETURN(FrameKind kind, ReadFrame(control, payload));
  if (kind != FrameKind::kInit) return InvalidArgument("worker: expected the model's spec first");
  MMS_ASSIGN_OR_RETURN(ModelConfig model, DecodeWorkerSpec(payload));
  if (static_cast<size_t>(model.thread_num) != channels) {
    return InvalidArgument("worker: the spec's thread_num does not match its channels");
  }
  MMS_ASSIGN_OR_RETURN(Backend * backend, backends.Find(model.backend));
  if (!backend->RunsIsolated(model)) {
    return InvalidArgument("backend " + model.backend + " task " + model.task +
                           " cannot run in a worker process");
  }
  MMS_ASSIGN_OR_RETURN(lease, guard.Acquire(backend->runtime(), model.device_id));
  auto memory = backend->runtime().Memory(model.device_id);
  host_memory = memory.ok() && memory->domain == "host";
  MMS_ASSIGN_OR_RETURN(auto session, backend->Load(model));
  if (session->style() != ExecutionStyle::kBatch) {
    return InvalidArgument("worker: only batch-style sessions run in a worker process");
  }
  return session;
}

}  // namespace

int RunWorker(const WorkerArgs& args, const BackendRegistry& backends, RuntimeGuard& guard) {
  // The parent-death signal was armed before exec; a server that died before that leaves this
  // process to init (or a subreaper), which is not the server that asked for it.
  if (::getppid() != args.parent) return 1;
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_UNBLOCK, &all, nullptr);  // the server's blocked set came across exec

  RuntimeLease lease;
  bool host_memory = false;
  auto session =
      LoadFromSpec(args.control, backends, guard, lease, args.channels.size(), host_memory);
  if (!session.ok()) {
    (void)WriteFrame(args.control, FrameKind::kFailed, EncodeStatus(session.status()));
    return 1;
  }
  if (!WriteFrame(args.control, FrameKind::kReady, EncodeWorkerFacts(**session, host_memory)).ok()) return 1;
  std::vector<std::thread> threads;
  for (size_t i = 0; i < args.channels.size(); ++i) {
    threads.emplace_back(ServeChannel, std::ref(**session), static_cast<int>(i), args.channels[i]);
  }
  std::string ignored;
  while (ReadFrame(args.control, ignored).ok()) {
  }
  // The server is done with this model: stop every channel, then tear down in reverse.
  for (int fd : args.channels) (void)::shutdown(fd, SHUT_RDWR);
  for (auto& t : threads) t.join();
  session->reset();
  return 0;
}

}  // namespace mmserve
