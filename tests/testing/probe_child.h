// A test binary as its own probe child. File probes (backend/file_probe.h) run
// `/proc/self/exe probe BACKEND FD ARG ...`; in a test, /proc/self/exe is the test. A test whose
// backends probe files defines its own main (instead of gmock_main's):
//
//   int main(int argc, char** argv) {
//     return mmserve::testing::ProbeOrTest(argc, argv, [](int fd, int64_t arg) { ... });
//   }
//
// Started as the child, it runs the probe and writes its answer; otherwise it runs the tests.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string_view>

#include "backend/file_probe.h"
#include "common/strings.h"

namespace mmserve::testing {

template <typename Probe>
int ProbeOrTest(int argc, char** argv, Probe probe) {
  if (argc >= 5 && std::string_view(argv[1]) == "probe") {
    const auto fd = ParseInt64(argv[3]), arg = ParseInt64(argv[4]);
    if (!fd || !arg) return 2;
    return WriteProbeAnswer(probe(static_cast<int>(*fd), *arg));
  }
  MarkProbeCapable();
  ::testing::InitGoogleMock(&argc, argv);
  return RUN_ALL_TESTS();
}

}  // namespace mmserve::testing
