#include "testing/http_client.h"

#include <utility>  // Boost 1.74 asio uses std::exchange without including it

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace mmserve::testing {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

struct HttpClient::Impl {
  explicit Impl(int port) : stream(ioc), port(port) {}
  void Connect() {
    stream.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"),
                                 static_cast<unsigned short>(port)));
    connected = true;
  }
  HttpResult Send(http::request<http::string_body> req) {
    if (!connected) Connect();
    req.set(http::field::host, "127.0.0.1");
    req.keep_alive(true);
    req.prepare_payload();
    http::write(stream, req);
    return Read();
  }
  HttpResult Read() {
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(1u << 30);
    http::read(stream, buffer, parser);
    auto res = parser.release();
    HttpResult out{static_cast<int>(res.result_int()), res.body(), {}, res.keep_alive()};
    for (const auto& f : res) {
      std::string name(f.name_string());
      for (auto& c : name) c = static_cast<char>(std::tolower(c));
      out.headers[name] = std::string(f.value());
    }
    if (!res.keep_alive()) {
      beast::error_code ec;
      stream.socket().shutdown(tcp::socket::shutdown_both, ec);
      stream.close();
      connected = false;
    }
    return out;
  }

  net::io_context ioc;
  beast::tcp_stream stream;
  int port;
  bool connected = false;
};

HttpClient::HttpClient(int port) : impl_(std::make_unique<Impl>(port)) {}
HttpClient::~HttpClient() = default;

HttpResult HttpClient::Get(const std::string& target) {
  return impl_->Send(http::request<http::string_body>(http::verb::get, target, 11));
}

HttpResult HttpClient::Delete(const std::string& target) {
  return impl_->Send(http::request<http::string_body>(http::verb::delete_, target, 11));
}

HttpResult HttpClient::Post(const std::string& target, const std::string& body,
                            const std::map<std::string, std::string>& headers) {
  http::request<http::string_body> req(http::verb::post, target, 11);
  req.set(http::field::content_type, "application/json");
  for (const auto& [k, v] : headers) req.set(k, v);
  req.body() = body;
  return impl_->Send(std::move(req));
}

HttpResult HttpClient::Request(const std::string& method, const std::string& target,
                               const std::string& body,
                               const std::map<std::string, std::string>& headers) {
  http::request<http::string_body> req(http::string_to_verb(method), target, 11);
  for (const auto& [k, v] : headers) req.set(k, v);
  if (!body.empty()) req.body() = body;
  req.prepare_payload();
  return impl_->Send(std::move(req));
}

HttpResult HttpClient::Raw(const std::string& bytes) {
  if (!impl_->connected) impl_->Connect();
  net::write(impl_->stream.socket(), net::buffer(bytes));
  return impl_->Read();
}

}  // namespace mmserve::testing
