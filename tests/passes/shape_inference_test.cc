// Tests of the shape-inference pass: Before/Expected IR per op family, symbolic shapes
// through a BERT-like Shape->Gather->Unsqueeze->Concat->Reshape chain, specialization by
// PassContext, declared-vs-inferred mismatches, does-nothing and idempotence cases, and
// agreement of every inferred static type with what the reference executor produces.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kiln/ir/ops.h"
#include "kiln/onnx/importer.h"
#include "passes/shape_inference_internal.h"
#include "tests/passes/pass_test_util.h"

namespace kiln {
namespace {

using testing::ExpectNoChange;
using testing::ExpectRewrite;
using testing::OutType;
using testing::Parse;
using testing::RunPass;

constexpr char kPass[] = "shape-inference";

// Runs the pass on `text` and returns its status (for error cases).
absl::Status RunStatus(const std::string& text, PassContext ctx = {}) {
  auto g = Parse(text);
  if (!g) return absl::InternalError("parse error");
  return CreatePass(kPass)->Run(*g, ctx).status();
}

// Makes every non-constant value a graph output, runs the reference executor and checks
// that each value's (static) inferred type is exactly the produced dtype and dims.
void ExpectTypesMatchExecution(Graph& g, const absl::flat_hash_map<std::string, Tensor>& feeds) {
  const size_t first = g.outputs().size();
  std::vector<Value> values;
  for (const auto& p : g.nodes()) {
    if (p->is_constant()) continue;
    for (int i = 0; i < p->num_outputs(); ++i) {
      values.push_back(p->output(i));
      g.AddOutput(absl::StrCat("value_", values.size()), p->output(i));
    }
  }
  auto results = RunReference(g, feeds);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), first + values.size());
  for (size_t k = 0; k < values.size(); ++k) {
    const Type& t = values[k].type();
    const Tensor& r = (*results)[first + k];
    const std::string what = absl::StrCat(values[k].node->Describe(), " output ", values[k].index);
    ASSERT_TRUE(t.is_static()) << what << " has type " << t.ToString();
    EXPECT_EQ(t.dtype, r.dtype()) << what;
    EXPECT_EQ(*t.StaticDims(), r.dims()) << what << " is " << t.ToString();
  }
}

// ---------------------------------------------------------------------------------------
// Elementwise family.

TEST(ShapeInferenceTest, ElementwiseBroadcastComparisonCastWhere) {
  ExpectRewrite(kPass, R"(graph g opset=21 {
  %0 = Input() : f32[batch,1,4] "x"
  %1 = Input() : f32[3,1] "y"
  %2 = Add(%0, %1)
  %3 = Less(%2, %1)
  %4 = Cast(%3) {to=7}
  %5 = Where(%3, %0, %2)
  %6 = Relu(%5)
  %7 = IsNaN(%6)
  %8 = CastLike(%4, %6)
  return "a": %4, "b": %7, "c": %8
})",
                R"(graph g opset=21 {
  %0 = Input() : f32[batch,1,4] "x"
  %1 = Input() : f32[3,1] "y"
  %2 = Add(%0, %1) : f32[batch,3,4]
  %3 = Less(%2, %1) : bool[batch,3,4]
  %4 = Cast(%3) {to=7} : i64[batch,3,4]
  %5 = Where(%3, %0, %2) : f32[batch,3,4]
  %6 = Relu(%5) : f32[batch,3,4]
  %7 = IsNaN(%6) : bool[batch,3,4]
  %8 = CastLike(%4, %6) : f32[batch,3,4]
  return "a": %4, "b": %7, "c": %8
})");
}

TEST(ShapeInferenceTest, SymbolicBroadcasting) {
  auto add = [](const std::string& a, const std::string& b) {
    return OutType(
        absl::StrCat("graph g opset=21 {\n  %0 = Input() : f32", a, " \"a\"\n  %1 = Input() : f32",
                     b, " \"b\"\n  %2 = Add(%0, %1)\n  return \"y\": %2\n}"),
        "y");
  };
  EXPECT_EQ(add("[batch,sequence]", "[sequence]"), "f32[batch,sequence]");
  EXPECT_EQ(add("[s]", "[1]"), "f32[s]");
  EXPECT_EQ(add("[s]", "[5]"), "f32[5]");  // s must be 1 or 5
  EXPECT_EQ(add("[?]", "[5]"), "f32[5]");
  EXPECT_EQ(add("[s]", "[t]"), "f32[?]");  // either may be 1: not known
  EXPECT_EQ(add("[s]", "[?]"), "f32[?]");
  EXPECT_EQ(add("[2,s]", "[*]"), "f32[*]");  // unknown rank
  EXPECT_EQ(add("[0]", "[1]"), "f32[0]");
  EXPECT_EQ(add("[]", "[3,1]"), "f32[3,1]");
  EXPECT_EQ(RunStatus("graph g opset=21 {\n  %0 = Input() : f32[3] \"a\"\n"
                      "  %1 = Input() : f32[4] \"b\"\n  %2 = Add(%0, %1) @ \"bad_add\"\n"
                      "  return \"y\": %2\n}")
                .message(),
            "node 'bad_add' (Add, opset 21): cannot broadcast dims 3 and 4");
}

TEST(ShapeInferenceTest, DropoutLayerNormSoftmaxAndFriends) {
  ExpectRewrite(kPass, R"(graph g opset=21 {
  %0 = Input() : f32[batch,seq,8] "x"
  %1 = Input() : f32[8] "scale"
  %2, %3, %4 = LayerNormalization(%0, %1, %1) {axis=-1}
  %5, %6 = Dropout(%2)
  %7 = Softmax(%5) {axis=1}
  %8 = Clip(%7, _, _)
  %9 = Gelu(%8)
  %10 = Trilu(%9)
  %11 = Constant() {value=tensor<i64[]>[1]} : i64[]
  %12 = CumSum(%10, %11)
  %13 = Identity(%12)
  %14 = LogSoftmax(%13) {axis=-1}
  %15, %16 = LayerNormalization(%0, %1) {axis=1, stash_type=11}
  return "y": %14, "m": %3, "s": %4, "mask": %6, "m2": %16
})",
                R"(graph g opset=21 {
  %0 = Input() : f32[batch,seq,8] "x"
  %1 = Input() : f32[8] "scale"
  %2, %3, %4 = LayerNormalization(%0, %1, %1) {axis=-1} : f32[batch,seq,8], f32[batch,seq,1], f32[batch,seq,1]
  %5, %6 = Dropout(%2) : f32[batch,seq,8], bool[batch,seq,8]
  %7 = Softmax(%5) {axis=1} : f32[batch,seq,8]
  %8 = Clip(%7, _, _) : f32[batch,seq,8]
  %9 = Gelu(%8) : f32[batch,seq,8]
  %10 = Trilu(%9) : f32[batch,seq,8]
  %11 = Constant() {value=tensor<i64[]>[1]} : i64[]
  %12 = CumSum(%10, %11) : f32[batch,seq,8]
  %13 = Identity(%12) : f32[batch,seq,8]
  %14 = LogSoftmax(%13) {axis=-1} : f32[batch,seq,8]
  %15, %16 = LayerNormalization(%0, %1) {axis=1, stash_type=11} : f32[batch,seq,8], f64[batch,1,1]
  return "y": %14, "m": %3, "s": %4, "mask": %6, "m2": %16
})");
  EXPECT_EQ(RunStatus("graph g opset=21 {\n  %0 = Input() : f32[2,3] \"x\"\n"
                      "  %1 = Softmax(%0) {axis=2}\n  return \"y\": %1\n}")
                .message(),
            "node '#1' (Softmax, opset 21): axis 2 is out of range for rank 2");
}

// ---------------------------------------------------------------------------------------
// Vision family: sizes from the window geometry (include/kiln/ir/window.h), symbolic batch
// kept, an unknown spatial dim unknown.

TEST(ShapeInferenceTest, ConvPoolsAndBlockMoves) {
  ExpectRewrite(kPass, R"(graph g opset=21 {
  %0 = Input() : f32[batch,3,32,h] "x"
  %1 = Input() : f32[8,3,4,4] "w"
  %2 = Conv(%0, %1) {strides=[4, 4]}
  %3 = MaxPool(%2) {kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]}
  %4 = AveragePool(%2) {kernel_shape=[2, 2], auto_pad="SAME_UPPER", strides=[3, 3]}
  %5 = Input() : f32[8,2,3,3] "wt"
  %6 = ConvTranspose(%2, %5) {strides=[2, 2], group=2}
  %7 = GlobalAveragePool(%2)
  %8 = DepthToSpace(%2) {blocksize=2}
  %9 = SpaceToDepth(%2) {blocksize=2}
  return "y": %3, "a": %4, "t": %6, "gp": %7, "d2s": %8, "s2d": %9
})",
                R"(graph g opset=21 {
  %0 = Input() : f32[batch,3,32,h] "x"
  %1 = Input() : f32[8,3,4,4] "w"
  %2 = Conv(%0, %1) {strides=[4, 4]} : f32[batch,8,8,?]
  %3 = MaxPool(%2) {kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]} : f32[batch,8,4,?]
  %4 = AveragePool(%2) {auto_pad="SAME_UPPER", kernel_shape=[2, 2], strides=[3, 3]} : f32[batch,8,3,?]
  %5 = Input() : f32[8,2,3,3] "wt"
  %6 = ConvTranspose(%2, %5) {group=2, strides=[2, 2]} : f32[batch,4,17,?]
  %7 = GlobalAveragePool(%2) : f32[batch,8,1,1]
  %8 = DepthToSpace(%2) {blocksize=2} : f32[batch,2,16,?]
  %9 = SpaceToDepth(%2) {blocksize=2} : f32[batch,32,4,?]
  return "y": %3, "a": %4, "t": %6, "gp": %7, "d2s": %8, "s2d": %9
})");
  EXPECT_EQ(RunStatus("graph g opset=21 {\n  %0 = Input() : f32[1,1,2,2] \"x\"\n"
                      "  %1 = MaxPool(%0) {kernel_shape=[3, 3]}\n  return \"y\": %1\n}")
                .message(),
            "node '#1' (MaxPool, opset 21): the window of spatial dim 0 (3 with dilation) is "
            "larger than the padded input (2)");
}

// ---------------------------------------------------------------------------------------
// Math family.

TEST(ShapeInferenceTest, MatMulAndGemm) {
  ExpectRewrite(kPass, R"(graph g opset=21 {
  %0 = Input() : f32[batch,4,seq,16] "q"
  %1 = Input() : f32[batch,4,16,seq] "k"
  %2 = MatMul(%0, %1)
  %3 = Input() : f32[16] "v"
  %4 = MatMul(%0, %3)
  %5 = MatMul(%3, %1)
  %6 = Input() : f32[7,1,2,3] "a"
  %7 = Input() : f32[5,3,6] "b"
  %8 = MatMul(%6, %7)
  %9 = Input() : f32[2,3] "ga"
  %10 = Input() : f32[4,3] "gb"
  %11 = Gemm(%9, %10, _) {transB=1}
  return "y": %2, "y2": %4, "y3": %5, "y4": %8, "y5": %11
})",
                R"(graph g opset=21 {
  %0 = Input() : f32[batch,4,seq,16] "q"
  %1 = Input() : f32[batch,4,16,seq] "k"
  %2 = MatMul(%0, %1) : f32[batch,4,seq,seq]
  %3 = Input() : f32[16] "v"
  %4 = MatMul(%0, %3) : f32[batch,4,seq]
  %5 = MatMul(%3, %1) : f32[batch,4,seq]
  %6 = Input() : f32[7,1,2,3] "a"
  %7 = Input() : f32[5,3,6] "b"
  %8 = MatMul(%6, %7) : f32[7,5,2,6]
  %9 = Input() : f32[2,3] "ga"
  %10 = Input() : f32[4,3] "gb"
  %11 = Gemm(%9, %10, _) {transB=1} : f32[2,4]
  return "y": %2, "y2": %4, "y3": %5, "y4": %8, "y5": %11
})");
  EXPECT_EQ(RunStatus("graph g opset=21 {\n  %0 = Input() : f32[2,3] \"a\"\n"
                      "  %1 = Input() : f32[4,5] \"b\"\n  %2 = MatMul(%0, %1)\n"
                      "  return \"y\": %2\n}")
                .message(),
            "node '#2' (MatMul, opset 21): inner dimensions differ: 3 vs 4");
}

TEST(ShapeInferenceTest, Reductions) {
  auto reduce = [](const std::string& x, const std::string& axes, const std::string& attrs) {
    std::string text = absl::StrCat("graph g opset=21 {\n  %0 = Input() : f32", x, " \"x\"\n");
    if (axes == "input") {
      absl::StrAppend(&text, "  %1 = Input() : i64[1] \"axes\"\n");
    } else if (!axes.empty()) {
      absl::StrAppend(&text, "  %1 = Constant() {value=tensor<i64[", axes == "[]" ? "0" : "2", "]>",
                      axes, "} : i64[", axes == "[]" ? "0" : "2", "]\n");
    }
    absl::StrAppend(&text, "  %2 = ReduceMean(%0", axes.empty() ? "" : ", %1", ") ", attrs,
                    "\n  return \"y\": %2\n}");
    return OutType(text, "y");
  };
  EXPECT_EQ(reduce("[2,3,4]", "[0, -1]", ""), "f32[1,3,1]");
  EXPECT_EQ(reduce("[2,3,4]", "[0, -1]", "{keepdims=0}"), "f32[3]");
  EXPECT_EQ(reduce("[2,3,4]", "", ""), "f32[1,1,1]");
  EXPECT_EQ(reduce("[2,3,4]", "", "{keepdims=0}"), "f32[]");
  EXPECT_EQ(reduce("[2,3,4]", "", "{noop_with_empty_axes=1}"), "f32[2,3,4]");
  EXPECT_EQ(reduce("[2,3,4]", "[]", "{noop_with_empty_axes=1}"), "f32[2,3,4]");
  EXPECT_EQ(reduce("[b,1,4]", "input", ""), "f32[?,1,?]");
  EXPECT_EQ(reduce("[b,1,4]", "input", "{keepdims=0}"), "f32[?,?]");
  EXPECT_EQ(reduce("[*]", "[0, 1]", ""), "f32[*]");
  EXPECT_EQ(OutType("graph g opset=21 {\n  %0 = Input() : f32[2,s,4] \"x\"\n"
                    "  %1 = ArgMax(%0) {axis=1, keepdims=0}\n  return \"y\": %1\n}",
                    "y"),
            "i64[2,4]");
  EXPECT_FALSE(RunStatus("graph g opset=21 {\n  %0 = Input() : f32[2,3] \"x\"\n"
                         "  %1 = Constant() {value=tensor<i64[1]>[2]} : i64[1]\n"
                         "  %2 = ReduceSum(%0, %1)\n  return \"y\": %2\n}")
                   .ok());
}

// ---------------------------------------------------------------------------------------
// Data movement and shape family.

TEST(ShapeInferenceTest, MovementOps) {
  ExpectRewrite(kPass, R"(graph g opset=21 {
  %0 = Input() : f32[5,6] "x"
  %1 = Input() : i64[batch,3] "ids"
  %2 = Gather(%0, %1) {axis=1}
  %3 = Transpose(%2)
  %4 = Constant() {value=tensor<i64[2]>[0, -1]} : i64[2]
  %5 = Unsqueeze(%0, %4)
  %6 = Constant() {value=tensor<i64[1]>[0]} : i64[1]
  %7 = Squeeze(%5, %6)
  %8 = Squeeze(%5)
  %9 = Flatten(%2) {axis=2}
  %10 = Constant() {value=tensor<i64[3]>[2, 1, 1]} : i64[3]
  %11 = Expand(%0, %10)
  %12 = Concat(%0, %0) {axis=-1}
  %13 = Constant() {value=tensor<i64[2]>[4, 8]} : i64[2]
  %14, %15 = Split(%12, %13) {axis=1}
  %16, %17, %18 = Split(%0) {axis=0}
  %19 = Shape(%2) {start=1}
  %20 = ConstantOfShape(%13) {value=tensor<i64[1]>[7]}
  %21 = ConstantOfShape(%13)
  return "a": %3, "b": %7, "c": %8, "d": %9, "e": %11, "f": %14, "g": %15, "h": %16, "i": %18, "j": %19, "k": %20, "l": %21
})",
                R"(graph g opset=21 {
  %0 = Input() : f32[5,6] "x"
  %1 = Input() : i64[batch,3] "ids"
  %2 = Gather(%0, %1) {axis=1} : f32[5,batch,3]
  %3 = Transpose(%2) : f32[3,batch,5]
  %4 = Constant() {value=tensor<i64[2]>[0, -1]} : i64[2]
  %5 = Unsqueeze(%0, %4) : f32[1,5,6,1]
  %6 = Constant() {value=tensor<i64[1]>[0]} : i64[1]
  %7 = Squeeze(%5, %6) : f32[5,6,1]
  %8 = Squeeze(%5) : f32[5,6]
  %9 = Flatten(%2) {axis=2} : f32["5*batch",3]
  %10 = Constant() {value=tensor<i64[3]>[2, 1, 1]} : i64[3]
  %11 = Expand(%0, %10) : f32[2,5,6]
  %12 = Concat(%0, %0) {axis=-1} : f32[5,12]
  %13 = Constant() {value=tensor<i64[2]>[4, 8]} : i64[2]
  %14, %15 = Split(%12, %13) {axis=1} : f32[5,4], f32[5,8]
  %16, %17, %18 = Split(%0) {axis=0} : f32[2,6], f32[2,6], f32[1,6]
  %19 = Shape(%2) {start=1} : i64[2]
  %20 = ConstantOfShape(%13) {value=tensor<i64[1]>[7]} : i64[4,8]
  %21 = ConstantOfShape(%13) : f32[4,8]
  return "a": %3, "b": %7, "c": %8, "d": %9, "e": %11, "f": %14, "g": %15, "h": %16, "i": %18, "j": %19, "k": %20, "l": %21
})");
}

TEST(ShapeInferenceTest, SymbolicMovement) {
  const std::string head =
      "graph g opset=21 {\n  %0 = Input() : f32[batch,sequence] \"x\"\n"
      "  %1 = Input() : f32[batch,3] \"w\"\n";
  EXPECT_EQ(OutType(head + "  %2 = Concat(%0, %1, %0) {axis=1}\n  return \"y\": %2\n}", "y"),
            "f32[batch,2*sequence+3]");
  EXPECT_EQ(OutType(head + "  %2 = Squeeze(%0)\n  return \"y\": %2\n}", "y"),
            "f32[*]");  // batch or sequence may be 1
  EXPECT_EQ(OutType("graph g opset=21 {\n  %0 = Input() : f32[2,\"2*s\"] \"x\"\n"
                    "  %1, %2 = Split(%0) {axis=1}\n  return \"y\": %2\n}",
                    "y"),
            "f32[2,s]");
  EXPECT_EQ(OutType("graph g opset=21 {\n  %0 = Input() : f32[2,s] \"x\"\n"
                    "  %1, %2 = Split(%0) {axis=1}\n  return \"y\": %2\n}",
                    "y"),
            "f32[2,?]");  // s may be odd
  EXPECT_EQ(OutType("graph g opset=21 {\n  %0 = Input() : f32[2,3] \"x\"\n"
                    "  %1 = Input() : f32[2,4] \"w\"\n"
                    "  %2 = Concat(%0, %1) {axis=0} @ \"cat\"\n  return \"y\": %2\n}",
                    "y"),
            "error: node 'cat' (Concat, opset 21): inputs differ in dim 1: 3 vs 4");
}

TEST(ShapeInferenceTest, Slice) {
  auto slice = [](const std::string& x, const std::string& starts, const std::string& ends,
                  const std::string& axes, const std::string& steps) {
    std::string text = absl::StrCat("graph g opset=21 {\n  %0 = Input() : f32", x, " \"x\"\n");
    int n = 1;
    std::vector<std::string> operands = {"%0"};
    for (const std::string* p : {&starts, &ends, &axes, &steps}) {
      if (p->empty()) {
        operands.push_back("_");
        continue;
      }
      absl::StrAppend(&text, "  %", n, " = Constant() {value=tensor<i64[1]>[", *p, "]} : i64[1]\n");
      operands.push_back(absl::StrCat("%", n++));
    }
    absl::StrAppend(&text, "  %9 = Slice(", absl::StrJoin(operands, ", "),
                    ")\n  return \"y\": %9\n}");
    return OutType(text, "y");
  };
  EXPECT_EQ(slice("[10,20]", "1", "-1", "1", "2"), "f32[10,9]");
  EXPECT_EQ(slice("[10,20]", "-1", "-9223372036854775808", "0", "-1"), "f32[10,20]");
  EXPECT_EQ(slice("[10,20]", "-3", "9223372036854775807", "", ""), "f32[3,20]");
  EXPECT_EQ(slice("[10,20]", "5", "2", "", ""), "f32[0,20]");
  EXPECT_EQ(slice("[0,20]", "0", "1", "", "-1"), "f32[0,20]");
  EXPECT_EQ(slice("[batch,sequence]", "0", "9223372036854775807", "1", ""), "f32[batch,sequence]");
  EXPECT_EQ(slice("[batch,sequence]", "1", "9223372036854775807", "1", ""), "f32[batch,?]");
  EXPECT_EQ(slice("[batch,sequence]", "0", "4", "1", ""), "f32[batch,?]");  // min(4, sequence)
  EXPECT_EQ(slice("[batch,sequence]", "-1", "-9223372036854775808", "-1", "-1"),
            "f32[batch,sequence]");
  EXPECT_EQ(slice("[10,20]", "0", "4", "1", "0"),
            "error: node '#5' (Slice, opset 21): Slice step must not be 0");
}

// The BERT attention chain: the Reshape target is computed from the input's own Shape.
constexpr char kAttentionChain[] = R"(graph g opset=14 {
  %0 = Input() : f32[batch,sequence,64] "x"
  %1 = Shape(%0)
  %2 = Constant() {value=tensor<i64[]>[0]} : i64[]
  %3 = Gather(%1, %2) {axis=0}
  %4 = Constant() {value=tensor<i64[1]>[0]} : i64[1]
  %5 = Unsqueeze(%3, %4)
  %6 = Constant() {value=tensor<i64[]>[1]} : i64[]
  %7 = Gather(%1, %6) {axis=0}
  %8 = Unsqueeze(%7, %4)
  %9 = Constant() {value=tensor<i64[2]>[4, 16]} : i64[2]
  %10 = Concat(%5, %8, %9) {axis=0}
  %11 = Reshape(%0, %10)
  %12 = Transpose(%11) {perm=[0, 2, 1, 3]}
  %13 = Transpose(%12) {perm=[0, 2, 1, 3]}
  %14 = Constant() {value=tensor<i64[1]>[64]} : i64[1]
  %15 = Concat(%5, %8, %14) {axis=0}
  %16 = Reshape(%13, %15)
  return "heads": %12, "merged": %16
})";

TEST(ShapeInferenceTest, SymbolicAttentionReshapeChain) {
  ExpectRewrite(kPass, kAttentionChain, R"(graph g opset=14 {
  %0 = Input() : f32[batch,sequence,64] "x"
  %1 = Shape(%0) : i64[3]
  %2 = Constant() {value=tensor<i64[]>[0]} : i64[]
  %3 = Gather(%1, %2) {axis=0} : i64[]
  %4 = Constant() {value=tensor<i64[1]>[0]} : i64[1]
  %5 = Unsqueeze(%3, %4) : i64[1]
  %6 = Constant() {value=tensor<i64[]>[1]} : i64[]
  %7 = Gather(%1, %6) {axis=0} : i64[]
  %8 = Unsqueeze(%7, %4) : i64[1]
  %9 = Constant() {value=tensor<i64[2]>[4, 16]} : i64[2]
  %10 = Concat(%5, %8, %9) {axis=0} : i64[4]
  %11 = Reshape(%0, %10) : f32[batch,sequence,4,16]
  %12 = Transpose(%11) {perm=[0, 2, 1, 3]} : f32[batch,4,sequence,16]
  %13 = Transpose(%12) {perm=[0, 2, 1, 3]} : f32[batch,sequence,4,16]
  %14 = Constant() {value=tensor<i64[1]>[64]} : i64[1]
  %15 = Concat(%5, %8, %14) {axis=0} : i64[3]
  %16 = Reshape(%13, %15) : f32[batch,sequence,64]
  return "heads": %12, "merged": %16
})");
  // The pass only sets types: the graph computes the same thing (exactly) afterwards.
  testing::ExpectNumericallyEquivalent(kPass, kAttentionChain, {}, {{"batch", 2}, {"sequence", 3}});
}

TEST(ShapeInferenceTest, ReshapeMinusOneAndZero) {
  auto reshape = [](const std::string& x, const std::string& shape, const std::string& attrs = "") {
    const int n = static_cast<int>(std::count(shape.begin(), shape.end(), ',')) + 1;
    return OutType(
        absl::StrCat("graph g opset=21 {\n  %0 = Input() : f32", x, " \"x\"\n",
                     "  %1 = Constant() {value=tensor<i64[", n, "]>[", shape, "]} : i64[", n,
                     "]\n  %2 = Reshape(%0, %1) ", attrs, "\n  return \"y\": %2\n}"),
        "y");
  };
  EXPECT_EQ(reshape("[batch,sequence,64]", "0, 0, -1, 16"), "f32[batch,sequence,4,16]");
  EXPECT_EQ(reshape("[batch,sequence,64]", "-1, 64"), "f32[batch*sequence,64]");
  EXPECT_EQ(reshape("[batch,sequence,64]", "-1, 128"), "f32[(batch*sequence)/2,128]");
  EXPECT_EQ(reshape("[?,sequence,64]", "0, 0, 4, -1"), "f32[?,sequence,4,16]");  // ? cancels
  EXPECT_EQ(reshape("[?,sequence,64]", "-1, 64"), "f32[?,64]");
  EXPECT_EQ(reshape("[2,3,4]", "4, -1"), "f32[4,6]");
  EXPECT_EQ(reshape("[2,3,4]", "0, 12"), "f32[2,12]");
  EXPECT_EQ(reshape("[2,3,0]", "0, -1"), "f32[2,0]");
  EXPECT_EQ(reshape("[0,3]", "0, -1"), "f32[0,?]");  // -1 next to a zero-size is ambiguous
  EXPECT_EQ(reshape("[2,0]", "0, 0", "{allowzero=1}"), "f32[0,0]");
  EXPECT_EQ(reshape("[2,3,4]", "5, -1"),
            "error: node '#2' (Reshape, opset 21): cannot reshape 24 elements with shape "
            "entries of product 5 and one -1");
  EXPECT_EQ(reshape("[2,3,4]", "-1, -1"),
            "error: node '#2' (Reshape, opset 21): shape has more than one -1");
}

// Values tracked through integer arithmetic, Equal/Where, Range, Expand, Slice of a shape.
TEST(ShapeInferenceTest, TrackedShapeArithmetic) {
  const std::string text = R"(graph g opset=21 {
  %0 = Input() : f32[batch,sequence,64] "x"
  %1 = Shape(%0)
  %2 = Constant() {value=tensor<i64[1]>[0]} : i64[1]
  %3 = Constant() {value=tensor<i64[1]>[2]} : i64[1]
  %4 = Slice(%1, %2, %3)
  %5 = Constant() {value=tensor<i64[1]>[2]} : i64[1]
  %6 = Mul(%4, %5)
  %7 = Constant() {value=tensor<i64[]>[4]} : i64[]
  %8 = Size(%0)
  %9 = Div(%8, %7)
  %10 = Unsqueeze(%9, %2)
  %11 = Reshape(%0, %10)
  %12 = Constant() {value=tensor<i64[2]>[-1, 2]} : i64[2]
  %13 = Equal(%12, %5)
  %14 = Where(%13, %5, %4)
  %15 = ConstantOfShape(%14)
  %16 = Constant() {value=tensor<i64[]>[0]} : i64[]
  %17 = Constant() {value=tensor<i64[]>[1]} : i64[]
  %18 = Gather(%1, %17) {axis=0}
  %19 = Range(%16, %18, %17)
  %20 = Cast(%4) {to=7}
  %21 = Expand(%19, %20)
  %22 = Sub(%18, %17)
  %23 = Unsqueeze(%22, %2)
  %24 = Concat(%23, %4) {axis=0}
  %25 = ConstantOfShape(%24)
  %26 = ConstantOfShape(%6)
  return "reshaped": %11, "where": %15, "range": %19, "expanded": %21, "sub": %25, "doubled": %26
})";
  EXPECT_EQ(OutType(text, "reshaped"), "f32[16*batch*sequence]");
  EXPECT_EQ(OutType(text, "where"), "f32[batch,2]");
  EXPECT_EQ(OutType(text, "range"), "i64[sequence]");
  EXPECT_EQ(OutType(text, "expanded"), "i64[batch,sequence]");
  EXPECT_EQ(OutType(text, "doubled"), "f32[2*batch,2*sequence]");
  EXPECT_EQ(OutType(text, "sub"), "f32[sequence-1,batch,sequence]");
}

// ---------------------------------------------------------------------------------------
// Indexing family.

TEST(ShapeInferenceTest, IndexingOps) {
  ExpectRewrite(kPass, R"(graph g opset=21 {
  %0 = Input() : f32[2,s] "x"
  %1 = Constant() {value=tensor<i64[2]>[3, 2]} : i64[2]
  %2 = Tile(%0, %1)
  %3 = Constant() {value=tensor<i64[4]>[1, 0, 0, 2]} : i64[4]
  %4 = Pad(%0, %3, _, _)
  %5 = Input() : i64[2,5] "idx"
  %6 = GatherElements(%0, %5) {axis=1}
  %7 = ScatterND(%0, %5, %0)
  %8 = Constant() {value=tensor<f32[]>[10]} : f32[]
  %9 = Constant() {value=tensor<f32[2]>[0, 1]} : f32[2]
  %10 = OneHot(%5, %8, %9) {axis=1}
  %11 = NonZero(%0)
  %12 = Size(%0)
  %13 = Constant() {value=tensor<i64[1]>[1]} : i64[1]
  %14, %15 = TopK(%0, %13) {axis=0}
  return "a": %2, "b": %4, "c": %6, "d": %7, "e": %10, "f": %11, "g": %12, "h": %14, "i": %15
})",
                R"(graph g opset=21 {
  %0 = Input() : f32[2,s] "x"
  %1 = Constant() {value=tensor<i64[2]>[3, 2]} : i64[2]
  %2 = Tile(%0, %1) : f32[6,"2*s"]
  %3 = Constant() {value=tensor<i64[4]>[1, 0, 0, 2]} : i64[4]
  %4 = Pad(%0, %3, _, _) : f32[3,"s+2"]
  %5 = Input() : i64[2,5] "idx"
  %6 = GatherElements(%0, %5) {axis=1} : f32[2,5]
  %7 = ScatterND(%0, %5, %0) : f32[2,s]
  %8 = Constant() {value=tensor<f32[]>[10]} : f32[]
  %9 = Constant() {value=tensor<f32[2]>[0, 1]} : f32[2]
  %10 = OneHot(%5, %8, %9) {axis=1} : f32[2,10,5]
  %11 = NonZero(%0) : i64[2,?]
  %12 = Size(%0) : i64[]
  %13 = Constant() {value=tensor<i64[1]>[1]} : i64[1]
  %14, %15 = TopK(%0, %13) {axis=0} : f32[1,s], i64[1,s]
  return "a": %2, "b": %4, "c": %6, "d": %7, "e": %10, "f": %11, "g": %12, "h": %14, "i": %15
})");
}

// TensorScatter: the cache's type, its symbolic dims off the batch and the scatter axis
// taken from the update where that knows them (onnxruntime-genai's caches declare the head
// size as a symbol of their own); known dims that disagree are an error.
TEST(ShapeInferenceTest, TensorScatterTakesTheUpdatesKnownDims) {
  ExpectRewrite(kPass, R"(graph g opset=24 {
  %0 = Input() : f32[b,2,p,hd] "cache"
  %1 = Input() : f32[b,2,1,16] "new"
  %2 = Input() : i64[b] "at"
  %3 = TensorScatter(%0, %1, %2) {axis=2}
  return "y": %3
})",
                R"(graph g opset=24 {
  %0 = Input() : f32[b,2,p,hd] "cache"
  %1 = Input() : f32[b,2,1,16] "new"
  %2 = Input() : i64[b] "at"
  %3 = TensorScatter(%0, %1, %2) {axis=2} : f32[b,2,p,16]
  return "y": %3
})");
  const absl::Status bad = RunStatus(R"(graph g opset=24 {
  %0 = Input() : f32[1,2,4,8] "cache"
  %1 = Input() : f32[1,2,1,16] "new"
  %2 = TensorScatter(%0, %1) {axis=2}
  return "y": %2
})");
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument) << bad;
  EXPECT_NE(bad.message().find("update dim 3 is 16, the cache's 8"), std::string::npos) << bad;
}

// ---------------------------------------------------------------------------------------
// Specialization.

TEST(ShapeInferenceTest, SpecializesInputShapes) {
  PassContext ctx;
  ctx.input_shapes["x"] = {2, 8, 64};
  auto g = Parse(kAttentionChain);
  ASSERT_TRUE(g);
  auto pass = CreatePass(kPass);
  ASSERT_TRUE(pass->Run(*g, ctx).ok());
  EXPECT_EQ(g->inputs()[0]->output_info(0).type.ToString(), "f32[2,8,64]");
  EXPECT_EQ(g->outputs()[0].value.type().ToString(), "f32[2,4,8,16]");
  EXPECT_EQ(g->outputs()[1].value.type().ToString(), "f32[2,8,64]");
  EXPECT_EQ(pass->counters().at("inputs specialized"), 1);
  EXPECT_EQ(pass->counters().at("values typed"), 11);
  EXPECT_EQ(pass->counters().at("symbolic values"), 0);
  EXPECT_EQ(pass->counters().at("unknown values"), 0);
  EXPECT_EQ(pass->counters().at("static values"), 12);
  // A second run with the same context changes nothing.
  EXPECT_FALSE(RunPass(kPass, *g, ctx));
}

TEST(ShapeInferenceTest, SpecializesSymbolsEverywhere) {
  PassContext ctx;
  ctx.symbol_values["batch"] = 1;
  ExpectRewrite(kPass, R"(graph g opset=21 {
  %0 = Input() : f32[batch,sequence] "x"
  %1 = kiln.Mystery(%0) : f32["2*batch",sequence]
  %2 = Relu(%1)
  return "y": %2
})",
                R"(graph g opset=21 {
  %0 = Input() : f32[1,sequence] "x"
  %1 = kiln.Mystery(%0) : f32[2,sequence]
  %2 = Relu(%1) : f32[2,sequence]
  return "y": %2
})",
                ctx);
}

TEST(ShapeInferenceTest, SpecializationErrorsNameTheInput) {
  const std::string text = R"(graph g opset=21 {
  %0 = Input() : i64[batch,sequence] "input_ids"
  %1 = Input() : i64[batch,sequence,4] "mask"
  %2 = Input() : f32[*] "free"
  return "y": %0
})";
  PassContext rank;
  rank.input_shapes["input_ids"] = {1, 128, 1};
  EXPECT_EQ(RunStatus(text, rank).message(),
            "graph input 'input_ids' has rank 2 (i64[batch,sequence]) but --shape "
            "input_ids=1x128x1 has 3 dims");
  PassContext dim;
  dim.input_shapes["mask"] = {1, 128, 8};
  EXPECT_EQ(RunStatus(text, dim).message(),
            "graph input 'mask' dim 2 is 4 (i64[batch,sequence,4]) but --shape mask=1x128x8 "
            "says 8");
  PassContext twice;
  twice.input_shapes["input_ids"] = {1, 128};
  twice.input_shapes["mask"] = {2, 128, 4};
  EXPECT_EQ(RunStatus(text, twice).message(),
            "symbol 'batch' is bound to 1 by graph input 'input_ids' (--shape input_ids=1x128) "
            "and to 2 by graph input 'mask' (--shape mask=2x128x4)");
  PassContext symbol;
  symbol.symbol_values["sequence"] = 64;
  symbol.input_shapes["input_ids"] = {1, 128};
  EXPECT_EQ(RunStatus(text, symbol).message(),
            "symbol 'sequence' is bound to 64 by --shape sequence=64 and to 128 by graph input "
            "'input_ids' (--shape input_ids=1x128)");
  PassContext missing;
  missing.input_shapes["ids"] = {1, 128};
  EXPECT_EQ(RunStatus(text, missing).message(),
            "--shape names 'ids', which is not a graph input (inputs: input_ids, mask, free)");
  PassContext negative;
  negative.symbol_values["batch"] = -1;
  EXPECT_EQ(RunStatus(text, negative).code(), absl::StatusCode::kInvalidArgument);
  // Any rank is accepted for an input of unknown rank.
  PassContext any;
  any.input_shapes["free"] = {3, 3};
  auto g = Parse(text);
  ASSERT_TRUE(g);
  EXPECT_TRUE(RunPass(kPass, *g, any));
  EXPECT_EQ(g->inputs()[2]->output_info(0).type.ToString(), "f32[3,3]");
}

// ---------------------------------------------------------------------------------------
// Declared vs inferred types.

// A declared dtype the inputs contradict is an error naming the node (onnxruntime refuses
// it too); a contradicted shape (rank or a known dim) gives way to the inferred one with a
// warning naming the node (onnxruntime warns and does the same: exporters leave stale
// value_info behind).
// Add / Mul / ... take one dtype: mixed inputs are an error naming the node and both dtypes
// (before, the output took input 0's dtype and the step failed only at run time).
TEST(ShapeInferenceTest, ElementwiseInputsOfTwoDtypesAreAnError) {
  const absl::Status s = RunStatus(
      "graph g opset=17 {\n  %0 = Input() : i32[2,3] \"x\"\n  %1 = Input() : i64[] \"z\"\n"
      "  %2 = Mul(%0, %1) : ?[*] \"m\" @ \"my_mul\"\n  return \"y\": %2\n}");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(s.message(),
            "node 'my_mul' (Mul, opset 17): inputs have different dtypes (i32 and i64 at input 1); "
            "the op takes one");
  EXPECT_TRUE(RunStatus("graph g opset=17 {\n  %0 = Input() : i32[2,3] \"x\"\n"
                        "  %1 = Mul(%0, %0) : ?[*] \"m\"\n  return \"y\": %1\n}")
                  .ok());
}

TEST(ShapeInferenceTest, MismatchWithDeclaredTypeNamesTheNode) {
  auto text = [](const std::string& declared) {
    return absl::StrCat("graph g opset=21 {\n  %0 = Input() : f32[2,3] \"x\"\n",
                        "  %1 = Relu(%0) : ", declared, " \"r\" @ \"my_relu\"\n",
                        "  return \"y\": %1\n}");
  };
  EXPECT_EQ(RunStatus(text("i32[2,3]")).message(),
            "node 'my_relu' (Relu, opset 21): output 0 'r' is declared i32[2,3] but its inputs "
            "give f32[2,3]");
  for (const std::string declared : {"f32[6]", "f32[2,4]"}) {
    std::vector<std::string> warnings;
    PassContext ctx;
    ctx.warnings = &warnings;
    EXPECT_EQ(testing::OutType(text(declared), "y", ctx), "f32[2,3]") << declared;
    ASSERT_EQ(warnings.size(), 1u) << declared;
    EXPECT_EQ(warnings[0],
              absl::StrCat("node 'my_relu' (Relu, opset 21): output 0 'r' is declared ", declared,
                           " but its inputs give f32[2,3]; using the inferred shape "
                           "(onnxruntime also runs such files)"));
  }
  // Without a warnings sink (a shape bucket's re-run) the contradiction stays an error.
  EXPECT_EQ(RunStatus(text("f32[2,4]")).message(),
            "node 'my_relu' (Relu, opset 21): output 0 'r' is declared f32[2,4] but its inputs "
            "give f32[2,3]");
  EXPECT_TRUE(RunStatus(text("f32[2,n]")).ok());
  EXPECT_TRUE(RunStatus(text("?[*]")).ok());
}

TEST(ShapeInferenceTest, MergesWithDeclaredTypes) {
  // Declared symbol or unknown dims give way to inferred ones; declared known dims stay.
  ExpectRewrite(kPass, R"(graph g opset=21 {
  %0 = Input() : f32[2,s,t] "x"
  %1 = Relu(%0) : f32[n,?,7]
  %2 = Neg(%1) : ?[*]
  return "y": %2
})",
                R"(graph g opset=21 {
  %0 = Input() : f32[2,s,t] "x"
  %1 = Relu(%0) : f32[2,s,7]
  %2 = Neg(%1) : f32[2,s,7]
  return "y": %2
})");
}

// Extreme attribute and constant values give a result or an InvalidArgument, never a crash
// or an invented size (run under ASan/UBSan too).
TEST(ShapeInferenceTest, ExtremeValuesAreHandled) {
  const std::string big = "9223372036854775807", small = "-9223372036854775808";
  auto graph = [](const std::string& body) {
    return absl::StrCat("graph g opset=21 {\n  %0 = Input() : f32[4,s] \"x\"\n", body,
                        "\n  return \"y\": %9\n}");
  };
  auto c = [](int id, const std::string& vals, int n = 1) {
    return absl::StrCat("  %", id, " = Constant() {value=tensor<i64[", n, "]>[", vals, "]} : i64[",
                        n, "]\n");
  };
  const std::vector<std::string> bodies = {
      c(1, big + ", 2", 2) + "  %9 = Reshape(%0, %1)",
      c(1, big + ", -1", 2) + "  %9 = Reshape(%0, %1)",
      c(1, "0") + c(2, big) + c(3, "1") + c(4, small) + "  %9 = Slice(%0, %1, %2, %3, %4)",
      c(1, small) + c(2, small) + c(3, "0") + c(4, big) + "  %9 = Slice(%0, %1, %2, %3, %4)",
      c(1, big + ", " + big, 2) + "  %9 = Tile(%0, %1)",
      c(1, small + ", 0, 0, " + small, 4) + "  %9 = Pad(%0, %1, _, _)",
      c(1, big + ", " + big, 2) + "  %9 = Expand(%0, %1)",
      c(1, big) + "  %9 = Unsqueeze(%0, %1)",
      "  %1 = Shape(%0) {start=" + small + ", end=" + big + "}\n" + c(2, small) +
          "  %9 = Gather(%1, %2) {axis=0}",
      "  %1 = Constant() {value=tensor<i64[]>[" + small + "]} : i64[]\n" +
          "  %2 = Constant() {value=tensor<i64[]>[" + big + "]} : i64[]\n" +
          "  %9 = Range(%1, %2, %1)",
      std::string("  %1 = Constant() {value=tensor<i64[]>[0]} : i64[]\n") +
          "  %2 = Constant() {value=tensor<i64[]>[" + big + "]} : i64[]\n" +
          "  %3 = Constant() {value=tensor<i64[]>[" + small + "]} : i64[]\n" +
          "  %9 = Range(%1, %2, %3)",
      "  %1 = Shape(%0)\n" + c(2, big) + "  %3 = Mul(%1, %2)\n  %4 = Mul(%3, %2)\n" +
          "  %9 = Reshape(%0, %4)",
      "  %9 = Flatten(%0) {axis=" + big + "}",
      "  %9 = Transpose(%0) {perm=[0, " + big + "]}",
      "  %9 = Concat(%0, %0)",
  };
  for (const std::string& body : bodies) {
    const std::string out = OutType(graph(body), "y");
    EXPECT_TRUE(out.rfind("f32", 0) == 0 || out.rfind("i64", 0) == 0 ||
                out.rfind("error: node '", 0) == 0)
        << body << "\n-> " << out;
  }
}

// Every op of the catalogue has a shape rule (adding an op: add its rule too).
TEST(ShapeInferenceTest, EveryCatalogueOpHasARule) {
  for (const OpInfo& op : AllOps()) {
    if (!op.domain.empty() || op.name == "Input" || op.name == "Constant") continue;
    const bool has_rule =
        shape_inference::FindElementwiseRule(op.name) || shape_inference::FindMathRule(op.name) ||
        shape_inference::FindMovementRule(op.name) || shape_inference::FindIndexingRule(op.name) ||
        shape_inference::FindVisionRule(op.name);
    EXPECT_TRUE(has_rule) << "no shape rule for " << op.name;
  }
}

// ---------------------------------------------------------------------------------------
// Does nothing.

TEST(ShapeInferenceTest, FullyTypedGraphIsUnchanged) {
  ExpectNoChange(kPass, R"(graph g opset=21 {
  %0 = Input() : f32[batch,4] "x"
  %1 = Constant() {value=tensor<f32[4]>[1, 2, 3, 4]} : f32[4]
  %2 = Add(%0, %1) : f32[batch,4]
  %3 = ReduceSum(%2) {keepdims=0} : f32[]
  return "y": %3
})");
}

TEST(ShapeInferenceTest, UnknownOpsKeepTheirTypes) {
  ExpectNoChange(kPass, R"(graph g opset=21 {
  %0 = Input() : f32[3] "x"
  %1 = kiln.Mystery(%0)
  %2 = Relu(%1)
  %3 = kiln.Typed(%0) : f32[7]
  return "y": %2, "z": %3
})");
}

// ---------------------------------------------------------------------------------------
// Inferred static types equal what the reference executor produces.

TEST(ShapeInferenceTest, StaticTypesMatchReferenceExecution) {
  auto g = Parse(R"(graph g opset=21 {
  %0 = Input() : f32[2,3,8] "x"
  %1 = Input() : i64[2,5] "ids"
  %2 = Input() : f32[8] "scale"
  %3 = Shape(%0)
  %4 = Constant() {value=tensor<i64[]>[0]} : i64[]
  %5 = Gather(%3, %4) {axis=0}
  %6 = Constant() {value=tensor<i64[1]>[0]} : i64[1]
  %7 = Unsqueeze(%5, %6)
  %8 = Constant() {value=tensor<i64[2]>[-1, 4]} : i64[2]
  %9 = Concat(%7, %8) {axis=0}
  %10 = Reshape(%0, %9)
  %11 = Transpose(%10) {perm=[0, 2, 1]}
  %12 = MatMul(%10, %11)
  %13 = Softmax(%12) {axis=-1}
  %14 = ReduceMean(%13, %6) {keepdims=0}
  %15 = Constant() {value=tensor<i64[1]>[1]} : i64[1]
  %16 = Constant() {value=tensor<i64[1]>[9223372036854775807]} : i64[1]
  %17 = Slice(%0, %15, %16, %15)
  %18, %19 = Split(%17) {axis=2}
  %20 = Constant() {value=tensor<i64[4]>[3, 1, 2, 1]} : i64[4]
  %21 = Expand(%18, %20)
  %22 = Less(%21, %19)
  %23 = Where(%22, %21, %19)
  %24 = Cast(%23) {to=11}
  %25, %26, %27 = LayerNormalization(%0, %2) {axis=-1}
  %28 = Flatten(%25) {axis=2}
  %29 = Squeeze(%26)
  %30 = ArgMax(%0) {axis=1, keepdims=0}
  %31 = Constant() {value=tensor<i64[]>[2]} : i64[]
  %32 = CumSum(%0, %31)
  %33 = Trilu(%13)
  %34 = ConstantOfShape(%3)
  %35 = Constant() {value=tensor<i64[]>[1]} : i64[]
  %36 = Constant() {value=tensor<i64[]>[7]} : i64[]
  %37 = Constant() {value=tensor<i64[]>[2]} : i64[]
  %38 = Range(%35, %36, %37)
  %39, %40 = Dropout(%0)
  %41 = Input() : f32[8,6] "w"
  %42 = Constant() {value=tensor<i64[2]>[6, 8]} : i64[2]
  %43 = Reshape(%0, %42)
  %44 = Gemm(%43, %41, _) {alpha=0.5}
  %45 = Gather(%2, %1) {axis=0}
  %46 = Clip(%45, _, _)
  %47 = Gelu(%46)
  %48 = Identity(%47)
  %49 = Sub(%5, %31)
  %50 = Size(%0)
  %51 = Constant() {value=tensor<i64[3]>[1, 2, 1]} : i64[3]
  %52 = Tile(%0, %51)
  %53 = Constant() {value=tensor<i64[6]>[0, 1, 0, 0, 2, 1]} : i64[6]
  %54 = Pad(%0, %53, _, _)
  %55, %56 = TopK(%0, %15) {axis=1}
  return "y": %14, "ln": %27, "i": %54, "j": %55, "k": %56
})");
  ASSERT_TRUE(g);
  EXPECT_TRUE(RunPass(kPass, *g));
  ExpectTypesMatchExecution(*g, testing::RandomInputs(*g, 7));
}

// ---------------------------------------------------------------------------------------
// The BERT fixture: symbolic without --shape, fully static with it, and then every value's
// type equals what the reference executor computes.

std::unique_ptr<Graph> ImportFixture(const std::string& name) {
  auto g = ImportOnnxFile(absl::StrCat(KILN_SOURCE_DIR, "/models/fixtures/", name));
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? std::move(*g) : nullptr;
}

TEST(ShapeInferenceTest, BertFixtureSymbolic) {
  auto g = ImportFixture("bert_tiny_opset14_pooler.onnx");
  ASSERT_TRUE(g);
  RunPass(kPass, *g);
  // Every value gets a dtype and a rank; the first Q projection reshape keeps batch and the
  // head split, but its sequence dim comes from Slice(position_ids, 0, sequence) on the
  // position table, min(max_pos, sequence), which is not expressible and so stays unknown.
  bool saw_reshape = false;
  for (const auto& p : g->nodes()) {
    for (int i = 0; i < p->num_outputs(); ++i) {
      const Type& t = p->output_info(i).type;
      EXPECT_NE(t.dtype, DType::kUndefined) << p->Describe();
      EXPECT_TRUE(t.has_rank()) << p->Describe();
    }
    if (p->op() == "Reshape" && !saw_reshape) {
      saw_reshape = true;
      EXPECT_EQ(p->output_info(0).type.ToString(), "f32[batch,?,4,16]");
    }
  }
  EXPECT_TRUE(saw_reshape);
}

TEST(ShapeInferenceTest, BertFixtureSpecializedIsStaticAndMatchesExecution) {
  for (const char* name : {"bert_tiny_opset14_pooler.onnx", "bert_tiny_opset17_classifier.onnx"}) {
    SCOPED_TRACE(name);
    auto g = ImportFixture(name);
    ASSERT_TRUE(g);
    PassContext ctx;
    for (const char* in : {"input_ids", "attention_mask", "token_type_ids"})
      ctx.input_shapes[in] = {2, 16};
    auto pass = CreatePass(kPass);
    ASSERT_TRUE(pass->Run(*g, ctx).ok());
    EXPECT_EQ(pass->counters().at("inputs specialized"), 3);
    EXPECT_EQ(pass->counters().at("symbolic values"), 0);
    EXPECT_EQ(pass->counters().at("unknown values"), 0);
    EXPECT_FALSE(RunPass(kPass, *g, ctx));
    absl::flat_hash_map<std::string, Tensor> feeds;
    for (const char* in : {"input_ids", "attention_mask", "token_type_ids"}) {
      Tensor t(DType::kI64, {2, 16});
      for (int64_t i = 0; i < 32; ++i)
        t.data<int64_t>()[i] = std::string(in) == "input_ids" ? (i * 7) % 50 : (in[0] == 'a');
      feeds[in] = t;
    }
    ExpectTypesMatchExecution(*g, feeds);
  }
}

}  // namespace
}  // namespace kiln
