// loadgen: the load generator of the side-by-side benchmarks, over HTTP/1.1 keep-alive or
// KServe v2 gRPC. Each client is one connection sending the same request; every answer is
// checked (HTTP 200, or gRPC OK, and an expected substring: a wrong answer is an error, not a
// data point). Prints one JSON line.
//
//   closed loop (default): --concurrency clients send back to back; latency from sending.
//   open loop (--rate R):   requests arrive as a Poisson process of R per second, whether or
//                           not earlier ones were answered, and wait for one of --concurrency
//                           connections; latency counts from the arrival (no coordinated
//                           omission), so an overloaded server shows as growing latency.
//   --stream:               the answer comes in parts (HTTP server-sent events, or gRPC
//                           ModelStreamInfer messages): time to the first part (TTFT) and the
//                           gaps between later parts (inter-token latency) are reported too.
//   --grpc:                 KServe v2 gRPC instead of HTTP: --body-file holds a
//                           ModelInferRequest in protobuf's JSON mapping, sent with ModelInfer
//                           (or ModelStreamInfer with --stream) on a channel of its own per
//                           client; --expect is looked for in the serialized answer (the last
//                           message of a stream). --save-answer writes one serialized answer,
//                           for bench/bare_grpc_server.cc to send back.
//
//   sweeps:                 --concurrency 1,4,16,64 or --rate 50,100,200 measures each point
//                           in turn (warm-up and window each), one output per point.
//   --mix FILE:             HTTP requests to several models: FILE is a JSON array of
//                           {"name", "path", "body_file", "expect"}. Each request picks one by
//                           a Zipf law over a ranking (--zipf S, default 1.1) that is shuffled
//                           anew every --shift-seconds (default 20; 0: never), the same
//                           rankings at the same times in every run; "models" in the output
//                           has each one's requests, errors, rps, p50 and p99. --timeout S
//                           fails a request not answered in S seconds (a wedged server ends
//                           the run with errors instead of never).
//
//   loadgen --port 8000 --path /v2/models/m/infer --body-file body.json --expect EMBEDDING
//           [--concurrency 64] [--rate 0] [--seconds 20] [--warmup 2] [--stream] [--markdown]
//   loadgen --grpc --port 8001 --body-file request.json --expect Y [...]
//
// Output: a JSON line per point — requests (sent in the window), errors, seconds, rps (answers
// per second, each request counted by the share of its time inside the window),
// p50/p90/p99/p999/max/mean latency in µs (and ttft_*/itl_* with --stream), client_cpu_cores
// (the CPU the load tool itself used, in cores, over the run), first_error when there was
// one — or with --markdown one table of all points. Exit 1 on any error.
#include <utility>  // before Asio: Boost 1.74 uses std::exchange without including it

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include <sys/socket.h>
#include <time.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <CLI/CLI.hpp>
#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "grpc_service.grpc.pb.h"

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace pb = inference;
using Clock = std::chrono::steady_clock;

// CPU seconds this process has used so far, every thread together.
double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

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

// One answer: whether it was right (else why not) and when each streamed part arrived.
struct Answer {
  std::string error;  // empty: the answer was right
  std::vector<Clock::time_point> events;
};

// One client's connection. Send() sends the request (the `target`th of a --mix) and waits for
// the whole answer; it throws only when the connection fails.
class Client {
 public:
  virtual ~Client() = default;
  virtual Answer Send(size_t target) = 0;
};

class HttpClient final : public Client {
 public:
  HttpClient(std::string host, int port, std::string path, const std::string& payload,
             const std::string& content_type, std::string expect, bool stream_events)
      : host_(std::move(host)),
        port_(port),
        expect_(std::move(expect)),
        stream_events_(stream_events),
        request_(http::verb::post, path, 11) {
    request_.set(http::field::host, host_);
    request_.set(http::field::content_type, content_type);
    request_.keep_alive(true);
    request_.body() = payload;
    request_.prepare_payload();
  }

  Answer Send(size_t /*target*/) override {
    Answer answer;
    std::optional<http::response_parser<http::string_body>> parsed;
    for (int attempt = 0;; ++attempt) {
      try {
        if (!stream_) Connect();
        http::write(*stream_, request_);
        beast::flat_buffer buffer;
        auto& parser = parsed.emplace();
        parser.body_limit(std::numeric_limits<std::uint64_t>::max());
        if (stream_events_) {
          // Read as it comes; each "\n\n" ends one event.
          http::read_header(*stream_, buffer, parser);
          size_t scanned = 0;
          while (!parser.is_done()) {
            http::read_some(*stream_, buffer, parser);
            const auto now = Clock::now();
            const std::string& text = parser.get().body();
            for (size_t at; (at = text.find("\n\n", scanned)) != std::string::npos;) {
              answer.events.push_back(now);
              scanned = at + 2;
            }
          }
        } else {
          http::read(*stream_, buffer, parser);
        }
        break;
      } catch (const beast::system_error& e) {
        // A server may close a kept-alive connection between requests (llama-server does
        // after a streamed answer): send the request again on a new one, as clients do.
        const bool closed = e.code() == http::error::end_of_stream ||
                            e.code() == net::error::connection_reset ||
                            e.code() == net::error::broken_pipe;
        stream_.reset();
        if (aborted_.exchange(false)) throw std::runtime_error("no answer within the timeout");
        if (!reused_ || !closed || attempt > 0) throw;
        answer.events.clear();
      }
    }
    reused_ = true;
    aborted_ = false;  // too late to matter
    const auto& res = parsed->get();
    if (res.result_int() != 200 ||
        (!expect_.empty() && res.body().find(expect_) == std::string::npos) ||
        (stream_events_ && answer.events.empty())) {
      answer.error = std::to_string(res.result_int()) + " " + res.body().substr(0, 200);
    }
    if (!res.keep_alive()) stream_.reset();
    return answer;
  }

  // Another thread: ends the request in progress (its Send throws).
  void Abort() {
    aborted_ = true;
    if (const int fd = fd_.load(); fd >= 0) ::shutdown(fd, SHUT_RDWR);
  }

 private:
  void Connect() {
    stream_.emplace(ioc_);
    stream_->connect(
        net::ip::tcp::endpoint(net::ip::make_address(host_), static_cast<unsigned short>(port_)));
    fd_ = stream_->socket().native_handle();
    reused_ = false;
  }

  const std::string host_;
  const int port_;
  const std::string expect_;
  const bool stream_events_;
  http::request<http::string_body> request_;
  net::io_context ioc_;
  std::optional<beast::tcp_stream> stream_;
  bool reused_ = false;  // the connection has carried a request already
  std::atomic<int> fd_{-1};
  std::atomic<bool> aborted_{false};
};

class GrpcClient final : public Client {
 public:
  GrpcClient(const std::string& host, int port, const pb::ModelInferRequest& request,
             std::string expect, bool stream_events)
      : request_(request), expect_(std::move(expect)), stream_events_(stream_events) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
    args.SetMaxReceiveMessageSize(-1);
    stub_ = pb::GRPCInferenceService::NewStub(grpc::CreateCustomChannel(
        host + ":" + std::to_string(port), grpc::InsecureChannelCredentials(), args));
  }

  Answer Send(size_t /*target*/) override {
    Answer answer;
    grpc::ClientContext context;
    if (!stream_events_) {
      pb::ModelInferResponse response;
      const grpc::Status status = stub_->ModelInfer(&context, request_, &response);
      if (!status.ok()) {
        answer.error = "gRPC " + std::to_string(status.error_code()) + " " + status.error_message();
      } else {
        Check(response, answer);
      }
      return answer;
    }
    auto stream = stub_->ModelStreamInfer(&context);
    stream->Write(request_);
    stream->WritesDone();
    pb::ModelStreamInferResponse message, last;
    while (stream->Read(&message)) {
      answer.events.push_back(Clock::now());
      if (!message.error_message().empty() && answer.error.empty()) {
        answer.error = "stream: " + message.error_message();
      }
      last.Swap(&message);
    }
    const grpc::Status status = stream->Finish();
    if (!status.ok()) {
      answer.error = "gRPC " + std::to_string(status.error_code()) + " " + status.error_message();
    } else if (answer.events.empty()) {
      answer.error = "the stream ended without an answer";
    } else if (answer.error.empty()) {
      Check(last.infer_response(), answer);
    }
    return answer;
  }

  // One answer, serialized (for --save-answer), or the error.
  std::string Fetch(std::string& error) {
    grpc::ClientContext context;
    pb::ModelInferResponse response;
    const grpc::Status status = stub_->ModelInfer(&context, request_, &response);
    if (!status.ok()) error = status.error_message();
    return response.SerializeAsString();
  }

 private:
  void Check(const pb::ModelInferResponse& response, Answer& answer) const {
    if (expect_.empty()) return;
    const std::string bytes = response.SerializeAsString();
    if (bytes.find(expect_) == std::string::npos) {
      answer.error =
          "the answer lacks \"" + expect_ + "\": " + response.ShortDebugString().substr(0, 200);
    }
  }

  const pb::ModelInferRequest& request_;
  const std::string expect_;
  const bool stream_events_;
  std::unique_ptr<pb::GRPCInferenceService::Stub> stub_;
};

// --mix: one keep-alive connection per model and client, the model picked per request.
struct Target {
  std::string name, path, payload, expect;
};

// With a timeout, a watchdog thread aborts a request not answered in time: a wedged server
// ends the run with errors rather than never.
class MixClient final : public Client {
 public:
  MixClient(const std::string& host, int port, const std::vector<Target>& targets, int timeout_s)
      : timeout_(std::chrono::seconds(timeout_s)) {
    for (const auto& t : targets) {
      clients_.push_back(std::make_unique<HttpClient>(host, port, t.path, t.payload,
                                                      "application/json", t.expect, false));
    }
    if (timeout_s > 0) watchdog_ = std::jthread([this](std::stop_token stop) { Watch(stop); });
  }
  Answer Send(size_t target) override {
    {
      std::lock_guard lock(mu_);
      active_ = clients_.at(target).get();
      deadline_ = Clock::now() + timeout_;
      ++sends_;
    }
    cv_.notify_one();
    struct Done {
      MixClient& c;
      ~Done() {
        std::lock_guard lock(c.mu_);
        c.active_ = nullptr;
      }
    } done{*this};
    return clients_[target]->Send(0);
  }

 private:
  void Watch(std::stop_token stop) {
    std::unique_lock lock(mu_);
    while (!stop.stop_requested()) {
      if (active_ && Clock::now() >= deadline_) {
        active_->Abort();
        active_ = nullptr;
      }
      const uint64_t seen = sends_;
      const auto until = active_ ? deadline_ : Clock::now() + std::chrono::seconds(1);
      cv_.wait_until(lock, stop, until, [&] { return sends_ != seen; });
    }
  }

  const Clock::duration timeout_;
  std::vector<std::unique_ptr<HttpClient>> clients_;
  std::mutex mu_;
  std::condition_variable_any cv_;
  HttpClient* active_ = nullptr;  // the request in progress, if any
  Clock::time_point deadline_;
  uint64_t sends_ = 0;  // wakes the watchdog for the next deadline
  std::jthread watchdog_;  // last: stopped first
};

// Which model a --mix request goes to: rank r is drawn with weight 1/(r+1)^s; the ranking is a
// shuffle seeded by the epoch (time since start / shift), so every run sees the same popular
// set at the same time. Pick is const: the clients' threads share one picker.
class ZipfPicker {
 public:
  ZipfPicker(size_t n, double s, double shift_seconds) : n_(n), shift_seconds_(shift_seconds) {
    for (size_t r = 0; r < n; ++r) {
      weights_.push_back(1.0 / std::pow(static_cast<double>(r + 1), s));
    }
  }
  size_t Pick(std::mt19937_64& rng, double since_start) const {
    std::discrete_distribution<size_t> rank(weights_.begin(), weights_.end());
    const auto epoch =
        shift_seconds_ > 0 ? static_cast<uint64_t>(since_start / shift_seconds_) : 0;
    std::vector<size_t> ranking(n_);
    for (size_t i = 0; i < n_; ++i) ranking[i] = i;
    std::mt19937_64 shuffle(0x5eed + epoch);
    std::shuffle(ranking.begin(), ranking.end(), shuffle);
    return ranking[rank(rng)];
  }
  size_t size() const { return n_; }

 private:
  size_t n_;
  double shift_seconds_;
  std::vector<double> weights_;
};

struct Samples {
  std::vector<int64_t> latency_us, ttft_us, itl_us;
  int64_t events = 0;
  double share = 0;  // answered requests, each counted by the part of it inside the window
  void Merge(const Samples& o) {
    share += o.share;
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

struct Settings {
  double seconds = 10;
  double warmup = 1;
  bool stream_events = false;
  // The window lasts `seconds`, and then until this many requests sent in it have been answered
  // (at most 60 s more): on a loaded machine a short window may otherwise see none.
  int64_t min_requests = 0;
};

// One measurement: `concurrency` clients (closed loop) or connections (open loop at `rate`),
// warm-up then the window; every answer checked. Returns the JSON line described at the top.
nlohmann::json Measure(const Settings& settings, int concurrency, double rate,
                       const std::function<std::unique_ptr<Client>()>& make_client,
                       const ZipfPicker* picker) {
  const size_t n_targets = picker ? picker->size() : 1;
  const double seconds = settings.seconds, warmup = settings.warmup;
  const bool stream_events = settings.stream_events;
  std::atomic<bool> stop{false};
  std::atomic<int64_t> errors{0};
  std::mutex mu;
  Samples all;
  std::vector<Samples> per_target(n_targets);
  std::vector<int64_t> target_errors(n_targets, 0);
  std::string first_error;
  Arrivals arrivals;
  const auto start = Clock::now();
  const double cpu_at_start = ProcessCpuSeconds();
  const auto measure_from =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(warmup));
  // The window's end: moved later while fewer than min_requests have been answered.
  std::atomic<Clock::rep> measure_to_rep{
      (measure_from +
       std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds)))
          .time_since_epoch()
          .count()};
  auto window_end = [&] { return Clock::time_point(Clock::duration(measure_to_rep.load())); };
  const auto planned_end = window_end();
  std::atomic<int64_t> answered{0};  // requests sent in the window and answered well
  auto measured = [&](Clock::time_point t) { return t >= measure_from && t < window_end(); };
  auto error = [&](size_t target, const std::string& what) {
    ++errors;
    std::lock_guard lock(mu);
    ++target_errors[target];
    if (first_error.empty()) first_error = what;
  };

  std::vector<std::thread> clients;
  for (int c = 0; c < concurrency; ++c) {
    clients.emplace_back([&, c] {
      std::vector<Samples> mine(n_targets);
      std::mt19937_64 rng(1000 + static_cast<uint64_t>(c));
      std::unique_ptr<Client> client = make_client();
      while (!stop) {
        Clock::time_point sent = Clock::now();
        const size_t target =
            picker ? picker->Pick(rng, std::chrono::duration<double>(sent - start).count()) : 0;
        Samples& own = mine[target];
        if (rate > 0) {
          auto arrival = arrivals.Pop(stop);
          if (!arrival) break;
          sent = *arrival;  // open loop: the request existed from its arrival on
        }
        Answer answer;
        try {
          answer = client->Send(target);
        } catch (const std::exception& e) {
          if (!stop && measured(sent)) error(target, e.what());
          continue;
        }
        const auto done = Clock::now();
        const bool ok = answer.error.empty();
        const auto& events = answer.events;
        const auto measure_to = window_end();
        if (ok && done > measure_from && sent < measure_to) {
          // Throughput counts each request by the share of its time inside the window: whole
          // counts would be off by up to one request per client (±3 % for 30 one-second
          // answers), enough to hide or invent a small gap to a raw engine loop.
          const auto inside = std::min(done, measure_to) - std::max(sent, measure_from);
          own.share += done > sent ? std::chrono::duration<double>(inside) /
                                          std::chrono::duration<double>(done - sent)
                                    : 1.0;
        }
        if (measured(sent)) {
          if (!ok) {
            error(target, answer.error);
          } else {
            own.latency_us.push_back(Micros(done - sent));
            ++answered;
            if (stream_events) {
              own.ttft_us.push_back(Micros(events.front() - sent));
              for (size_t i = 1; i < events.size(); ++i) {
                own.itl_us.push_back(Micros(events[i] - events[i - 1]));
              }
              own.events += static_cast<int64_t>(events.size());
            }
          }
        }
      }
      std::lock_guard lock(mu);
      for (size_t t = 0; t < n_targets; ++t) {
        all.Merge(mine[t]);
        per_target[t].Merge(mine[t]);
      }
    });
  }
  if (rate > 0) {
    // Poisson arrivals: exponential gaps with mean 1/rate, from the start of the warm-up on.
    std::mt19937_64 rng(12345);
    std::exponential_distribution<double> gap(rate);
    auto next = start;
    while (next < planned_end) {
      next += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(gap(rng)));
      std::this_thread::sleep_until(next);
      arrivals.Push(next);
    }
  } else {
    std::this_thread::sleep_until(planned_end);
  }
  // Count requests, not seconds: extend the window until enough have been answered.
  const auto give_up = planned_end + std::chrono::seconds(60);
  while (answered.load() < settings.min_requests && Clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (settings.min_requests > 0) measure_to_rep = std::max(Clock::now(), planned_end).time_since_epoch().count();
  // Stop sending; requests already sent finish (each client waits for its answer), and the
  // open loop gives queued arrivals a moment to be sent.
  std::this_thread::sleep_for(std::chrono::milliseconds(rate > 0 ? 200 : 0));
  stop = true;
  arrivals.Wake();
  for (auto& t : clients) t.join();
  // The load tool's own cost: how many cores it kept busy on average over the run, warm-up
  // included. A client on the server's cores takes this from the server.
  const double client_cpu_cores =
      (ProcessCpuSeconds() - cpu_at_start) /
      std::max(1e-9, std::chrono::duration<double>(Clock::now() - start).count());

  const double elapsed = std::chrono::duration<double>(window_end() - measure_from).count();
  int64_t sum = 0;
  for (int64_t v : all.latency_us) sum += v;
  const size_t n = all.latency_us.size();
  nlohmann::json out = {{"requests", n},
                        {"errors", errors.load()},
                        {"seconds", elapsed},
                        {"rps", all.share / elapsed},
                        {"p50_us", Percentile(all.latency_us, 0.50)},
                        {"p90_us", Percentile(all.latency_us, 0.90)},
                        {"p99_us", Percentile(all.latency_us, 0.99)},
                        {"p999_us", Percentile(all.latency_us, 0.999)},
                        {"max_us", n ? all.latency_us.back() : 0},
                        {"mean_us", n ? sum / static_cast<int64_t>(n) : 0},
                        {"concurrency", concurrency},
                        {"client_cpu_cores", client_cpu_cores}};
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
  if (picker) {
    out["models"] = nlohmann::json::array();
    for (size_t t = 0; t < n_targets; ++t) {
      auto& own = per_target[t];
      out["models"].push_back({{"requests", own.latency_us.size()},
                               {"errors", target_errors[t]},
                               {"rps", own.share / elapsed},
                               {"p50_us", Percentile(own.latency_us, 0.50)},
                               {"p99_us", Percentile(own.latency_us, 0.99)}});
    }
  }
  if (n == 0 && first_error.empty()) first_error = "no request completed in the measured window";
  if (!first_error.empty()) out["first_error"] = first_error;
  return out;
}

// The sweep as a markdown table, one row per point.
void PrintTable(const std::vector<nlohmann::json>& points, bool stream_events) {
  std::cout << "| clients | rate/s | answers/s | p50 ms | p90 ms | p99 ms | p99.9 ms | errors |"
            << (stream_events ? " TTFT p50 ms | ITL p50 ms |" : "") << "\n"
            << "|---|---|---|---|---|---|---|---|" << (stream_events ? "---|---|" : "") << "\n";
  auto ms = [](const nlohmann::json& j, const char* key) {
    std::ostringstream o;
    o.precision(3);
    o << j.value(key, int64_t{0}) / 1000.0;
    return o.str();
  };
  for (const auto& p : points) {
    std::ostringstream rps;
    rps.setf(std::ios::fixed);
    rps.precision(1);
    rps << p["rps"].get<double>();
    std::cout << "| " << p["concurrency"] << " | "
              << (p.contains("rate") ? p["rate"].dump() : std::string("closed loop")) << " | "
              << rps.str() << " | " << ms(p, "p50_us") << " | " << ms(p, "p90_us") << " | "
              << ms(p, "p99_us") << " | " << ms(p, "p999_us") << " | " << p["errors"] << " |";
    if (stream_events)
      std::cout << " " << ms(p, "ttft_p50_us") << " | " << ms(p, "itl_p50_us") << " |";
    std::cout << "\n";
  }
  for (const auto& p : points) {
    if (p.contains("first_error")) {
      std::cout << "\n"
                << p["concurrency"] << " clients: " << p["first_error"].get<std::string>() << "\n";
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"HTTP/gRPC load generator (closed or open loop) that checks every answer"};
  std::string host = "127.0.0.1", path, body_file, expect, save_answer;
  std::string content_type = "application/json";
  int port = 8000;
  std::vector<int> concurrencies = {1};
  std::vector<double> rates = {0};
  Settings settings;
  bool use_grpc = false, markdown = false;
  bool& stream_events = settings.stream_events;
  std::string mix_file;
  double zipf = 1.1, shift_seconds = 20;
  int timeout_s = 0;
  app.add_option("--host", host);
  app.add_option("--port", port)->required();
  app.add_option("--path", path, "HTTP: the request's path");
  app.add_flag("--grpc", use_grpc, "KServe v2 gRPC: --body-file is a ModelInferRequest in JSON");
  app.add_option("--save-answer", save_answer, "gRPC: write one serialized answer here and exit");
  auto* body_option = app.add_option("--body-file", body_file);
  app.add_option("--mix", mix_file, "HTTP to several models: a JSON array of "
                 "{name, path, body_file, expect}")->excludes(body_option);
  app.add_option("--zipf", zipf, "--mix: the Zipf law's exponent");
  app.add_option("--shift-seconds", shift_seconds, "--mix: a new ranking this often (0: never)");
  app.add_option("--timeout", timeout_s, "--mix: seconds a request may wait for its answer "
                 "before it counts as an error (0: forever)");
  app.add_option("--content-type", content_type, "HTTP: the body's type (image/jpeg for an image)");
  app.add_option("--expect", expect, "a substring every answer must contain");
  app.add_option("--concurrency", concurrencies,
                 "clients (closed loop) or connections (open loop); several: a sweep")
      ->delimiter(',');
  app.add_option("--rate", rates,
                 "open loop: Poisson arrivals per second (0: closed loop); several: a sweep")
      ->delimiter(',');
  app.add_option("--seconds", settings.seconds, "the measured window of each point");
  app.add_option("--warmup", settings.warmup, "seconds of load before measuring, each point");
  // BENCH_MIN_REQUESTS sets it for every run of a suite (bench/all.sh --quick does).
  if (const char* env = std::getenv("BENCH_MIN_REQUESTS")) settings.min_requests = std::atoll(env);
  app.add_option("--min-requests", settings.min_requests,
                 "after the window, go on until this many requests sent in it are answered "
                 "(at most 60 s more; default $BENCH_MIN_REQUESTS or 0)");
  app.add_flag("--markdown", markdown, "print the sweep as a markdown table instead of JSON lines");
  app.add_flag("--stream", stream_events, "the answer comes in parts: report TTFT and ITL");
  CLI11_PARSE(app, argc, argv);
  auto read_file = [](const std::string& file) {
    std::stringstream text;
    text << std::ifstream(file, std::ios::binary).rdbuf();
    return text.str();
  };
  std::vector<Target> targets;
  if (!mix_file.empty()) {
    for (const auto& t : nlohmann::json::parse(read_file(mix_file))) {
      targets.push_back({t.at("name"), t.at("path"), read_file(t.at("body_file")),
                         t.value("expect", std::string())});
    }
  } else if (body_file.empty()) {
    std::cerr << "--body-file or --mix is required\n";
    return 2;
  }
  if (!use_grpc && path.empty() && targets.empty()) {
    std::cerr << "--path is required for HTTP\n";
    return 2;
  }

  const std::string payload = body_file.empty() ? std::string() : read_file(body_file);
  pb::ModelInferRequest grpc_request;
  if (use_grpc) {
    if (auto parsed = google::protobuf::util::JsonStringToMessage(payload, &grpc_request);
        !parsed.ok()) {
      std::cerr << body_file << ": not a ModelInferRequest: " << parsed.ToString() << "\n";
      return 2;
    }
  }
  std::optional<ZipfPicker> picker;
  if (!targets.empty()) picker.emplace(targets.size(), zipf, shift_seconds);
  auto make_client = [&]() -> std::unique_ptr<Client> {
    if (!targets.empty()) return std::make_unique<MixClient>(host, port, targets, timeout_s);
    if (use_grpc)
      return std::make_unique<GrpcClient>(host, port, grpc_request, expect, stream_events);
    return std::make_unique<HttpClient>(host, port, path, payload, content_type, expect,
                                        stream_events);
  };
  if (!save_answer.empty()) {
    if (!use_grpc) {
      std::cerr << "--save-answer needs --grpc\n";
      return 2;
    }
    std::string error;
    const std::string bytes = GrpcClient(host, port, grpc_request, expect, false).Fetch(error);
    if (!error.empty()) {
      std::cerr << "ModelInfer failed: " << error << "\n";
      return 1;
    }
    std::ofstream(save_answer, std::ios::binary) << bytes;
    return 0;
  }

  std::vector<nlohmann::json> points;
  bool failed = false;
  for (double rate : rates) {
    for (int concurrency : concurrencies) {
      nlohmann::json out =
          Measure(settings, concurrency, rate, make_client, picker ? &*picker : nullptr);
      for (size_t t = 0; t < targets.size(); ++t) out["models"][t]["name"] = targets[t].name;
      failed = failed || out["errors"].get<int64_t>() > 0 || out["requests"].get<size_t>() == 0;
      if (!markdown) std::cout << out.dump() << std::endl;
      points.push_back(std::move(out));
    }
  }
  if (markdown) PrintTable(points, stream_events);
  return failed ? 1 : 0;
}
