#include "scheduler/model_scheduler.h"

#include <pthread.h>
#include <sched.h>

#include <future>
#include <mutex>
#include <optional>
#include <regex>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/fake_time.h"

namespace mmserve {
namespace {

using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A session whose instances record what they execute. A request's id steers it: "fail" fails
// the batch, "hang" blocks until the instance is aborted, "slow" takes 100 ms, "yielding" takes
// ten 10 ms steps with the instance's yield point between them (as llama.cpp between graph
// nodes); and every execution waits while the session is held.
class FakeSession final : public Session {
 public:
  const ModelSignature& signature() const override { return signature_; }
  int64_t resident_bytes() const override { return 0; }
  Result<std::unique_ptr<Instance>> CreateInstance(int index) override;
  bool executes_inline() const override { return inline_ok; }
  // The scheduler's destructor calls it once it has told its workers to stop.
  void Interrupt() override {
    std::lock_guard lock(mu);
    interrupted = true;
    cv.notify_all();
  }

  void Hold() {
    std::lock_guard lock(mu);
    released = false;
  }
  void Release() {
    std::lock_guard lock(mu);
    released = true;
    cv.notify_all();
  }
  std::vector<std::string> Executed() {
    std::lock_guard lock(mu);
    return executed_ids;
  }

  std::mutex mu;
  std::condition_variable cv;
  bool released = true;                    // guarded by mu
  bool interrupted = false;                // guarded by mu: Interrupt() was called
  std::vector<size_t> batch_sizes;         // guarded by mu
  std::vector<int> tiers;                  // guarded by mu
  std::vector<std::string> executed_ids;   // guarded by mu
  int instances = 0;                       // guarded by mu
  std::vector<std::thread::id> threads;    // guarded by mu: who ran each execution
  std::vector<size_t> calls;               // guarded by mu: batches per ExecuteEach()
  int parks = 0;                           // guarded by mu: Instance::Park calls
  int releases = 0;                        // guarded by mu: Instance::Release calls
  bool fail_instances = false;
  int batches_per_call = 1;
  bool splits = false;                     // the instances split calls (Instance::StartEach)
  std::vector<std::string> started;        // guarded by mu: each StartEach's first request id
  bool inline_ok = false;
  std::optional<std::chrono::milliseconds> release_after;  // the instances' release_after()

 private:
  ModelSignature signature_;
};

class FakeInstance final : public Instance {
 public:
  explicit FakeInstance(FakeSession& s) : s_(s) {}
  Status Execute(Execution& execution) override {
    std::unique_lock lock(s_.mu);
    s_.cv.wait(lock, [&] { return s_.released; });
    s_.batch_sizes.push_back(execution.items.size());
    s_.threads.push_back(std::this_thread::get_id());
    s_.tiers.push_back(execution.tier);
    bool fail = false, hang = false, slow = false, yielding = false;
    for (auto& item : execution.items) {
      s_.executed_ids.push_back(item.request->id);
      fail = fail || item.request->id == "fail";
      hang = hang || item.request->id == "hang";
      slow = slow || item.request->id == "slow";
      yielding = yielding || item.request->id == "yielding";
    }
    execution.set_stage(Stage::kExecute);
    if (hang) s_.cv.wait(lock, [&] { return aborted_; });
    if (slow) s_.cv.wait_for(lock, 100ms, [&] { return aborted_; });
    if (yielding) {
      lock.unlock();
      for (int step = 0; step < 10; ++step) {
        std::this_thread::sleep_for(10ms);
        if (yield_point()) yield_point()->Yield();
      }
      lock.lock();
    }
    if (aborted_) return Cancelled("aborted");
    if (fail) return Internal("engine fault");
    for (auto& item : execution.items) item.result = InferResponse{};
    return Status::Ok();
  }
  void ExecuteEach(std::span<Execution> batches, std::span<Status> statuses) override {
    {
      std::lock_guard lock(s_.mu);
      s_.calls.push_back(batches.size());
    }
    Instance::ExecuteEach(batches, statuses);
  }
  int batches_per_call() const override { return s_.batches_per_call; }
  bool starts_calls() const override { return s_.splits; }
  void StartEach(std::span<Execution> batches) override {
    std::lock_guard lock(s_.mu);
    s_.started.push_back(batches[0].items[0].request->id);
  }
  void Park() override {
    std::lock_guard lock(s_.mu);
    ++s_.parks;
    s_.cv.notify_all();
  }
  void Release() override {
    std::lock_guard lock(s_.mu);
    ++s_.releases;
    s_.cv.notify_all();
  }
  std::optional<std::chrono::milliseconds> release_after() const override {
    return s_.release_after;
  }
  bool Abort() override {
    std::lock_guard lock(s_.mu);
    aborted_ = true;
    s_.cv.notify_all();
    return true;
  }

 private:
  FakeSession& s_;
  bool aborted_ = false;  // guarded by s_.mu
};

Result<std::unique_ptr<Instance>> FakeSession::CreateInstance(int index) {
  if (fail_instances && index == 1) return Internal("no context");
  std::lock_guard lock(mu);
  ++instances;
  return std::unique_ptr<Instance>(std::make_unique<FakeInstance>(*this));
}

// A request's answer, and when it came by `clock` (the scheduler's: a FakeTime in the tests of
// deadlines, windows and cool-downs, which move time instead of sleeping).
struct Outcome {
  explicit Outcome(const TimeSource& time = TimeSource::Real()) : clock(&time) {}
  const TimeSource* clock;
  std::promise<Status> promise;
  std::future<Status> future = promise.get_future();
  Clock::time_point at;
  bool here = false;  // MayAnswerHere() when it was answered
};

std::unique_ptr<InferRequest> Request(Outcome& outcome, std::string id = "",
                                      Clock::time_point deadline = Clock::time_point::max(),
                                      int priority = 0) {
  auto r = std::make_unique<InferRequest>();
  r->id = std::move(id);
  r->deadline = deadline;
  r->priority = priority;
  r->arrival = outcome.clock->Now();
  r->done = [&outcome](Result<InferResponse> result) {
    outcome.at = outcome.clock->Now();
    outcome.here = MayAnswerHere();
    outcome.promise.set_value(result.status());
  };
  return r;
}

ModelScheduler::Options Opts(int max_batch = 1, const TimeSource& time = TimeSource::Real()) {
  ModelScheduler::Options o;
  o.model = "m";
  o.max_batch = max_batch;
  o.levels = ModelScheduler::Levels(QueueConfig{}, 30s);
  o.time = &time;
  return o;
}

// True when `outcome` is still unanswered after a short real wait: what a test checks before it
// moves fake time past the point that answers it (a wrong early answer shows up here).
bool StillWaiting(Outcome& outcome) {
  return outcome.future.wait_for(20ms) == std::future_status::timeout;
}

// Blocks the single worker on a first request, so that what follows stays queued.
void OccupyWorker(ModelScheduler& s, FakeSession& session, Outcome& first) {
  session.Hold();
  ASSERT_TRUE(s.Enqueue(Request(first, "first")).ok());
  while (s.executing() == 0) std::this_thread::sleep_for(1ms);
}

TEST(ModelSchedulerTest, BatchesWhatIsQueuedUpToMaxBatch) {
  FakeSession session;
  std::vector<Outcome> outcomes(7);  // outlives the scheduler, which may still complete them
  Outcome first;
  auto scheduler = ModelScheduler::Create(Opts(4), session);
  ASSERT_TRUE(scheduler.ok());
  OccupyWorker(**scheduler, session, first);
  for (auto& o : outcomes) ASSERT_TRUE((*scheduler)->Enqueue(Request(o)).ok());
  session.Release();
  for (auto& o : outcomes) EXPECT_TRUE(o.future.get().ok());
  std::lock_guard lock(session.mu);
  EXPECT_THAT(session.batch_sizes, ElementsAre(1, 4, 3));
}

// A worker may spend its own time on an answer (encode and write it: no thread woken before the
// client has it) only when it executed the request alone and nothing is queued behind it.
// A worker writes its answers itself (MayAnswerHere) only when nothing is queued behind them,
// and only a few: at most kMaxBatchesPerCall.
TEST(ModelSchedulerTest, AWorkerMayAnswerItselfOnlyAFewRequestsWithNothingQueued) {
  FakeSession session;
  testing::FakeTime time;
  Outcome first, second, third, fourth, expired(time);
  std::vector<Outcome> batched(2);
  std::vector<Outcome> many(kMaxBatchesPerCall + 1);
  {
    auto scheduler = ModelScheduler::Create(Opts(2 * kMaxBatchesPerCall, time), session);
    ASSERT_TRUE(scheduler.ok());
    OccupyWorker(**scheduler, session, first);
    ASSERT_TRUE((*scheduler)->Enqueue(Request(expired, "", time.Now() + 20ms)).ok());
    time.Advance(20ms);
    EXPECT_EQ(expired.future.get().code(), StatusCode::kDeadlineExceeded);  // the watchdog's
    ASSERT_TRUE((*scheduler)->Enqueue(Request(second)).ok());
    session.Release();
    EXPECT_TRUE(first.future.get().ok());   // alone, but `second` was queued
    EXPECT_TRUE(second.future.get().ok());  // alone, nothing queued
    OccupyWorker(**scheduler, session, third);
    for (auto& o : batched) ASSERT_TRUE((*scheduler)->Enqueue(Request(o)).ok());
    session.Release();
    for (auto& o : batched) EXPECT_TRUE(o.future.get().ok());
    EXPECT_TRUE(third.future.get().ok());
    OccupyWorker(**scheduler, session, fourth);
    for (auto& o : many) ASSERT_TRUE((*scheduler)->Enqueue(Request(o)).ok());
    session.Release();
    for (auto& o : many) EXPECT_TRUE(o.future.get().ok());
  }
  EXPECT_FALSE(expired.here);
  EXPECT_FALSE(first.here);
  EXPECT_TRUE(second.here);
  EXPECT_TRUE(batched[0].here);  // a batch of two, nothing behind it
  EXPECT_TRUE(batched[1].here);
  EXPECT_FALSE(third.here);       // two were queued
  for (const auto& o : many) EXPECT_FALSE(o.here) << "more than a few";
  EXPECT_FALSE(MayAnswerHere());  // and never on other threads
}

TEST(ModelSchedulerTest, WaitsUpToMaxQueueDelayForAPartialBatchToFill) {
  FakeSession session;
  testing::FakeTime time;
  std::vector<Outcome> outcomes;
  for (int i = 0; i < 3; ++i) outcomes.emplace_back(time);
  auto opts = Opts(4, time);
  opts.max_queue_delay = 80ms;
  auto scheduler = ModelScheduler::Create(opts, session);
  ASSERT_TRUE(scheduler.ok());
  const auto start = time.Now();
  ASSERT_TRUE((*scheduler)->Enqueue(Request(outcomes[0])).ok());
  time.Advance(20ms);
  ASSERT_TRUE((*scheduler)->Enqueue(Request(outcomes[1])).ok());
  time.Advance(59ms);
  EXPECT_TRUE(StillWaiting(outcomes[0])) << "the window closed early";
  time.Advance(1ms);  // 80 ms after the first arrived
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(outcomes[i].future.get().ok());
  EXPECT_EQ(outcomes[0].at - start, 80ms) << "the partial batch went when the window closed";
  {
    std::lock_guard lock(session.mu);
    EXPECT_EQ(session.batch_sizes, std::vector<size_t>{2});
  }
  std::lock_guard lock(session.mu);
  ASSERT_TRUE((*scheduler)->Enqueue(Request(outcomes[2])).ok());
}

TEST(ModelSchedulerTest, AFullBatchGoesAtOnceWithoutWaitingForTheDelay) {
  // An hour's delay: a full batch answered at all was not held for it (no clock is read).
  FakeSession session;
  auto opts = Opts(4);
  opts.max_queue_delay = std::chrono::hours(1);
  auto scheduler = ModelScheduler::Create(opts, session);
  ASSERT_TRUE(scheduler.ok());
  std::vector<Outcome> full(4);
  for (auto& o : full) ASSERT_TRUE((*scheduler)->Enqueue(Request(o)).ok());
  for (auto& o : full) {
    ASSERT_EQ(o.future.wait_for(std::chrono::minutes(1)), std::future_status::ready)
        << "the full batch waited for the delay";
    EXPECT_TRUE(o.future.get().ok());
  }
  std::lock_guard lock(session.mu);
  EXPECT_EQ(session.batch_sizes, std::vector<size_t>{4});
}

// An idle worker parks its instance (after kParkAfter), then releases it after its
// release_after(), once per idle spell; an instance that says nullopt is never released.
TEST(ModelSchedulerTest, AnIdleWorkerParksThenReleasesItsInstanceOncePerIdleSpell) {
  for (const bool releases : {true, false}) {
    SCOPED_TRACE(releases ? "released a minute after it parks" : "never released");
    FakeSession session;
    testing::FakeTime time;
    if (releases) session.release_after = 1min;
    auto scheduler = ModelScheduler::Create(Opts(1, time), session);
    ASSERT_TRUE(scheduler.ok());
    // Moves time on, a minute at a time, until the count reaches `n`: the worker starts its
    // idle wait when it gets to it, so one step may come before the wait it was meant to end.
    auto await = [&](int FakeSession::*field, int n) {
      for (int i = 0; i < 1000; ++i) {
        time.Advance(1min);
        std::unique_lock lock(session.mu);
        if (session.cv.wait_for(lock, 10ms, [&] { return session.*field >= n; })) return true;
      }
      return false;
    };
    for (int spell = 1; spell <= 2; ++spell) {
      Outcome outcome(time);
      ASSERT_TRUE((*scheduler)->Enqueue(Request(outcome)).ok());
      EXPECT_TRUE(outcome.future.get().ok());
      ASSERT_TRUE(await(&FakeSession::parks, spell));
      if (releases) {
        ASSERT_TRUE(await(&FakeSession::releases, spell));
      }
    }
    // Past its second spell's park (and release, if any), the worker ran this request.
    Outcome last(time);
    ASSERT_TRUE((*scheduler)->Enqueue(Request(last)).ok());
    EXPECT_TRUE(last.future.get().ok());
    std::lock_guard lock(session.mu);
    EXPECT_EQ(session.releases, releases ? 2 : 0);
  }
}

// hold_partial_batches (a device that runs one execution at a time): while one worker's batch
// executes, another does not launch a partial batch behind it, but waits for the batch to fill
// or for the device to free. Without it, the second worker takes what is there at once.
TEST(ModelSchedulerTest, OnASerialDeviceAPartialBatchWaitsWhileAnotherExecutes) {
  for (const bool hold : {false, true}) {
    SCOPED_TRACE(hold ? "hold" : "no hold");
    FakeSession session;
    std::vector<Outcome> partial(3), last(1), after(2);
    Outcome first, second;
    auto opts = Opts(4);
    opts.thread_num = 2;
    opts.hold_partial_batches = hold;
    auto scheduler = ModelScheduler::Create(opts, session);
    ASSERT_TRUE(scheduler.ok());
    ModelScheduler& s = **scheduler;
    OccupyWorker(s, session, first);
    for (auto& o : partial) ASSERT_TRUE(s.Enqueue(Request(o)).ok());
    if (!hold) {
      // The second worker launches whatever has arrived, a partial batch, at once.
      while (s.executing() < 2) std::this_thread::sleep_for(1ms);
      session.Release();
      for (auto& o : partial) EXPECT_TRUE(o.future.get().ok());
      continue;
    }
    std::this_thread::sleep_for(50ms);
    EXPECT_EQ(s.executing(), 1);  // the three wait
    EXPECT_EQ(s.queued(), 3);
    ASSERT_TRUE(s.Enqueue(Request(last[0])).ok());  // the batch is full: it goes
    while (s.executing() < 5) std::this_thread::sleep_for(1ms);
    session.Release();
    for (auto& o : partial) EXPECT_TRUE(o.future.get().ok());
    EXPECT_TRUE(first.future.get().ok());
    // A partial batch goes once the other execution ends.
    OccupyWorker(s, session, second);
    for (auto& o : after) ASSERT_TRUE(s.Enqueue(Request(o)).ok());
    std::this_thread::sleep_for(20ms);
    EXPECT_EQ(s.executing(), 1);
    session.Release();
    for (auto& o : after) EXPECT_TRUE(o.future.get().ok());
    std::lock_guard lock(session.mu);
    EXPECT_THAT(session.batch_sizes, ::testing::UnorderedElementsAre(1, 4, 1, 2));  // never 3
  }
}

TEST(ModelSchedulerTest, AFormedBatchRunsAtTheSmallestTierThatHoldsIt) {
  FakeSession session;
  auto opts = Opts(8);
  opts.batch_tiers = {1, 2, 4, 8};
  auto scheduler = ModelScheduler::Create(opts, session);
  ASSERT_TRUE(scheduler.ok());
  Outcome first;
  std::vector<Outcome> three(3), five(5);
  OccupyWorker(**scheduler, session, first);
  for (auto& o : three) ASSERT_TRUE((*scheduler)->Enqueue(Request(o)).ok());
  session.Release();
  for (auto& o : three) ASSERT_TRUE(o.future.get().ok());
  Outcome second;
  OccupyWorker(**scheduler, session, second);
  for (auto& o : five) ASSERT_TRUE((*scheduler)->Enqueue(Request(o)).ok());
  session.Release();
  for (auto& o : five) ASSERT_TRUE(o.future.get().ok());
  {
    std::lock_guard lock(session.mu);
    EXPECT_THAT(session.batch_sizes, ElementsAre(1, 3, 1, 5));
    EXPECT_THAT(session.tiers, ElementsAre(1, 4, 1, 8));
  }
  const SchedulerStats stats = (*scheduler)->stats();
  EXPECT_EQ(stats.batches.at(4).executions, 1);
  EXPECT_EQ(stats.batches.at(8).executions, 1);
  EXPECT_EQ(stats.inference_count, 10);
  EXPECT_EQ(stats.execution_count, 4);
}

// An instance behind a costly crossing takes what queued in one call, as several batches: each
// at most max_batch at its own tier, each failing or succeeding on its own.
TEST(ModelSchedulerTest, AnInstanceMayTakeSeveralBatchesPerCallEachOnItsOwn) {
  FakeSession session;
  session.batches_per_call = 3;
  auto opts = Opts(2);
  opts.batch_tiers = {1, 2};
  auto scheduler = ModelScheduler::Create(opts, session);
  ASSERT_TRUE(scheduler.ok());
  Outcome first;
  OccupyWorker(**scheduler, session, first);
  const std::vector<std::string> ids = {"a", "b", "fail", "d", "e", "f", "g"};
  std::vector<Outcome> outcomes(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    ASSERT_TRUE((*scheduler)->Enqueue(Request(outcomes[i], ids[i])).ok());
  }
  session.Release();
  EXPECT_TRUE(first.future.get().ok());
  for (size_t i = 0; i < ids.size(); ++i) {
    const Status s = outcomes[i].future.get();
    EXPECT_EQ(s.code(), i == 2 || i == 3 ? StatusCode::kInternal : StatusCode::kOk) << ids[i];
  }
  {
    std::lock_guard lock(session.mu);
    // [first] alone; [a b] [fail d] [e f] in one call; then [g] alone.
    EXPECT_THAT(session.calls, ElementsAre(1, 3, 1));
    EXPECT_THAT(session.batch_sizes, ElementsAre(1, 2, 2, 2, 1));
    EXPECT_THAT(session.tiers, ElementsAre(1, 2, 2, 2, 1));
    EXPECT_EQ(session.executed_ids, (std::vector<std::string>{"first", "a", "b", "fail", "d",
                                                              "e", "f", "g"}));
  }
  const SchedulerStats stats = (*scheduler)->stats();
  EXPECT_EQ(stats.execution_count, 5);
  EXPECT_EQ(stats.inference_count, 8);
  EXPECT_EQ(stats.batches.at(2).executions, 3);
}

// Runs "first", then "a" and "b" (queued while "first" executes) through a scheduler over a
// splitting instance made by a thread with affinity `cores`; returns how many calls had started
// when each of the three was answered, and whether "first" was answered on the worker's thread.
std::pair<std::vector<size_t>, bool> SplitCalls(const std::vector<int>& cores) {
  std::vector<size_t> started_when_answered(3);
  Outcome first;
  std::vector<Outcome> outcomes(2);
  FakeSession session;
  session.splits = true;
  cpu_set_t set, saved;
  CPU_ZERO(&set);
  for (int c : cores) CPU_SET(c, &set);
  pthread_getaffinity_np(pthread_self(), sizeof(saved), &saved);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);  // the worker thread inherits it
  auto scheduler = ModelScheduler::Create(Opts(1), session);
  pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved);
  EXPECT_TRUE(scheduler.ok());
  if (!scheduler.ok()) return {};
  auto request = [&](Outcome& outcome, const std::string& id, size_t k) {
    auto r = Request(outcome, id);
    r->done = [&, k, done = std::move(r->done)](Result<InferResponse> result) {
      {
        std::lock_guard lock(session.mu);
        started_when_answered[k] = session.started.size();
      }
      done(std::move(result));
    };
    return r;
  };
  session.Hold();  // the worker holds "first" while a and b queue
  EXPECT_TRUE((*scheduler)->Enqueue(request(first, "first", 0)).ok());
  while ((*scheduler)->executing() == 0) std::this_thread::sleep_for(1ms);
  EXPECT_TRUE((*scheduler)->Enqueue(request(outcomes[0], "a", 1)).ok());
  EXPECT_TRUE((*scheduler)->Enqueue(request(outcomes[1], "b", 2)).ok());
  session.Release();
  EXPECT_TRUE(first.future.get().ok());
  EXPECT_TRUE(outcomes[0].future.get().ok());
  EXPECT_TRUE(outcomes[1].future.get().ok());
  EXPECT_EQ((*scheduler)->stats().inference_count, 3);
  std::lock_guard lock(session.mu);
  EXPECT_THAT(session.started, ElementsAre("first", "a", "b"));
  return {started_when_answered, first.here};
}

// An instance that splits its calls (an isolated model's proxy) gets the next call started
// before the worker writes the last one's answers, and the worker writes them itself meanwhile
// — when the worker may run on two cores or more. On one core it does not split.
TEST(ModelSchedulerTest, ASplitCallStartsTheNextBeforeTheLastIsAnsweredOnTwoCores) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one core";
  // "first" is answered once a's call has started (2 calls), a once b's has (3), each on the
  // worker's own thread.
  auto [two, here] = SplitCalls({0, 1});
  EXPECT_THAT(two, ElementsAre(2, 3, 3));
  EXPECT_TRUE(here);
  // One core: each call is answered before the next starts.
  EXPECT_THAT(SplitCalls({0}).first, ElementsAre(1, 2, 3));
}

// Across a batch window: the next call of a splitting instance is not started while its batch
// could still fill.
TEST(ModelSchedulerTest, ASplitCallDoesNotStartAPartialBatchBeforeItsWindowCloses) {
  testing::FakeTime time;
  FakeSession session;
  session.splits = true;
  auto opts = Opts(2, time);
  opts.max_queue_delay = 10s;  // within the 30 s deadline
  auto scheduler = ModelScheduler::Create(opts, session);
  ASSERT_TRUE(scheduler.ok());
  Outcome a(time), b(time), c(time);
  session.Hold();
  ASSERT_TRUE((*scheduler)->Enqueue(Request(a, "a")).ok());
  ASSERT_TRUE((*scheduler)->Enqueue(Request(b, "b")).ok());  // a full batch: goes at once
  while ((*scheduler)->executing() == 0) std::this_thread::sleep_for(1ms);
  ASSERT_TRUE((*scheduler)->Enqueue(Request(c, "c")).ok());
  session.Release();
  ASSERT_TRUE(a.future.get().ok());
  ASSERT_TRUE(b.future.get().ok());
  EXPECT_TRUE(StillWaiting(c));
  {
    std::lock_guard lock(session.mu);
    EXPECT_THAT(session.started, ElementsAre("a"));
  }
  time.Advance(10s);
  ASSERT_TRUE(c.future.get().ok());
  std::lock_guard lock(session.mu);
  EXPECT_THAT(session.started, ElementsAre("a", "c"));
}

TEST(ModelSchedulerTest, HigherLevelsGoFirstAndEachLevelIsFifo) {
  FakeSession session;
  auto scheduler = ModelScheduler::Create(Opts(1), session);
  ASSERT_TRUE(scheduler.ok());
  Outcome first;
  std::vector<Outcome> o(6);
  OccupyWorker(**scheduler, session, first);
  ASSERT_TRUE((*scheduler)->Enqueue(Request(o[0], "low-a", Clock::time_point::max(), 3)).ok());
  ASSERT_TRUE((*scheduler)->Enqueue(Request(o[1], "normal-a")).ok());  // model default: 2
  ASSERT_TRUE((*scheduler)->Enqueue(Request(o[2], "high-a", Clock::time_point::max(), 1)).ok());
  ASSERT_TRUE((*scheduler)->Enqueue(Request(o[3], "low-b", Clock::time_point::max(), 3)).ok());
  ASSERT_TRUE((*scheduler)->Enqueue(Request(o[4], "high-b", Clock::time_point::max(), 1)).ok());
  ASSERT_TRUE((*scheduler)->Enqueue(Request(o[5], "normal-b", Clock::time_point::max(), 2)).ok());
  EXPECT_EQ((*scheduler)->stats().queued[1], 2);
  session.Release();
  for (auto& x : o) ASSERT_TRUE(x.future.get().ok());
  EXPECT_THAT(session.Executed(), ElementsAre("first", "high-a", "high-b", "normal-a", "normal-b",
                                              "low-a", "low-b"));
}

TEST(ModelSchedulerTest, AFullLevelAnswersAtOnceWhileOtherLevelsStillQueue) {
  FakeSession session;
  auto opts = Opts(1);
  opts.levels[2].max_size = 2;
  auto scheduler = ModelScheduler::Create(opts, session);
  ASSERT_TRUE(scheduler.ok());
  Outcome first, a, b, rejected, high;
  OccupyWorker(**scheduler, session, first);
  ASSERT_TRUE((*scheduler)->Enqueue(Request(a)).ok());
  ASSERT_TRUE((*scheduler)->Enqueue(Request(b)).ok());
  Status s = (*scheduler)->Enqueue(Request(rejected));
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()), HasSubstr("queue for priority level 2 is full (2 requests)"));
  EXPECT_EQ(rejected.future.get().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE((*scheduler)->Enqueue(Request(high, "", Clock::time_point::max(), 1)).ok());
  session.Release();
  for (Outcome* o : {&a, &b, &high}) EXPECT_TRUE(o->future.get().ok());
  EXPECT_EQ((*scheduler)->stats().rejected, 1);
}

TEST(ModelSchedulerTest, ExpiredRequestsAreAnsweredAtTheirDeadlineWithoutExecution) {
  FakeSession session;
  testing::FakeTime time;
  auto opts = Opts(1, time);
  opts.levels = ModelScheduler::Levels(QueueConfig{}, 2h);
  auto scheduler = ModelScheduler::Create(opts, session);
  ASSERT_TRUE(scheduler.ok());
  Outcome first(time), expired(time);
  OccupyWorker(**scheduler, session, first);
  // An hour: what only a clock the test moves can reach within a test.
  const auto deadline = time.Now() + 1h;
  ASSERT_TRUE((*scheduler)->Enqueue(Request(expired, "expired", deadline)).ok());
  time.Advance(1h - 1ms);
  EXPECT_TRUE(StillWaiting(expired));
  time.Advance(1ms);
  // The only worker is still blocked: the watchdog answers the request at its deadline.
  Status s = expired.future.get();
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(s.message()), HasSubstr("it was not executed"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("expired after 3600000 ms"));
  EXPECT_EQ(expired.at, deadline);
  session.Release();
  EXPECT_TRUE(first.future.get().ok());
  EXPECT_THAT(session.Executed(), ElementsAre("first"));
  EXPECT_EQ((*scheduler)->stats().expired, 1);
}

TEST(ModelSchedulerTest, TheLevelTimeoutBoundsTheDeadline) {
  FakeSession session;
  testing::FakeTime time;
  auto opts = Opts(1, time);
  opts.levels[3].timeout = 20ms;
  auto scheduler = ModelScheduler::Create(opts, session);
  ASSERT_TRUE(scheduler.ok());
  Outcome first(time), low(time), normal(time);
  OccupyWorker(**scheduler, session, first);
  ASSERT_TRUE((*scheduler)->Enqueue(Request(low, "low", Clock::time_point::max(), 3)).ok());
  ASSERT_TRUE((*scheduler)->Enqueue(Request(normal, "normal")).ok());
  time.Advance(20ms);
  EXPECT_EQ(low.future.get().code(), StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(StillWaiting(normal)) << "the default level's 30 s bound its deadline";
  session.Release();
  EXPECT_TRUE(normal.future.get().ok());
}

TEST(ModelSchedulerTest, ACancelledRequestIsDroppedWithoutExecution) {
  FakeSession session;
  auto scheduler = ModelScheduler::Create(Opts(), session);
  ASSERT_TRUE(scheduler.ok());
  Outcome first, gone;
  std::atomic<bool> client_gone{false};
  OccupyWorker(**scheduler, session, first);
  auto r = Request(gone, "gone");
  r->cancelled = [&] { return client_gone.load(); };
  ASSERT_TRUE((*scheduler)->Enqueue(std::move(r)).ok());
  client_gone = true;
  EXPECT_EQ(gone.future.get().code(), StatusCode::kCancelled);
  session.Release();
  EXPECT_TRUE(first.future.get().ok());
  EXPECT_THAT(session.Executed(), ElementsAre("first"));
  EXPECT_EQ((*scheduler)->stats().cancelled, 1);
}

TEST(ModelSchedulerTest, BreakerOpensAfterConsecutiveFailuresAndClosesAfterAProbe) {
  FakeSession session;
  testing::FakeTime time;
  auto opts = Opts(1, time);
  opts.breaker = {.failures = 3, .cooldown = 150ms};
  auto scheduler = ModelScheduler::Create(opts, session);
  ASSERT_TRUE(scheduler.ok());
  auto run = [&](const std::string& id) {
    Outcome o;
    (void)(*scheduler)->Enqueue(Request(o, id));
    return o.future.get();
  };
  EXPECT_EQ(run("fail").code(), StatusCode::kInternal);
  EXPECT_EQ(run("fail").code(), StatusCode::kInternal);
  EXPECT_TRUE(run("ok").ok()) << "a success resets the count";
  for (int i = 0; i < 3; ++i) EXPECT_EQ(run("fail").code(), StatusCode::kInternal);
  EXPECT_EQ((*scheduler)->breaker_state(), CircuitBreaker::State::kOpen);

  // Open: answered at once, not queued, not executed.
  const size_t executed = session.Executed().size();
  Status s = run("ok");
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_THAT(std::string(s.message()), HasSubstr("3 consecutive failures"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("engine fault"));
  EXPECT_EQ(session.Executed().size(), executed);

  // Half-open after the cool-down: a failing probe opens it again ...
  time.Advance(149ms);
  EXPECT_EQ(run("ok").code(), StatusCode::kUnavailable) << "still cooling down";
  time.Advance(1ms);
  EXPECT_EQ(run("fail").code(), StatusCode::kInternal);
  EXPECT_EQ((*scheduler)->breaker_state(), CircuitBreaker::State::kOpen);
  EXPECT_EQ(run("ok").code(), StatusCode::kUnavailable);
  // ... and a succeeding one closes it.
  time.Advance(150ms);
  EXPECT_TRUE(run("ok").ok());
  EXPECT_EQ((*scheduler)->breaker_state(), CircuitBreaker::State::kClosed);
  EXPECT_TRUE(run("ok").ok());
  EXPECT_EQ((*scheduler)->stats().breaker_opened, 2);
}

// A failed execution fails its requests together, and so does a lost worker every batch of a
// call: the breaker counts it once, not once per request.
TEST(ModelSchedulerTest, TheRequestsOfOneFailedCallAreOneFailureForTheBreaker) {
  FakeSession session;
  session.batches_per_call = 2;
  auto opts = Opts(4);
  opts.breaker = {.failures = 2, .cooldown = 10s};
  auto scheduler = ModelScheduler::Create(opts, session);
  ASSERT_TRUE(scheduler.ok());
  Outcome first;
  OccupyWorker(**scheduler, session, first);
  // One call of two failing batches of four: eight requests failed, one failure told.
  std::vector<Outcome> failed(8);
  for (auto& o : failed) ASSERT_TRUE((*scheduler)->Enqueue(Request(o, "fail")).ok());
  session.Release();
  EXPECT_TRUE(first.future.get().ok());
  for (auto& o : failed) EXPECT_EQ(o.future.get().code(), StatusCode::kInternal);
  {
    std::lock_guard lock(session.mu);
    EXPECT_THAT(session.calls, ElementsAre(1, 2));  // [first]; then the two failing batches
  }
  EXPECT_EQ((*scheduler)->breaker_state(), CircuitBreaker::State::kClosed);
  // The next failed call is the second consecutive failure.
  Outcome again;
  ASSERT_TRUE((*scheduler)->Enqueue(Request(again, "fail")).ok());
  EXPECT_EQ(again.future.get().code(), StatusCode::kInternal);
  EXPECT_EQ((*scheduler)->breaker_state(), CircuitBreaker::State::kOpen);
}

TEST(ModelSchedulerTest, HalfOpenLetsExactlyOneProbeThrough) {
  FakeSession session;
  testing::FakeTime time;
  auto opts = Opts(1, time);
  opts.breaker = {.failures = 1, .cooldown = 50ms};
  auto scheduler = ModelScheduler::Create(opts, session);
  ASSERT_TRUE(scheduler.ok());
  Outcome failed, probe, second;
  ASSERT_TRUE((*scheduler)->Enqueue(Request(failed, "fail")).ok());
  EXPECT_EQ(failed.future.get().code(), StatusCode::kInternal);
  time.Advance(50ms);
  session.Hold();
  ASSERT_TRUE((*scheduler)->Enqueue(Request(probe, "probe")).ok());
  EXPECT_EQ((*scheduler)->Enqueue(Request(second, "second")).code(), StatusCode::kUnavailable);
  EXPECT_EQ((*scheduler)->breaker_state(), CircuitBreaker::State::kHalfOpen);
  session.Release();
  EXPECT_TRUE(probe.future.get().ok());
  EXPECT_EQ((*scheduler)->breaker_state(), CircuitBreaker::State::kClosed);
}

TEST(ModelSchedulerTest, WatchdogAnswersAHungExecutionQuarantinesAndRestarts) {
  FakeSession session;
  testing::FakeTime time;
  auto opts = Opts(1, time);
  opts.watchdog_margin = 50ms;
  opts.breaker = {.failures = 0, .cooldown = 60s};  // only the watchdog opens it
  auto scheduler = ModelScheduler::Create(opts, session);
  ASSERT_TRUE(scheduler.ok());
  Outcome hung(time);
  const auto deadline = time.Now() + 50ms;
  ASSERT_TRUE((*scheduler)->Enqueue(Request(hung, "hang", deadline)).ok());
  while ((*scheduler)->executing() == 0) std::this_thread::sleep_for(1ms);
  time.Advance(50ms);
  // The client is answered at its deadline; the report follows at deadline + margin.
  Status s = hung.future.get();
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(s.message()), HasSubstr("its execution ran past the request's"));
  EXPECT_EQ(hung.at, deadline);
  time.Advance(49ms);
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ((*scheduler)->stats().watchdog_reports, 0) << "reported before deadline + margin";
  time.Advance(1ms);
  // The aborted instance is replaced by a fresh one on the same worker.
  for (int i = 0; i < 3000 && (*scheduler)->stats().workers[0].restarts == 0; ++i) {
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ((*scheduler)->breaker_state(), CircuitBreaker::State::kOpen);
  EXPECT_THAT((*scheduler)->breaker_reason(), HasSubstr("model 'm' version 1"));
  EXPECT_THAT((*scheduler)->breaker_reason(), HasSubstr("batch of 1 in stage execute"));
  EXPECT_THAT((*scheduler)->breaker_reason(), HasSubstr("watchdog"));
  const SchedulerStats stats = (*scheduler)->stats();
  EXPECT_EQ(stats.workers[0].restarts, 1);
  EXPECT_EQ(stats.watchdog_reports, 1);
  EXPECT_EQ(stats.failure, 1);
  std::lock_guard lock(session.mu);
  EXPECT_EQ(session.instances, 2);
}

// An unload waits for its workers; a worker whose execution hangs waits for the watchdog to
// abort it. So the watchdog keeps watching until the workers are joined.
TEST(ModelSchedulerTest, AnExecutionThatHangsAtUnloadIsStillAbortedAndTheUnloadEnds) {
  FakeSession session;
  testing::FakeTime time;
  auto opts = Opts(1, time);
  opts.watchdog_margin = 50ms;
  SchedulerStats final_stats;
  opts.on_retired = [&final_stats](const SchedulerStats& s) { final_stats = s; };
  auto scheduler = ModelScheduler::Create(opts, session);
  ASSERT_TRUE(scheduler.ok());
  Outcome hung(time);
  ASSERT_TRUE((*scheduler)->Enqueue(Request(hung, "hang", time.Now() + 50ms)).ok());
  while ((*scheduler)->executing() == 0) std::this_thread::sleep_for(1ms);
  std::thread unload([&] { scheduler->reset(); });
  {
    // The workers are told to stop before the session is interrupted: only then may the
    // watchdog fire, or the worker would see the report before the stop and restart.
    std::unique_lock lock(session.mu);
    session.cv.wait(lock, [&] { return session.interrupted; });
  }
  time.Advance(100ms);  // past the deadline and the margin
  unload.join();        // before: never, the watchdog was stopped before the workers' join
  EXPECT_EQ(hung.future.get().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(final_stats.watchdog_reports, 1);
  std::lock_guard lock(session.mu);
  EXPECT_EQ(session.instances, 1) << "an unloading worker made a fresh instance";
}

TEST(ModelSchedulerTest, PreserveOrderingHoldsResponsesUntilEarlierOnesLeave) {
  FakeSession session;
  auto opts = Opts();
  opts.thread_num = 2;
  opts.preserve_ordering = true;
  auto scheduler = ModelScheduler::Create(opts, session);
  ASSERT_TRUE(scheduler.ok());
  Outcome slow, fast;
  ASSERT_TRUE((*scheduler)->Enqueue(Request(slow, "slow")).ok());
  while ((*scheduler)->executing() == 0) std::this_thread::sleep_for(1ms);
  ASSERT_TRUE((*scheduler)->Enqueue(Request(fast, "fast")).ok());
  EXPECT_TRUE(fast.future.get().ok());
  EXPECT_TRUE(slow.future.get().ok());
  EXPECT_LE(slow.at, fast.at);
  EXPECT_THAT(session.Executed(), ElementsAre("slow", "fast"));
}

TEST(ModelSchedulerTest, FailsToStartWhenAnInstanceCannotBeCreated) {
  FakeSession session;
  session.fail_instances = true;
  auto opts = Opts();
  opts.thread_num = 2;
  auto scheduler = ModelScheduler::Create(opts, session);
  ASSERT_FALSE(scheduler.ok());
  EXPECT_EQ(scheduler.status().message(), "creating instance 1: no context");
}

ModelScheduler::Options InlineOpts() {
  ModelScheduler::Options o = Opts();
  o.execute_inline = true;
  o.breaker.failures = 2;
  return o;
}

TEST(ModelSchedulerTest, InlineExecutionRunsOnTheCallersThreadBeforeEnqueueReturns) {
  FakeSession session;
  session.inline_ok = true;
  Outcome outcome;
  auto scheduler = ModelScheduler::Create(InlineOpts(), session);
  ASSERT_TRUE(scheduler.ok()) << scheduler.status().ToString();
  ASSERT_TRUE((*scheduler)->Enqueue(Request(outcome, "a")).ok());
  ASSERT_EQ(outcome.future.wait_for(0s), std::future_status::ready);
  EXPECT_TRUE(outcome.future.get().ok());
  {
    std::lock_guard lock(session.mu);
    EXPECT_THAT(session.threads, ElementsAre(std::this_thread::get_id()));
  }
  const SchedulerStats stats = (*scheduler)->stats();
  EXPECT_EQ(stats.success, 1);
  EXPECT_EQ(stats.execution_count, 1);
  EXPECT_EQ(stats.batches.at(1).executions, 1);
  EXPECT_TRUE(stats.workers.empty());
}

TEST(ModelSchedulerTest, InlineExecutionsOfManyThreadsRunAtOnce) {
  FakeSession session;
  session.inline_ok = true;
  auto scheduler = ModelScheduler::Create(InlineOpts(), session);
  ASSERT_TRUE(scheduler.ok());
  session.Hold();
  std::vector<Outcome> outcomes(2);
  std::vector<std::jthread> callers;
  for (auto& o : outcomes) {
    callers.emplace_back([&] { (void)(*scheduler)->Enqueue(Request(o)); });
  }
  while ((*scheduler)->executing() < 2) std::this_thread::sleep_for(1ms);
  session.Release();
  for (auto& o : outcomes) EXPECT_TRUE(o.future.get().ok());
}

TEST(ModelSchedulerTest, InlineExecutionKeepsDeadlinesAndTheBreaker) {
  FakeSession session;
  session.inline_ok = true;
  auto scheduler = ModelScheduler::Create(InlineOpts(), session);
  ASSERT_TRUE(scheduler.ok());
  Outcome late;
  (void)(*scheduler)->Enqueue(Request(late, "late", Clock::now() - 1ms));
  EXPECT_EQ(late.future.get().code(), StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(session.Executed().empty());  // expired on arrival: never executed

  std::vector<Outcome> failed(2);
  for (auto& o : failed) {
    (void)(*scheduler)->Enqueue(Request(o, "fail"));
    EXPECT_EQ(o.future.get().code(), StatusCode::kInternal);
  }
  Outcome refused;
  EXPECT_EQ((*scheduler)->Enqueue(Request(refused, "a")).code(), StatusCode::kUnavailable);
  EXPECT_EQ((*scheduler)->breaker_state(), CircuitBreaker::State::kOpen);
  EXPECT_THAT(session.Executed(), ElementsAre("fail", "fail"));
}

TEST(ModelSchedulerTest, InlineExecutionNeedsASessionThatAllowsIt) {
  FakeSession session;  // inline_ok false: its executions may block
  auto scheduler = ModelScheduler::Create(InlineOpts(), session);
  ASSERT_FALSE(scheduler.ok());
  EXPECT_EQ(scheduler.status().code(), StatusCode::kFailedPrecondition);
}

TEST(ModelSchedulerTest, StopAcceptingRejectsNewRequestsButFinishesQueuedOnes) {
  FakeSession session;
  auto scheduler = ModelScheduler::Create(Opts(), session);
  ASSERT_TRUE(scheduler.ok());
  Outcome first, queued, late;
  OccupyWorker(**scheduler, session, first);
  ASSERT_TRUE((*scheduler)->Enqueue(Request(queued)).ok());
  (*scheduler)->StopAccepting();
  EXPECT_EQ((*scheduler)->Enqueue(Request(late)).code(), StatusCode::kUnavailable);
  session.Release();
  EXPECT_TRUE(queued.future.get().ok());
}

TEST(ModelSchedulerTest, WorkersReportTheirPinningAndNiceValue) {
  FakeSession session;
  auto opts = Opts();
  opts.thread_num = 2;
  opts.cpu_affinity = {0};
  opts.nice = 5;
  auto scheduler = ModelScheduler::Create(opts, session);
  ASSERT_TRUE(scheduler.ok());
  const auto workers = (*scheduler)->stats().workers;
  ASSERT_EQ(workers.size(), 2u);
  for (const auto& w : workers) {
    EXPECT_EQ(w.cores, std::vector<int>{0});
    EXPECT_EQ(w.nice, 5);
    EXPECT_GT(w.tid, 0);
  }
  EXPECT_NE(workers[0].tid, workers[1].tid);
}

}  // namespace
}  // namespace mmserve

namespace mmserve {
namespace {

// Model a (level 1) and model b (level 3) on one device's gate.
struct TwoModels {
  explicit TwoModels(std::chrono::milliseconds linger, std::chrono::milliseconds b_timeout = 30s,
                     std::chrono::milliseconds b_margin = 1s)
      : gate(linger) {
    auto a_opts = Opts();
    a_opts.model = "a";
    a_opts.default_priority = 1;
    a_opts.gate = &gate;
    auto b_opts = Opts();
    b_opts.model = "b";
    b_opts.default_priority = 3;
    b_opts.gate = &gate;
    b_opts.levels = ModelScheduler::Levels(QueueConfig{}, b_timeout);
    b_opts.watchdog_margin = b_margin;
    auto created_a = ModelScheduler::Create(a_opts, a_session);
    auto created_b = ModelScheduler::Create(b_opts, b_session);
    a = std::move(*created_a);
    b = std::move(*created_b);
  }
  // Starts b on a "yielding" execution, then makes a busy with a request held in execution.
  void BusyAWhileBRuns(Outcome& b_running, Outcome& a_held) {
    ASSERT_TRUE(b->Enqueue(Request(b_running, "yielding")).ok());
    while (b->executing() == 0) std::this_thread::sleep_for(1ms);
    a_session.Hold();
    ASSERT_TRUE(a->Enqueue(Request(a_held)).ok());
  }

  PriorityGate gate;
  FakeSession a_session, b_session;
  std::unique_ptr<ModelScheduler> a, b;
};

TEST(ModelSchedulerTest, ALessImportantModelGivesWayWhileAMoreImportantOneHasWork) {
  Outcome b_running, b_next, a_held;
  TwoModels m(20ms);
  m.BusyAWhileBRuns(b_running, a_held);
  // Unhindered, b's execution takes 100 ms; it pauses at its next yield point instead.
  EXPECT_EQ(b_running.future.wait_for(300ms), std::future_status::timeout);
  // Nor does b start another execution while a is busy.
  ASSERT_TRUE(m.b->Enqueue(Request(b_next, "next")).ok());
  std::this_thread::sleep_for(50ms);
  EXPECT_THAT(m.b_session.Executed(), ElementsAre("yielding"));

  const auto released = Clock::now();
  m.a_session.Release();
  EXPECT_TRUE(a_held.future.get().ok());
  EXPECT_TRUE(b_running.future.get().ok());
  EXPECT_TRUE(b_next.future.get().ok());
  EXPECT_GE(b_running.at - released, 20ms) << "b resumes after a's linger";
  EXPECT_THAT(m.b_session.Executed(), ElementsAre("yielding", "next"));
  const SchedulerStats b_stats = m.b->stats();
  EXPECT_GE(b_stats.yields, 1);
  EXPECT_GE(b_stats.yield_ns, 300'000'000);
  EXPECT_EQ(b_stats.watchdog_reports, 0);
  EXPECT_EQ(m.a->stats().yields, 0) << "the more important model never waits";
}

TEST(ModelSchedulerTest, APauseEndsAtTheExecutionsDeadlineAndIsNotAHang) {
  Outcome b_running, a_held;
  // b's requests time out after 300 ms; a stays busy far longer. The watchdog margin (50 ms) is
  // shorter than b's remaining work after its deadline, so counting the pause as execution
  // time would report a hang.
  TwoModels m(0ms, /*b_timeout=*/300ms, /*b_margin=*/50ms);
  const auto start = Clock::now();
  m.BusyAWhileBRuns(b_running, a_held);
  ASSERT_EQ(b_running.future.wait_for(3s), std::future_status::ready);
  EXPECT_EQ(b_running.future.get().code(), StatusCode::kDeadlineExceeded)
      << "answered at its deadline";
  EXPECT_GE(b_running.at - start, 300ms);
  const SchedulerStats b_stats = m.b->stats();
  EXPECT_EQ(b_stats.watchdog_reports, 0);
  EXPECT_EQ(b_stats.breaker, CircuitBreaker::State::kClosed);
  EXPECT_EQ(a_held.future.wait_for(0ms), std::future_status::timeout) << "a is still busy";
  m.a_session.Release();
  EXPECT_TRUE(a_held.future.get().ok());
}

TEST(ModelSchedulerTest, ModelsOfEqualPriorityNeverWaitForEachOther) {
  PriorityGate gate(50ms);
  FakeSession x_session, y_session;
  auto opts = Opts();
  opts.gate = &gate;
  auto x = ModelScheduler::Create(opts, x_session);
  auto y = ModelScheduler::Create(opts, y_session);
  ASSERT_TRUE(x.ok() && y.ok());
  Outcome x_held, y_done;
  x_session.Hold();
  ASSERT_TRUE((*x)->Enqueue(Request(x_held)).ok());
  ASSERT_TRUE((*y)->Enqueue(Request(y_done, "yielding")).ok());
  ASSERT_EQ(y_done.future.wait_for(2s), std::future_status::ready);
  EXPECT_TRUE(y_done.future.get().ok());
  EXPECT_EQ((*y)->stats().yields, 0);
  x_session.Release();
  EXPECT_TRUE(x_held.future.get().ok());
}

// A generator that never finishes its sequences, in steps of 2 ms (a worker process that stopped
// answering, polled): the continuous style's watchdog case.
class StuckGeneratorSession final : public Session {
 public:
  const ModelSignature& signature() const override { return signature_; }
  int64_t resident_bytes() const override { return 0; }
  ExecutionStyle style() const override { return ExecutionStyle::kContinuous; }
  Result<std::unique_ptr<Instance>> CreateInstance(int) override {
    return std::unique_ptr<Instance>(std::make_unique<Generator>());
  }

 private:
  class Generator final : public ContinuousInstance {
   public:
    int free_slots() const override { return sequences_.empty() ? 1 : 0; }
    void Admit(std::unique_ptr<InferRequest> request) override {
      sequences_.push_back(std::move(request));
    }
    bool idle() const override { return sequences_.empty(); }
    void Step() override { std::this_thread::sleep_for(2ms); }
    void CancelAll(const Status& status) override {
      for (auto& r : sequences_) r->done(status);
      sequences_.clear();
    }
    bool Abort() override { return true; }

   private:
    std::vector<std::unique_ptr<InferRequest>> sequences_;
  };
  ModelSignature signature_;
};

// Round 2, F10: the report said "has run 3 ms, 1000 ms past its deadline": the time of the step
// in progress, not of the sequence that outlived its deadline.
TEST(ModelSchedulerTest, AStuckGeneratorIsReportedWithItsSequencesTimeNotOneSteps) {
  StuckGeneratorSession session;
  testing::FakeTime time;
  auto opts = Opts(1, time);
  opts.watchdog_margin = 50ms;
  opts.breaker = {.failures = 0, .cooldown = 60s};
  auto scheduler = ModelScheduler::Create(opts, session);
  ASSERT_TRUE(scheduler.ok());
  Outcome stuck(time);
  ASSERT_TRUE((*scheduler)->Enqueue(Request(stuck, "stuck", time.Now() + 100ms)).ok());
  while ((*scheduler)->executing() == 0) std::this_thread::sleep_for(1ms);
  time.Advance(100ms);
  EXPECT_EQ(stuck.future.get().code(), StatusCode::kDeadlineExceeded);  // at its deadline
  // The report follows, at deadline + margin (or up to the watchdog's 100 ms later: between
  // steps no execution is running, and it sleeps until its next regular look).
  for (int i = 0; i < 3000 && (*scheduler)->stats().watchdog_reports == 0; ++i) {
    time.Advance(10ms);
    std::this_thread::sleep_for(1ms);
  }
  // The sequence started before its deadline (else it would have been answered from the
  // queue) and is reported at deadline + margin or later: it has run more than the 50 ms margin,
  // a step 2 ms.
  const std::string reason = (*scheduler)->breaker_reason();
  std::smatch ran;
  ASSERT_TRUE(std::regex_search(reason, ran, std::regex("has run ([0-9]+) ms"))) << reason;
  EXPECT_GE(std::stoi(ran[1]), 50) << reason;
  EXPECT_EQ((*scheduler)->stats().watchdog_reports, 1);
}

// A generator whose steps wait until the test lets them go; each step streams a partial to
// each sequence and ends the sequence when its on_partial refuses.
class HeldGeneratorSession final : public Session {
 public:
  const ModelSignature& signature() const override { return signature_; }
  int64_t resident_bytes() const override { return 0; }
  ExecutionStyle style() const override { return ExecutionStyle::kContinuous; }
  Result<std::unique_ptr<Instance>> CreateInstance(int) override {
    return std::unique_ptr<Instance>(std::make_unique<Generator>(*this));
  }
  void Release() { go_.set_value(); }
  std::atomic<int> steps_done{0}, sequences_ended{0};

 private:
  class Generator final : public ContinuousInstance {
   public:
    explicit Generator(HeldGeneratorSession& s) : s_(s), go_(s.go_.get_future().share()) {}
    int free_slots() const override { return sequences_.empty() ? 1 : 0; }
    void Admit(std::unique_ptr<InferRequest> request) override {
      sequences_.push_back(std::move(request));
    }
    bool idle() const override { return sequences_.empty(); }
    void Step() override {
      go_.wait();
      for (auto& r : sequences_) {
        if (!r->on_partial(InferResponse{})) {
          r->done(Cancelled("the answer is no longer wanted"));
          r.reset();
          ++s_.sequences_ended;
        }
      }
      std::erase(sequences_, nullptr);
      ++s_.steps_done;
    }
    void CancelAll(const Status& status) override {
      for (auto& r : sequences_) r->done(status);
      sequences_.clear();
    }

   private:
    HeldGeneratorSession& s_;
    std::shared_future<void> go_;
    std::vector<std::unique_ptr<InferRequest>> sequences_;
  };
  std::promise<void> go_;
  ModelSignature signature_;
};

// #42: a generation past its deadline is answered 504 at the deadline, not when the step in
// progress ends; no partial follows the answer, and the sequence's own end is not a second one.
TEST(ModelSchedulerTest, AGenerationPastItsDeadlineIsAnsweredAtItNotAtItsNextStep) {
  HeldGeneratorSession session;
  testing::FakeTime time;
  auto opts = Opts(1, time);
  opts.watchdog_margin = 600s;  // no hang report: the deadline alone answers
  auto scheduler = ModelScheduler::Create(opts, session);
  ASSERT_TRUE(scheduler.ok());
  Outcome out(time);
  std::atomic<int> partials{0};
  const auto deadline = time.Now() + 50ms;
  auto request = Request(out, "gen", deadline);
  request->on_partial = [&partials](const InferResponse&) {
    ++partials;
    return true;
  };
  ASSERT_TRUE((*scheduler)->Enqueue(std::move(request)).ok());
  while ((*scheduler)->executing() == 0) std::this_thread::sleep_for(1ms);
  time.Advance(50ms);
  // The first step is held: only the deadline can answer.
  const bool answered = out.future.wait_for(60s) == std::future_status::ready;
  const int steps_at_answer = session.steps_done;
  session.Release();  // before any ASSERT: the scheduler's worker waits on it
  ASSERT_TRUE(answered) << "not answered while the step was held";
  EXPECT_EQ(out.future.get().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(out.at, deadline);
  EXPECT_EQ(steps_at_answer, 0);
  for (int i = 0; i < 3000 && session.sequences_ended == 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(session.sequences_ended, 1) << "the closed gate ends the sequence";
  EXPECT_EQ(partials, 0) << "no partial after the answer";
  EXPECT_EQ((*scheduler)->stats().failure, 1);  // one answer, counted once
}

}  // namespace
}  // namespace mmserve
