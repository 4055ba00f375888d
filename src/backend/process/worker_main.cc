#include "backend/process/worker_main.h"

#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <latch>
#include <map>
#include <thread>

#include <spdlog/spdlog.h>

#include "backend/process/sandbox.h"
#include "backend/process/shared_region.h"
#include "backend/process/worker_spec.h"
#include "backend/process/worker_wire.h"

namespace mmserve {
namespace {

// Returns once `ready(timeout)` says the server's next message has come (or the channel
// failed); idle meanwhile, `instance` is parked and then released as the server's workers do it
// (Instance::Park, Instance::Release): the server's scheduler only sees this worker's proxy.
template <typename Ready>
void AwaitWork(Instance& instance, Ready ready) {
  if (ready(kParkAfter)) return;
  instance.Park();
  const auto release = ReleaseAfterPark(instance);
  if (!release || ready(*release)) return;
  instance.Release();
}

// Each channel's thread makes its instance, then waits for the process to enter the sandbox
// (or not) before it serves: instances are made with everything a load may need.
class StartGate {
 public:
  StartGate(size_t channels, bool sandbox)
      : sandbox_(sandbox), made_(static_cast<std::ptrdiff_t>(channels)) {}
  bool sandbox() const { return sandbox_; }
  // A channel's instance is made (or failed): waits for the start.
  void InstanceMade() {
    made_.count_down();
    started_.wait();
  }
  void WaitForInstances() { made_.wait(); }
  void Start() { started_.count_down(); }

 private:
  const bool sandbox_;
  std::latch made_;
  std::latch started_{1};
};

// Before a sandbox: one execution of the session's warm-up request on `instance`, so that what
// engines set up on their first execution (thread pools, the C library's arenas, what they read
// of /sys) is set up while the process may still open files.
void WarmUp(Session& session, Instance& instance) {
  auto request = session.WarmupRequest(1);
  if (!request) return;
  if (session.style() == ExecutionStyle::kContinuous) {
    auto& generator = static_cast<ContinuousInstance&>(instance);
    bool done = false;  // completed on this thread, by Step()
    request->done = [&done](Result<InferResponse>) { done = true; };
    generator.Admit(std::move(request));
    while (!done && !generator.idle()) generator.Step();
    return;
  }
  std::vector<BatchItem> items(1);
  items[0].request = request.get();
  Execution execution{.items = BatchView(items), .tier = 1};
  (void)instance.Execute(execution);
}

// One channel of a batch session: batches in, results out through its shared region, on the
// instance this thread created. Ends when the channel closes.
void ServeBatches(Session& session, int index, SharedRegion& region, StartGate& gate) {
  auto instance = session.CreateInstance(index);
  if (instance.ok() && gate.sandbox()) WarmUp(session, **instance);
  gate.InstanceMade();
  if (!instance.ok()) {
    spdlog::error("worker instance {}: {}", index, instance.status().ToString());
  }
  std::string out;
  // The worker waits for whatever the server sends next: no spin (it rarely caught a batch and
  // took a tenth of the machine's CPU at 16 clients, docs/BENCHMARKS.md P10).
  const auto passed = [&](std::chrono::nanoseconds timeout) {
    auto p = region.Await(timeout);
    return !p.ok() || *p;
  };
  for (;;) {
    if (instance.ok()) AwaitWork(**instance, passed);
    auto turn = region.Await(SharedRegion::kForever);
    auto in = turn.ok() ? region.Receive() : Result<std::string_view>(turn.status());
    if (!in.ok() && in.status().code() == StatusCode::kUnavailable) return;  // closed: done
    auto batches = in.ok() ? DecodeBatches(*in) : Result<std::vector<DecodedBatch>>(in.status());
    if (!batches.ok()) {
      spdlog::error("worker instance {}: {}", index, batches.status().ToString());
      return region.Close();  // the server sees the channel close and restarts the worker
    }
    // Each batch runs on its own, as it would in the server's process.
    std::vector<std::vector<BatchItem>> items(batches->size());
    std::vector<Execution> executions(batches->size());  // made in place: holds an atomic
    std::vector<Status> statuses(batches->size());
    for (size_t b = 0; b < batches->size(); ++b) {
      const auto& requests = (*batches)[b].requests;
      items[b].resize(requests.size());  // in place: a moved temporary trips GCC 12's warning
      for (size_t i = 0; i < requests.size(); ++i) items[b][i].request = requests[i].get();
      executions[b].items = items[b];
      executions[b].tier = (*batches)[b].tier;
    }
    if (!instance.ok()) {
      std::fill(statuses.begin(), statuses.end(), instance.status());
    } else {
      (*instance)->ExecuteEach(executions, statuses);
    }
    EncodeResults(executions, statuses, {session.counters(), session.histograms()}, out);
    if (!region.Send(out).ok()) return;
  }
}

// One channel of a continuous session (generation): its slots out first; then sequences and
// cancellations in, between steps of the instance; their pieces and ends out as they come.
void ServeSequences(Session& session, int index, int fd, StartGate& gate) {
  // Declared before the instance: its requests' callbacks use them until it is gone.
  // The sequences admitted and not yet done, and whether the server cancelled each: a cancel
  // that crosses the sequence's end finds nothing and leaves nothing behind.
  std::map<uint64_t, bool> cancelled;
  auto is_cancelled = [&](uint64_t seq) {
    auto it = cancelled.find(seq);
    return it != cancelled.end() && it->second;
  };
  FrameReader reader;
  std::string in, out;
  auto base = session.CreateInstance(index);
  if (base.ok() && gate.sandbox()) WarmUp(session, **base);
  gate.InstanceMade();
  if (!base.ok()) {
    spdlog::error("worker instance {}: {}", index, base.status().ToString());
    return;
  }
  auto* instance = static_cast<ContinuousInstance*>(base->get());
  const uint64_t slots = static_cast<uint64_t>(std::max(1, instance->free_slots()));
  if (!WriteFrame(fd, FrameKind::kInstance, EncodeNumber(slots)).ok()) return;
  for (;;) {
    // Blocks while there is nothing to step; otherwise takes only what has arrived.
    while (instance->idle() || reader.Ready(fd, std::chrono::milliseconds(0))) {
      if (instance->idle()) {
        AwaitWork(*instance, [&](std::chrono::milliseconds t) { return reader.Ready(fd, t); });
      }
      auto kind = reader.Read(fd, in);
      if (!kind.ok()) return instance->CancelAll(kind.status());
      if (*kind == FrameKind::kCancel) {
        if (auto seq = DecodeNumber(in); seq.ok()) {
          if (auto it = cancelled.find(*seq); it != cancelled.end()) it->second = true;
        }
        continue;
      }
      auto a = *kind == FrameKind::kAdmit ? DecodeAdmit(in)
                                          : Result<Admission>(Internal("not an admission"));
      if (!a.ok()) {
        spdlog::error("worker instance {}: {}", index, a.status().ToString());
        return instance->CancelAll(a.status());
      }
      const uint64_t seq = a->seq;
      cancelled[seq] = false;
      a->request->done = [&, seq](Result<InferResponse> result) {
        cancelled.erase(seq);
        EncodeEvent(seq, result, {session.counters(), session.histograms()}, out);
        (void)WriteFrame(fd, FrameKind::kDone, out);
      };
      if (a->streaming) {
        a->request->on_partial = [&, seq](const InferResponse& piece) {
          EncodeEvent(seq, piece, {}, out);
          return WriteFrame(fd, FrameKind::kPartial, out).ok() && !is_cancelled(seq);
        };
      }
      a->request->cancelled = [&, seq] { return is_cancelled(seq); };
      instance->Admit(std::move(a->request));
    }
    instance->Step();
  }
}

// What the session's tokenizer says to the server's query.
TokenizerReply AnswerQuery(Session& session, std::string_view payload) {
  TokenizerReply reply;
  auto query = DecodeQuery(payload);
  if (!query.ok()) {
    reply.status = query.status();
    return reply;
  }
  reply.id = query->id;
  if (query->shed_bytes > 0) {
    reply.text = std::to_string(session.ShedCache(query->shed_bytes));
    return reply;
  }
  if (query->detokenize) {
    auto text = session.Detokenize(query->tokens);
    if (text.ok()) reply.text = std::move(*text);
    reply.status = text.status();
    return reply;
  }
  auto tokens = session.Tokenize(query->text, query->add_special, query->pieces);
  if (tokens.ok() && tokens->size() > kMaxWireCount) {
    reply.status = InvalidArgument("content: more than " + std::to_string(kMaxWireCount) +
                                   " tokens");
  } else if (tokens.ok()) {
    reply.tokens = std::move(*tokens);
  } else {
    reply.status = tokens.status();
  }
  return reply;
}

// Serves channel `index` with the session's style, then closes it: the server reads its end.
// Only batches use the channel's shared region: generation's prompts and pieces are small and
// stream both ways at once, on the socket.
void ServeChannel(Session& session, int index, int fd, SharedRegion& region, StartGate& gate) {
  if (session.style() == ExecutionStyle::kContinuous) {
    ServeSequences(session, index, fd, gate);
  } else {
    ServeBatches(session, index, region, gate);
  }
  region.Close();
  (void)::shutdown(fd, SHUT_RDWR);
}

// The model's session, loaded as the server's spec says; the error is told to the server.
Result<std::unique_ptr<Session>> LoadFromSpec(int control, const BackendRegistry& backends,
                                              const SessionStages& stages, RuntimeGuard& guard,
                                              RuntimeLease& lease, size_t channels, bool sandbox,
                                              bool& host_memory) {
  std::string payload;
  FrameReader reader;
  MMS_ASSIGN_OR_RETURN(FrameKind kind, reader.Read(control, payload));
  if (kind != FrameKind::kInit) return InvalidArgument("worker: expected the model's spec first");
  MMS_ASSIGN_OR_RETURN(ModelConfig model, DecodeWorkerSpec(payload));
  if (sandbox) model.isolation = Isolation::kSandbox;  // what the backend may check it for
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
  if (!model.preprocess && !model.postprocess) return session;
  if (!stages) return Unimplemented("worker: this binary runs no image stages");
  return stages(std::move(session), model);
}

}  // namespace

int RunWorker(const WorkerArgs& args, const BackendRegistry& backends, RuntimeGuard& guard,
              const SessionStages& stages) {
  // The parent-death signal was armed before exec; a server that died before that leaves this
  // process to init (or a subreaper), which is not the server that asked for it.
  if (::getppid() != args.parent || args.regions.size() != args.channels.size()) return 1;
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_UNBLOCK, &all, nullptr);  // the server's blocked set came across exec

  std::vector<SharedRegion> regions;
  for (int fd : args.regions) {
    auto region = SharedRegion::Adopt(fd);
    if (!region.ok()) {
      (void)WriteFrame(args.control, FrameKind::kFailed, EncodeStatus(region.status()));
      return 1;
    }
    regions.push_back(std::move(*region));
  }
  RuntimeLease lease;
  bool host_memory = false;
  const auto load_start = std::chrono::steady_clock::now();
  auto session =
      LoadFromSpec(args.control, backends, stages, guard, lease, args.channels.size(),
                   args.sandbox, host_memory);
  if (!session.ok()) {
    (void)WriteFrame(args.control, FrameKind::kFailed, EncodeStatus(session.status()));
    return 1;
  }
  const auto load_us = std::chrono::duration_cast<std::chrono::microseconds>(
                           std::chrono::steady_clock::now() - load_start)
                           .count();
  if (!WriteFrame(args.control, FrameKind::kReady,
                  EncodeWorkerFacts(**session, host_memory, load_us))
           .ok()) {
    return 1;
  }
  StartGate gate(args.channels.size(), args.sandbox);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < args.channels.size(); ++i) {
    threads.emplace_back(ServeChannel, std::ref(**session), static_cast<int>(i), args.channels[i],
                         std::ref(regions[i]), std::ref(gate));
  }
  if (args.sandbox) {
    gate.WaitForInstances();
    if (Status s = EnterSandbox(); !s.ok()) {
      spdlog::error("model worker: {}; exiting", s.ToString());
      std::_Exit(3);  // nothing may serve outside the sandbox it asked for
    }
  }
  gate.Start();
  // The control socket: the server's tokenizer queries, until it closes it.
  std::string query, reply;
  FrameReader control;
  for (auto kind = control.Read(args.control, query); kind.ok();
       kind = control.Read(args.control, query)) {
    if (*kind != FrameKind::kQuery) continue;
    EncodeReply(AnswerQuery(**session, query), reply);
    if (!WriteFrame(args.control, FrameKind::kReply, reply).ok()) break;
  }
  // The server is done with this model: stop every channel, then tear down in reverse.
  for (int fd : args.channels) (void)::shutdown(fd, SHUT_RDWR);
  for (SharedRegion& region : regions) region.Close();
  for (auto& t : threads) t.join();
  session->reset();
  return 0;
}

}  // namespace mmserve
