// json_codec_bench: the KServe v2 REST codec (server/http/json_codec.h) against nlohmann's DOM,
// the JSON library mmserve used before, on the H1 request (140 INT32 values, 1 KB) and its
// answer — side by side in one run (Google Benchmark).
//
//   build/bench/json_codec_bench
#include <benchmark/benchmark.h>

#include <nlohmann/json.hpp>

#include "server/http/json_codec.h"

namespace mmserve {
namespace {

std::string Body() {
  nlohmann::json data = nlohmann::json::array();
  for (int i = 100000; i < 100140; ++i) data.push_back(i);
  nlohmann::json body = {
      {"inputs", {{{"name", "X"}, {"datatype", "INT32"}, {"shape", {140}}, {"data", data}}}}};
  return body.dump();
}

void BM_ParseRequest_Mmserve(benchmark::State& state) {
  const std::string body = Body();
  for (auto _ : state) {
    auto parsed = ParseInferRequest(body, std::nullopt);
    if (!parsed.ok()) state.SkipWithError("parse failed");
    benchmark::DoNotOptimize(parsed);
  }
}
BENCHMARK(BM_ParseRequest_Mmserve);

// The peer: nlohmann's DOM parse and the walk that copies the values into a tensor's bytes.
void BM_ParseRequest_NlohmannDom(benchmark::State& state) {
  const std::string body = Body();
  for (auto _ : state) {
    auto doc = nlohmann::json::parse(body);
    std::string bytes;
    for (const auto& v : doc["inputs"][0]["data"]) {
      const auto i = v.get<int32_t>();
      bytes.append(reinterpret_cast<const char*>(&i), sizeof i);
    }
    benchmark::DoNotOptimize(bytes);
  }
}
BENCHMARK(BM_ParseRequest_NlohmannDom);

InferResponse Answer() {
  auto parsed = ParseInferRequest(Body(), std::nullopt);
  InferResponse response;
  Tensor out = parsed->request.inputs[0];
  out.set_name("Y");
  response.outputs.push_back(std::move(out));
  return response;
}

void BM_EncodeAnswer_Mmserve(benchmark::State& state) {
  const InferResponse response = Answer();
  ResponseContext ctx;
  ctx.model_name = "echo";
  for (auto _ : state) benchmark::DoNotOptimize(EncodeInferResponse(response, ctx));
}
BENCHMARK(BM_EncodeAnswer_Mmserve);

void BM_EncodeAnswer_NlohmannDom(benchmark::State& state) {
  const InferResponse response = Answer();
  const Tensor& t = response.outputs[0];
  for (auto _ : state) {
    nlohmann::json data = nlohmann::json::array();
    for (size_t i = 0; i < t.data().size() / 4; ++i) {
      int32_t v;
      std::memcpy(&v, t.data().data() + 4 * i, 4);
      data.push_back(v);
    }
    nlohmann::json doc = {{"model_name", "echo"}, {"model_version", "1"},
                          {"outputs", {{{"name", t.name()}, {"datatype", "INT32"},
                                        {"shape", t.shape()}, {"data", std::move(data)}}}}};
    benchmark::DoNotOptimize(doc.dump());
  }
}
BENCHMARK(BM_EncodeAnswer_NlohmannDom);

}  // namespace
}  // namespace mmserve

BENCHMARK_MAIN();
