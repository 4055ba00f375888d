#include "backend/backend.h"

namespace mmserve {

std::string_view StageName(Stage stage) {
  switch (stage) {
    case Stage::kQueued: return "queued";
    case Stage::kPreprocess: return "preprocess";
    case Stage::kExecute: return "execute";
    case Stage::kPostprocess: return "postprocess";
  }
  return "unknown";
}

}  // namespace mmserve
