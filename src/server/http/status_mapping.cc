#include "server/http/status_mapping.h"

namespace mmserve {

boost::beast::http::status HttpStatusFor(StatusCode code) {
  using boost::beast::http::status;
  switch (code) {
    case StatusCode::kOk: return status::ok;
    case StatusCode::kInvalidArgument:
    case StatusCode::kAlreadyExists:
    case StatusCode::kCancelled:
    case StatusCode::kFailedPrecondition: return status::bad_request;
    case StatusCode::kNotFound: return status::not_found;
    case StatusCode::kResourceExhausted: return status::too_many_requests;
    case StatusCode::kUnavailable: return status::service_unavailable;
    case StatusCode::kDeadlineExceeded: return status::gateway_timeout;
    case StatusCode::kUnimplemented: return status::not_implemented;
    case StatusCode::kInternal: return status::internal_server_error;
    case StatusCode::kUnauthenticated: return status::unauthorized;
    case StatusCode::kPermissionDenied: return status::forbidden;
  }
  return status::internal_server_error;
}

}  // namespace mmserve
