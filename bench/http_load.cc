// http_load: the HTTP/1.1 load generator of the side-by-side benchmarks. Each client is one
// keep-alive connection sending the same POST; every answer is checked (status 200 and an
// expected substring: a wrong answer is an error, not a data point). Prints one JSON line.
//
//   closed loop (default): --concurrency clients send back to back; latency from sending.
//   open loop (--rate R):   requests arrive as a Poisson process of R per second, whether or
//                           not earlier ones were answered, and wait for one of --concurrency
//                           connections; latency counts from the arrival (no coordinated
//                           omission), so an overloaded server shows as growing latency.
//   --stream:               the answer is server-sent events: time to the first event (TTFT)
//                           and the gaps between later events (inter-token latency) are
//                           reported too.
//
//   http_load --port 8000 --path /v2/models/m/infer --body-file body.json --expect EMBEDDING
//             [--concurrency 64] [--rate 0] [--seconds 20] [--warmup 2] [--stream]
//
// Output: requests, errors, seconds, rps, p50/p90/p99/p999/max/mean latency in µs (and
// ttft_*/itl_* with --stream), first_error when there was one. Exit 1 on any error.
#include <utility>  // before Asio: Boost 1.74 uses std::exchange without including it

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <iostream>
#include <limits>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using Clock = std::chrono::steady_clock;

namespace {

int64_t Micros(Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::microseconds>(d).count();
}

// Open-loop arrivals: a dispatcher pushes each arrival time when it comes; clients pop them.
class Arrivals {
 public:
  void Push(Clock::time_point t) {
    std::lock_guard lock(mu_);
    queue_.push_back(t);
    cv_.notify_one();
  }
  // The next arrival, or nullopt once stopped.
  std::optional<Clock::time_point> Pop(const std::atomic<bool>& stop) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return !queue_.empty() || stop.load(); });
    if (stop.load()) return std::nullopt;
    const auto t = queue_.front();
    queue_.pop_front();
    return t;
  }
  void Wake() {
    std::lock_guard lock(mu_);
    cv_.notify_all();
  }
  size_t size() {
    std::lock_guard lock(mu_);
    return queue_.size();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Clock::time_point> queue_;
};

struct Samples {
  std::vector<int64_t> latency_us, ttft_us, itl_us;
  int64_t events = 0;
  void Merge(const Samples& o) {
    latency_us.insert(latency_us.end(), o.latency_us.begin(), o.latency_us.end());
    ttft_us.insert(ttft_us.end(), o.ttft_us.begin(), o.ttft_us.end());
    itl_us.insert(itl_us.end(), o.itl_us.begin(), o.itl_us.end());
    events += o.events;
  }
};

int64_t Percentile(std::vector<int64_t>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"HTTP load generator (closed or open loop) that checks every answer"};
  std::string host = "127.0.0.1", path, body_file, expect;
  int port = 8000, concurrency = 1;
  double seconds = 10, warmup = 1, rate = 0;
  bool stream_events = false;
  app.add_option("--host", host);
  app.add_option("--port", port)->required();
  app.add_option("--path", path)->required();
  app.add_option("--body-file", body_file)->required();
  app.add_option("--expect", expect, "a substring every 200 response must contain");
  app.add_option("--concurrency", concurrency, "clients (closed loop) or connections (open loop)");
  app.add_option("--rate", rate, "open loop: Poisson arrivals per second (0: closed loop)");
  app.add_option("--seconds", seconds);
  app.add_option("--warmup", warmup, "seconds of load before measuring");
  app.add_flag("--stream", stream_events, "the answer is server-sent events: report TTFT and ITL");
  CLI11_PARSE(app, argc, argv);

  std::stringstream body;
  body << std::ifstream(body_file).rdbuf();
  const std::string payload = body.str();

  std::atomic<bool> stop{false};
  std::atomic<int64_t> errors{0};
  std::mutex mu;
  Samples all;
  std::string first_error;
  Arrivals arrivals;
  const auto start = Clock::now();
  const auto measure_from = start + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(warmup));
  const auto measure_to = measure_from + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(seconds));
  auto measured = [&](Clock::time_point t) { return t >= measure_from && t < measure_to; };
  auto error = [&](const std::string& what) {
    ++errors;
    std::lock_guard lock(mu);
    if (first_error.empty()) first_error = what;
  };

  std::vector<std::thread> clients;
  for (int c = 0; c < concurrency; ++c) {
    clients.emplace_back([&] {
      Samples mine;
      net::io_context ioc;
      std::optional<beast::tcp_stream> stream;
      bool reused = false;  // the connection has carried a request already
      auto connect = [&] {
        stream.emplace(ioc);
        stream->connect(net::ip::tcp::endpoint(net::ip::make_address(host),
                                               static_cast<unsigned short>(port)));
        reused = false;
      };
      while (!stop) {
        Clock::time_point sent = Clock::now();
        if (rate > 0) {
          auto arrival = arrivals.Pop(stop);
          if (!arrival) break;
          sent = *arrival;  // open loop: the request existed from its arrival on
        }
        http::request<http::string_body> req(http::verb::post, path, 11);
        req.set(http::field::host, host);
        req.set(http::field::content_type, "application/json");
        req.keep_alive(true);
        req.body() = payload;
        req.prepare_payload();
        std::optional<http::response_parser<http::string_body>> parsed;
        std::vector<Clock::time_point> events;
        try {
          for (int attempt = 0;; ++attempt) {
            try {
              if (!stream) connect();
              http::write(*stream, req);
              beast::flat_buffer buffer;
              auto& parser = parsed.emplace();
              parser.body_limit(std::numeric_limits<std::uint64_t>::max());
              if (stream_events) {
                // Read as it comes; each "\n\n" ends one event.
                http::read_header(*stream, buffer, parser);
                size_t scanned = 0;
                while (!parser.is_done()) {
                  http::read_some(*stream, buffer, parser);
                  const auto now = Clock::now();
                  const std::string& text = parser.get().body();
                  for (size_t at; (at = text.find("\n\n", scanned)) != std::string::npos;) {
                    events.push_back(now);
                    scanned = at + 2;
                  }
                }
              } else {
                http::read(*stream, buffer, parser);
              }
              break;
            } catch (const beast::system_error& e) {
              // A server may close a kept-alive connection between requests (llama-server does
              // after a streamed answer): send the request again on a new one, as clients do.
              const bool closed = e.code() == http::error::end_of_stream ||
                                  e.code() == net::error::connection_reset ||
                                  e.code() == net::error::broken_pipe;
              if (!reused || !closed || attempt > 0) throw;
              stream.reset();
              events.clear();
            }
          }
        } catch (const std::exception& e) {
          stream.reset();
          if (!stop && measured(sent)) error(e.what());
          continue;
        }
        reused = true;
        const auto done = Clock::now();
        const auto& res = parsed->get();
        const bool ok = res.result_int() == 200 &&
                        (expect.empty() || res.body().find(expect) != std::string::npos) &&
                        (!stream_events || !events.empty());
        if (measured(sent)) {
          if (!ok) {
            error(std::to_string(res.result_int()) + " " + res.body().substr(0, 200));
          } else {
            mine.latency_us.push_back(Micros(done - sent));
            if (stream_events) {
              mine.ttft_us.push_back(Micros(events.front() - sent));
              for (size_t i = 1; i < events.size(); ++i) {
                mine.itl_us.push_back(Micros(events[i] - events[i - 1]));
              }
              mine.events += static_cast<int64_t>(events.size());
            }
          }
        }
        if (!res.keep_alive()) stream.reset();
      }
      std::lock_guard lock(mu);
      all.Merge(mine);
    });
  }
  if (rate > 0) {
    // Poisson arrivals: exponential gaps with mean 1/rate, from the start of the warm-up on.
    std::mt19937_64 rng(12345);
    std::exponential_distribution<double> gap(rate);
    auto next = start;
    while (next < measure_to) {
      next += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(gap(rng)));
      std::this_thread::sleep_until(next);
      arrivals.Push(next);
    }
  } else {
    std::this_thread::sleep_until(measure_to);
  }
  // Let requests already sent in the window finish (bounded), then stop.
  std::this_thread::sleep_for(std::chrono::milliseconds(rate > 0 ? 200 : 0));
  stop = true;
  arrivals.Wake();
  for (auto& t : clients) t.join();

  const double elapsed = seconds;
  int64_t sum = 0;
  for (int64_t v : all.latency_us) sum += v;
  const size_t n = all.latency_us.size();
  nlohmann::json out = {{"requests", n},
                        {"errors", errors.load()},
                        {"seconds", elapsed},
                        {"rps", static_cast<double>(n) / elapsed},
                        {"p50_us", Percentile(all.latency_us, 0.50)},
                        {"p90_us", Percentile(all.latency_us, 0.90)},
                        {"p99_us", Percentile(all.latency_us, 0.99)},
                        {"p999_us", Percentile(all.latency_us, 0.999)},
                        {"max_us", n ? all.latency_us.back() : 0},
                        {"mean_us", n ? sum / static_cast<int64_t>(n) : 0},
                        {"concurrency", concurrency}};
  if (rate > 0) {
    out["rate"] = rate;
    out["unsent"] = arrivals.size();  // arrivals still waiting for a connection at the end
  }
  if (stream_events) {
    out["ttft_p50_us"] = Percentile(all.ttft_us, 0.50);
    out["ttft_p99_us"] = Percentile(all.ttft_us, 0.99);
    out["itl_p50_us"] = Percentile(all.itl_us, 0.50);
    out["itl_p99_us"] = Percentile(all.itl_us, 0.99);
    out["events_per_request"] = n ? static_cast<double>(all.events) / static_cast<double>(n) : 0;
  }
  if (n == 0 && first_error.empty()) first_error = "no request completed in the measured window";
  if (!first_error.empty()) out["first_error"] = first_error;
  std::cout << out.dump() << std::endl;
  return errors.load() == 0 && n > 0 ? 0 : 1;
}
