// The insides of `isolation: process` (process_session.h), shared by its two files: the
// session and its supervisor (process_session.cc) and the instances that talk to the worker
// (process_instances.cc). Nothing outside backend/process/ includes it.
#pragma once

#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <csignal>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/process/process_session.h"
#include "backend/process/shared_region.h"
#include "backend/process/worker_spec.h"
#include "backend/process/worker_wire.h"
#include "common/clock.h"
#include "common/fd.h"
#include "common/mutex.h"
#include "config/model_config.h"

namespace mmserve {

// One started worker process: its pid (reaped by the supervisor only), its pidfd, and the
// server's ends of its sockets.
struct Worker {
  pid_t pid = -1;
  Fd pidfd;
  Fd control;
  std::vector<Fd> channels;  // one per instance
  std::vector<SharedRegion> regions;  // one per channel: a batch's tensors and results
  FrameReader control_reader;  // the replies to tokenizer queries (ProcessSession::query_mu_)
  WorkerFacts facts;
  std::atomic<bool> exited{false};
  std::string exit_reason;  // set once, before `exited`
  void Kill() const { (void)::syscall(SYS_pidfd_send_signal, pidfd.get(), SIGKILL, nullptr, 0); }
};

class ProcessSession;
// The instances of a batch session (Execute) and of a continuous one (generation).
std::unique_ptr<Instance> NewBatchInstance(ProcessSession& session, int index);
std::unique_ptr<Instance> NewContinuousInstance(ProcessSession& session, int index);

// An instance's link to the worker: its channel of the current worker, with a reader that
// starts afresh with each new worker (what a dead one sent is dropped).
class Channel {
 public:
  Channel(ProcessSession& session, int index) : session_(session), index_(index) {}
  // The current worker, waiting for a restart until `until`; rebinds to it when it changed.
  Status Bind(Clock::time_point until);
  Worker* worker() const { return worker_.get(); }
  const std::shared_ptr<Worker>& shared() const { return worker_; }
  ProcessSession& session() { return session_; }
  int fd() const { return worker_->channels[static_cast<size_t>(index_)].get(); }
  SharedRegion& region() const { return worker_->regions[static_cast<size_t>(index_)]; }
  FrameReader& reader() { return reader_; }
  // The worker failed on this channel: why (it died; or it broke the protocol, and is killed).
  Status Lost(const Status& why);
  void Unbind() { worker_.reset(); }

 private:
  ProcessSession& session_;
  const int index_;
  std::shared_ptr<Worker> worker_;
  FrameReader reader_;
};

class ProcessSession final : public Session {
 public:
  ProcessSession(const ModelConfig& model, WorkerEventSink on_event)
      : model_(model),
        spec_(EncodeWorkerSpec(model)),
        stop_(::eventfd(0, EFD_CLOEXEC)),
        on_event_(on_event ? std::move(on_event) : [](std::string, std::string) {}) {}
  ~ProcessSession() override;
  // Starts the supervisor and waits for the first worker's load.
  Status Start();

  const ModelSignature& signature() const override { return facts_.signature; }
  // On the host: the worker's private memory (what it alone holds: the model, its contexts,
  // the process's own heap), measured at most once a second; at least what the session says.
  int64_t resident_bytes() const override;
  // The worker's session sheds (a round trip on the control socket); a worker restarted later
  // is told to shed as much again, so the room stays given back.
  int64_t ShedCache(int64_t bytes) override;
  ExecutionStyle style() const override {
    return facts_.continuous ? ExecutionStyle::kContinuous : ExecutionStyle::kBatch;
  }
  Result<std::unique_ptr<Instance>> CreateInstance(int index) override {
    return facts_.continuous ? NewContinuousInstance(*this, index) : NewBatchInstance(*this, index);
  }
  // The scheduler's last word (an unload, a shutdown): the worker is told to stop — its sockets
  // closed, so an execution in flight returns at once; killed if it has not exited within 5 s —
  // and nothing restarts it.
  void Interrupt() override { (void)::eventfd_write(stop_.get(), 1); }
  std::vector<int> batch_tiers() const override { return facts_.batch_tiers; }
  // The worker's session answers: a round trip on the control socket, at most kQueryTimeout.
  Result<std::vector<Token>> Tokenize(std::string_view text, bool add_special,
                                      bool pieces) const override;
  Result<std::string> Detokenize(std::span<const int32_t> tokens) const override;
  int64_t context_length() const override { return facts_.context_length; }
  bool executions_share_device() const override { return facts_.executions_share_device; }
  int default_warmup() const override { return facts_.default_warmup; }
  Status health() const override {
    MutexLock lock(mu_);
    return failed_;
  }
  // The engine's, as the workers reported them (each worker's last report, summed over the
  // workers this session started: they do not go backwards at a restart), and the worker's pid
  // and restarts; batch style, the round trips to it (one carries one or more batches:
  // Instance::ExecuteEach).
  std::map<std::string, int64_t> counters() const override {
    MutexLock lock(mu_);
    Counters out = engine_.counters;
    for (const auto& [key, value] : exited_engine_.counters) out[key] += value;
    out["worker_pid"] = current_ ? current_->pid : 0;
    out["worker_restarts"] = restarts_;
    if (!facts_.continuous) out["worker_round_trips"] = round_trips_;
    if (last_exit_at_ms_ > 0) out["worker_last_exit_unix_ms"] = last_exit_at_ms_;
    return out;
  }
  // Why the worker last exited (`SIGSEGV`, `exit code 1`), once one has.
  std::map<std::string, std::string> notes() const override {
    MutexLock lock(mu_);
    if (last_exit_at_ms_ == 0) return {};
    return {{"worker_last_exit", last_exit_reason_}};
  }
  // Likewise: generation's time to first token and per output token, measured in the worker.
  std::map<std::string, Histogram> histograms() const override {
    MutexLock lock(mu_);
    auto out = engine_.histograms;
    for (const auto& [key, h] : exited_engine_.histograms) out[key].Add(h);
    return out;
  }
  // The engine's stats as worker `from` reported them; ignored once it has exited (they were
  // folded into the exited workers' sum then).
  void set_engine_stats(const Worker* from, const EngineStats& stats) {
    MutexLock lock(mu_);
    if (from && !from->exited) engine_ = stats;
  }
  // A batch instance's round trip came back with the engine's stats.
  void RoundTripDone(const Worker* from, const EngineStats& stats) {
    MutexLock lock(mu_);
    if (from && !from->exited) engine_ = stats;
    ++round_trips_;
  }

  // The worker serving now; while it restarts, waits for it until `until`. Unavailable with the
  // last exit reason when there is none by then, or when the model stopped restarting.
  Result<std::shared_ptr<Worker>> Current(Clock::time_point until);

  // What became of `worker` after its socket failed: it died (the supervisor reaps it, at
  // once), or it broke the protocol (it is killed). Unavailable, with the reason.
  Status Lost(Worker& worker);
  std::string ExitMessage(const std::string& reason) const {
    return "model worker for '" + model_.name + "' exited: " + reason;
  }

 private:
  void Supervise();
  Result<std::shared_ptr<Worker>> Spawn();
  // `*hung_up`: the worker closed the control socket without a word (it died loading).
  Status Handshake(Worker& worker, bool* hung_up);
  // Waits for `worker` to exit (or the session to stop: then stops it), reaps it and records why.
  void Watch(Worker& worker);
  // Records the worker's last exit: its reason (`SIGSEGV`), the message requests are answered
  // with, and when.
  void NoteExit(const std::string& reason, const std::string& message) REQUIRES(mu_) {
    last_exit_reason_ = reason;
    last_exit_ = message;
    last_exit_at_ms_ = UnixMillisNow();
  }
  // Sends `query` to the serving worker and waits for its reply.
  Result<TokenizerReply> Ask(TokenizerQuery query) const;

  const ModelConfig model_;
  const std::string spec_;
  const Fd stop_;  // readable once the session is being destroyed
  const WorkerEventSink on_event_;
  WorkerFacts facts_;  // the first worker's; set before any instance exists
  std::thread supervisor_;
  mutable Mutex query_mu_;  // one tokenizer query at a time on the control socket
  mutable uint64_t last_query_ GUARDED_BY(query_mu_) = 0;
  mutable Mutex mu_;
  std::condition_variable_any cv_;
  std::shared_ptr<Worker> current_ GUARDED_BY(mu_);
  std::shared_ptr<Worker> spawning_ GUARDED_BY(mu_);  // started, loading
  Status failed_ GUARDED_BY(mu_);
  std::string last_exit_ GUARDED_BY(mu_);
  std::string last_exit_reason_ GUARDED_BY(mu_);  // its reason alone: `SIGSEGV`
  int64_t last_exit_at_ms_ GUARDED_BY(mu_) = 0;   // when, in Unix milliseconds
  int64_t restarts_ GUARDED_BY(mu_) = 0;
  int64_t round_trips_ GUARDED_BY(mu_) = 0;
  EngineStats engine_ GUARDED_BY(mu_);         // the serving worker's last report
  EngineStats exited_engine_ GUARDED_BY(mu_);  // the exited workers' last reports, summed
  mutable Clock::time_point measured_at_ GUARDED_BY(mu_);
  mutable int64_t measured_ GUARDED_BY(mu_) = 0;
  std::atomic<int64_t> shed_{0};  // bytes of the session's reserved room given back
};

}  // namespace mmserve
