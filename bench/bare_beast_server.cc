// bare_beast_server: the peer of the HTTP-overhead benchmark — a Boost.Beast HTTP/1.1 server
// built like mmserve's frontend (a pool of I/O threads, a strand per keep-alive connection,
// async read and write) that does no work: every request is read whole and answered 200 with
// the same canned body (mmserve's own answer to the benchmark request, so both sides write the
// same bytes). Prints "listening on PORT" once bound.
//
//   bare_beast_server --port 0 --threads 2 --response-file answer.json
#include <utility>  // before Asio: Boost 1.74 uses std::exchange without including it

#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <CLI/CLI.hpp>

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, const std::string& body) : stream_(std::move(socket)), body_(body) {
    buffer_.reserve(16 * 1024);  // as mmserve's frontend: a 1 KB request in one read
  }
  void Start() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->Read(); });
  }

 private:
  void Read() {
    request_ = {};
    http::async_read(stream_, buffer_, request_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (ec) return self->Close();
                       self->Write();
                     });
  }
  void Write() {
    auto res = std::make_shared<http::response<http::string_body>>(http::status::ok,
                                                                   request_.version());
    res->set(http::field::content_type, "application/json");
    res->keep_alive(request_.keep_alive());
    res->body() = body_;
    res->prepare_payload();
    http::async_write(stream_, *res, [self = shared_from_this(), res](beast::error_code ec, size_t) {
      if (ec || !res->keep_alive()) return self->Close();
      self->Read();
    });
  }
  void Close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
  }

  beast::tcp_stream stream_;
  const std::string& body_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> request_;
};

int main(int argc, char** argv) {
  CLI::App app{"a Boost.Beast server that answers every request with a canned body"};
  int port = 0, threads = 2;
  std::string response_file;
  app.add_option("--port", port);
  app.add_option("--threads", threads);
  app.add_option("--response-file", response_file)->required();
  CLI11_PARSE(app, argc, argv);
  std::stringstream body;
  body << std::ifstream(response_file).rdbuf();
  const std::string canned = body.str();

  net::io_context ioc(threads);
  tcp::acceptor acceptor(net::make_strand(ioc),
                         {net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)});
  std::function<void()> accept = [&] {
    acceptor.async_accept(net::make_strand(ioc), [&](beast::error_code ec, tcp::socket s) {
      if (!ec) {
        s.set_option(tcp::no_delay(true), ec);
        std::make_shared<Session>(std::move(s), canned)->Start();
      }
      accept();
    });
  };
  accept();
  std::cout << "listening on " << acceptor.local_endpoint().port() << std::endl;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back([&] { ioc.run(); });
  for (auto& t : pool) t.join();
}
