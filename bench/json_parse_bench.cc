// json_parse_bench: common/json.h ParseJson (a linear depth pre-scan, then nlohmann's DOM
// parser) against the depth check it replaced (nlohmann's callback parser, which scans the
// parent object again at the end of every nested object) and against nlohmann's parser with
// no depth check at all, on the worst body for the callback parser: one object whose N
// members are each an empty object (issue #40 F2). Google Benchmark fits the complexity.
//
//   build/bench/json_parse_bench
#include <string>

#include <benchmark/benchmark.h>

#include <nlohmann/json.hpp>

#include "common/json.h"

namespace mmserve {
namespace {

using nlohmann::json;

// {"m0":{},"m1":{},...}: 9 to 12 bytes a member.
std::string WideObject(int64_t members) {
  std::string text = "{";
  for (int64_t i = 0; i < members; ++i) {
    if (i > 0) text += ',';
    text += "\"m" + std::to_string(i) + "\":{}";
  }
  text += '}';
  return text;
}

void BM_ParseJson_Mmserve(benchmark::State& state) {
  const std::string text = WideObject(state.range(0));
  for (auto _ : state) {
    JsonError error;
    json value = ParseJson(text, &error);
    if (error != JsonError::kNone) state.SkipWithError("not parsed");
    benchmark::DoNotOptimize(value);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.SetComplexityN(state.range(0));
}
BENCHMARK(BM_ParseJson_Mmserve)->RangeMultiplier(2)->Range(12500, 400000)->Complexity();

// The depth check before issue #40: a callback that discards past the limit.
void BM_ParseJson_NlohmannCallback(benchmark::State& state) {
  const std::string text = WideObject(state.range(0));
  for (auto _ : state) {
    bool too_deep = false;
    const json::parser_callback_t guard = [&](int depth, json::parse_event_t event, json&) {
      if (depth >= kMaxJsonDepth && (event == json::parse_event_t::object_start ||
                                     event == json::parse_event_t::array_start)) {
        too_deep = true;
      }
      return !too_deep;
    };
    json value = json::parse(text.begin(), text.end(), guard, false);
    benchmark::DoNotOptimize(value);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.SetComplexityN(state.range(0));
}
// Quadratic: 50,000 members already take seconds, so the range stops there.
BENCHMARK(BM_ParseJson_NlohmannCallback)->RangeMultiplier(2)->Range(3125, 50000)->Complexity();

// nlohmann's DOM parser alone: what the pre-scan adds to it.
void BM_ParseJson_NlohmannNoDepthCheck(benchmark::State& state) {
  const std::string text = WideObject(state.range(0));
  for (auto _ : state) {
    json value = json::parse(text.begin(), text.end(), nullptr, false);
    benchmark::DoNotOptimize(value);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.SetComplexityN(state.range(0));
}
BENCHMARK(BM_ParseJson_NlohmannNoDepthCheck)->RangeMultiplier(2)->Range(12500, 400000)->Complexity();

}  // namespace
}  // namespace mmserve

BENCHMARK_MAIN();
