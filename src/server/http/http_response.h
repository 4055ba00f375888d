// The HTTP frontend's vocabulary and answers: the request/response types every route handler
// takes, the one StatusCode → HTTP status table (Triton's, plus 429 for a full queue and 504
// for an expired deadline) and the JSON answers built on it. Route handlers (http_router,
// openai_*) and the connection code (http_frontend) all answer through here.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <boost/beast/http.hpp>

#include "common/status.h"

namespace mmserve {

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;
using HttpResponse = boost::beast::http::response<boost::beast::http::string_body>;
using HttpReply = std::function<void(HttpResponse)>;
// Runs a closure on the connection's I/O strand. At once when the caller is on the strand
// already (an inline execution answers within the read handler: no second thread is woken),
// else queued to it.
using HttpDispatch = std::function<void(std::function<void()>)>;

// A chunked response written piece by piece (server-sent events). Start() sends the headers,
// Send() one chunk, End() the last chunk; they must run on the connection's strand (through
// HttpDispatch), in that order. broken() turns true, on any thread, once the client has gone away.
class HttpStream {
 public:
  virtual ~HttpStream() = default;
  virtual void Start(HttpResponse headers) = 0;
  virtual void Send(std::string chunk) = 0;
  virtual void End() = 0;
  virtual bool broken() const = 0;
};
using HttpOpenStream = std::function<std::shared_ptr<HttpStream>()>;

// What a handler may know about its connection while the answer is pending. Any thread.
struct HttpConnection {
  HttpDispatch dispatch;
  // Like dispatch, for a closure whose only effect on the connection is the request's one and
  // final reply: run on the calling thread instead when that thread may spend its time on the
  // answer (MayAnswerHere: a model's worker that would go idle otherwise) and the connection
  // still waits for it; the reply is then encoded and written from there, and no I/O thread
  // has to wake before the client has it.
  HttpDispatch answer;
  HttpOpenStream open_stream;
  std::function<bool()> client_gone;  // true once the client closed the connection
  std::string request_id;             // the request's X-Request-Id (cut to 128 bytes), if any
  std::string route;                  // "METHOD /path" (no query), for the access log
};

boost::beast::http::status HttpStatusFor(StatusCode code);

// The status line and the fields of `res` as HTTP/1.x text, ending with the empty line, into
// `out` (reused). For answers that carry their Content-Length (streams are written by Beast's
// serializer): made for chunked and streamed bodies too, it cost as much CPU as the rest of
// the write.
void WriteResponseHeader(const HttpResponse& res, std::string& out);

// Answers are built without the request's HTTP version and keep-alive: the connection holds
// them and stamps every answer it is handed for a request (an answer may still close the
// connection with keep_alive(false)).
HttpResponse JsonResponse(boost::beast::http::status code, std::string body);
HttpResponse EmptyResponse(boost::beast::http::status code);
// `res` for a request of HTTP `version` that asks to keep the connection open (`keep_alive`):
// what the connection does to every answer a handler gives it. An answer that closes the
// connection keeps closing it.
HttpResponse ForRequest(HttpResponse res, unsigned version, bool keep_alive);
// {"error": message} with the status that `status` maps to.
HttpResponse ErrorResponse(const Status& status);
// 405 with {"error": "use <allowed> for <what>"}.
HttpResponse MethodNotAllowed(const std::string& allowed, const std::string& what);
// 429 and 503 pass (a full queue, a model loading, a limit reached): the answer says when to
// come back — `status`'s retry_after_s() (a breaker's cool-down left), else 1 s. Every error
// answer goes through here.
void MarkRetryable(HttpResponse& response, const Status& status);

}  // namespace mmserve
