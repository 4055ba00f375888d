// WithImageStages in a build without OpenCV: validation already refuses preprocess and
// postprocess there (backend_registry.cc); a load that gets here anyway says why.
#include "backend/vision/vision_session.h"

namespace mmserve {

Result<std::unique_ptr<Session>> WithImageStages(std::unique_ptr<Session>, const ModelConfig&) {
  return Unimplemented(
      "preprocess and postprocess need OpenCV, which this mmserve is built without");
}

}  // namespace mmserve
