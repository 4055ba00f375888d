#include "runtime/runtime_guard.h"

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace mmserve {
namespace {

using ::testing::ElementsAre;

// Records every call, in order, into a log shared by all fakes of a test.
class FakeRuntime final : public Runtime {
 public:
  FakeRuntime(std::string name, std::vector<std::string>* log, std::mutex* log_mu)
      : name_(std::move(name)), log_(log), log_mu_(log_mu) {}

  std::string name() const override { return name_; }
  int DeviceCount() const override { return 4; }
  Result<InitResult> Initialize() override {
    ++inits;
    Record("init " + name_);
    if (fail_init) return Internal("no device");
    // AscendCL's 100002: someone in the process already called aclInit.
    return already_initialized ? InitResult::kAlreadyInitialized : InitResult::kInitialized;
  }
  Status Finalize() override {
    ++finalizes;
    Record("finalize " + name_);
    return Status::Ok();
  }
  Status OpenDevice(int device) override {
    Record("open " + name_ + ":" + std::to_string(device));
    if (fail_open) return Internal("device busy");
    return Status::Ok();
  }
  Status CloseDevice(int device) override {
    Record("close " + name_ + ":" + std::to_string(device));
    return Status::Ok();
  }

  std::atomic<int> inits{0};
  std::atomic<int> finalizes{0};
  bool already_initialized = false;
  bool fail_init = false;
  bool fail_open = false;

 private:
  void Record(std::string event) {
    std::lock_guard lock(*log_mu_);
    log_->push_back(std::move(event));
  }
  std::string name_;
  std::vector<std::string>* log_;
  std::mutex* log_mu_;
};

class RuntimeGuardTest : public ::testing::Test {
 protected:
  std::vector<std::string> log_;
  std::mutex log_mu_;
  FakeRuntime acl_{"acl", &log_, &log_mu_};
  FakeRuntime ggml_{"ggml", &log_, &log_mu_};
  RuntimeGuard guard_;
};

TEST_F(RuntimeGuardTest, FirstLeaseInitializesLastReleaseFinalizes) {
  {
    auto a = guard_.Acquire(acl_, 0);
    auto b = guard_.Acquire(acl_, 0);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(acl_.inits, 1);
    a->Release();
    EXPECT_EQ(acl_.finalizes, 0);
  }
  EXPECT_EQ(acl_.finalizes, 1);
  EXPECT_THAT(log_, ElementsAre("init acl", "open acl:0", "close acl:0", "finalize acl"));
}

class RuntimeGuardConcurrencyTest : public RuntimeGuardTest,
                                    public ::testing::WithParamInterface<int> {};

TEST_P(RuntimeGuardConcurrencyTest, ConcurrentLeasesInitializeAndFinalizeExactlyOnce) {
  const int threads = GetParam();
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::atomic<int> held{0};
  std::atomic<int> max_held{0};
  {
    // A lease held across the whole run (declared before the workers, so released after they
    // are joined): the runtime is never idle, so whatever the interleaving of the 16 threads'
    // acquires and releases, there must be exactly one init and one finalize.
    auto first = guard_.Acquire(acl_, 0);
    ASSERT_TRUE(first.ok());
    std::vector<std::jthread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        ++ready;
        while (!go) std::this_thread::yield();
        for (int i = 0; i < 50; ++i) {
          auto lease = guard_.Acquire(acl_, t % 2);
          ASSERT_TRUE(lease.ok());
          const int now = ++held;
          int prev = max_held;
          while (now > prev && !max_held.compare_exchange_weak(prev, now)) {
          }
          --held;
        }
      });
    }
    while (ready < threads) std::this_thread::yield();
    go = true;
  }
  EXPECT_EQ(acl_.inits, 1);
  EXPECT_EQ(acl_.finalizes, 1);
  EXPECT_GT(max_held.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(Threads, RuntimeGuardConcurrencyTest, ::testing::Values(2, 16));

TEST_F(RuntimeGuardTest, SixteenThreadsStartingFromNothingInitializeOnceAtATime) {
  // No lease is held across threads here: the runtime may go idle and come back, but never
  // twice at once — inits and finalizes alternate, starting with an init.
  {
    std::vector<std::jthread> workers;
    for (int t = 0; t < 16; ++t) {
      workers.emplace_back([&] {
        for (int i = 0; i < 50; ++i) {
          auto lease = guard_.Acquire(acl_, 0);
          ASSERT_TRUE(lease.ok());
        }
      });
    }
  }
  EXPECT_EQ(acl_.inits, acl_.finalizes);
  EXPECT_GE(acl_.inits, 1);
  std::lock_guard lock(log_mu_);
  int depth = 0;
  for (const auto& e : log_) {
    if (e == "init acl") {
      EXPECT_EQ(++depth, 1) << "a second init while initialized";
    }
    if (e == "finalize acl") {
      EXPECT_EQ(--depth, 0);
    }
  }
}

TEST_F(RuntimeGuardTest, RuntimeInitializedElsewhereIsNeverFinalized) {
  acl_.already_initialized = true;
  {
    auto lease = guard_.Acquire(acl_, 0);
    ASSERT_TRUE(lease.ok()) << lease.status().ToString();
    EXPECT_EQ(guard_.Describe(), "acl(foreign) acl:0");
  }
  EXPECT_EQ(acl_.inits, 1);
  EXPECT_EQ(acl_.finalizes, 0);
  EXPECT_THAT(log_, ElementsAre("init acl", "open acl:0", "close acl:0"));
}

TEST_F(RuntimeGuardTest, TeardownIsLastInFirstOutEvenWhenReleasedInOrder) {
  auto a = guard_.Acquire(acl_, 0);
  auto g = guard_.Acquire(ggml_, 0);
  ASSERT_TRUE(a.ok() && g.ok());
  a->Release();  // acl was initialized first: it must wait until ggml is gone
  EXPECT_EQ(acl_.finalizes, 0);
  g->Release();
  EXPECT_THAT(log_, ElementsAre("init acl", "open acl:0", "init ggml", "open ggml:0",
                                "close ggml:0", "finalize ggml", "close acl:0", "finalize acl"));
}

TEST_F(RuntimeGuardTest, IdleEntryIsRevivedByANewLease) {
  auto a = guard_.Acquire(acl_, 0);
  auto g = guard_.Acquire(ggml_, 0);
  a->Release();
  auto again = guard_.Acquire(acl_, 0);  // acl is idle but not yet torn down: reuse it
  ASSERT_TRUE(again.ok());
  g->Release();
  EXPECT_EQ(acl_.inits, 1);
  EXPECT_EQ(acl_.finalizes, 0);
  again->Release();
  EXPECT_EQ(acl_.finalizes, 1);
}

TEST_F(RuntimeGuardTest, FailedInitializationLeavesNothingBehind) {
  acl_.fail_init = true;
  auto lease = guard_.Acquire(acl_, 0);
  ASSERT_FALSE(lease.ok());
  EXPECT_EQ(lease.status().ToString(), "Internal: initializing runtime acl: no device");
  EXPECT_EQ(guard_.Describe(), "");
}

TEST_F(RuntimeGuardTest, FailedDeviceOpenFinalizesTheRuntimeItInitialized) {
  acl_.fail_open = true;
  auto lease = guard_.Acquire(acl_, 1);
  ASSERT_FALSE(lease.ok());
  EXPECT_EQ(lease.status().message(), "opening acl device 1: device busy");
  EXPECT_THAT(log_, ElementsAre("init acl", "open acl:1", "finalize acl"));
}

TEST_F(RuntimeGuardTest, MovedLeaseReleasesOnce) {
  auto a = guard_.Acquire(acl_, 0);
  ASSERT_TRUE(a.ok());
  RuntimeLease moved = std::move(*a);
  EXPECT_FALSE(a->held());
  EXPECT_TRUE(moved.held());
  moved = RuntimeLease();
  EXPECT_EQ(acl_.finalizes, 1);
}

}  // namespace
}  // namespace mmserve
