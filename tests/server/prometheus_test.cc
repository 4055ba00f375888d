#include "server/prometheus.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace mmserve {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

ModelInfo Model(const std::string& name, bool loaded) {
  ModelInfo info;
  info.config.name = name;
  info.config.version = 2;
  info.config.device_id = 1;
  info.state = loaded ? ModelState::kReady : ModelState::kNotLoaded;
  info.loads = loaded ? 1 : 0;
  info.estimate.bytes = 1000;
  info.measured_bytes = 900;
  if (loaded) {
    SchedulerStats st;
    st.success = 5;
    st.failure = 1;
    st.rejected = 2;
    st.inference_count = 6;
    st.execution_count = 3;
    st.queued[1] = 4;
    st.queue_latency.Record(2'000'000'000);
    st.compute_latency.Record(500'000'000);
    st.breaker = CircuitBreaker::State::kOpen;
    st.request_latency.Record(3'000'000);    // (2.5, 5] ms
    st.request_latency.Record(3'000'000);
    st.request_latency.Record(90'000'000'000);  // 90 s: +Inf
    info.stats = st;
    info.loaded = true;
    Histogram ttft;
    ttft.Record(150'000'000);
    ttft.Record(150'000'000);
    info.histograms["time_to_first_token"] = ttft;
    info.counters = {{"generated_tokens", 42},
                     {"first_tokens", 2},
                     {"first_token_ns", 300'000'000},
                     {"context_releases", 3},
                     {"worker_last_exit_unix_ms", 1'700'000'000'250}};
    info.notes = {{"worker_last_exit", "exit \"code\" 1"}};
  }
  return info;
}

TEST(PrometheusTest, SamplesCarryModelAndVersionAndEachFamilyHasHelpAndType) {
  const std::string text = PrometheusText({Model("a\"b", true), Model("idle", false)}, {});
  EXPECT_THAT(text, Not(HasSubstr(" untyped\n")));  // every family typed
  EXPECT_THAT(text, HasSubstr("# TYPE nv_inference_pending_request_count gauge\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE nv_inference_request_success counter\n"
                              "nv_inference_request_success{model=\"a\\\"b\",version=\"2\"} 5\n"));
  EXPECT_THAT(text, HasSubstr("nv_inference_request_failure{model=\"a\\\"b\",version=\"2\","
                              "reason=\"REJECTED\"} 2"));
  EXPECT_THAT(text, HasSubstr("nv_inference_pending_request_count{model=\"a\\\"b\",version=\"2\"} 4"));
  EXPECT_THAT(text, HasSubstr("mmserve_inference_queue_duration_seconds_total{model=\"a\\\"b\","
                              "version=\"2\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("mmserve_breaker_state{model=\"a\\\"b\",version=\"2\"} 2"));
  EXPECT_THAT(text, HasSubstr("mmserve_model_estimated_bytes{model=\"idle\",version=\"2\","
                              "device=\"1\"} 1000"));
  EXPECT_THAT(text, HasSubstr("mmserve_tokens_generated_total{model=\"a\\\"b\",version=\"2\"} 42"));
  EXPECT_THAT(text, HasSubstr("mmserve_context_releases_total{model=\"a\\\"b\",version=\"2\"} 3"));
  // An isolated model's last worker exit: when, and why as a label (escaped).
  EXPECT_THAT(text, HasSubstr("mmserve_worker_last_exit_timestamp_seconds{model=\"a\\\"b\","
                              "version=\"2\",reason=\"exit \\\"code\\\" 1\"} 1700000000.25"));
  EXPECT_THAT(text, Not(HasSubstr("mmserve_worker_last_exit_timestamp_seconds{model=\"idle\"")));
  EXPECT_THAT(text, HasSubstr("mmserve_time_to_first_token_seconds_sum{model=\"a\\\"b\","
                              "version=\"2\"} 0.3"));
  // Histograms: cumulative buckets with le, then +Inf, _sum in seconds and _count.
  EXPECT_THAT(text, HasSubstr("# TYPE mmserve_request_duration_seconds histogram\n"
                              "mmserve_request_duration_seconds_bucket{model=\"a\\\"b\","
                              "version=\"2\",le=\"0.0005\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("mmserve_request_duration_seconds_bucket{model=\"a\\\"b\","
                              "version=\"2\",le=\"0.0025\"} 0\n"
                              "mmserve_request_duration_seconds_bucket{model=\"a\\\"b\","
                              "version=\"2\",le=\"0.005\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("mmserve_request_duration_seconds_bucket{model=\"a\\\"b\","
                              "version=\"2\",le=\"60\"} 2\n"
                              "mmserve_request_duration_seconds_bucket{model=\"a\\\"b\","
                              "version=\"2\",le=\"+Inf\"} 3\n"
                              "mmserve_request_duration_seconds_sum{model=\"a\\\"b\","
                              "version=\"2\"} 90.006\n"
                              "mmserve_request_duration_seconds_count{model=\"a\\\"b\","
                              "version=\"2\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("mmserve_time_to_first_token_seconds_count{model=\"a\\\"b\","
                              "version=\"2\"} 2\n"));
  // An encoder has no generation histograms: no empty family samples for it.
  EXPECT_THAT(text, Not(HasSubstr("mmserve_time_per_output_token_seconds_count{model=\"a")));
  // A model that is not loaded has no scheduler statistics.
  EXPECT_THAT(text, Not(HasSubstr("nv_inference_count{model=\"idle\"")));
  EXPECT_THAT(text, HasSubstr("mmserve_model_ready{model=\"idle\",version=\"2\"} 0"));
}

}  // namespace
}  // namespace mmserve
