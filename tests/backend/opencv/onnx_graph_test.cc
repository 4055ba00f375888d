#include "backend/opencv/onnx_graph.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/models.h"

namespace mmserve {
namespace {

using testing::GeneratedModel;
using ::testing::HasSubstr;
using testing::ReadFile;

TEST(OnnxGraphTest, ReadsInputsOutputsAndOperatorsWithoutTheInitializers) {
  auto graph = ReadOnnxGraph(ReadFile(GeneratedModel("classifier-tiny.onnx")));
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  EXPECT_EQ(graph->opset, 13);
  ASSERT_EQ(graph->inputs.size(), 1u);  // conv_w, conv_b, fc_w, fc_b are initializers
  EXPECT_EQ(graph->inputs[0].name, "images");
  EXPECT_EQ(graph->inputs[0].elem_type, 1);
  EXPECT_EQ(graph->inputs[0].shape, (Shape{-1, 3, 32, 32}));  // "N" is symbolic
  ASSERT_EQ(graph->outputs.size(), 1u);
  EXPECT_EQ(graph->outputs[0].name, "logits");
  EXPECT_EQ(graph->outputs[0].shape, (Shape{-1, 10}));
  std::vector<std::string> ops;
  for (const auto& n : graph->nodes) ops.push_back(n.op_type);
  EXPECT_EQ(ops,
            (std::vector<std::string>{"Conv", "Relu", "GlobalAveragePool", "Flatten", "Gemm"}));
}

TEST(OnnxGraphTest, AFixedBatchIsKept) {
  auto graph = ReadOnnxGraph(ReadFile(GeneratedModel("classifier-b4-tiny.onnx")));
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  EXPECT_EQ(graph->inputs[0].shape, (Shape{4, 3, 32, 32}));
}

TEST(OnnxGraphTest, EveryTruncationIsAnErrorNeverACrash) {
  const std::string bytes = ReadFile(GeneratedModel("detector-tiny.onnx"));
  int errors = 0;
  for (size_t n = 0; n < bytes.size(); n += 7) {
    auto graph = ReadOnnxGraph(std::string_view(bytes).substr(0, n));
    if (!graph.ok()) ++errors;
  }
  EXPECT_GT(errors, 0);
  auto text = ReadOnnxGraph("this is not a protobuf at all");
  ASSERT_FALSE(text.ok());
  EXPECT_THAT(std::string(text.status().message()), HasSubstr("not an ONNX model"));
  EXPECT_FALSE(ReadOnnxGraph("").ok());
}

}  // namespace
}  // namespace mmserve
