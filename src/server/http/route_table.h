// RouteTable: every HTTP route in one place — its methods, its path pattern, the scope it needs
// (open, inference key, admin key) and its handler — so that what a route needs is declared
// with the route and a new route cannot miss the access check (the router checks the scope of
// the route it found before the handler runs; an unknown path needs the inference key).
//
// Patterns are paths of literal segments, "{}" (any one segment, passed to the handler in
// order) and a final "*" (one or more segments, passed joined). A trailing '/' and empty
// segments are ignored, as they were before the table. Matching is linear in the routes and
// the segments of the path: both are bounded (routes are the server's; the path is split at
// most kMaxSegments deep and longer ones match nothing).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/container/small_vector.hpp>

#include "server/access.h"
#include "server/http/http_response.h"

namespace mmserve {

// How a route's own errors are written: KServe's {"error": "..."}, OpenAI's or TEI's objects.
enum class ErrorStyle { kKServe, kOpenAi, kTei };

// One request on its way to a route's handler.
struct RouteCall {
  HttpRequest request;
  std::string target;  // the path, without the query
  // The segments "{}" matched, in order, and a final "*"'s rest: views into `target`.
  boost::container::small_vector<std::string_view, 4> args;
  HttpReply reply;
  HttpConnection connection;
};

struct Route {
  std::string pattern;
  std::vector<boost::beast::http::verb> methods;  // empty: any method
  Scope scope = Scope::kInference;
  ErrorStyle errors = ErrorStyle::kKServe;
  std::function<void(RouteCall&)> handler;
};

class RouteTable {
 public:
  static constexpr size_t kMaxSegments = 16;

  void Add(Route route);

  struct Match {
    const Route* route = nullptr;
    boost::container::small_vector<std::string_view, 4> args;
  };
  // The first route whose pattern matches `path` (no query), whatever the method.
  std::optional<Match> Find(std::string_view path) const;
  // The methods a route takes, for a 405's message: "GET", "GET or DELETE".
  static std::string MethodsText(const Route& route);

 private:
  struct Entry {
    Route route;
    std::vector<std::string> segments;
  };
  std::vector<Entry> entries_;
};

}  // namespace mmserve
