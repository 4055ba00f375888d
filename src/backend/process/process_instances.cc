// The server side of an isolated model's instances: each hands its work to the worker over its
// own channel. Batch style: a call is one kBatch payload out through the channel's shared region
// (one or more batches), one kResults payload back, each passing the region's turn.
// Continuous style (generation): Admit() sends a sequence, Step() delivers the pieces and ends
// the worker streams back, and forwards cancellations.
#include <algorithm>
#include <map>
#include <span>

#include <spdlog/spdlog.h>

#include "backend/process/process_internal.h"

namespace mmserve {

Status Channel::Bind(Clock::time_point until) {
  MMS_ASSIGN_OR_RETURN(std::shared_ptr<Worker> worker, session_.Current(until));
  if (worker != worker_) {
    worker_ = std::move(worker);
    reader_ = FrameReader();
  }
  return Status::Ok();
}

Status Channel::Lost(const Status& why) {
  if (why.code() != StatusCode::kUnavailable) {  // not a closed socket: the worker misbehaved
    spdlog::error("model worker broke the protocol: {}; killing it", why.message());
    worker_->Kill();
  }
  Status lost = session_.Lost(*worker_);
  worker_.reset();
  return lost;
}

namespace {

class BatchInstance final : public Instance {
 public:
  BatchInstance(ProcessSession& session, int index) : channel_(session, index) {}

  Status Execute(Execution& execution) override {
    Status status;
    ExecuteEach(std::span(&execution, 1), std::span(&status, 1));
    return status;
  }

  // One round trip for all of `batches`; the worker runs them one after another.
  void ExecuteEach(std::span<Execution> batches, std::span<Status> statuses) override {
    StartEach(batches);
    FinishEach(batches, statuses);
  }
  int batches_per_call() const override { return batches_per_call_; }
  // The round trip in two halves: the server's worker answers the last call meanwhile.
  bool starts_calls() const override { return true; }
  void StartEach(std::span<Execution> batches) override {
    started_at_ = Clock::now();
    sent_ = Send(batches);
  }
  void FinishEach(std::span<Execution> batches, std::span<Status> statuses) override {
    const Status failed = sent_.ok() ? Receive(batches, statuses) : sent_;
    if (!failed.ok()) {
      std::fill(statuses.begin(), statuses.end(), failed);
      return;
    }
    // A round trip costs two process wake-ups: worth sharing out while a batch takes less.
    // (Split, the time also holds the answers the server wrote meanwhile: a few µs each.)
    const auto per_batch = (Clock::now() - started_at_) / static_cast<int64_t>(batches.size());
    batches_per_call_ = per_batch < kShareRoundTripsBelow ? kMaxBatchesPerCall : 1;
  }

  bool Abort() override {
    MutexLock lock(mu_);
    if (running_) running_->Kill();
    return true;
  }

 private:
  // Below this time per batch, a call takes what queued, up to kMaxBatchesPerCall batches:
  // the round trip's cost is then the larger part, and a request waits at most 7 batches
  // (3.5 ms) longer for the others in its call.
  static constexpr auto kShareRoundTripsBelow = std::chrono::microseconds(500);
  // How long the server's thread spins for a lone batch's results before it sleeps (measured
  // over the socket the channel used before: 0.53x of in-process throughput at 0 µs, 0.70x at
  // 30, 0.65x at 100 — identity, 16 clients, docs/BENCHMARKS.md P10).
  static constexpr auto kSpinForOne = std::chrono::microseconds(30);
  static constexpr auto kNoSpin = std::chrono::microseconds(0);

  // The first half of a round trip: `batches` out to the worker.
  Status Send(std::span<Execution> batches) {
    // A worker that is restarting is waited for as long as the first deadline allows.
    Clock::time_point until = Clock::time_point::max();
    for (const Execution& batch : batches) {
      for (const auto& item : batch.items) until = std::min(until, item.request->deadline);
    }
    MMS_RETURN_IF_ERROR(channel_.Bind(until));
    SetRunning(channel_.shared());
    for (Execution& batch : batches) batch.set_stage(Stage::kExecute);
    EncodeBatches(batches, buffer_);
    Status sent = channel_.region().Send(buffer_);
    if (!sent.ok()) {
      SetRunning(nullptr);
      return channel_.Lost(sent);
    }
    return Status::Ok();
  }

  // The second half: their results back.
  Status Receive(std::span<Execution> batches, std::span<Status> statuses) {
    // One batch: its answer usually comes within the spin. Several take longer than a spin is
    // worth, and the CPU it would burn is the HTTP threads' meanwhile.
    SharedRegion& region = channel_.region();
    auto passed = region.Await(SharedRegion::kForever,
                               batches.size() == 1 ? kSpinForOne : kNoSpin);
    auto results = passed.ok() ? region.Receive() : Result<std::string_view>(passed.status());
    Status decoded = results.ok() ? DecodeResults(*results, batches, statuses, &stats_)
                                  : results.status();
    SetRunning(nullptr);
    if (!decoded.ok()) return channel_.Lost(decoded);
    channel_.session().RoundTripDone(channel_.worker(), stats_);
    return Status::Ok();
  }

  void SetRunning(std::shared_ptr<Worker> worker) {
    MutexLock lock(mu_);
    running_ = std::move(worker);
  }
  Channel channel_;
  std::string buffer_;  // reused for every batch before it goes to the shared region
  EngineStats stats_;
  int batches_per_call_ = 1;  // until a round trip is measured
  Clock::time_point started_at_;  // of the call in flight (StartEach)
  Status sent_;                   // whether StartEach handed it over
  Mutex mu_;
  std::shared_ptr<Worker> running_ GUARDED_BY(mu_);  // the worker of the execution in flight
};

class ContinuousProxy final : public ContinuousInstance {
 public:
  ContinuousProxy(ProcessSession& session, int index) : channel_(session, index) {}

  int free_slots() const override {
    return std::max(0, slots_ - static_cast<int>(active_.size()));
  }
  bool idle() const override { return active_.empty(); }

  void Admit(std::unique_ptr<InferRequest> request) override {
    if (Status s = Connect(request->deadline); !s.ok()) return request->done(s);
    const uint64_t seq = ++next_seq_;
    EncodeAdmit(seq, *request, buffer_);
    if (Status s = WriteFrame(channel_.fd(), FrameKind::kAdmit, buffer_); !s.ok()) {
      const Status lost = channel_.Lost(s);
      FailAll(lost);
      return request->done(lost);
    }
    active_.emplace(seq, Sequence{std::move(request)});
  }

  void Step() override {
    if (!channel_.worker()) return;
    for (auto& [seq, s] : active_) {
      if (!s.cancel_sent && s.request->cancelled && s.request->cancelled()) Cancel(seq, s);
    }
    // Waits a little for the worker's next piece; the scheduler's loop admits between steps.
    if (!channel_.reader().Ready(channel_.fd(), kStepWait)) return;
    do {
      auto kind = channel_.reader().Read(channel_.fd(), buffer_);
      uint64_t seq = 0;
      Result<InferResponse> result = NoResponseYet();
      Status s = !kind.ok() ? kind.status()
                 : *kind != FrameKind::kPartial && *kind != FrameKind::kDone
                     ? Internal("an event out of turn")
                     : DecodeEvent(buffer_, &seq, &result, &stats_);
      if (!s.ok()) return FailAll(channel_.Lost(s));
      if (*kind == FrameKind::kDone) channel_.session().set_engine_stats(channel_.worker(), stats_);
      Deliver(seq, *kind == FrameKind::kDone, std::move(result));
    } while (channel_.worker() && channel_.reader().Ready(channel_.fd(), std::chrono::milliseconds(0)));
  }

  void CancelAll(const Status& status) override {
    for (auto& [seq, s] : active_) {
      if (channel_.worker() && !s.cancel_sent) Cancel(seq, s);
    }
    FailAll(status);
  }
  bool Abort() override {
    MutexLock lock(mu_);
    if (bound_) bound_->Kill();
    return true;
  }

 private:
  static constexpr auto kStepWait = std::chrono::milliseconds(5);
  struct Sequence {
    std::unique_ptr<InferRequest> request;
    bool cancel_sent = false;
  };

  // Binds to the worker serving now (waiting for a restart until `until`) and reads its
  // instance's slots, unless bound already.
  Status Connect(Clock::time_point until) {
    if (channel_.worker()) return Status::Ok();
    MMS_RETURN_IF_ERROR(channel_.Bind(until));
    SetBound();
    auto kind = channel_.reader().Read(channel_.fd(), buffer_);
    Status s = !kind.ok() ? kind.status()
               : *kind != FrameKind::kInstance ? Internal("expected the instance's slots")
                                               : Status::Ok();
    auto slots = s.ok() ? DecodeNumber(buffer_) : Result<uint64_t>(s);
    if (!slots.ok() || *slots == 0 || *slots > 1'000'000) {
      Status lost = channel_.Lost(slots.ok() ? Internal("an instance without slots") : slots.status());
      SetBound();
      return lost;
    }
    slots_ = static_cast<int>(*slots);
    return Status::Ok();
  }

  void Cancel(uint64_t seq, Sequence& s) {
    s.cancel_sent = true;
    if (Status w = WriteFrame(channel_.fd(), FrameKind::kCancel, EncodeNumber(seq)); !w.ok()) {
      FailAll(channel_.Lost(w));
    }
  }

  void Deliver(uint64_t seq, bool done, Result<InferResponse> result) {
    auto it = active_.find(seq);
    if (it == active_.end()) return;  // answered already (cancelled here)
    if (done) {
      auto request = std::move(it->second.request);
      active_.erase(it);
      return request->done(std::move(result));
    }
    Sequence& s = it->second;
    if (result.ok() && s.request->on_partial && !s.request->on_partial(*result) &&
        !s.cancel_sent) {
      Cancel(seq, s);
    }
  }

  // Ends every sequence with `status` (the worker is gone, or the model is unloading).
  void FailAll(const Status& status) {
    auto active = std::move(active_);
    active_.clear();
    for (auto& [seq, s] : active) s.request->done(status);
    if (!channel_.worker()) {
      SetBound();
      slots_ = 1;
    }
  }
  // Abort() kills the worker this instance is bound to, from the watchdog's thread.
  void SetBound() {
    MutexLock lock(mu_);
    bound_ = channel_.shared();
  }

  Channel channel_;
  std::string buffer_;
  EngineStats stats_;
  std::map<uint64_t, Sequence> active_;
  uint64_t next_seq_ = 0;
  int slots_ = 1;  // until a worker says how many: one, so that a request comes to connect
  Mutex mu_;
  std::shared_ptr<Worker> bound_ GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<Instance> NewBatchInstance(ProcessSession& session, int index) {
  return std::make_unique<BatchInstance>(session, index);
}

std::unique_ptr<Instance> NewContinuousInstance(ProcessSession& session, int index) {
  return std::make_unique<ContinuousProxy>(session, index);
}

}  // namespace mmserve
