#include "server/http/http_response.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "common/json.h"

namespace mmserve {

namespace http = boost::beast::http;

void WriteResponseHeader(const HttpResponse& res, std::string& out) {
  out.clear();
  out += "HTTP/";
  out += static_cast<char>('0' + res.version() / 10);
  out += '.';
  out += static_cast<char>('0' + res.version() % 10);
  out += ' ';
  out += std::to_string(res.result_int());
  out += ' ';
  const auto reason = res.reason();
  out.append(reason.data(), reason.size());
  out += "\r\n";
  for (const auto& field : res.base()) {
    const auto name = field.name_string();
    const auto value = field.value();
    out.append(name.data(), name.size());
    out += ": ";
    out.append(value.data(), value.size());
    out += "\r\n";
  }
  out += "\r\n";
}

http::status HttpStatusFor(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return http::status::ok;
    case StatusCode::kInvalidArgument:
    case StatusCode::kAlreadyExists:
    case StatusCode::kCancelled:
    case StatusCode::kFailedPrecondition: return http::status::bad_request;
    case StatusCode::kNotFound: return http::status::not_found;
    case StatusCode::kResourceExhausted: return http::status::too_many_requests;
    case StatusCode::kUnavailable: return http::status::service_unavailable;
    case StatusCode::kDeadlineExceeded: return http::status::gateway_timeout;
    case StatusCode::kUnimplemented: return http::status::not_implemented;
    case StatusCode::kInternal: return http::status::internal_server_error;
    case StatusCode::kUnauthenticated: return http::status::unauthorized;
    case StatusCode::kPermissionDenied: return http::status::forbidden;
  }
  return http::status::internal_server_error;
}

HttpResponse JsonResponse(http::status code, std::string body) {
  HttpResponse res(code, 11);
  res.set(http::field::content_type, "application/json");
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

HttpResponse ForRequest(HttpResponse res, unsigned version, bool keep_alive) {
  const bool keep = keep_alive && res.keep_alive();
  res.version(version);
  res.keep_alive(keep);
  return res;
}

HttpResponse EmptyResponse(http::status code) {
  HttpResponse res(code, 11);
  res.prepare_payload();
  return res;
}

void MarkRetryable(HttpResponse& response, const Status& status) {
  if (response.result() == http::status::too_many_requests ||
      response.result() == http::status::service_unavailable) {
    response.set(http::field::retry_after,
                 std::to_string(std::max<int64_t>(1, status.retry_after_s())));
  }
}

HttpResponse ErrorResponse(const Status& status) {
  nlohmann::json body = {{"error", std::string(status.message())}};
  HttpResponse res = JsonResponse(HttpStatusFor(status.code()), DumpJson(body));
  MarkRetryable(res, status);
  return res;
}

HttpResponse MethodNotAllowed(const std::string& allowed, const std::string& what) {
  HttpResponse res = ErrorResponse(InvalidArgument("use " + allowed + " for " + what));
  res.result(http::status::method_not_allowed);
  return res;
}

}  // namespace mmserve
