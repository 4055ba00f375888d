#include "server/http/stats_json.h"

#include <algorithm>
#include <chrono>

#include "common/histogram.h"
#include "server/model_statistics.h"

namespace mmserve {
namespace {

using nlohmann::json;

json Duration(const StatDuration& d) { return {{"count", d.count}, {"ns", d.ns}}; }

// A latency histogram: each bucket's own count ("counts", the last is +Inf) under the upper
// bounds "le" (seconds), so a client can difference two snapshots for recent quantiles.
json HistogramJson(const Histogram& h) {
  return {{"le", kLatencyBuckets}, {"counts", h.counts}, {"count", h.count}, {"sum_ns", h.sum_ns}};
}

}  // namespace

// When a loaded, idle model unloads (keep_alive): seconds from now, null when it never does
// (no keep_alive, or not loaded); the whole keep_alive while requests are in flight.
json KeepAliveJson(const ModelInfo& info) {
  json out = {{"seconds", nullptr}, {"expires_in_s", nullptr}};
  const auto& keep_alive = info.config.keep_alive;
  if (!keep_alive) return out;
  out["seconds"] = std::chrono::duration<double>(*keep_alive).count();
  if (info.state != ModelState::kReady || !info.stats) return out;
  auto left = std::chrono::duration<double>(*keep_alive).count();
  if (info.in_flight == 0) {
    left -= std::chrono::duration<double>(Clock::now() - info.last_used).count();
  }
  out["expires_in_s"] = std::max(left, 0.0);
  return out;
}

namespace {

// Requests over about the last minute, kept by the server (ModelVersion::SampleMinute): a page
// opened after the traffic shows it. Null until the first sample.
json LastMinuteJson(const ModelInfo& info) {
  if (!info.last_minute) return nullptr;
  const MinuteFigures& m = *info.last_minute;
  json out = {{"seconds", m.seconds},
              {"requests", m.requests},
              {"rate", static_cast<double>(m.requests) / m.seconds},
              {"errors", m.errors},
              {"p50_s", m.p50},
              {"p99_s", m.p99}};
  if (info.config.task == "generate") {
    out["tokens_per_s"] = static_cast<double>(m.generated_tokens) / m.seconds;
  }
  return out;
}

}  // namespace

json ModelStatsJson(const ModelInfo& info) {
  const ModelStatistics stats = StatisticsOf(info);
  json out = {{"name", stats.name},
              {"version", stats.version},
              {"inference_count", stats.inference_count},
              {"execution_count", stats.execution_count}};
  json mms = {{"state", std::string(ModelStateName(info.state))},
              {"task", info.config.task},
              {"backend", info.config.backend},
              {"device", info.config.device_id},
              {"keep_alive", KeepAliveJson(info)},
              {"last_minute", LastMinuteJson(info)},
              {"loads", info.loads},
              {"in_flight", info.in_flight},
              {"memory", {{"estimate_bytes", info.estimate.bytes},
                          {"estimate_source", info.estimate.source},
                          {"measured_bytes", info.measured_bytes},
                          {"resident_bytes", info.resident_bytes}}},
              {"counters", info.counters},
              {"execution", info.config.execute_inline ? "inline" : "worker"}};
  if (!info.reason.empty() && info.state != ModelState::kReady) mms["reason"] = info.reason;
  if (!info.notes.empty()) mms["notes"] = info.notes;
  json labels = json::array();
  for (const auto& [label, version] : info.labels) {
    if (version == info.config.version) labels.push_back(label);
  }
  mms["labels"] = labels;  // those naming this version
  mms["priority"] = info.config.priority;
  if (info.last_event) {
    mms["last_event"] = {{"kind", info.last_event->kind},
                         {"time_ms", info.last_event->unix_ms},
                         {"message", info.last_event->message}};
  }
  if (info.state == ModelState::kLoading) {
    mms["load_progress"] = {{"done_bytes", info.load_done_bytes},
                            {"total_bytes", info.load_total_bytes}};
  }
  if (const auto& st = info.stats) {
    out["inference_stats"] = {{"success", Duration(stats.success)},
                              {"fail", Duration(stats.fail)},
                              {"queue", Duration(stats.queue)},
                              {"compute_infer", Duration(stats.compute_infer)}};
    json batches = json::array();
    for (const auto& [size, b] : stats.batches) {
      batches.push_back({{"batch_size", size}, {"compute_infer", Duration(b)}});
    }
    out["batch_stats"] = batches;
    json queued = json::object();
    for (size_t l = 1; l < st->queued.size(); ++l) {
      if (st->queued[l] > 0) queued[std::to_string(l)] = st->queued[l];
    }
    json workers = json::array();
    for (const auto& w : st->workers) {
      workers.push_back({{"index", w.index}, {"tid", w.tid}, {"cores", w.cores},
                         {"nice", w.nice}, {"restarts", w.restarts}});
    }
    mms["rejected"] = st->rejected;
    mms["expired"] = st->expired;
    mms["cancelled"] = st->cancelled;
    mms["watchdog_reports"] = st->watchdog_reports;
    mms["priority_yields"] = {{"count", st->yields}, {"us", st->yield_ns / 1000}};
    if (info.loaded) {  // what the serving scheduler holds now
      mms["queued_by_level"] = queued;
      mms["executing"] = st->executing;
      mms["breaker"] = {{"state", std::string(BreakerStateName(st->breaker))},
                        {"reason", st->breaker_reason},
                        {"times_opened", st->breaker_opened}};
      mms["workers"] = workers;  // none when requests execute inline
    }
    json latency = {{"request", HistogramJson(st->request_latency)},
                    {"queue", HistogramJson(st->queue_latency)},
                    {"compute", HistogramJson(st->compute_latency)}};
    for (const auto& [name, h] : info.histograms) latency[name] = HistogramJson(h);
    mms["latency"] = latency;
  }
  out["mmserve"] = mms;
  return out;
}

}  // namespace mmserve
