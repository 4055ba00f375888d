// The one place that maps StatusCode to an HTTP status (Triton's table, plus 429 for a full
// queue and 504 for an expired deadline).
#pragma once

#include <boost/beast/http/status.hpp>

#include "common/status.h"

namespace mmserve {

boost::beast::http::status HttpStatusFor(StatusCode code);

}  // namespace mmserve
