// Fuzzes the small readers every config and request goes through: durations, integers, UTF-8
// repair and the depth-limited JSON parser with its dump and quote.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/json.h"
#include "common/strings.h"
#include "config/config_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (auto d = mmserve::ParseDuration(text); d && *d && (d->value().count() < 0 ||
                                                          d->value().count() > mmserve::kMaxDurationMs)) {
    std::abort();  // a duration out of its documented range
  }
  (void)mmserve::ParseInt64(text);
  const std::string repaired = mmserve::ToValidUtf8(text);
  if (!mmserve::IsValidUtf8(repaired)) std::abort();
  (void)mmserve::Abbreviate(text, 7);
  mmserve::JsonError error;
  const nlohmann::json j = mmserve::ParseJson(text, &error);
  if (!j.is_discarded()) {
    (void)mmserve::DumpJson(j);
    (void)mmserve::QuoteJson(j);
  }
  return 0;
}
