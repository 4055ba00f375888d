// The configuration users already write (issue #2's example), verbatim but for the path, which
// is relative to the YAML file: tests put a person_det.om next to it.
#pragma once

namespace mmserve::testing {

inline constexpr const char* kSeed = R"(global:
  device: 0
  memory_pool: 1024      # MB, 0 = no limit
  thread_num: 8
models:
  - name: person_det
    path: person_det.om
    device_id: 0
    batch_size: 1
    max_batch: 8
    dynamic_batch: true
    preprocess: resize_256_center_crop
    postprocess: nms_threshold_0.45
    timeout_ms: 200
    priority: high
    thread_num: 2
)";

}  // namespace mmserve::testing
