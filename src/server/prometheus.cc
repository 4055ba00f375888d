#include "server/prometheus.h"

#include <charconv>
#include <functional>
#include <sstream>

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

// One metric family: its HELP and TYPE once, then a sample per model version (and per extra
// label value) for which `value` gives one.
class Writer {
 public:
  explicit Writer(const std::vector<ModelInfo>& models) : models_(models) {}

  using Sample = std::function<std::optional<double>(const ModelInfo&)>;
  void Family(const std::string& name, const char* type, const char* help, const Sample& value,
              const std::string& extra_label = {}) {
    std::ostringstream samples;
    for (const auto& m : models_) {
      const auto v = value(m);
      if (!v) continue;
      samples << name << "{model=\"" << Escape(m.config.name) << "\",version=\""
              << m.config.version << "\"" << extra_label << "} " << Number(*v) << "\n";
    }
    Emit(name, type, help, samples.str());
  }
  // A family with one sample per value of `label` (e.g. reason).
  void Labelled(const std::string& name, const char* type, const char* help, const char* label,
                const std::vector<std::pair<std::string, std::function<std::optional<double>(
                                                             const ModelInfo&)>>>& values) {
    std::ostringstream samples;
    for (const auto& m : models_) {
      for (const auto& [label_value, value] : values) {
        const auto v = value(m);
        if (!v) continue;
        samples << name << "{model=\"" << Escape(m.config.name) << "\",version=\""
                << m.config.version << "\"," << label << "=\"" << label_value << "\"} "
                << Number(*v) << "\n";
      }
    }
    Emit(name, type, help, samples.str());
  }
  void Plain(const std::string& name, const char* type, const char* help, double value) {
    Emit(name, type, help, name + " " + Number(value) + "\n");
  }
  std::string str() const { return out_.str(); }

 private:
  static std::string Number(double v) { return Shortest(v); }
  void Emit(const std::string& name, const char* type, const char* help,
            const std::string& samples) {
    out_ << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n"
         << samples;
  }
  const std::vector<ModelInfo>& models_;
  std::ostringstream out_;
};

std::optional<double> Counter(const ModelInfo& m, const char* key) {
  auto it = m.counters.find(key);
  if (it == m.counters.end()) return std::nullopt;
  return static_cast<double>(it->second);
}

}  // namespace

std::string PrometheusText(const std::vector<ModelInfo>& models, const ServerMetrics& server) {
  Writer w(models);
  using M = const ModelInfo&;
  auto stat = [](int64_t SchedulerStats::*field) {
    return [field](M m) -> std::optional<double> {
      if (!m.stats) return std::nullopt;
      return static_cast<double>((*m.stats).*field);
    };
  };
  w.Family("nv_inference_request_success", "untyped",
           "Successful inference requests (a counter)", stat(&SchedulerStats::success));
  w.Labelled("nv_inference_request_failure", "untyped",
             "Failed inference requests by reason (a counter)", "reason",
             {{"REJECTED", stat(&SchedulerStats::rejected)},
              {"CANCELED", stat(&SchedulerStats::cancelled)},
              {"BACKEND", stat(&SchedulerStats::failure)},
              {"OTHER", stat(&SchedulerStats::expired)}});
  w.Family("nv_inference_count", "untyped",
           "Inferences performed; a batch of n counts n (a counter)",
           stat(&SchedulerStats::inference_count));
  w.Family("nv_inference_exec_count", "untyped", "Batch executions (a counter)",
           stat(&SchedulerStats::execution_count));
  w.Family("nv_inference_pending_request_count", "untyped",
           "Requests queued, not yet executing (a gauge)", [](M m) -> std::optional<double> {
             if (!m.stats) return std::nullopt;
             int64_t queued = 0;
             for (int64_t q : m.stats->queued) queued += q;
             return static_cast<double>(queued);
           });
  w.Family("nv_model_load_duration_secs", "gauge", "How long the last load of the model took",
           [](M m) -> std::optional<double> {
             if (m.loads == 0 || m.last_load_time.count() == 0) return std::nullopt;
             return std::chrono::duration<double>(m.last_load_time).count();
           });

  const auto device = [](M m) { return ",device=\"" + std::to_string(m.config.device_id) + "\""; };
  auto per_device = [&](const std::string& name, const char* help, auto value) {
    // The device label differs per model, so each sample carries its own.
    std::ostringstream out;
    out << "# HELP " << name << " " << help << "\n# TYPE " << name << " gauge\n";
    for (const auto& m : models) {
      out << name << "{model=\"" << Escape(m.config.name) << "\",version=\"" << m.config.version
          << "\"" << device(m) << "} " << value(m) << "\n";
    }
    return out.str();
  };
  std::string text = w.str();
  text += per_device("mmserve_model_resident_bytes",
                     "Bytes the loaded model holds (the backend's figure, else measured over its load)",
                     [](M m) {
                       if (m.state != ModelState::kReady && !m.stats) return int64_t{0};
                       return m.resident_bytes > 0 ? m.resident_bytes : m.measured_bytes;
                     });
  text += per_device("mmserve_model_estimated_bytes",
                     "Bytes the model was estimated to need before it loaded",
                     [](M m) { return m.estimate.bytes; });

  Writer t(models);
  // Triton's *_duration_us names fail the exposition format's lint (abbreviated units), so the
  // same cumulative durations are given in seconds under mmserve's names.
  auto seconds = [](auto ns) {
    return [ns](M m) -> std::optional<double> {
      if (!m.stats) return std::nullopt;
      return static_cast<double>(ns(*m.stats)) / 1e9;
    };
  };
  t.Family("mmserve_inference_request_duration_seconds_total", "counter",
           "Cumulative request duration, queue plus compute",
           seconds([](const SchedulerStats& s) { return s.queue_ns + s.compute_ns; }));
  t.Family("mmserve_inference_queue_duration_seconds_total", "counter",
           "Cumulative time requests waited in the queue",
           seconds([](const SchedulerStats& s) { return s.queue_ns; }));
  t.Family("mmserve_inference_compute_duration_seconds_total", "counter",
           "Cumulative execution time", seconds([](const SchedulerStats& s) { return s.compute_ns; }));
  t.Family("mmserve_model_ready", "gauge", "1 when the model version serves requests",
           [](M m) -> std::optional<double> { return m.state == ModelState::kReady ? 1 : 0; });
  t.Family("mmserve_model_loads_total", "counter", "Loads started",
           [](M m) -> std::optional<double> { return static_cast<double>(m.loads); });
  t.Family("mmserve_model_evictions_total", "counter",
           "Unloads to make room for another model",
           [](M m) -> std::optional<double> { return static_cast<double>(m.evictions); });
  t.Family("mmserve_model_in_flight_requests", "gauge", "Requests submitted and not yet answered",
           [](M m) -> std::optional<double> { return static_cast<double>(m.in_flight); });
  t.Family("mmserve_model_executing_requests", "gauge", "Requests executing now",
           stat(&SchedulerStats::executing));
  t.Family("mmserve_breaker_state", "gauge",
           "Circuit breaker: 0 closed, 1 half-open, 2 open", [](M m) -> std::optional<double> {
             if (!m.stats) return std::nullopt;
             switch (m.stats->breaker) {
               case CircuitBreaker::State::kClosed: return 0;
               case CircuitBreaker::State::kHalfOpen: return 1;
               case CircuitBreaker::State::kOpen: return 2;
             }
             return std::nullopt;
           });
  t.Family("mmserve_breaker_opened_total", "counter", "Times the circuit breaker opened",
           stat(&SchedulerStats::breaker_opened));
  t.Family("mmserve_watchdog_reports_total", "counter",
           "Executions the watchdog found hung", stat(&SchedulerStats::watchdog_reports));
  t.Family("mmserve_tokens_generated_total", "counter", "Tokens generated",
           [](M m) { return Counter(m, "generated_tokens"); });
  t.Family("mmserve_tokens_decoded_total", "counter",
           "Tokens through the model (prompts, inputs and generated tokens)",
           [](M m) { return Counter(m, "tokens"); });
  // Time to first token as a summary without quantiles: _sum and _count.
  std::string ttft = "# HELP mmserve_time_to_first_token_seconds Arrival to the first generated "
                     "token\n# TYPE mmserve_time_to_first_token_seconds summary\n";
  for (const auto& m : models) {
    const auto n = Counter(m, "first_tokens");
    const auto ns = Counter(m, "first_token_ns");
    if (!n || !ns) continue;
    const std::string labels =
        "{model=\"" + Escape(m.config.name) + "\",version=\"" + std::to_string(m.config.version) + "\"}";
    ttft += "mmserve_time_to_first_token_seconds_sum" + labels + " " + Shortest(*ns / 1e9) +
            "\nmmserve_time_to_first_token_seconds_count" + labels + " " + Shortest(*n) + "\n";
  }
  t.Plain("mmserve_http_open_connections", "gauge", "Open HTTP connections",
          static_cast<double>(server.open_connections));
  t.Plain("mmserve_http_requests_in_progress", "gauge", "HTTP requests being handled",
          static_cast<double>(server.requests_in_progress));
  t.Plain("mmserve_http_refused_connections_total", "counter",
          "Connections refused over global.max_connections",
          static_cast<double>(server.refused_connections));
  t.Plain("mmserve_http_refused_requests_total", "counter",
          "Requests refused over global.max_in_flight",
          static_cast<double>(server.refused_requests));
  return text + t.str() + ttft;
}

}  // namespace mmserve
