#include "backend/llama/llama_quantize.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <utility>

#include "backend/llama/gguf_summary.h"
#include "common/strings.h"
#include "llama.h"

namespace mmserve {
namespace {

constexpr std::array<std::pair<std::string_view, llama_ftype>, 16> kTypes = {{
    {"Q4_K_M", LLAMA_FTYPE_MOSTLY_Q4_K_M}, {"Q4_K_S", LLAMA_FTYPE_MOSTLY_Q4_K_S},
    {"Q5_K_M", LLAMA_FTYPE_MOSTLY_Q5_K_M}, {"Q5_K_S", LLAMA_FTYPE_MOSTLY_Q5_K_S},
    {"Q6_K", LLAMA_FTYPE_MOSTLY_Q6_K},     {"Q8_0", LLAMA_FTYPE_MOSTLY_Q8_0},
    {"Q3_K_M", LLAMA_FTYPE_MOSTLY_Q3_K_M}, {"Q3_K_S", LLAMA_FTYPE_MOSTLY_Q3_K_S},
    {"Q3_K_L", LLAMA_FTYPE_MOSTLY_Q3_K_L}, {"Q2_K", LLAMA_FTYPE_MOSTLY_Q2_K},
    {"Q4_0", LLAMA_FTYPE_MOSTLY_Q4_0},     {"Q4_1", LLAMA_FTYPE_MOSTLY_Q4_1},
    {"Q5_0", LLAMA_FTYPE_MOSTLY_Q5_0},     {"Q5_1", LLAMA_FTYPE_MOSTLY_Q5_1},
    {"F16", LLAMA_FTYPE_MOSTLY_F16},       {"BF16", LLAMA_FTYPE_MOSTLY_BF16},
}};

}  // namespace

std::vector<std::string> QuantizeTypes() {
  std::vector<std::string> names;
  for (const auto& [name, type] : kTypes) names.emplace_back(name);
  return names;
}

Result<Quantized> QuantizeGguf(const std::string& in, const std::string& out,
                               std::string_view type, int threads) {
  const auto* found = std::find_if(kTypes.begin(), kTypes.end(),
                                   [&](const auto& t) { return t.first == type; });
  if (found == kTypes.end()) {
    return InvalidArgument("TYPE: '" + Abbreviate(ToValidUtf8(type)) + "' is not one of " +
                           Join(QuantizeTypes(), ", "));
  }
  std::error_code ec;
  if (std::filesystem::equivalent(in, out, ec)) {
    return InvalidArgument("OUT is IN ('" + out + "'): write the quantized file elsewhere");
  }
  MMS_ASSIGN_OR_RETURN(const GgufSummary before, ReadGguf(in));
  const std::string part = out + ".part";
  llama_model_quantize_params params = llama_model_quantize_default_params();
  params.nthread = threads;
  params.ftype = found->second;
  params.allow_requantize = false;  // from F32/F16/BF16 only: requantizing loses accuracy twice
  const uint32_t rc = llama_model_quantize(in.c_str(), part.c_str(), &params);
  if (rc != 0) {
    ::unlink(part.c_str());
    return Internal("llama.cpp could not quantize '" + in + "' to " + std::string(type) +
                    " (see its log above)");
  }
  auto after = ReadGguf(part);  // what was written must read back as a model
  if (!after.ok()) {
    ::unlink(part.c_str());
    return Internal("the quantized file does not read back: " +
                    std::string(after.status().message()));
  }
  std::filesystem::rename(part, out, ec);
  if (ec) {
    ::unlink(part.c_str());
    return Internal("cannot rename '" + part + "' to '" + out + "': " + ec.message());
  }
  return Quantized{.weights_before = before.weights_bytes, .weights_after = after->weights_bytes};
}

}  // namespace mmserve
