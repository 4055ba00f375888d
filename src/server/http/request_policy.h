// What a browser may make this server do: checks on a request's Host, Origin and Content-Type
// headers, before it is routed. With no keys set (the default) a web page the user merely
// visits could otherwise unload models: a cross-origin "no-cors" POST with a text/plain body
// needs no preflight, and DNS rebinding turns the attacker's own host name into this server's
// address. So, on every route but the health probes:
//  - Host must name this server: an IP address, "localhost" (or a name under it), this
//    machine's host name, or an entry of global.allowed_hosts ("name", ".suffix", or "*").
//    A rebinding page's Host is the attacker's domain: 403.
//  - Origin, when sent, must be the server's own (scheme://Host) or in global.cors_origins:
//    browsers send it with every cross-origin request and every POST or DELETE. Else 403.
//  - A body must be JSON (application/json, application/*+json), binary tensors
//    (application/octet-stream) or an image (image/*): the types a page can send without a
//    preflight (text/plain, forms) are refused with 415. A body without a type is accepted
//    (command-line clients; browsers always send one).
// Internal to server/http.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/http/http_response.h"

namespace mmserve {

class RequestPolicy {
 public:
  // `allowed_hosts`: global.allowed_hosts; `cors_origins`: global.cors_origins ("*": any).
  RequestPolicy(std::vector<std::string> allowed_hosts, std::vector<std::string> cors_origins);

  // The refusal for `request` (403 or 415, naming the header and the setting), or nothing.
  std::optional<HttpResponse> Refusal(const HttpRequest& request) const;

  // The Access-Control-Allow-Origin value for `origin`, or "" when it is not allowed.
  std::string AllowedOrigin(std::string_view origin) const;
  // The answer to a CORS preflight that Refusal() let through: 204 with what may be sent.
  HttpResponse Preflight(const HttpRequest& request) const;
  // The CORS fields of an answer to a request from `origin` (none unless it is allowed).
  void AddCorsHeaders(std::string_view origin, boost::beast::http::fields& fields) const;
  // Host (a Host header's value, with or without a port) names this server.
  bool HostAllowed(std::string_view host) const;
  // A liveness or readiness probe: answered whatever the load, since an orchestrator that
  // cannot reach one restarts a server that is merely busy.
  static bool IsHealthProbe(const HttpRequest& request);

 private:
  std::vector<std::string> allowed_hosts_;  // lower case
  std::vector<std::string> cors_origins_;
  std::string hostname_;  // gethostname(), lower case
};

}  // namespace mmserve
