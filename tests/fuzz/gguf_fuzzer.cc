// Fuzzes the GGUF header check that stands before llama.cpp (backend/llama/gguf_summary.h): the
// input is written to an in-memory file and read as a model would be. A header it accepts must
// be one llama.cpp's own gguf reader accepts too, with the same tensor bytes.
#include <gguf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "backend/llama/gguf_summary.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A file of its own per input: ReadGguf keeps summaries by inode, size and times.
  const int fd = memfd_create("gguf-fuzz", 0);
  if (fd < 0) return 0;
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (pwrite(fd, data, size, 0) == static_cast<ssize_t>(size)) {
    auto summary = mmserve::ReadGguf(path);
    if (summary.ok()) {
      gguf_context* g = gguf_init_from_file(path.c_str(), {.no_alloc = true, .ctx = nullptr});
      if (!g) std::abort();  // accepted here, refused by llama.cpp
      int64_t bytes = 0;
      for (int64_t i = 0; i < gguf_get_n_tensors(g); ++i) bytes += gguf_get_tensor_size(g, i);
      gguf_free(g);
      if (bytes != summary->weights_bytes) std::abort();
    }
  }
  close(fd);
  return 0;
}
