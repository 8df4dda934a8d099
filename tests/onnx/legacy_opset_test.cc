// Opsets 7..12 and 22..27 (docs/importer.md "Canonicalizations"): each attribute-era form
// imports into the opset-21 IR form and computes what the ONNX definition says, checked
// by running the imported graph on the reference executor against values worked out by
// hand from the spec (exact: every value here is representable and the ops involved are
// exact or correctly rounded, except the softmax rows, compared within 1e-6).
#include <cmath>
#include <cstring>

#include "gtest/gtest.h"
#include "kiln/onnx/importer.h"
#include "kiln/reference/executor.h"
#include "tests/onnx/onnx_test_util.h"

namespace kiln {
namespace {

using namespace kiln::testing;  // NOLINT

// Imports `m` and runs it on x (f32 [2, 3] = 1..6 unless given).
absl::StatusOr<std::vector<Tensor>> ImportAndRun(const onnx::ModelProto& m,
                                                 Tensor x = Tensor::FromF32({2, 3},
                                                                            {1, 2, 3, 4, 5, 6})) {
  auto g = Import(m);
  if (!g.ok()) return g.status();
  return RunReference(**g, {{"x", std::move(x)}});
}

TEST(LegacyOpset, UnsqueezeAndSqueezeAxesAttributesBecomeInputs) {
  onnx::ModelProto m = MakeModel(11);
  AddInput(m, "x");
  AttrInts(AddNode(m, "Unsqueeze", {"x"}, {"u"}, "unsq"), "axes", {0, 3});
  AttrInts(AddNode(m, "Squeeze", {"u"}, {"y"}, "sq"), "axes", {3});
  AddOutput(m, "y", onnx::TensorProto::FLOAT, {"1", "2", "3"});
  auto g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status();
  const Node* u = FindNode(**g, "unsq");
  ASSERT_EQ(u->num_inputs(), 2);
  EXPECT_FALSE(u->has_attr("axes"));
  EXPECT_EQ(u->input(1).name(), "unsq/axes");
  auto out = ImportAndRun(m);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dims(), (std::vector<int64_t>{1, 2, 3}));
}

TEST(LegacyOpset, ClipMinMaxAttributesTakeTheDataType) {
  onnx::ModelProto m = MakeModel(10);
  AddInput(m, "x");
  auto* c = AddNode(m, "Clip", {"x"}, {"y"}, "clp");
  AttrFloat(c, "min", 2);
  AttrFloat(c, "max", 4.5f);
  auto* only_max = AddNode(m, "Clip", {"x"}, {"z"}, "clp_max");
  AttrFloat(only_max, "max", 3);
  AddOutput(m, "y");
  AddOutput(m, "z");
  auto g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status();
  const Node* cm = nullptr;  // the Clip, not the CastLike made for its max
  for (const auto& n : (*g)->nodes())
    if (n->op() == "Clip" && n->provenance().front() == "clp_max") cm = n.get();
  ASSERT_NE(cm, nullptr);
  ASSERT_EQ(cm->num_inputs(), 3);
  EXPECT_FALSE(cm->input(1));  // min omitted: an empty slot
  EXPECT_EQ(cm->input(2).node->op(), "CastLike");
  auto out = ImportAndRun(m);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(F32s((*out)[0]), (std::vector<float>{2, 2, 3, 4, 4.5f, 4.5f}));
  EXPECT_EQ(F32s((*out)[1]), (std::vector<float>{1, 2, 3, 3, 3, 3}));
}

TEST(LegacyOpset, ClipAttributesOnF16Data) {
  onnx::ModelProto m = MakeModel(9);
  AddInput(m, "x", onnx::TensorProto::FLOAT16);
  AttrFloat(AddNode(m, "Clip", {"x"}, {"y"}, "clp"), "min", 2.5f);
  AddOutput(m, "y", onnx::TensorProto::FLOAT16);
  Tensor x(DType::kF16, {2, 3});
  for (int i = 0; i < 6; ++i) x.SetFromDouble(i, i + 1);
  auto out = ImportAndRun(m, x);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].dtype(), DType::kF16);
  std::vector<double> y;
  for (int i = 0; i < 6; ++i) y.push_back((*out)[0].GetAsDouble(i));
  EXPECT_EQ(y, (std::vector<double>{2.5, 2.5, 3, 4, 5, 6}));
}

TEST(LegacyOpset, SliceAttributesBeforeOpset10) {
  onnx::ModelProto m = MakeModel(9);
  AddInput(m, "x");
  auto* s = AddNode(m, "Slice", {"x"}, {"y"}, "sl");
  AttrInts(s, "starts", {1});
  AttrInts(s, "ends", {1000});
  AttrInts(s, "axes", {1});
  AddOutput(m, "y", onnx::TensorProto::FLOAT, {"2", "2"});
  auto out = ImportAndRun(m);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(F32s((*out)[0]), (std::vector<float>{2, 3, 5, 6}));
}

TEST(LegacyOpset, SliceInputsBeforeOpset10AreRefused) {
  onnx::ModelProto m = MakeModel(9);
  AddInput(m, "x");
  AddInitI64(m, "st", {1}, {0});
  AddInitI64(m, "en", {1}, {1});
  AddNode(m, "Slice", {"x", "st", "en"}, {"y"}, "sl");
  AddOutput(m, "y");
  auto g = Import(m);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g.status().message(),
            "node 'sl' (Slice, opset 9) has 3 inputs; expected 1 (at opset 9 its other "
            "operands are attributes)");
}

TEST(LegacyOpset, TopKAttributeK) {
  onnx::ModelProto m = MakeModel(9);
  AddInput(m, "x");
  AttrInt(AddNode(m, "TopK", {"x"}, {"v", "i"}, "tk"), "k", 2);
  AddOutput(m, "v", onnx::TensorProto::FLOAT, {"2", "2"});
  AddOutput(m, "i", onnx::TensorProto::INT64, {"2", "2"});
  auto out = ImportAndRun(m);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(F32s((*out)[0]), (std::vector<float>{3, 2, 6, 5}));
}

TEST(LegacyOpset, PadAttributes) {
  onnx::ModelProto m = MakeModel(10);
  AddInput(m, "x");
  auto* p = AddNode(m, "Pad", {"x"}, {"y"}, "pad");
  AttrInts(p, "pads", {0, 1, 0, 0});
  AttrFloat(p, "value", -1);
  AddOutput(m, "y", onnx::TensorProto::FLOAT, {"2", "4"});
  auto out = ImportAndRun(m);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(F32s((*out)[0]), (std::vector<float>{-1, 1, 2, 3, -1, 4, 5, 6}));
}

TEST(LegacyOpset, SplitAttributeAndDropoutRatio) {
  onnx::ModelProto m = MakeModel(11);
  AddInput(m, "x");
  auto* s = AddNode(m, "Split", {"x"}, {"a", "b"}, "sp");
  AttrInt(s, "axis", 1);
  AttrInts(s, "split", {1, 2});
  AttrFloat(AddNode(m, "Dropout", {"b"}, {"d"}, "drop"), "ratio", 0.25f);
  AddOutput(m, "a", onnx::TensorProto::FLOAT, {"2", "1"});
  AddOutput(m, "d", onnx::TensorProto::FLOAT, {"2", "2"});
  auto g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status();
  const Node* d = FindNode(**g, "drop");
  ASSERT_EQ(d->num_inputs(), 2);
  EXPECT_EQ(F32s(*d->input(1).node->constant_value()), std::vector<float>{0.25f});
  auto out = ImportAndRun(m);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(F32s((*out)[0]), (std::vector<float>{1, 4}));
  EXPECT_EQ(F32s((*out)[1]), (std::vector<float>{2, 3, 5, 6}));
}

TEST(LegacyOpset, DropoutMaskBeforeOpset10IsUnimplemented) {
  onnx::ModelProto m = MakeModel(9);
  AddInput(m, "x");
  AddNode(m, "Dropout", {"x"}, {"y", "mask"}, "drop");
  AddOutput(m, "y");
  auto g = Import(m);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(g.status().message().find("node 'drop' (Dropout, opset 9): the mask output"),
            std::string::npos)
      << g.status();
}

// Softmax before opset 13 normalizes the input flattened to 2-D at `axis`: over a [2, 3]
// input with axis 0, one row of all six values.
TEST(LegacyOpset, SoftmaxFlattensAtAxis) {
  onnx::ModelProto m = MakeModel(11);
  AddInput(m, "x");
  AttrInt(AddNode(m, "Softmax", {"x"}, {"y"}, "sm"), "axis", 0);
  AddNode(m, "LogSoftmax", {"x"}, {"z"}, "lsm");  // default axis 1: rows of three
  AddOutput(m, "y");
  AddOutput(m, "z");
  auto out = ImportAndRun(m);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].dims(), (std::vector<int64_t>{2, 3}));
  double sum = 0;
  for (int i = 1; i <= 6; ++i) sum += std::exp(i);
  const std::vector<float> y = F32s((*out)[0]), z = F32s((*out)[1]);
  for (int i = 0; i < 6; ++i) {
    EXPECT_NEAR(y[i], std::exp(i + 1) / sum, 1e-6) << i;
    const int row = i / 3;
    double row_sum = 0;
    for (int j = 0; j < 3; ++j) row_sum += std::exp(3 * row + j + 1);
    EXPECT_NEAR(z[i], (i + 1) - std::log(row_sum), 1e-6) << i;
  }
}

TEST(LegacyOpset, SoftmaxOutputKeepsItsOnnxName) {
  onnx::ModelProto m = MakeModel(12);
  AddInput(m, "x");
  AttrInt(AddNode(m, "Softmax", {"x"}, {"probs"}, "sm"), "axis", 1);
  AddNode(m, "Relu", {"probs"}, {"y"}, "relu");
  AddOutput(m, "probs");
  AddOutput(m, "y");
  auto g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ((*g)->outputs()[0].value.node->op(), "Reshape");
  EXPECT_EQ((*g)->outputs()[0].value.name(), "probs");
  EXPECT_EQ(FindNode(**g, "relu")->input(0), (*g)->outputs()[0].value);
}

TEST(LegacyOpset, OpBeforeItsOpsetIsUnimplemented) {
  onnx::ModelProto m = MakeModel(8);
  AddInput(m, "x");
  AddNode(m, "Erf", {"x"}, {"y"}, "erf");
  AddOutput(m, "y");
  auto g = Import(m);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(g.status().message().find("Erf [kiln needs opset >= 9] (node 'erf')"),
            std::string::npos)
      << g.status();
}

// FLOAT8E8M0 (24): newer than the onnx headers kiln builds against.
constexpr int32_t kFloat8E8M0 = 24;

TEST(LegacyOpset, CastRoundModeIsKeptForE8M0) {
  onnx::ModelProto m = MakeModel(25);
  AddInput(m, "x");
  auto* c = AddNode(m, "Cast", {"x"}, {"y"}, "cast");
  AttrInt(c, "to", kFloat8E8M0);
  auto* rm = c->add_attribute();
  rm->set_name("round_mode");
  rm->set_type(onnx::AttributeProto::STRING);
  rm->set_s("down");
  AddOutput(m, "y", kFloat8E8M0);
  auto g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_NE(FindNode(**g, "cast")->attr_string("round_mode"), nullptr);
  // 1..6 rounded down to powers of two: 1 2 2 4 4 4.
  auto out = ImportAndRun(m);
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<double> got;
  for (int64_t i = 0; i < 6; ++i) got.push_back((*out)[0].GetAsDouble(i));
  EXPECT_EQ(got, (std::vector<double>{1, 2, 2, 4, 4, 4}));
}

// Resize-10 (X, scales) is the opset-11 form with asymmetric coordinates and floor.
TEST(LegacyOpset, Resize10BecomesTheOpset11Form) {
  onnx::ModelProto m = MakeModel(10);
  AddInput(m, "x");
  AddInitF32(m, "scales", {2}, {1, 2});
  AddNode(m, "Resize", {"x", "scales"}, {"y"}, "resize");
  AddOutput(m, "y", onnx::TensorProto::FLOAT, {"2", "6"});
  auto g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status();
  const Node* r = FindNode(**g, "resize");
  ASSERT_EQ(r->num_inputs(), 3);
  EXPECT_FALSE(r->input(1));
  EXPECT_EQ(*r->attr_string("coordinate_transformation_mode"), "asymmetric");
  EXPECT_EQ(*r->attr_string("nearest_mode"), "floor");
  auto out = ImportAndRun(m);
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<double> got;
  for (int64_t i = 0; i < 12; ++i) got.push_back((*out)[0].GetAsDouble(i));
  EXPECT_EQ(got, (std::vector<double>{1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6}));
  // Nearest downscaling by a constant: runtimes disagree; refused.
  onnx::ModelProto d = MakeModel(10);
  AddInput(d, "x");
  AddInitF32(d, "scales", {2}, {1, 0.5f});
  AddNode(d, "Resize", {"x", "scales"}, {"y"}, "resize");
  AddOutput(d, "y");
  EXPECT_EQ(Import(d).status().code(), absl::StatusCode::kUnimplemented);
}

// Upsample (deprecated in 10; `scales` an attribute in 7, an input from 9) imports as Resize.
TEST(LegacyOpset, UpsampleImportsAsResize) {
  for (int opset : {7, 9}) {
    SCOPED_TRACE(opset);
    onnx::ModelProto m = MakeModel(opset);
    AddInput(m, "x");
    auto* u = AddNode(m, "Upsample", {"x"}, {"y"}, "up");
    if (opset == 7) {
      AttrFloats(u, "scales", {2, 1});
    } else {
      AddInitF32(m, "scales", {2}, {2, 1});
      u->add_input("scales");
    }
    AddOutput(m, "y", onnx::TensorProto::FLOAT, {"4", "3"});
    auto out = ImportAndRun(m);
    ASSERT_TRUE(out.ok()) << out.status();
    std::vector<double> got;
    for (int64_t i = 0; i < 12; ++i) got.push_back((*out)[0].GetAsDouble(i));
    EXPECT_EQ(got, (std::vector<double>{1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6}));
  }
}

TEST(LegacyOpset, PadWithoutPadsBeforeOpset11IsRefused) {
  onnx::ModelProto m = MakeModel(10);
  AddInput(m, "x");
  AddNode(m, "Pad", {"x"}, {"y"}, "pad");
  AddOutput(m, "y");
  auto g = Import(m);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().message(),
            "node 'pad' (Pad, opset 10): attribute 'pads' is required before opset 11");
}

// DequantizeLinear's output_dtype (opset 23): the result converted to that type.
TEST(LegacyOpset, DequantizeOutputDtypeBecomesCast) {
  onnx::ModelProto m = MakeModel(23);
  AddInput(m, "x", onnx::TensorProto::INT8, {"4"});
  AddInitF32(m, "s", {}, {0.5f});
  AttrInt(AddNode(m, "DequantizeLinear", {"x", "s"}, {"y"}, "dq"), "output_dtype",
          onnx::TensorProto::DOUBLE);
  AddOutput(m, "y", onnx::TensorProto::DOUBLE, {"4"});
  auto g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ((*g)->outputs()[0].value.node->op(), "Cast");
  EXPECT_EQ((*g)->outputs()[0].value.name(), "y");
  Tensor x(DType::kI8, {4});
  for (int i = 0; i < 4; ++i) x.SetFromDouble(i, i - 2);
  auto out = RunReference(**g, {{"x", x}});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].dtype(), DType::kF64);
  for (int i = 0; i < 4; ++i) EXPECT_EQ((*out)[0].GetAsDouble(i), 0.5 * (i - 2)) << i;
}

TEST(LegacyOpset, RangeStashTypeZeroIsUnimplemented) {
  onnx::ModelProto m = MakeModel(27);
  AddInitF32(m, "s", {}, {0});
  AddInitF32(m, "l", {}, {4});
  AddInitF32(m, "d", {}, {1});
  AttrInt(AddNode(m, "Range", {"s", "l", "d"}, {"y"}, "rg"), "stash_type", 0);
  AddOutput(m, "y", onnx::TensorProto::FLOAT, {"4"});
  auto g = Import(m);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(g.status().message().find("stash_type"), std::string::npos) << g.status();
}

}  // namespace
}  // namespace kiln
