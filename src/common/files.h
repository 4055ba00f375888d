// Whole-file reads with a size bound, for the files a config names (models, label lists).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "common/result.h"

namespace mmserve {

// The bytes of the regular file at `path`; an error that names the file when it cannot be read
// or holds more than `max_bytes`.
Result<std::string> ReadFileBounded(const std::filesystem::path& path, int64_t max_bytes);

// The size of the regular file at `path` (symlinks followed); 0 when there is none.
int64_t FileBytes(const std::filesystem::path& path);

}  // namespace mmserve
