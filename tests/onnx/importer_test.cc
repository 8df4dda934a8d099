// Normal imports: ModelProtos built in C++ (and one file written by the onnx Python
// package) imported into the IR, checking ops, attributes, types, provenance, constants
// and the opset canonicalizations listed in docs/importer.md.
#include "kiln/onnx/importer.h"

#include <fstream>

#include "gtest/gtest.h"
#include "kiln/ir/ops.h"
#include "tests/onnx/onnx_test_util.h"

namespace kiln {
namespace {

using namespace kiln::testing;  // NOLINT

std::vector<int64_t> I64s(const Tensor& t) {
  std::vector<int64_t> v(t.NumElements());
  std::memcpy(v.data(), t.raw(), t.NumBytes());
  return v;
}

TEST(Importer, GemmReluGraph) {
  onnx::ModelProto m = MakeModel(17, "mlp");
  AddInput(m, "x", onnx::TensorProto::FLOAT, {"batch", "?", "4"});
  AddInitF32(m, "W", {3, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  AddInitF32(m, "B", {3}, {0.5f, -1.f, 2.f}, /*raw=*/false);
  auto* gemm = AddNode(m, "Gemm", {"x", "W", "B"}, {"h"}, "fc");
  AttrFloat(gemm, "alpha", 0.5f);
  AttrInt(gemm, "transB", 1);
  AddNode(m, "Relu", {"h"}, {"y"}, "act");
  AddOutput(m, "y", onnx::TensorProto::FLOAT, {"batch", "?", "3"});

  auto g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ((*g)->name(), "mlp");
  EXPECT_EQ((*g)->opset(), 17);
  ASSERT_EQ((*g)->inputs().size(), 1u);
  const Node* x = (*g)->inputs()[0];
  EXPECT_EQ(x->output_info(0).name, "x");
  EXPECT_EQ(x->output_info(0).type.ToString(), "f32[batch,?,4]");
  EXPECT_EQ(x->provenance(), std::vector<std::string>{"x"});

  Node* w = FindConstant(**g, "W");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->output_info(0).type.ToString(), "f32[3,4]");
  EXPECT_EQ(F32s(*w->constant_value())[11], 12.f);
  Node* b = FindConstant(**g, "B");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(F32s(*b->constant_value()), (std::vector<float>{0.5f, -1.f, 2.f}));

  Node* fc = FindNode(**g, "fc");
  ASSERT_NE(fc, nullptr);
  EXPECT_EQ(fc->op(), "Gemm");
  EXPECT_EQ(fc->Describe(), "node 'fc' (Gemm, opset 17)");
  ASSERT_EQ(fc->num_inputs(), 3);
  EXPECT_EQ(fc->input(0).node, x);
  EXPECT_EQ(fc->input(1).node, w);
  EXPECT_EQ(fc->input(2).node, b);
  EXPECT_EQ(fc->attr_float("alpha"), 0.5f);
  EXPECT_EQ(fc->attr_int("transB"), 1);
  EXPECT_EQ(fc->attrs().size(), 2u);
  EXPECT_EQ(fc->output_info(0).name, "h");
  EXPECT_EQ(fc->output_info(0).type.dtype, DType::kUndefined);  // no value_info given

  Node* act = FindNode(**g, "act");
  ASSERT_NE(act, nullptr);
  EXPECT_EQ(act->input(0), fc->output(0));
  ASSERT_EQ((*g)->outputs().size(), 1u);
  EXPECT_EQ((*g)->outputs()[0].name, "y");
  EXPECT_EQ((*g)->outputs()[0].value, act->output(0));
  EXPECT_EQ(act->output_info(0).type.ToString(), "f32[batch,?,3]");  // from graph output
  EXPECT_EQ((*g)->num_nodes(), 5);
}

TEST(Importer, SynthesizesNamesForUnnamedNodes) {
  onnx::ModelProto m = MakeModel();
  AddInput(m, "x");
  AddNode(m, "Relu", {"x"}, {"a"});
  AddNode(m, "Neg", {"a"}, {"y"});
  AddOutput(m, "y");
  auto g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status();
  Node* relu = FindNode(**g, "Relu_0");
  Node* neg = FindNode(**g, "Neg_1");
  ASSERT_NE(relu, nullptr);
  ASSERT_NE(neg, nullptr);
  EXPECT_EQ(neg->Describe(), "node 'Neg_1' (Neg, opset 17)");
}

TEST(Importer, SortsNodesGivenOutOfOrder) {
  onnx::ModelProto m = MakeModel();
  AddInput(m, "x");
  AddNode(m, "Neg", {"b"}, {"y"}, "last");
  AddNode(m, "Abs", {"a"}, {"b"}, "middle");
  AddNode(m, "Relu", {"x"}, {"a"}, "first");
  AddOutput(m, "y");
  auto g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status();
  std::vector<std::string> order;
  for (const auto& n : (*g)->nodes()) order.push_back(n->provenance().front());
  EXPECT_EQ(order, (std::vector<std::string>{"x", "first", "middle", "last"}));
}

TEST(Importer, ConstantNodeForms) {
  onnx::ModelProto m = MakeModel();
  auto* c1 = AddNode(m, "Constant", {}, {"c_tensor"}, "c1");
  auto* a = c1->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  FillF32(a->mutable_t(), "", {2}, {1.5f, 2.5f});
  AttrFloat(AddNode(m, "Constant", {}, {"c_float"}, "c2"), "value_float", 3.25f);
  auto* c3 = AddNode(m, "Constant", {}, {"c_floats"}, "c3");
  auto* fa = c3->add_attribute();
  fa->set_name("value_floats");
  fa->set_type(onnx::AttributeProto::FLOATS);
  fa->add_floats(-1.f);
  fa->add_floats(4.f);
  AttrInt(AddNode(m, "Constant", {}, {"c_int"}, "c4"), "value_int", -7);
  AttrInts(AddNode(m, "Constant", {}, {"c_ints"}, "c5"), "value_ints", {1, 2, 3});
  for (const char* o : {"c_tensor", "c_float", "c_floats", "c_int", "c_ints"})
    m.mutable_graph()->add_output()->set_name(o);
  auto g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status();
  Node* n;
  ASSERT_NE(n = FindConstant(**g, "c_tensor"), nullptr);
  EXPECT_EQ(n->output_info(0).type.ToString(), "f32[2]");
  EXPECT_EQ(F32s(*n->constant_value()), (std::vector<float>{1.5f, 2.5f}));
  EXPECT_EQ(n->provenance(), std::vector<std::string>{"c1"});
  ASSERT_NE(n = FindConstant(**g, "c_float"), nullptr);
  EXPECT_EQ(n->output_info(0).type.ToString(), "f32[]");
  EXPECT_EQ(F32s(*n->constant_value()), std::vector<float>{3.25f});
  ASSERT_NE(n = FindConstant(**g, "c_floats"), nullptr);
  EXPECT_EQ(F32s(*n->constant_value()), (std::vector<float>{-1.f, 4.f}));
  ASSERT_NE(n = FindConstant(**g, "c_int"), nullptr);
  EXPECT_EQ(n->output_info(0).type.ToString(), "i64[]");
  EXPECT_EQ(I64s(*n->constant_value()), std::vector<int64_t>{-7});
  ASSERT_NE(n = FindConstant(**g, "c_ints"), nullptr);
  EXPECT_EQ(n->output_info(0).type.ToString(), "i64[3]");
  EXPECT_EQ(I64s(*n->constant_value()), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ((*g)->num_nodes(), 5);
}

TEST(Importer, InitializerThatIsAlsoAnInputIsAConstant) {
  onnx::ModelProto m = MakeModel();
  AddInput(m, "x");
  AddInput(m, "bias", onnx::TensorProto::FLOAT, {"3"});
  AddInitF32(m, "bias", {3}, {1, 2, 3});
  AddNode(m, "Add", {"x", "bias"}, {"y"}, "add");
  AddOutput(m, "y");
  auto g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ((*g)->inputs().size(), 1u);
  EXPECT_EQ((*g)->inputs()[0]->output_info(0).name, "x");
  Node* add = FindNode(**g, "add");
  ASSERT_NE(add, nullptr);
  EXPECT_TRUE(add->input(1).node->is_constant());
  EXPECT_EQ(add->input(1).name(), "bias");
}

TEST(Importer, ReduceMeanAxesAttributeBecomesInputBeforeOpset18) {
  for (int opset : {13, 17}) {
    onnx::ModelProto m = MakeModel(opset);
    AddInput(m, "x", onnx::TensorProto::FLOAT, {"2", "3", "4"});
    auto* r = AddNode(m, "ReduceMean", {"x"}, {"y"}, "mean");
    AttrInts(r, "axes", {-1, 1});
    AttrInt(r, "keepdims", 0);
    AddNode(m, "ReduceMax", {"x"}, {"z"}, "max_all");  // no axes: reduce all
    AddOutput(m, "y");
    AddOutput(m, "z");
    auto g = Import(m);
    ASSERT_TRUE(g.ok()) << g.status();
    Node* mean = FindNode(**g, "mean");
    ASSERT_NE(mean, nullptr);
    ASSERT_EQ(mean->num_inputs(), 2) << "opset " << opset;
    EXPECT_FALSE(mean->has_attr("axes"));
    EXPECT_EQ(mean->attr_int("keepdims"), 0);
    const Node* axes = mean->input(1).node;
    ASSERT_TRUE(axes->is_constant());
    EXPECT_EQ(axes->output_info(0).type.ToString(), "i64[2]");
    EXPECT_EQ(I64s(*axes->constant_value()), (std::vector<int64_t>{-1, 1}));
    EXPECT_EQ(axes->output_info(0).name, "mean/axes");
    EXPECT_EQ(axes->provenance(), std::vector<std::string>{"mean"});
    Node* mx = FindNode(**g, "max_all");
    ASSERT_NE(mx, nullptr);
    EXPECT_EQ(mx->num_inputs(), 1);
    // The constant precedes its user after the topological sort.
    int pos = 0, axes_pos = -1, mean_pos = -1;
    for (const auto& n : (*g)->nodes()) {
      if (n.get() == axes) axes_pos = pos;
      if (n.get() == mean) mean_pos = pos;
      ++pos;
    }
    EXPECT_LT(axes_pos, mean_pos);
  }
}

TEST(Importer, EveryCatalogueReduceWithAxesAttributeIsCanonicalized) {
  int checked = 0;
  for (const char* op : {"ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                         "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"}) {
    if (FindOp("", op) == nullptr) continue;  // not in the catalogue: rejected elsewhere
    SCOPED_TRACE(op);
    onnx::ModelProto m = MakeModel(17);
    AddInput(m, "x");
    AttrInts(AddNode(m, op, {"x"}, {"y"}, "r"), "axes", {0});
    AddOutput(m, "y");
    auto g = Import(m);
    ASSERT_TRUE(g.ok()) << g.status();
    Node* r = FindNode(**g, "r");
    ASSERT_EQ(r->num_inputs(), 2);
    EXPECT_FALSE(r->has_attr("axes"));
    EXPECT_EQ(I64s(*r->input(1).node->constant_value()), std::vector<int64_t>{0});
    ++checked;
  }
  EXPECT_GE(checked, 2);  // ReduceMean and ReduceMax at least
}

TEST(Importer, EmptyAxesAttributeBecomesEmptyInput) {
  onnx::ModelProto m = MakeModel(13);
  AddInput(m, "x");
  AttrInts(AddNode(m, "ReduceMean", {"x"}, {"y"}, "mean"), "axes", {});
  AttrInts(AddNode(m, "Constant", {}, {"e"}, "empty"), "value_ints", {});
  AddOutput(m, "y");
  m.mutable_graph()->add_output()->set_name("e");
  auto g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status();
  const Node* axes = FindNode(**g, "mean")->input(1).node;
  EXPECT_EQ(axes->output_info(0).type.ToString(), "i64[0]");
  EXPECT_EQ(FindConstant(**g, "e")->output_info(0).type.ToString(), "i64[0]");
}

TEST(Importer, ReduceMeanAxesInputKeptFromOpset18) {
  onnx::ModelProto m = MakeModel(18);
  AddInput(m, "x", onnx::TensorProto::FLOAT, {"2", "3"});
  AddInitI64(m, "ax", {1}, {1});
  auto* r = AddNode(m, "ReduceMean", {"x", "ax"}, {"y"}, "mean");
  AttrInt(r, "noop_with_empty_axes", 1);
  AddOutput(m, "y");
  auto g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status();
  Node* mean = FindNode(**g, "mean");
  ASSERT_EQ(mean->num_inputs(), 2);
  EXPECT_EQ(mean->input(1).name(), "ax");
  EXPECT_EQ(mean->attr_int("noop_with_empty_axes"), 1);
}

TEST(Importer, AxesConstantNameAvoidsCollisions) {
  onnx::ModelProto m = MakeModel(13);
  AddInput(m, "x");
  AddInitF32(m, "mean/axes", {1}, {0});
  AttrInts(AddNode(m, "ReduceMean", {"x"}, {"y"}, "mean"), "axes", {0});
  AddOutput(m, "y");
  auto g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(FindNode(**g, "mean")->input(1).name(), "mean/axes_1");
}

TEST(Importer, SplitNumOutputsRemovedAtOpset18) {
  onnx::ModelProto m = MakeModel(18);
  AddInput(m, "x", onnx::TensorProto::FLOAT, {"6"});
  auto* s = AddNode(m, "Split", {"x"}, {"a", "b", "c"}, "split");
  AttrInt(s, "num_outputs", 3);
  AttrInt(s, "axis", 0);
  for (const char* o : {"a", "b", "c"}) AddOutput(m, o, 1, {"2"});
  auto g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status();
  Node* n = FindNode(**g, "split");
  EXPECT_EQ(n->num_outputs(), 3);
  EXPECT_EQ(n->num_inputs(), 1);
  EXPECT_FALSE(n->has_attr("num_outputs"));
  EXPECT_EQ(n->attr_int("axis"), 0);
  EXPECT_EQ((*g)->outputs()[2].value, n->output(2));
}

TEST(Importer, SplitWithSplitInputAtOpset13) {
  onnx::ModelProto m = MakeModel(13);
  AddInput(m, "x", onnx::TensorProto::FLOAT, {"6"});
  AddInitI64(m, "sizes", {2}, {2, 4});
  AddNode(m, "Split", {"x", "sizes"}, {"a", "b"}, "split");
  AddOutput(m, "a", 1, {"2"});
  AddOutput(m, "b", 1, {"4"});
  auto g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status();
  Node* n = FindNode(**g, "split");
  ASSERT_EQ(n->num_inputs(), 2);
  EXPECT_EQ(n->input(1).name(), "sizes");
  EXPECT_EQ(n->num_outputs(), 2);
}

TEST(Importer, OmittedOptionalInputsAndOutputs) {
  onnx::ModelProto m = MakeModel();
  AddInput(m, "x");
  AddInitF32(m, "hi", {}, {6});
  AddNode(m, "Clip", {"x", "", "hi"}, {"c"}, "clip");
  AddNode(m, "Dropout", {"c", "", ""}, {"y", ""}, "drop");
  AddOutput(m, "y");
  auto g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status();
  Node* clip = FindNode(**g, "clip");
  ASSERT_EQ(clip->num_inputs(), 3);
  EXPECT_FALSE(clip->input(1));
  EXPECT_EQ(clip->input(2).name(), "hi");
  Node* drop = FindNode(**g, "drop");
  EXPECT_EQ(drop->num_inputs(), 1);   // trailing omitted inputs are dropped
  EXPECT_EQ(drop->num_outputs(), 1);  // trailing omitted output too
  EXPECT_TRUE(clip->output_info(0).uses.size() == 1);
}

TEST(Importer, OmittedMiddleOutputKeepsItsSlot) {
  onnx::ModelProto m = MakeModel();
  AddInput(m, "x");
  AddInitF32(m, "s", {3}, {1, 1, 1});
  AddNode(m, "LayerNormalization", {"x", "s"}, {"y", "", "inv"}, "ln");
  AddOutput(m, "y");
  AddOutput(m, "inv", 1, {"2", "1"});
  auto g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status();
  Node* ln = FindNode(**g, "ln");
  ASSERT_EQ(ln->num_outputs(), 3);
  EXPECT_EQ(ln->output_info(1).name, "");
  EXPECT_EQ((*g)->outputs()[1].value, ln->output(2));
}

TEST(Importer, ValueInfoTypesOnIntermediates) {
  onnx::ModelProto m = MakeModel();
  AddInput(m, "x", onnx::TensorProto::FLOAT, {"n", "3"});
  AddNode(m, "Relu", {"x"}, {"h"}, "relu");
  AddNode(m, "Shape", {"h"}, {"y"}, "shape");
  auto* vi = m.mutable_graph()->add_value_info();
  vi->set_name("h");
  SetTensorType(vi, onnx::TensorProto::FLOAT, {"n", "?"});
  auto* stale = m.mutable_graph()->add_value_info();  // names nothing: ignored
  stale->set_name("gone");
  SetTensorType(stale, onnx::TensorProto::FLOAT, {"1"});
  AddOutput(m, "y", onnx::TensorProto::INT64, {"2"});
  auto g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(FindNode(**g, "relu")->output_info(0).type.ToString(), "f32[n,?]");
  EXPECT_EQ(FindNode(**g, "shape")->output_info(0).type.ToString(), "i64[2]");
}

TEST(Importer, AllSupportedOpsetsAndAiOnnxDomain) {
  for (int opset = kMinOpset; opset <= kMaxOpset; ++opset) {
    onnx::ModelProto m = MakeModel(opset);
    m.mutable_opset_import(0)->set_domain(opset % 2 ? "" : "ai.onnx");
    AddInput(m, "x");
    AddNode(m, "Add", {"x", "x"}, {"y"}, "add")->set_domain(opset % 3 ? "" : "ai.onnx");
    AddOutput(m, "y");
    auto g = Import(m);
    ASSERT_TRUE(g.ok()) << "opset " << opset << ": " << g.status();
    EXPECT_EQ((*g)->opset(), opset);
    EXPECT_EQ(FindNode(**g, "add")->domain(), "");
  }
}

TEST(Importer, AttributeKinds) {
  onnx::ModelProto m = MakeModel();
  AddInput(m, "x");
  auto* n = AddNode(m, "Cast", {"x"}, {"y"}, "cast");
  AttrInt(n, "to", onnx::TensorProto::FLOAT16);
  auto* s = n->add_attribute();
  s->set_name("note");
  s->set_type(onnx::AttributeProto::STRING);
  s->set_s("hello");
  auto* ss = n->add_attribute();
  ss->set_name("notes");
  ss->set_type(onnx::AttributeProto::STRINGS);
  ss->add_strings("a");
  ss->add_strings("b");
  auto* fs = n->add_attribute();
  fs->set_name("scales");
  fs->set_type(onnx::AttributeProto::FLOATS);
  fs->add_floats(0.25f);
  auto* untyped = n->add_attribute();  // no `type`: inferred from the field set
  untyped->set_name("legacy");
  untyped->set_i(9);
  AddOutput(m, "y", onnx::TensorProto::FLOAT16);
  auto g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status();
  Node* c = FindNode(**g, "cast");
  EXPECT_EQ(c->attr_int("to"), 10);
  ASSERT_NE(c->attr_string("note"), nullptr);
  EXPECT_EQ(*c->attr_string("note"), "hello");
  EXPECT_EQ(std::get<std::vector<std::string>>(c->attrs().at("notes")),
            (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(*c->attr_floats("scales"), std::vector<float>{0.25f});
  EXPECT_EQ(c->attr_int("legacy"), 9);
  EXPECT_EQ(c->output_info(0).type.ToString(), "f16[2,3]");
}

TEST(Importer, TinyModelWrittenByOnnxPython) {
  auto g = ImportOnnxFile(std::string(KILN_SOURCE_DIR) + "/tests/onnx/data/tiny.onnx");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ((*g)->name(), "tiny");
  EXPECT_EQ((*g)->opset(), 13);
  std::vector<std::string> ops;
  for (const auto& n : (*g)->nodes())
    if (!n->is_constant()) ops.push_back(n->op());
  EXPECT_EQ(ops, (std::vector<std::string>{"Input", "MatMul", "Add", "Relu", "ReduceMean"}));
  EXPECT_EQ((*g)->inputs()[0]->output_info(0).type.ToString(), "f32[batch,4]");
  Node* w = FindConstant(**g, "W");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->output_info(0).type.ToString(), "f32[4,3]");
  std::vector<float> expect_w;
  for (int i = 0; i < 12; ++i) expect_w.push_back(i / 8.f);
  EXPECT_EQ(F32s(*w->constant_value()), expect_w);
  EXPECT_EQ(F32s(*FindConstant(**g, "b")->constant_value()), (std::vector<float>{0.5f, -1.f, 2.f}));
  Node* mean = FindNode(**g, "mean");
  ASSERT_EQ(mean->num_inputs(), 2);
  EXPECT_EQ(I64s(*mean->input(1).node->constant_value()), std::vector<int64_t>{1});
  EXPECT_EQ(mean->attr_int("keepdims"), 1);
  EXPECT_EQ(FindNode(**g, "add")->output_info(0).type.ToString(), "f32[batch,3]");
  EXPECT_EQ((*g)->outputs()[0].name, "y");
  EXPECT_EQ(mean->output_info(0).type.ToString(), "f32[batch,1]");
}

TEST(Importer, ImportOnnxFileMissing) {
  auto g = ImportOnnxFile(std::string(KILN_TEST_TMPDIR) + "/no/such/model.onnx");
  EXPECT_EQ(g.status().code(), absl::StatusCode::kNotFound);
}

TEST(ReadTensorProtoFile, RoundTripAndErrors) {
  const std::string dir = FreshTmpDir("read_tensor_proto");
  onnx::TensorProto t;
  FillF32(&t, "input_0", {2, 2}, {1, -2, 3.5f, 4});
  {
    std::ofstream f(dir + "/input_0.pb", std::ios::binary);
    f << t.SerializeAsString();
  }
  auto r = ReadTensorProtoFile(dir + "/input_0.pb");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->dtype(), DType::kF32);
  EXPECT_EQ(r->dims(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(F32s(*r), (std::vector<float>{1, -2, 3.5f, 4}));

  t.set_raw_data("abc");  // 3 bytes for 4 floats
  {
    std::ofstream f(dir + "/bad.pb", std::ios::binary);
    f << t.SerializeAsString();
  }
  r = ReadTensorProtoFile(dir + "/bad.pb");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("raw_data has 3 bytes, expected 16"), std::string::npos)
      << r.status();
  {
    std::ofstream f(dir + "/garbage.pb", std::ios::binary);
    f << "\xff\xff\xff\xff\xff";
  }
  r = ReadTensorProtoFile(dir + "/garbage.pb");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadTensorProtoFile(dir).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln
