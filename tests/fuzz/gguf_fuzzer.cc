// Fuzzes the GGUF header check that stands before llama.cpp (backend/llama/gguf_summary.h): the
// input is written to an in-memory file and read as a model would be.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "backend/llama/gguf_summary.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const int fd = memfd_create("gguf-fuzz", 0);
  if (fd < 0) return 0;
  if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) return 0;
  (void)mmserve::ReadGguf("/proc/self/fd/" + std::to_string(fd));
  return 0;
}
