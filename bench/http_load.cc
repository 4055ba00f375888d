// http_load: a closed-loop HTTP/1.1 load generator for side-by-side benchmarks. N clients, each
// on its own keep-alive connection, send the same POST back to back for a fixed time and check
// every answer (status 200 and an expected substring: a wrong answer is an error, not a data
// point). Prints one JSON line: requests, errors, requests/s, latency percentiles in µs.
//
//   http_load --port 8000 --path /v2/models/m/infer --body-file body.json
//             --expect EMBEDDING --concurrency 64 --seconds 20 [--warmup 2]
#include <utility>  // before Asio: Boost 1.74 uses std::exchange without including it

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <iostream>
#include <mutex>
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

int main(int argc, char** argv) {
  CLI::App app{"closed-loop HTTP load generator"};
  std::string host = "127.0.0.1", path, body_file, expect;
  int port = 8000, concurrency = 1;
  double seconds = 10, warmup = 1;
  app.add_option("--host", host);
  app.add_option("--port", port)->required();
  app.add_option("--path", path)->required();
  app.add_option("--body-file", body_file)->required();
  app.add_option("--expect", expect, "a substring every 200 response must contain");
  app.add_option("--concurrency", concurrency);
  app.add_option("--seconds", seconds);
  app.add_option("--warmup", warmup, "seconds of load before measuring");
  CLI11_PARSE(app, argc, argv);

  std::stringstream body;
  body << std::ifstream(body_file).rdbuf();
  const std::string payload = body.str();

  std::atomic<bool> measuring{false}, stop{false};
  std::atomic<int64_t> errors{0};
  std::mutex mu;
  std::vector<int64_t> latencies_us;
  std::string first_error;

  std::vector<std::thread> clients;
  for (int c = 0; c < concurrency; ++c) {
    clients.emplace_back([&] {
      std::vector<int64_t> mine;
      while (!stop) {
        try {
          net::io_context ioc;
          beast::tcp_stream stream(ioc);
          stream.connect(net::ip::tcp::endpoint(net::ip::make_address(host),
                                                static_cast<unsigned short>(port)));
          while (!stop) {
            http::request<http::string_body> req(http::verb::post, path, 11);
            req.set(http::field::host, host);
            req.set(http::field::content_type, "application/json");
            req.keep_alive(true);
            req.body() = payload;
            req.prepare_payload();
            const auto start = Clock::now();
            http::write(stream, req);
            beast::flat_buffer buffer;
            http::response<http::string_body> res;
            http::read(stream, buffer, res);
            const auto us =
                std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
            const bool ok = res.result_int() == 200 &&
                            (expect.empty() || res.body().find(expect) != std::string::npos);
            if (!measuring) continue;
            if (ok) {
              mine.push_back(us);
            } else {
              ++errors;
              std::lock_guard lock(mu);
              if (first_error.empty()) {
                first_error = std::to_string(res.result_int()) + " " + res.body().substr(0, 200);
              }
            }
            if (!res.keep_alive()) break;
          }
        } catch (const std::exception& e) {
          if (measuring && !stop) {
            ++errors;
            std::lock_guard lock(mu);
            if (first_error.empty()) first_error = e.what();
          }
        }
      }
      std::lock_guard lock(mu);
      latencies_us.insert(latencies_us.end(), mine.begin(), mine.end());
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(warmup));
  measuring = true;
  const auto begin = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  measuring = false;
  const double elapsed = std::chrono::duration<double>(Clock::now() - begin).count();
  stop = true;
  for (auto& t : clients) t.join();

  std::sort(latencies_us.begin(), latencies_us.end());
  auto pct = [&](double p) -> int64_t {
    if (latencies_us.empty()) return 0;
    return latencies_us[std::min(latencies_us.size() - 1,
                                 static_cast<size_t>(p * static_cast<double>(latencies_us.size())))];
  };
  nlohmann::json out = {{"requests", latencies_us.size()},
                        {"errors", errors.load()},
                        {"seconds", elapsed},
                        {"rps", static_cast<double>(latencies_us.size()) / elapsed},
                        {"p50_us", pct(0.50)},
                        {"p90_us", pct(0.90)},
                        {"p99_us", pct(0.99)},
                        {"concurrency", concurrency}};
  if (!first_error.empty()) out["first_error"] = first_error;
  std::cout << out.dump() << std::endl;
  return errors.load() == 0 ? 0 : 1;
}
