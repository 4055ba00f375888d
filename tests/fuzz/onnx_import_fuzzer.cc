// Fuzzes OpenCV 4.6's ONNX importer the way the server runs it (backend/file_probe.h): in a probe
// child, this binary started again, which imports the input with OpencvBackend::ProbeFile. A file
// that crashes the importer kills the child only (the corpus holds six that do); what must hold
// is the parent: every input answered, an import or the reason, and no crash here.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "backend/file_probe.h"
#include "backend/opencv/opencv_backend.h"
#include "common/strings.h"
#include "runtime/host_runtime.h"

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  if (*argc >= 5 && std::strcmp((*argv)[1], "probe") == 0) {
    const auto fd = mmserve::ParseInt64((*argv)[3]), rows = mmserve::ParseInt64((*argv)[4]);
    if (!fd || !rows) std::_Exit(2);
    mmserve::HostRuntime host;
    std::_Exit(mmserve::WriteProbeAnswer(
        mmserve::OpencvBackend(host).ProbeFile(static_cast<int>(*fd), *rows)));
  }
  mmserve::MarkProbeCapable();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto copy = mmserve::SealedCopy(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!copy.ok()) __builtin_trap();
  // No address-space limit: the child runs under AddressSanitizer, whose shadow needs terabytes.
  const mmserve::ProbeSpec spec{.backend = "opencv",
                                .arg = 2,
                                .what = "OpenCV 4.6's ONNX importer",
                                .file = "input.onnx",
                                .fd = copy->get(),
                                .address_space_bytes = 0,
                                .wall = std::chrono::seconds(8)};
  auto answer = mmserve::RunProbe(spec);
  // A child that could not be started says nothing of the input: the harness is broken.
  if (!answer.ok() && answer.status().code() == mmserve::StatusCode::kUnavailable) {
    __builtin_trap();
  }
  return 0;
}
