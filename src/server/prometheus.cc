#include "server/prometheus.h"

#include <map>

#include <charconv>
#include <functional>
#include <sstream>

#include "common/histogram.h"
#include "server/model_statistics.h"

namespace mmserve {
namespace {

std::string Escape(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

// The shortest text that reads back as `v`.
std::string Shortest(double v) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : std::string("NaN");
}

// The shortest fixed-point text that reads back as `v` ("0.0005", not "5e-04"): bucket bounds.
std::string Fixed(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
  return ec == std::errc() ? std::string(buf, end) : Shortest(v);
}

using Sample = std::function<std::optional<double>(const ModelInfo&)>;

// The exposition, family by family: a family's HELP and TYPE once, then one sample per model
// version for which its value function gives one, labelled model and version (and more).
class Writer {
 public:
  explicit Writer(const std::vector<ModelInfo>& models) : models_(models) {}

  // `extra` gives more labels per sample (",device=\"0\"").
  void Family(const std::string& name, const char* type, const char* help, const Sample& value,
              const std::function<std::string(const ModelInfo&)>& extra = {}) {
    Head(name, type, help);
    Samples(name, value, extra);
  }
  // A family with one sample per value of `label` (e.g. reason).
  void Labelled(const std::string& name, const char* type, const char* help, const char* label,
                const std::vector<std::pair<std::string, Sample>>& values) {
    Head(name, type, help);
    for (const auto& m : models_) {
      for (const auto& [label_value, value] : values) {
        if (const auto v = value(m)) {
          Sample1(name, m, "," + std::string(label) + "=\"" + label_value + "\"", *v);
        }
      }
    }
  }
  // A histogram per model version for which `value` gives one: cumulative name_bucket{le} over
  // kLatencyBuckets then +Inf, name_sum in seconds, name_count.
  void Histograms(const std::string& name, const char* help,
                  const std::function<std::optional<Histogram>(const ModelInfo&)>& value) {
    Head(name, "histogram", help);
    for (const auto& m : models_) {
      const auto h = value(m);
      if (!h) continue;
      int64_t cumulative = 0;
      for (size_t i = 0; i < h->counts.size(); ++i) {
        cumulative += h->counts[i];
        const std::string le =
            i < kLatencyBuckets.size() ? Fixed(kLatencyBuckets[i]) : std::string("+Inf");
        Sample1(name + "_bucket", m, ",le=\"" + le + "\"", static_cast<double>(cumulative));
      }
      Sample1(name + "_sum", m, "", static_cast<double>(h->sum_ns) / 1e9);
      Sample1(name + "_count", m, "", static_cast<double>(h->count));
    }
  }
  void Plain(const std::string& name, const char* type, const char* help, double value) {
    Head(name, type, help);
    out_ << name << " " << Shortest(value) << "\n";
  }
  std::string str() const { return out_.str(); }

 private:
  void Head(const std::string& name, const char* type, const char* help) {
    out_ << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
  }
  void Samples(const std::string& name, const Sample& value,
               const std::function<std::string(const ModelInfo&)>& extra) {
    for (const auto& m : models_) {
      if (const auto v = value(m)) Sample1(name, m, extra ? extra(m) : "", *v);
    }
  }
  void Sample1(const std::string& name, const ModelInfo& m, const std::string& extra, double v) {
    out_ << name << "{model=\"" << Escape(m.config.name) << "\",version=\"" << m.config.version
         << "\"" << extra << "} " << Shortest(v) << "\n";
  }
  const std::vector<ModelInfo>& models_;
  std::ostringstream out_;
};

std::optional<double> Counter(const ModelInfo& m, const char* key) {
  auto it = m.counters.find(key);
  if (it == m.counters.end()) return std::nullopt;
  return static_cast<double>(it->second);
}

using M = const ModelInfo&;
using Derived = std::map<const ModelInfo*, ModelStatistics>;

// Triton's families, from the statistics every frontend reports.
void TritonFamilies(Writer& w, const Derived& derived) {
  auto stat = [&derived](int64_t ModelStatistics::*field) {
    return [&derived, field](M m) -> std::optional<double> {
      const ModelStatistics& s = derived.at(&m);
      if (!s.loaded) return std::nullopt;
      return static_cast<double>(s.*field);
    };
  };
  w.Family("nv_inference_request_success", "counter",
           "Successful inference requests", [&derived](M m) -> std::optional<double> {
             const ModelStatistics& s = derived.at(&m);
             if (!s.loaded) return std::nullopt;
             return static_cast<double>(s.success.count);
           });
  w.Labelled("nv_inference_request_failure", "counter",
             "Failed inference requests by reason", "reason",
             {{"REJECTED", stat(&ModelStatistics::rejected)},
              {"CANCELED", stat(&ModelStatistics::cancelled)},
              {"BACKEND", stat(&ModelStatistics::backend_failures)},
              {"OTHER", stat(&ModelStatistics::expired)}});
  w.Family("nv_inference_count", "counter",
           "Inferences performed; a batch of n counts n",
           stat(&ModelStatistics::inference_count));
  w.Family("nv_inference_exec_count", "counter", "Batch executions",
           stat(&ModelStatistics::execution_count));
  w.Family("nv_inference_pending_request_count", "gauge",
           "Requests queued, not yet executing", stat(&ModelStatistics::queued));
  w.Family("nv_model_load_duration_secs", "gauge", "How long the last load of the model took",
           [](M m) -> std::optional<double> {
             if (m.loads == 0 || m.last_load_time.count() == 0) return std::nullopt;
             return std::chrono::duration<double>(m.last_load_time).count();
           });

}

// Memory, cumulative durations and the version's life.
void ModelFamilies(Writer& w, const Derived& derived) {
  const auto device = [](M m) { return ",device=\"" + std::to_string(m.config.device_id) + "\""; };
  w.Family("mmserve_model_resident_bytes", "gauge",
           "Bytes the loaded model holds (the backend's figure, else measured over its load)",
           [&derived](M m) -> std::optional<double> {
             if (m.state != ModelState::kReady && !m.stats) return 0;
             return static_cast<double>(derived.at(&m).resident_bytes);
           },
           device);
  w.Family("mmserve_model_estimated_bytes", "gauge",
           "Bytes the model was estimated to need before it loaded",
           [](M m) -> std::optional<double> { return static_cast<double>(m.estimate.bytes); },
           device);
  // Triton's *_duration_us names fail the exposition format's lint (abbreviated units), so the
  // same cumulative durations are given in seconds under mmserve's names.
  auto seconds = [&derived](auto ns) {
    return [&derived, ns](M m) -> std::optional<double> {
      const ModelStatistics& s = derived.at(&m);
      if (!s.loaded) return std::nullopt;
      return static_cast<double>(ns(s)) / 1e9;
    };
  };
  using S = const ModelStatistics&;
  w.Family("mmserve_inference_request_duration_seconds_total", "counter",
           "Cumulative request duration, queue plus compute",
           seconds([](S s) { return s.queue.ns + s.compute_infer.ns; }));
  w.Family("mmserve_inference_queue_duration_seconds_total", "counter",
           "Cumulative time requests waited in the queue", seconds([](S s) { return s.queue.ns; }));
  w.Family("mmserve_inference_compute_duration_seconds_total", "counter",
           "Cumulative execution time", seconds([](S s) { return s.compute_infer.ns; }));
  w.Family("mmserve_model_ready", "gauge", "1 when the model version serves requests",
           [](M m) -> std::optional<double> { return m.state == ModelState::kReady ? 1 : 0; });
  w.Family("mmserve_model_loads_total", "counter", "Loads started",
           [](M m) -> std::optional<double> { return static_cast<double>(m.loads); });
  w.Family("mmserve_model_evictions_total", "counter",
           "Unloads to make room for another model",
           [](M m) -> std::optional<double> { return static_cast<double>(m.evictions); });
  w.Family("mmserve_model_in_flight_requests", "gauge", "Requests submitted and not yet answered",
           [](M m) -> std::optional<double> { return static_cast<double>(m.in_flight); });
}

// mmserve's own figures, straight from the scheduler and the engine's counters.
void SchedulerFamilies(Writer& w) {
  auto scheduler = [](int64_t SchedulerStats::*field) {
    return [field](M m) -> std::optional<double> {
      if (!m.stats) return std::nullopt;
      return static_cast<double>((*m.stats).*field);
    };
  };
  w.Family("mmserve_model_executing_requests", "gauge", "Requests executing now",
           [](M m) -> std::optional<double> {
             if (!m.loaded) return std::nullopt;
             return static_cast<double>(m.stats->executing);
           });
  w.Family("mmserve_breaker_state", "gauge",
           "Circuit breaker: 0 closed, 1 half-open, 2 open", [](M m) -> std::optional<double> {
             if (!m.loaded || !m.stats) return std::nullopt;
             switch (m.stats->breaker) {
               case CircuitBreaker::State::kClosed: return 0;
               case CircuitBreaker::State::kHalfOpen: return 1;
               case CircuitBreaker::State::kOpen: return 2;
             }
             return std::nullopt;
           });
  w.Family("mmserve_breaker_opened_total", "counter", "Times the circuit breaker opened",
           scheduler(&SchedulerStats::breaker_opened));
  w.Family("mmserve_watchdog_reports_total", "counter",
           "Executions the watchdog found hung", scheduler(&SchedulerStats::watchdog_reports));
  w.Family("mmserve_priority_yields_total", "counter",
           "Times the model's workers gave way to a more important model on the device",
           scheduler(&SchedulerStats::yields));
  w.Family("mmserve_priority_yield_seconds_total", "counter",
           "Time the model's workers spent giving way to more important models",
           [](M m) -> std::optional<double> {
             if (!m.stats) return std::nullopt;
             return static_cast<double>(m.stats->yield_ns) / 1e9;
           });
  w.Family("mmserve_worker_restarts_total", "counter",
           "Times an isolated model's worker process exited and was started again",
           [](M m) { return Counter(m, "worker_restarts"); });
  w.Family("mmserve_worker_last_exit_timestamp_seconds", "gauge",
           "When an isolated model's worker last exited; `reason` says why",
           [](M m) -> std::optional<double> {
             const auto at = Counter(m, "worker_last_exit_unix_ms");
             if (!at) return std::nullopt;
             return *at / 1e3;
           },
           [](M m) {
             auto it = m.notes.find("worker_last_exit");
             return ",reason=\"" + Escape(it == m.notes.end() ? "" : it->second) + "\"";
           });
  w.Family("mmserve_worker_pid", "gauge", "The process id of an isolated model's worker (0: none)",
           [](M m) { return Counter(m, "worker_pid"); });
  w.Family("mmserve_context_releases_total", "counter",
           "Times an idle worker freed its engine context (params.idle_context_ms)",
           [](M m) { return Counter(m, "context_releases"); });
  w.Family("mmserve_tokens_generated_total", "counter", "Tokens generated",
           [](M m) { return Counter(m, "generated_tokens"); });
  w.Family("mmserve_prompt_tokens_reused_total", "counter",
           "Prompt tokens a generator found cached from an earlier request (not decoded again)",
           [](M m) { return Counter(m, "reused_prompt_tokens"); });
  w.Family("mmserve_prompt_cache_lookups_total", "counter",
           "Prompts looked up in a generator's host prompt cache",
           [](M m) { return Counter(m, "prompt_cache_lookups"); });
  w.Family("mmserve_prompt_cache_hits_total", "counter",
           "Prompts that a saved state from the host prompt cache extended",
           [](M m) { return Counter(m, "prompt_cache_hits"); });
  w.Family("mmserve_prompt_cache_restored_tokens_total", "counter",
           "Prompt tokens restored from the host prompt cache",
           [](M m) { return Counter(m, "prompt_cache_restored_tokens"); });
  w.Family("mmserve_prompt_cache_evictions_total", "counter",
           "Saved states the host prompt cache dropped for room",
           [](M m) { return Counter(m, "prompt_cache_evicted"); });
  w.Family("mmserve_prompt_cache_bytes", "gauge", "Bytes of saved states in the host prompt cache",
           [](M m) { return Counter(m, "prompt_cache_bytes"); });
  w.Family("mmserve_prompt_cache_limit_bytes", "gauge",
           "The host prompt cache's room, reserved in its device's budget",
           [](M m) { return Counter(m, "prompt_cache_limit_bytes"); });
  w.Family("mmserve_tokens_decoded_total", "counter",
           "Tokens through the model (prompts, inputs and generated tokens)",
           [](M m) { return Counter(m, "tokens"); });
}

// Latency distributions: the scheduler's for every model, the engine's for generation.
void LatencyFamilies(Writer& w) {
  auto scheduler = [](Histogram SchedulerStats::*field) {
    return [field](M m) -> std::optional<Histogram> {
      if (!m.stats) return std::nullopt;
      return (*m.stats).*field;
    };
  };
  auto engine = [](const char* key) {
    return [key](M m) -> std::optional<Histogram> {
      auto it = m.histograms.find(key);
      if (it == m.histograms.end()) return std::nullopt;
      return it->second;
    };
  };
  w.Histograms("mmserve_request_duration_seconds",
               "Requests answered, by time from arrival in the queue to the answer",
               scheduler(&SchedulerStats::request_latency));
  w.Histograms("mmserve_queue_duration_seconds", "Requests executed, by time waited in the queue",
               scheduler(&SchedulerStats::queue_latency));
  w.Histograms("mmserve_compute_duration_seconds", "Requests executed, by execution time",
               scheduler(&SchedulerStats::compute_latency));
  w.Histograms("mmserve_time_to_first_token_seconds",
               "Generations, by time from arrival to the first generated token",
               engine("time_to_first_token"));
  w.Histograms("mmserve_time_per_output_token_seconds",
               "Generated tokens after the first, by time since the previous token",
               engine("time_per_output_token"));
}

}  // namespace

std::string PrometheusText(const std::vector<ModelInfo>& models, const ServerMetrics& server) {
  Writer w(models);
  // The statistics every frontend reports, derived once per model version.
  Derived derived;
  for (const auto& m : models) derived[&m] = StatisticsOf(m);
  TritonFamilies(w, derived);
  ModelFamilies(w, derived);
  SchedulerFamilies(w);
  w.Plain("mmserve_http_open_connections", "gauge", "Open HTTP connections",
          static_cast<double>(server.open_connections));
  w.Plain("mmserve_http_requests_in_progress", "gauge", "HTTP requests being handled",
          static_cast<double>(server.requests_in_progress));
  w.Plain("mmserve_http_refused_connections_total", "counter",
          "Connections refused over global.max_connections",
          static_cast<double>(server.refused_connections));
  w.Plain("mmserve_http_refused_requests_total", "counter",
          "Requests refused over global.max_in_flight",
          static_cast<double>(server.refused_requests));
  LatencyFamilies(w);
  return w.str();
}

}  // namespace mmserve
