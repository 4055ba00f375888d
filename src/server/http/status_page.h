// The status page and the JSON only it needs besides the model statistics:
//
//   GET /, /ui             the page (src/server/http/ui/index.html), compiled into the binary
//   GET /ui/{file}         its script and style
//   GET /ui/access.json    which keys the server wants ({"api_key": bool, "admin_key": bool}),
//                          so the page asks for a key before it calls anything that needs one
//   GET /v2/devices        each memory domain's budget and who holds what of it
//   GET /v2/events?after=N the recent loads, unloads, evictions, breaker trips, restarts and
//                          reloads after event N ({"events": [...], "last_seq": M})
//
// The page and its files are open (they hold no data); the two JSON routes need the API key as
// every other listing does. The page polls /v2/models/stats, /v2/devices and /v2/events once a
// second and computes each model's request rate and p50/p99 over the last minute from the
// difference of two snapshots of its latency histogram.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "server/access.h"
#include "server/http/http_response.h"
#include "service/inference_service.h"

namespace mmserve {

struct EmbeddedFile {
  std::string_view name;  // "index.html"
  std::string_view bytes;
};
// The page's files (generated from src/server/http/ui by cmake/embed_files.cmake).
std::span<const EmbeddedFile> StatusPageFiles();

// Whether `path` (no query) is the page or one of its files: open to all.
bool IsStatusPageFile(std::string_view path);

// The answer for one of the routes above, or nullopt when `path` is none of them.
std::optional<HttpResponse> StatusRoute(const HttpRequest& request, std::string_view path,
                                        const InferenceService& service, const Access& access);

}  // namespace mmserve
