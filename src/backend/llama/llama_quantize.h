// `mmserve quantize IN.gguf OUT.gguf TYPE`: a GGUF model rewritten with smaller weights by
// llama.cpp's own quantizer (llama_model_quantize), so that a model the memory plan refuses can
// be made to fit in one command. The input is checked by ReadGguf first (gguf_summary.h): a cut
// or malformed file is an error that names it, before llama.cpp reads it. The output is written
// beside itself and renamed into place only when complete: a failed or interrupted run never
// leaves a file that looks like a model.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace mmserve {

// The types `QuantizeGguf` accepts (llama-quantize's names for the ones needing no importance
// matrix): Q4_K_M, Q8_0, F16...
std::vector<std::string> QuantizeTypes();

// The weights' bytes before and after, from the two files' headers.
struct Quantized {
  int64_t weights_before = 0, weights_after = 0;
};

// Quantizes `in` into `out` as `type` with `threads` threads (<= 0: all cores). The llama
// runtime must be held by the caller (a RuntimeLease). InvalidArgument for an unknown type, the
// same path twice or a bad input; Internal when llama.cpp fails.
Result<Quantized> QuantizeGguf(const std::string& in, const std::string& out,
                               std::string_view type, int threads);

}  // namespace mmserve
