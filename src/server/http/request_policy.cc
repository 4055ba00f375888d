#include "server/http/request_policy.h"

#include <unistd.h>

#include <algorithm>
#include <array>

#include <boost/asio/ip/address.hpp>

namespace mmserve {
namespace {

namespace http = boost::beast::http;

std::string Lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// "name:port" → "name"; "[::1]:port" → "::1"; a trailing dot dropped ("localhost." is
// localhost). Lower case.
std::string HostName(std::string_view host) {
  if (host.starts_with('[')) {
    const size_t end = host.find(']');
    return Lower(host.substr(1, end == std::string_view::npos ? host.npos : end - 1));
  }
  if (const size_t colon = host.find(':'); colon != std::string_view::npos) {
    host = host.substr(0, colon);
  }
  if (host.ends_with('.')) host.remove_suffix(1);
  return Lower(host);
}

bool IsIpAddress(const std::string& name) {
  boost::system::error_code ec;
  boost::asio::ip::make_address(name, ec);
  return !ec;
}

bool MatchesEntry(const std::string& name, const std::string& entry) {
  if (entry == "*") return true;
  if (entry.starts_with('.')) return name.ends_with(entry) || name == entry.substr(1);
  return name == entry;
}

std::string HeaderValue(const HttpRequest& request, http::field field) {
  auto it = request.find(field);
  return it == request.end() ? std::string() : std::string(it->value());
}

// A body of this type reaches the routes: JSON, binary tensors, an image.
bool ServedBodyType(const std::string& content_type) {
  const std::string type = Lower(content_type.substr(0, content_type.find(';')));
  std::string_view t(type);
  while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.remove_suffix(1);
  return t == "application/json" || (t.starts_with("application/") && t.ends_with("+json")) ||
         t == "application/octet-stream" || t.starts_with("image/");
}

HttpResponse Refuse(Status status, const HttpRequest& request) {
  return ForRequest(ErrorResponse(std::move(status)), request.version(), request.keep_alive());
}

}  // namespace

RequestPolicy::RequestPolicy(std::vector<std::string> allowed_hosts,
                             std::vector<std::string> cors_origins)
    : cors_origins_(std::move(cors_origins)) {
  for (const auto& host : allowed_hosts) allowed_hosts_.push_back(Lower(host));
  std::array<char, 256> name{};
  if (::gethostname(name.data(), name.size() - 1) == 0) hostname_ = Lower(name.data());
}

std::string RequestPolicy::AllowedOrigin(std::string_view origin) const {
  if (origin.empty()) return {};
  for (const auto& o : cors_origins_) {
    if (o == "*") return "*";
    if (o == origin) return std::string(origin);
  }
  return {};
}

HttpResponse RequestPolicy::Preflight(const HttpRequest& request) const {
  HttpResponse res(http::status::no_content, request.version());
  res.keep_alive(request.keep_alive());
  res.set(http::field::access_control_allow_methods, "GET, POST, DELETE, OPTIONS");
  if (auto it = request.find(http::field::access_control_request_headers); it != request.end()) {
    res.set(http::field::access_control_allow_headers, it->value());
  }
  res.set(http::field::access_control_max_age, "600");
  res.prepare_payload();
  return res;
}

void RequestPolicy::AddCorsHeaders(std::string_view origin, http::fields& fields) const {
  const std::string allowed = AllowedOrigin(origin);
  if (allowed.empty()) return;
  fields.set(http::field::access_control_allow_origin, allowed);
  if (allowed != "*") fields.set(http::field::vary, "Origin");
  fields.set(http::field::access_control_expose_headers,
             "Inference-Header-Content-Length, Retry-After, Location");
}

bool RequestPolicy::HostAllowed(std::string_view host) const {
  const std::string name = HostName(host);
  if (name.empty()) return false;
  if (name == "localhost" || name.ends_with(".localhost") || IsIpAddress(name)) return true;
  if (!hostname_.empty() && name == hostname_) return true;
  return std::any_of(allowed_hosts_.begin(), allowed_hosts_.end(),
                     [&](const std::string& entry) { return MatchesEntry(name, entry); });
}

std::optional<HttpResponse> RequestPolicy::Refusal(const HttpRequest& request) const {
  // HTTP/1.0 clients may send no Host; browsers always do.
  const std::string host = HeaderValue(request, http::field::host);
  if (request.find(http::field::host) != request.end() && !HostAllowed(host)) {
    return Refuse(PermissionDenied("Host '" + host.substr(0, 256) +
                                   "' does not name this server; add it to "
                                   "global.allowed_hosts to serve it"),
                  request);
  }
  const std::string origin = HeaderValue(request, http::field::origin);
  const size_t scheme = origin.find("://");
  const bool same_origin = !host.empty() && scheme != std::string::npos &&
                           Lower(std::string_view(origin).substr(scheme + 3)) == Lower(host);
  if (!origin.empty() && !same_origin && AllowedOrigin(origin).empty()) {
    return Refuse(PermissionDenied("origin '" + origin.substr(0, 256) +
                                   "' is not allowed (global.cors_origins)"),
                  request);
  }
  if (!request.body().empty()) {
    const std::string type = HeaderValue(request, http::field::content_type);
    if (!type.empty() && !ServedBodyType(type)) {
      HttpResponse res = Refuse(
          InvalidArgument("Content-Type '" + type.substr(0, 128) +
                          "' is not served: send application/json (binary tensors: "
                          "application/octet-stream; an image: image/jpeg, image/png, ...)"),
          request);
      res.result(http::status::unsupported_media_type);
      return res;
    }
  }
  return std::nullopt;
}

bool RequestPolicy::IsHealthProbe(const HttpRequest& request) {
  return request.method() == http::verb::get && request.target().starts_with("/v2/health/");
}

}  // namespace mmserve
