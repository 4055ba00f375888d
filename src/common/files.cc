#include "common/files.h"

#include <fstream>

namespace mmserve {

Result<std::string> ReadFileBounded(const std::filesystem::path& path, int64_t max_bytes) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return NotFound("'" + path.string() + "' is not a readable file");
  }
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return NotFound("'" + path.string() + "': " + ec.message());
  if (size > static_cast<uint64_t>(max_bytes)) {
    return InvalidArgument("'" + path.string() + "' holds " + std::to_string(size) +
                           " bytes, more than the " + std::to_string(max_bytes) + " allowed");
  }
  std::ifstream in(path, std::ios::binary);
  std::string bytes(static_cast<size_t>(size), '\0');
  if (!in.read(bytes.data(), static_cast<std::streamsize>(size)) ||
      in.gcount() != static_cast<std::streamsize>(size)) {
    return NotFound("'" + path.string() + "' could not be read whole");
  }
  return bytes;
}

int64_t FileBytes(const std::filesystem::path& path) {
  if (path.empty()) return 0;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return 0;
  const auto size = std::filesystem::file_size(path, ec);
  return ec ? 0 : static_cast<int64_t>(size);
}

}  // namespace mmserve
