#include "server/http/status_page.h"

#include <charconv>

#include <nlohmann/json.hpp>

#include "common/json.h"

namespace mmserve {
namespace {

namespace http = boost::beast::http;
using nlohmann::json;

std::string_view ContentTypeOf(std::string_view name) {
  if (name.ends_with(".html")) return "text/html; charset=utf-8";
  if (name.ends_with(".js")) return "text/javascript; charset=utf-8";
  if (name.ends_with(".css")) return "text/css; charset=utf-8";
  if (name.ends_with(".png")) return "image/png";
  return "application/octet-stream";
}

const EmbeddedFile* FindFile(std::string_view name) {
  for (const auto& file : StatusPageFiles()) {
    if (file.name == name) return &file;
  }
  return nullptr;
}

HttpResponse FileResponse(const EmbeddedFile& file) {
  HttpResponse res(http::status::ok, 11);
  res.set(http::field::content_type, std::string(ContentTypeOf(file.name)));
  // The binary's own files: revalidated on each visit, so an upgrade shows at once.
  res.set(http::field::cache_control, "no-cache");
  res.set("X-Content-Type-Options", "nosniff");
  // Only its own script, style and JSON: no inline code, nothing from elsewhere, no framing.
  res.set("Content-Security-Policy",
          "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
          "img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'");
  res.body() = std::string(file.bytes);
  res.prepare_payload();
  return res;
}

// A non-negative integer query parameter `name` of `target` ("/v2/events?after=5&limit=10"):
// nullopt when absent, an error naming it when it is not a number.
Result<std::optional<uint64_t>> QueryNumber(std::string_view target, std::string_view name) {
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return std::optional<uint64_t>();
  std::string_view query = target.substr(q + 1);
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    const size_t eq = pair.find('=');
    if (pair.substr(0, eq) != name) continue;
    const std::string_view value =
        eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
    uint64_t n = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (value.empty() || ec != std::errc() || end != value.data() + value.size()) {
      return InvalidArgument("query parameter '" + std::string(name) +
                             "': expected a non-negative integer, found '" +
                             std::string(value.substr(0, 32)) + "'");
    }
    return std::optional<uint64_t>(n);
  }
  return std::optional<uint64_t>();
}

json DevicesJson(const std::vector<DomainUsage>& domains) {
  json out = json::array();
  for (const auto& d : domains) {
    json holders = json::array();
    for (const auto& [model, bytes] : d.holders) {
      holders.push_back({{"model", model}, {"bytes", bytes}});
    }
    out.push_back({{"domain", d.domain},
                   {"budget_bytes", d.budget > 0 ? json(d.budget) : json(nullptr)},
                   {"used_bytes", d.used},
                   {"holders", holders}});
  }
  return json{{"devices", out}};
}

Result<json> EventsJson(const EventLog& events, std::string_view target) {
  MMS_ASSIGN_OR_RETURN(auto after, QueryNumber(target, "after"));
  MMS_ASSIGN_OR_RETURN(auto limit, QueryNumber(target, "limit"));
  const size_t most = static_cast<size_t>(std::min<uint64_t>(limit.value_or(EventLog::kCapacity),
                                                             EventLog::kCapacity));
  // last_seq first: an event recorded between the two reads is then sent again, never missed.
  const uint64_t last = events.last_seq();
  json list = json::array();
  for (const Event& e : events.Since(after.value_or(0), most)) {
    json item = {{"seq", e.seq}, {"time_ms", e.unix_ms}, {"kind", e.kind},
                 {"message", e.message}};
    if (!e.model.empty()) {
      item["model"] = e.model;
      item["version"] = e.version;
    }
    list.push_back(std::move(item));
  }
  return json{{"events", list}, {"last_seq", last}};
}

}  // namespace

bool IsStatusPageFile(std::string_view path) {
  return path == "/" || path == "/ui" || path == "/ui/" || path.starts_with("/ui/");
}

std::optional<HttpResponse> StatusRoute(const HttpRequest& request, std::string_view path,
                                        const InferenceService& service, const Access& access) {
  const bool page = IsStatusPageFile(path);
  if (!page && path != "/v2/devices" && path != "/v2/events") return std::nullopt;
  if (request.method() != http::verb::get) return MethodNotAllowed("GET", std::string(path));
  if (path == "/v2/devices") {
    return JsonResponse(http::status::ok, DumpJson(DevicesJson(service.Devices())));
  }
  if (path == "/v2/events") {
    const auto target = request.target();
    auto body = EventsJson(service.events(), std::string_view(target.data(), target.size()));
    if (!body.ok()) return ErrorResponse(body.status());
    return JsonResponse(http::status::ok, DumpJson(*body));
  }
  if (path == "/ui/access.json") {
    json body = {{"api_key", access.KeyRequired(Scope::kInference)},
                 {"admin_key", access.KeyRequired(Scope::kAdmin)}};
    return JsonResponse(http::status::ok, DumpJson(body));
  }
  std::string_view name = "index.html";
  if (path.starts_with("/ui/") && path.size() > 4) name = path.substr(4);
  const EmbeddedFile* file = FindFile(name);
  if (!file) return ErrorResponse(NotFound("no file " + std::string(path) + " in the status page"));
  return FileResponse(*file);
}

}  // namespace mmserve
