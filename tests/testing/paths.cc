#include "testing/paths.h"

namespace mmserve::testing {

const std::string& SourceDir() {
  static const std::string kDir = MMSERVE_SOURCE_DIR;
  return kDir;
}

const std::string& MmserveBinary() {
  static const std::string kBinary = MMSERVE_BINARY;
  return kBinary;
}

}  // namespace mmserve::testing
