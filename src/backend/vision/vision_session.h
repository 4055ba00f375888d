// The image stages around a network: WithImageStages wraps a loaded batch session so that its
// requests carry encoded images and its answers carry post-processed outputs, as the model's
// `preprocess:` / `postprocess:` say (config/vision_config.h, docs/VISION.md). The backend
// underneath (acl, opencv, identity) sees only tensors; the stages run on the model's worker
// threads, inside the execution the scheduler hands them (stages preprocess → execute →
// postprocess, as the watchdog reports them).
//
//   signature: the network's image input becomes IMAGE (BYTES [-1]: one encoded JPEG, PNG, BMP
//   or WebP per element, one batch row each); its outputs become the post-processor's.
#pragma once

#include <memory>

#include "backend/backend.h"

namespace mmserve {

// The name of the encoded-image input a pre-processing model takes.
inline constexpr char kImageInput[] = "IMAGE";

// Wraps `network`, a batch session of `model`, whose preprocess or postprocess is set. An
// InvalidArgument names what does not fit the network's signature (checked at load).
Result<std::unique_ptr<Session>> WithImageStages(std::unique_ptr<Session> network,
                                                 const ModelConfig& model);

}  // namespace mmserve
