// Decorator bases. A Session or Instance that wraps another (the image stages, any later one)
// derives from these and so forwards every capability of what it wraps; it overrides only what
// it decides to change, on purpose. Session and Instance give most capabilities a silent
// default (no batch tiers, no shared device, healthy, no notes...): a decorator written against
// them directly drops each one it forgets. tests/scripts/forwarding_test.sh fails when a
// virtual of Session or Instance has no forwarding override here.
#pragma once

#include <memory>
#include <utility>

#include "backend/backend.h"

namespace mmserve {

class ForwardingInstance : public Instance {
 public:
  explicit ForwardingInstance(std::unique_ptr<Instance> inner) : inner_(std::move(inner)) {}

  Status Execute(Execution& execution) override {
    inner_->set_yield_point(yield_point());
    return inner_->Execute(execution);
  }
  void ExecuteEach(std::span<Execution> batches, std::span<Status> statuses) override {
    inner_->set_yield_point(yield_point());
    inner_->ExecuteEach(batches, statuses);
  }
  int batches_per_call() const override { return inner_->batches_per_call(); }
  bool starts_calls() const override { return inner_->starts_calls(); }
  void StartEach(std::span<Execution> batches) override {
    inner_->set_yield_point(yield_point());
    inner_->StartEach(batches);
  }
  void FinishEach(std::span<Execution> batches, std::span<Status> statuses) override {
    inner_->set_yield_point(yield_point());  // an inner that does not split executes here
    inner_->FinishEach(batches, statuses);
  }
  bool Abort() override { return inner_->Abort(); }
  void Park() override { inner_->Park(); }
  void Release() override { inner_->Release(); }
  std::optional<std::chrono::milliseconds> release_after() const override {
    return inner_->release_after();
  }

 protected:
  Instance& inner() { return *inner_; }
  const Instance& inner() const { return *inner_; }

 private:
  std::unique_ptr<Instance> inner_;
};

class ForwardingSession : public Session {
 public:
  explicit ForwardingSession(std::unique_ptr<Session> inner) : inner_(std::move(inner)) {}

  const ModelSignature& signature() const override { return inner_->signature(); }
  int64_t resident_bytes() const override { return inner_->resident_bytes(); }
  int64_t ShedCache(int64_t bytes) override { return inner_->ShedCache(bytes); }
  ExecutionStyle style() const override { return inner_->style(); }
  Result<std::unique_ptr<Instance>> CreateInstance(int index) override {
    return inner_->CreateInstance(index);
  }
  void Interrupt() override { inner_->Interrupt(); }
  std::vector<int> batch_tiers() const override { return inner_->batch_tiers(); }
  std::map<std::string, int64_t> counters() const override { return inner_->counters(); }
  std::map<std::string, std::string> notes() const override { return inner_->notes(); }
  Result<std::vector<Token>> Tokenize(std::string_view text, bool add_special,
                                      bool pieces) const override {
    return inner_->Tokenize(text, add_special, pieces);
  }
  Result<std::string> Detokenize(std::span<const int32_t> tokens) const override {
    return inner_->Detokenize(tokens);
  }
  int64_t context_length() const override { return inner_->context_length(); }
  std::map<std::string, Histogram> histograms() const override { return inner_->histograms(); }
  bool executes_inline() const override { return inner_->executes_inline(); }
  bool executions_share_device() const override { return inner_->executions_share_device(); }
  std::unique_ptr<InferRequest> WarmupRequest(int rows) const override {
    return inner_->WarmupRequest(rows);
  }
  int default_warmup() const override { return inner_->default_warmup(); }
  Status health() const override { return inner_->health(); }

 protected:
  Session& inner() { return *inner_; }
  const Session& inner() const { return *inner_; }

 private:
  std::unique_ptr<Session> inner_;
};

}  // namespace mmserve
