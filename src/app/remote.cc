#include "app/remote.h"

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "common/json.h"
#include "common/result.h"
#include "common/strings.h"

namespace mmserve {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using nlohmann::json;

struct Endpoint {
  std::string host;
  std::string port;
};

// "http://host:port" (a trailing slash allowed; port 80 when absent). https is refused: the
// server speaks plain HTTP (TLS belongs to a proxy in front of it).
Result<Endpoint> ParseUrl(const std::string& url) {
  constexpr std::string_view kScheme = "http://";
  if (!std::string_view(url).starts_with(kScheme)) {
    return InvalidArgument("--url: expected http://HOST:PORT, found '" + url + "'");
  }
  std::string rest = url.substr(kScheme.size());
  if (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (rest.empty() || rest.find('/') != std::string::npos) {
    return InvalidArgument("--url: expected http://HOST:PORT, found '" + url + "'");
  }
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos || rest.back() == ']') return Endpoint{rest, "80"};
  return Endpoint{rest.substr(0, colon), rest.substr(colon + 1)};
}

struct Answer {
  int status = 0;
  std::string body;
};

// One request with a 30 s bound on the whole exchange and a 64 MiB bound on the answer.
Result<Answer> Call(const std::string& url, http::verb method, const std::string& target,
                    const std::string& key) {
  MMS_ASSIGN_OR_RETURN(Endpoint endpoint, ParseUrl(url));
  try {
    boost::asio::io_context io;
    boost::asio::ip::tcp::resolver resolver(io);
    beast::tcp_stream stream(io);
    stream.expires_after(std::chrono::seconds(30));
    stream.connect(resolver.resolve(endpoint.host, endpoint.port));
    http::request<http::string_body> req(method, target, 11);
    req.set(http::field::host, endpoint.host);
    req.set(http::field::user_agent, "mmserve-cli");
    if (!key.empty()) req.set(http::field::authorization, "Bearer " + key);
    if (method == http::verb::post) {
      req.set(http::field::content_type, "application/json");
      req.body() = "{}";
    }
    req.prepare_payload();
    http::write(stream, req);
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(64ull << 20);
    http::read(stream, buffer, parser);
    beast::error_code ignored;
    stream.socket().shutdown(boost::asio::ip::tcp::socket::shutdown_both, ignored);
    return Answer{static_cast<int>(parser.get().result_int()), parser.get().body()};
  } catch (const std::exception& e) {
    return Unavailable("cannot reach the server at " + url + ": " + e.what() +
                       " (is it running? --url or MMSERVE_URL names another)");
  }
}

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

// What the CLI prints of a server's (or its own argument's) text: valid UTF-8, control
// characters escaped, at most `max` bytes. A server's strings are not trusted to be kind to the
// terminal: an escape sequence would retitle or clear it, a CR forge a line.
std::string Printable(std::string_view text, size_t max) {
  return Abbreviate(EscapeControl(ToValidUtf8(text)), max);
}

// The error an answer carries ({"error": ...}), else its body; printable, at most 2,000 bytes.
std::string ErrorOf(const Answer& answer) {
  const json body = ParseJson(answer.body);
  if (body.is_object() && body.contains("error") && body["error"].is_string()) {
    return Printable(body["error"].get<std::string>(), 2000);
  }
  return Printable(answer.body, 2000);
}

std::string Mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

// "4m 10s", "never", "-" (not loaded).
std::string ExpiresIn(const json& keep_alive) {
  if (!keep_alive.is_object() || keep_alive["seconds"].is_null()) return "never";
  if (!keep_alive["expires_in_s"].is_number()) return "-";
  const double seconds = keep_alive["expires_in_s"].get<double>();
  if (!(seconds >= 0 && seconds < 1e9)) return "?";  // NaN, negative, or past 30 years
  const auto s = static_cast<int64_t>(seconds);
  if (s >= 3600) return std::to_string(s / 3600) + "h " + std::to_string(s % 3600 / 60) + "m";
  if (s >= 60) return std::to_string(s / 60) + "m " + std::to_string(s % 60) + "s";
  return std::to_string(s) + "s";
}

// The value of `j[key]` as printable text (at most 64 bytes), or "-".
std::string Text(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key)) return "-";
  const json& v = j[key];
  return Printable(v.is_string() ? v.get<std::string>() : DumpJson(v), 64);
}

// Every restart of a model's workers: watchdog restarts of its instances (workers[].restarts)
// and restarts of its isolated worker process after any exit (counters.worker_restarts).
int64_t Restarts(const json& mms) {
  int64_t n = 0;
  const auto add = [&](const json& v) {
    if (v.is_number_integer() && v.get<int64_t>() > 0 && v.get<int64_t>() < (int64_t{1} << 40)) {
      n += v.get<int64_t>();
    }
  };
  if (mms.contains("workers") && mms["workers"].is_array()) {
    for (const json& w : mms["workers"]) {
      if (w.is_object() && w.contains("restarts")) add(w["restarts"]);
    }
  }
  if (mms.contains("counters") && mms["counters"].is_object() &&
      mms["counters"].contains("worker_restarts")) {
    add(mms["counters"]["worker_restarts"]);
  }
  return n;
}

}  // namespace

int Ps(const RemoteOptions& options) {
  auto answer = Call(options.url, http::verb::get, "/v2/models/stats", Env("MMSERVE_API_KEY"));
  if (!answer.ok()) {
    std::cerr << "ps: " << answer.status().message() << "\n";
    return 1;
  }
  if (answer->status != 200) {
    std::cerr << "ps: the server answered " << answer->status << ": " << ErrorOf(*answer) << "\n";
    return 1;
  }
  const json stats = ParseJson(answer->body);
  if (!stats.is_object() || !stats.contains("model_stats") || !stats["model_stats"].is_array()) {
    std::cerr << "ps: the server's answer is not a statistics list\n";
    return 1;
  }
  std::vector<std::vector<std::string>> rows = {
      {"NAME", "VERSION", "STATE", "TASK", "DEVICE", "MEMORY (MiB)", "IN FLIGHT", "RESTARTS",
       "UNLOADS IN"}};
  for (const json& m : stats["model_stats"]) {
    if (!m.is_object() || !m.contains("mmserve")) continue;
    const json& mms = m["mmserve"];
    int64_t resident = 0;
    if (mms.contains("memory") && mms["memory"].is_object() &&
        mms["memory"].value("resident_bytes", json(0)).is_number_integer()) {
      resident = mms["memory"]["resident_bytes"].get<int64_t>();
    }
    rows.push_back({Text(m, "name"), Text(m, "version"), Text(mms, "state"), Text(mms, "task"),
                    Text(mms, "device"), resident > 0 ? Mib(resident) : "-",
                    Text(mms, "in_flight"), std::to_string(Restarts(mms)),
                    ExpiresIn(mms.contains("keep_alive") ? mms["keep_alive"] : json())});
  }
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    std::cout << line << "\n";
  }
  return 0;
}

int LoadOrUnload(const RemoteOptions& options, const std::string& name, bool load) {
  const char* verb = load ? "load" : "unload";
  std::string key = Env("MMSERVE_ADMIN_KEY");
  if (key.empty()) key = Env("MMSERVE_API_KEY");
  std::string escaped;  // the name as one path segment
  for (unsigned char c : name) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.') {
      escaped += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      escaped += buf;
    }
  }
  auto answer = Call(options.url, http::verb::post,
                     "/v2/repository/models/" + escaped + "/" + verb, key);
  if (!answer.ok()) {
    std::cerr << verb << ": " << answer.status().message() << "\n";
    return 1;
  }
  if (answer->status != 200) {
    std::cerr << verb << " " << Printable(name, 256) << ": " << ErrorOf(*answer) << " (HTTP "
              << answer->status << ")\n";
    return 1;
  }
  std::cout << Printable(name, 256) << ": " << (load ? "loaded" : "unloaded") << "\n";
  return 0;
}

}  // namespace mmserve
