#include "server/http/route_table.h"

#include <cassert>

namespace mmserve {
namespace {

using Segments = boost::container::small_vector<std::string_view, RouteTable::kMaxSegments>;

// The non-empty segments of `path`; nullopt past kMaxSegments.
std::optional<Segments> Split(std::string_view path) {
  Segments out;
  size_t at = 0;
  while (at < path.size()) {
    size_t end = path.find('/', at);
    if (end == std::string_view::npos) end = path.size();
    if (end > at) {
      if (out.size() == RouteTable::kMaxSegments) return std::nullopt;
      out.push_back(path.substr(at, end - at));
    }
    at = end + 1;
  }
  return out;
}

}  // namespace

void RouteTable::Add(Route route) {
  auto split = Split(route.pattern);
  assert(split && "a route pattern has at most kMaxSegments segments");
  Entry entry{.route = std::move(route), .segments = {}};
  if (split) {
    for (std::string_view s : *split) entry.segments.emplace_back(s);
  }
  entries_.push_back(std::move(entry));
}

std::optional<RouteTable::Match> RouteTable::Find(std::string_view path) const {
  const auto segments = Split(path);
  if (!segments) return std::nullopt;
  for (const Entry& e : entries_) {
    const bool rest = !e.segments.empty() && e.segments.back() == "*";
    const size_t fixed = e.segments.size() - (rest ? 1 : 0);
    if (rest ? segments->size() <= fixed : segments->size() != fixed) continue;
    Match match{.route = &e.route, .args = {}};
    bool ok = true;
    for (size_t i = 0; i < fixed && ok; ++i) {
      if (e.segments[i] == "{}") {
        match.args.push_back((*segments)[i]);
      } else {
        ok = e.segments[i] == (*segments)[i];
      }
    }
    if (!ok) continue;
    if (rest) {
      const std::string_view first = (*segments)[fixed];
      const std::string_view last = segments->back();
      match.args.emplace_back(first.data(),
                              static_cast<size_t>(last.data() + last.size() - first.data()));
    }
    return match;
  }
  return std::nullopt;
}

std::string RouteTable::MethodsText(const Route& route) {
  std::string out;
  for (size_t i = 0; i < route.methods.size(); ++i) {
    if (i) out += i + 1 == route.methods.size() ? " or " : ", ";
    out += std::string(boost::beast::http::to_string(route.methods[i]));
  }
  return out;
}

}  // namespace mmserve
