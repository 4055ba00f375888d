// Where the tests find the source tree and the mmserve binary under test. Their absolute paths
// are compiled into paths.cc alone: every other test file then compiles to the same command in
// any clone, so ccache (CCACHE_BASEDIR) serves a fresh clone what another one compiled.
#pragma once

#include <string>

namespace mmserve::testing {

const std::string& SourceDir();      // the checkout's root
const std::string& MmserveBinary();  // build/src/app/mmserve of this build tree

}  // namespace mmserve::testing
