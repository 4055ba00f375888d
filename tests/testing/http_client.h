// A small blocking HTTP/1.1 client over Boost.Beast for integration tests: one keep-alive
// connection to 127.0.0.1:port.
#pragma once

#include <map>
#include <memory>
#include <string>

namespace mmserve::testing {

struct HttpResult {
  int status = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // lower-case names
  bool keep_alive = false;
};

class HttpClient {
 public:
  explicit HttpClient(int port);
  ~HttpClient();

  HttpResult Get(const std::string& target);
  HttpResult Delete(const std::string& target);
  HttpResult Post(const std::string& target, const std::string& body,
                  const std::map<std::string, std::string>& headers = {});
  // Any method, with headers (e.g. Authorization, Origin).
  HttpResult Request(const std::string& method, const std::string& target,
                     const std::string& body = {},
                     const std::map<std::string, std::string>& headers = {});
  // Sends raw bytes and reads one response (for malformed-request tests).
  HttpResult Raw(const std::string& bytes);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mmserve::testing
