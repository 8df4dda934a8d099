// Tests for the IR text printer and parser: exact round trip of a graph that uses every
// attribute kind, every dtype and the awkward values (NaN payloads, -0, subnormals,
// integer extremes), a pinned golden print, hand-written text, and errors on bad text
// (each with its line:column), including every truncation and many byte mutations of a
// valid text, which must fail cleanly or round-trip.
#include "kiln/ir/text.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/ir/verifier.h"

namespace kiln {
namespace {

template <typename T>
Tensor Make(DType dt, std::vector<int64_t> dims, const std::vector<T>& values) {
  Tensor t(dt, std::move(dims));
  EXPECT_EQ(t.NumBytes(), values.size() * sizeof(T));
  std::memcpy(t.raw(), values.data(), t.NumBytes());
  return t;
}

float BitsF32(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
double BitsF64(uint64_t b) {
  double d;
  std::memcpy(&d, &b, 8);
  return d;
}
uint32_t F32Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// Attributes compare bitwise for floats (NaN payloads, -0) and tensors.
bool AttrEqual(const Attribute& a, const Attribute& b) {
  if (a.index() != b.index()) return false;
  if (auto* x = std::get_if<float>(&a)) return F32Bits(*x) == F32Bits(std::get<float>(b));
  if (auto* x = std::get_if<Tensor>(&a)) return x->BitwiseEqual(std::get<Tensor>(b));
  if (auto* x = std::get_if<std::vector<float>>(&a)) {
    const auto& y = std::get<std::vector<float>>(b);
    if (x->size() != y.size()) return false;
    for (size_t i = 0; i < x->size(); ++i)
      if (F32Bits((*x)[i]) != F32Bits(y[i])) return false;
    return true;
  }
  if (auto* x = std::get_if<int64_t>(&a)) return *x == std::get<int64_t>(b);
  if (auto* x = std::get_if<std::string>(&a)) return *x == std::get<std::string>(b);
  if (auto* x = std::get_if<std::vector<int64_t>>(&a))
    return *x == std::get<std::vector<int64_t>>(b);
  return std::get<std::vector<std::string>>(a) == std::get<std::vector<std::string>>(b);
}

// Structural identity, nodes matched by position in nodes().
void ExpectSameGraph(const Graph& a, const Graph& b) {
  EXPECT_EQ(a.name(), b.name());
  EXPECT_EQ(a.opset(), b.opset());
  ASSERT_EQ(a.num_nodes(), b.num_nodes());
  std::map<const Node*, int> ia, ib;
  for (const auto& p : a.nodes()) ia.emplace(p.get(), static_cast<int>(ia.size()));
  for (const auto& p : b.nodes()) ib.emplace(p.get(), static_cast<int>(ib.size()));
  auto vid = [](const std::map<const Node*, int>& m, Value v) {
    return v ? std::make_pair(m.at(v.node), v.index) : std::make_pair(-1, 0);
  };
  auto ita = a.nodes().begin();
  auto itb = b.nodes().begin();
  for (; ita != a.nodes().end(); ++ita, ++itb) {
    const Node& x = **ita;
    const Node& y = **itb;
    SCOPED_TRACE(x.Describe());
    EXPECT_EQ(x.op(), y.op());
    EXPECT_EQ(x.domain(), y.domain());
    ASSERT_EQ(x.num_inputs(), y.num_inputs());
    for (int i = 0; i < x.num_inputs(); ++i)
      EXPECT_EQ(vid(ia, x.input(i)), vid(ib, y.input(i))) << "operand " << i;
    ASSERT_EQ(x.num_outputs(), y.num_outputs());
    for (int i = 0; i < x.num_outputs(); ++i) {
      EXPECT_EQ(x.output_info(i).type, y.output_info(i).type) << "output " << i;
      EXPECT_EQ(x.output_info(i).name, y.output_info(i).name) << "output " << i;
      EXPECT_EQ(x.output_info(i).uses.size(), y.output_info(i).uses.size());
    }
    EXPECT_EQ(x.provenance(), y.provenance());
    ASSERT_EQ(x.attrs().size(), y.attrs().size());
    for (const auto& [name, attr] : x.attrs()) {
      ASSERT_TRUE(y.has_attr(name)) << name;
      EXPECT_TRUE(AttrEqual(attr, y.attrs().at(name))) << "attribute " << name;
    }
  }
  ASSERT_EQ(a.inputs().size(), b.inputs().size());
  for (size_t i = 0; i < a.inputs().size(); ++i)
    EXPECT_EQ(ia.at(a.inputs()[i]), ib.at(b.inputs()[i]));
  ASSERT_EQ(a.outputs().size(), b.outputs().size());
  for (size_t i = 0; i < a.outputs().size(); ++i) {
    EXPECT_EQ(a.outputs()[i].name, b.outputs()[i].name);
    EXPECT_EQ(vid(ia, a.outputs()[i].value), vid(ib, b.outputs()[i].value));
  }
}

Type SymType(DType dt, std::vector<Dim> dims) {
  Type t;
  t.dtype = dt;
  t.shape = std::move(dims);
  return t;
}

// A graph touching every feature of the format.
std::unique_ptr<Graph> BuildRichGraph() {
  auto g = std::make_unique<Graph>();
  g->set_name("main");
  g->set_opset(17);
  Node* ids =
      g->AddInput("input_ids", SymType(DType::kI64, {Dim::Symbol("batch"), Dim::Symbol("seq")}));
  Node* mask = g->AddInput("mask \"q\"\n",
                           SymType(DType::kF16, {Dim(), Dim::Symbol("seq+1"), Dim::Known(7),
                                                 Dim::Symbol("128"), Dim::Symbol("return")}));
  Node* z = g->AddInput("z", Type{DType::kBF16, std::nullopt});
  g->AddInput("scalar", Type::Static(DType::kBool, {}));

  const float fnan = std::numeric_limits<float>::quiet_NaN();
  const float finf = std::numeric_limits<float>::infinity();
  Node* c32 = g->AddConstant(
      "c_f32", Make<float>(DType::kF32, {12},
                           {0.1f, -0.0f, finf, -finf, fnan, BitsF32(0x7fc00001u),
                            BitsF32(0xffc00000u), std::numeric_limits<float>::denorm_min(),
                            std::numeric_limits<float>::max(), 1.0f, 1e10f, 3.0f}));
  g->AddConstant("c_f64",
                 Make<double>(DType::kF64, {8},
                              {0.1, -0.0, std::numeric_limits<double>::infinity(),
                               BitsF64(0x7ff8000000000123ull), BitsF64(0xfff8000000000000ull),
                               std::numeric_limits<double>::denorm_min(),
                               std::numeric_limits<double>::max(), 1.0 / 3.0}));
  g->AddConstant("c_f16", Make<uint16_t>(DType::kF16, {3, 3},
                                         {0x0000, 0x8000, 0x3c00, 0x0001, 0x7bff, 0x7c00, 0xfc00,
                                          0x7e01, 0x3555}));
  g->AddConstant(
      "c_bf16",
      Make<uint16_t>(DType::kBF16, {7}, {0x3f80, 0x8000, 0x0001, 0x7f80, 0x7fc1, 0xff81, 0x3dcd}));
  g->AddConstant("c_i8", Make<int8_t>(DType::kI8, {3}, {-128, 127, 0}));
  g->AddConstant("c_u8", Make<uint8_t>(DType::kU8, {2}, {0, 255}));
  g->AddConstant("c_i16", Make<int16_t>(DType::kI16, {2}, {-32768, 32767}));
  g->AddConstant("c_u16", Make<uint16_t>(DType::kU16, {2}, {0, 65535}));
  g->AddConstant("c_i32", Make<int32_t>(DType::kI32, {2, 1}, {INT32_MIN, INT32_MAX}));
  g->AddConstant("c_u32", Make<uint32_t>(DType::kU32, {2}, {0, UINT32_MAX}));
  g->AddConstant("c_i64", Make<int64_t>(DType::kI64, {2}, {INT64_MIN, INT64_MAX}));
  g->AddConstant("c_u64", Make<uint64_t>(DType::kU64, {2}, {0, UINT64_MAX}));
  g->AddConstant("c_bool", Make<uint8_t>(DType::kBool, {3}, {0, 1, 2}));
  g->AddConstant("c_scalar", Tensor::ScalarF32(-2.5f));
  g->AddConstant("c_empty", Tensor(DType::kF32, {0, 3}));
  // Larger than max_inline_elements: printed as hex of the raw bytes.
  std::vector<float> big(40);
  for (size_t i = 0; i < big.size(); ++i) big[i] = std::sin(static_cast<float>(i)) * 1e3f;
  big[5] = BitsF32(0x7fa00001u);  // signalling NaN payload
  Node* cbig = g->AddConstant("c_big", Tensor::FromF32({5, 8}, big));
  std::vector<uint16_t> big16(20);
  for (size_t i = 0; i < big16.size(); ++i) big16[i] = static_cast<uint16_t>(i * 3001);
  g->AddConstant("c_big_f16", Make<uint16_t>(DType::kF16, {20}, big16));
  g->AddConstant("c_big_u64",
                 Make<uint64_t>(DType::kU64, {17}, std::vector<uint64_t>(17, UINT64_MAX - 1)));
  g->AddConstant("c_big_bool", Make<uint8_t>(DType::kBool, {17}, std::vector<uint8_t>(17, 1)));

  // Every attribute kind.
  Node* attrs = g->AddNode("Attrs", {ids->output(), Value{}, mask->output()}, 1);
  attrs->set_attr("i", int64_t{-5});
  attrs->set_attr("i_max", int64_t{INT64_MAX});
  attrs->set_attr("f", 0.5f);
  attrs->set_attr("f_int", 2.0f);
  attrs->set_attr("f_big", 1e10f);
  attrs->set_attr("f_nan", BitsF32(0xffc00042u));
  attrs->set_attr("f_negzero", -0.0f);
  attrs->set_attr("f_inf", -finf);
  attrs->set_attr("s", std::string("q\"uote \\ back\nnl\ttab\x01\x7f caf\xc3\xa9"));
  attrs->set_attr("s_empty", std::string());
  attrs->set_attr("t", Tensor::FromI64({2}, {3, -4}));
  attrs->set_attr("t_large", Tensor::FromF32({17}, std::vector<float>(17, 0.75f)));
  attrs->set_attr("t_undef", Tensor());
  attrs->set_attr("t_string", Tensor(DType::kString, {2}));
  attrs->set_attr("ints", std::vector<int64_t>{1, -2, INT64_MAX, INT64_MIN});
  attrs->set_attr("ints_empty", std::vector<int64_t>{});
  attrs->set_attr("floats", std::vector<float>{1.0f, 0.25f, -finf, BitsF32(0x7fc00003u)});
  attrs->set_attr("floats_empty", std::vector<float>{});
  attrs->set_attr("strings", std::vector<std::string>{"a", "", "b\"c"});
  attrs->set_attr("strings_empty", std::vector<std::string>{});
  attrs->set_attr("my attr", int64_t{1});
  attrs->set_output_type(0, SymType(DType::kUndefined, {Dim::Known(2)}));
  attrs->set_provenance({"attrs_node"});

  // Multi-output node with names, types and two provenance entries.
  Node* split = g->AddNode("Split", {c32->output(), Value{}}, 3);
  split->set_attr("axis", int64_t{0});
  split->set_output_type(0, Type::Static(DType::kF32, {4}));
  split->set_output_type(1, Type{DType::kF32, std::nullopt});
  split->set_output_name(0, "a");
  split->set_output_name(1, "b");
  split->set_output_name(2, "c");  // name only: type stays unknown
  split->set_provenance({"split_0", "fused \"x\""});
  // A node without results whose op name must be quoted, right after named outputs.
  g->AddNode("return", {split->output(2)}, 0);
  Node* linear = g->AddNode("Linear", {ids->output(), cbig->output(), Value{}}, 1, "kiln");
  Node* ms = g->AddNode("FusedMatMul", {z->output(), linear->output()}, 1, "com.microsoft");
  ms->set_output_type(0, Type::Static(DType::kF32, {}));
  // Result-less nodes with quoted names right after an unnamed typed output: the string
  // must be read as the next op, not as the output's name.
  g->AddNode("quoted op", {ms->output()}, 0);
  g->AddNode("Sink", {ms->output()}, 0, "my-domain");
  Node* weird = g->AddNode("Op.With.Dot", {ms->output(), Value{}}, 2, "my-domain");
  weird->set_output_name(1, "w1");
  g->AddNode("Bare", {}, 0, "return.x");
  g->AddNode("NoOut", {weird->output(1)}, 0);

  g->AddOutput("out", split->output(1));
  g->AddOutput("out 2", linear->output());
  g->AddOutput("again", split->output(1));
  g->AddOutput("w", weird->output(0));
  return g;
}

TEST(TextTest, RoundTripIsExact) {
  auto g = BuildRichGraph();
  ASSERT_TRUE(VerifyGraph(*g).ok()) << VerifyGraph(*g);
  const std::string text = PrintGraph(*g);
  auto parsed = ParseGraph(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << text;
  EXPECT_EQ(PrintGraph(**parsed), text);
  ExpectSameGraph(*g, **parsed);
  EXPECT_TRUE(VerifyGraph(**parsed).ok()) << VerifyGraph(**parsed);
  // Printing is deterministic and does not depend on node ids.
  EXPECT_EQ(PrintGraph(*g), text);
  EXPECT_EQ(PrintGraph(*g->Clone()), text);
}

TEST(TextTest, RoundTripWithOtherInlineLimits) {
  auto g = BuildRichGraph();
  for (int limit : {0, 1, 100}) {
    PrintOptions o;
    o.max_inline_elements = limit;
    const std::string text = PrintGraph(*g, o);
    auto parsed = ParseGraph(text);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(PrintGraph(**parsed, o), text);
    ExpectSameGraph(*g, **parsed);
  }
}

TEST(TextTest, PrintsAwkwardValuesReadably) {
  const std::string text = PrintGraph(*BuildRichGraph());
  // Spot checks of the encodings the format promises.
  EXPECT_NE(text.find("%4 = Constant() {value=tensor<f32[12]>[0.1, -0, inf, -inf, nan:0x7fc00000, "
                      "nan:0x7fc00001, nan:0xffc00000, 1e-45, 3.4028235e+38, 1, 1e+10, 3]} : "
                      "f32[12] \"c_f32\"\n"),
            std::string::npos)
      << text;
  EXPECT_NE(
      text.find(
          "tensor<f16[3,3]>[0, -0, 1, 5.9604645e-08, 65504, inf, -inf, nan:0x7e01, 0.33325195]"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("tensor<bool[3]>[false, true, 2]"), std::string::npos);
  EXPECT_NE(text.find("tensor<u64[2]>[0, 18446744073709551615]"), std::string::npos);
  EXPECT_NE(
      text.find("f=0.5, f_big=1e+10, f_inf=-inf, f_int=2.0, f_nan=nan:0xffc00042, "
                "f_negzero=-0.0, floats=[1.0, 0.25, -inf, nan:0x7fc00003], floats_empty=floats[]"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("s=\"q\\\"uote \\\\ back\\nnl\\ttab\\x01\\x7f caf\xc3\xa9\""),
            std::string::npos);
  EXPECT_NE(text.find("t_large=tensor<f32[17]>#0000403f0000403f"), std::string::npos);
  EXPECT_NE(text.find("t_string=tensor<string[2]>, t_undef=tensor<?>"), std::string::npos);
  EXPECT_NE(text.find("\"my attr\"=1"), std::string::npos);
  EXPECT_NE(text.find(": ?[2] @ \"attrs_node\""), std::string::npos);
  EXPECT_NE(text.find(": f16[?,\"seq+1\",7,\"128\",\"return\"] \"mask \\\"q\\\"\\n\""),
            std::string::npos);
  EXPECT_NE(text.find(" : f32[4] \"a\", f32[*] \"b\", ? \"c\" @ \"split_0\", \"fused \\\"x\\\"\"\n"
                      "  \"return\"(%"),
            std::string::npos);
  EXPECT_NE(text.find(" = kiln.Linear(%0, %"), std::string::npos);
  EXPECT_NE(text.find(" = com.microsoft.FusedMatMul(%2, %"), std::string::npos);
  EXPECT_NE(text.find(" = \"my-domain\".\"Op.With.Dot\"("), std::string::npos);
  EXPECT_NE(text.find("  \"return.x\".Bare()\n"), std::string::npos);
  EXPECT_NE(
      text.find("FusedMatMul(%2, %27) : f32[]\n  \"quoted op\"(%28)\n  \"my-domain\".Sink(%28)\n"),
      std::string::npos);
}

TEST(TextTest, GoldenPrint) {
  Graph g;
  g.set_name("main");
  g.set_opset(17);
  Node* x =
      g.AddInput("input_ids", SymType(DType::kI64, {Dim::Symbol("batch"), Dim::Symbol("seq")}));
  Node* w = g.AddConstant("w", Tensor::FromF32({2}, {1.f, 2.5f}));
  Node* split = g.AddNode("Split", {w->output()}, 2);
  split->set_attr("axis", int64_t{0});
  split->set_output_type(0, Type::Static(DType::kF32, {1}));
  split->set_output_type(1, Type::Static(DType::kF32, {1}));
  split->set_output_name(0, "a");
  split->set_provenance({"split_0"});
  Node* lin = g.AddNode("Linear", {x->output(), w->output(), Value{}}, 1, "kiln");
  lin->set_attr("alpha", 1.0f);
  lin->set_attr("perm", std::vector<int64_t>{0, 1});
  g.AddOutput("out", split->output(0));
  g.AddOutput("out2", lin->output());
  const std::string expected =
      "graph main opset=17 {\n"
      "  %0 = Input() : i64[batch,seq] \"input_ids\"\n"
      "  %1 = Constant() {value=tensor<f32[2]>[1, 2.5]} : f32[2] \"w\"\n"
      "  %2, %3 = Split(%1) {axis=0} : f32[1] \"a\", f32[1] @ \"split_0\"\n"
      "  %4 = kiln.Linear(%0, %1, _) {alpha=1.0, perm=[0, 1]}\n"
      "  return \"out\": %2, \"out2\": %4\n"
      "}\n";
  EXPECT_EQ(PrintGraph(g), expected);
  auto parsed = ParseGraph(expected);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ExpectSameGraph(g, **parsed);
}

TEST(TextTest, ParsesHandWrittenText) {
  const char* text = R"(// A hand-written graph: comments, free spacing, a forward reference.
graph "my model" opset = 21 {
  %10 = Input() : f32[batch, 3] "x"   // trailing comment
  %11 = Relu(%12) @ "relu"            // %12 is defined on the next line
  %12 = Neg(%10) : f32[batch,3]
  %13 = Constant() {value = tensor<i64[2]>[0, -1]} : i64[2]
  %14 = Reshape(%11, %13) {allowzero=0, scales=[1, 2.5], names=["a"], empty=floats[],
                           forced=floats[1, 2]} : ?[*]
  %15 = Constant() {value=tensor<f16[2]>[0.5, nan]}
  return "y": %14, "skip": _
}
)";
  auto r = ParseGraph(text);
  ASSERT_TRUE(r.ok()) << r.status();
  Graph& g = **r;
  EXPECT_EQ(g.name(), "my model");
  EXPECT_EQ(g.opset(), 21);
  ASSERT_EQ(g.num_nodes(), 6);
  std::vector<Node*> n;
  for (const auto& p : g.nodes()) n.push_back(p.get());
  ASSERT_EQ(g.inputs().size(), 1u);
  EXPECT_EQ(g.inputs()[0], n[0]);
  EXPECT_EQ(n[0]->output_info(0).name, "x");
  EXPECT_EQ(n[0]->output_info(0).type, SymType(DType::kF32, {Dim::Symbol("batch"), Dim::Known(3)}));
  EXPECT_EQ(n[1]->op(), "Relu");
  EXPECT_EQ(n[1]->domain(), "");
  EXPECT_EQ(n[1]->input(0), n[2]->output());
  EXPECT_EQ(n[1]->provenance(), std::vector<std::string>{"relu"});
  EXPECT_EQ(n[1]->output_info(0).type, Type());
  EXPECT_EQ(n[2]->input(0), n[0]->output());
  ASSERT_EQ(n[2]->output_info(0).uses.size(), 1u);
  EXPECT_EQ(n[2]->output_info(0).uses[0], (Use{n[1], 0}));
  const Tensor* shape = n[3]->constant_value();
  ASSERT_NE(shape, nullptr);
  EXPECT_TRUE(shape->BitwiseEqual(Tensor::FromI64({2}, {0, -1})));
  EXPECT_EQ(n[4]->input(1), n[3]->output());
  EXPECT_EQ(n[4]->attr_int("allowzero"), 0);
  ASSERT_NE(n[4]->attr_floats("scales"), nullptr);
  EXPECT_EQ(*n[4]->attr_floats("scales"), (std::vector<float>{1.f, 2.5f}));
  EXPECT_EQ(*n[4]->attr_floats("forced"), (std::vector<float>{1.f, 2.f}));
  EXPECT_EQ(*n[4]->attr_floats("empty"), std::vector<float>{});
  EXPECT_EQ(std::get<std::vector<std::string>>(n[4]->attrs().at("names")),
            std::vector<std::string>{"a"});
  EXPECT_EQ(n[4]->output_info(0).type, Type());
  const Tensor* half = n[5]->constant_value();
  ASSERT_NE(half, nullptr);
  EXPECT_EQ(half->dtype(), DType::kF16);
  EXPECT_EQ(half->data<uint16_t>()[0], 0x3800);
  EXPECT_EQ(half->data<uint16_t>()[1], 0x7e00);  // `nan` is the canonical quiet NaN
  ASSERT_EQ(g.outputs().size(), 2u);
  EXPECT_EQ(g.outputs()[0].name, "y");
  EXPECT_EQ(g.outputs()[0].value, n[4]->output());
  EXPECT_FALSE(g.outputs()[1].value);
  // The text is not topologically ordered: parse keeps it, the verifier objects.
  g.ClearOutputs();
  g.AddOutput("y", n[4]->output());
  EXPECT_FALSE(VerifyGraph(g).ok());
  ASSERT_TRUE(g.TopoSort().ok());
  // Constant %15 has no stored type, which the verifier also rejects; give it one.
  n[5]->set_output_type(0, Type::Static(DType::kF16, {2}));
  EXPECT_TRUE(VerifyGraph(g).ok()) << VerifyGraph(g);
}

TEST(TextTest, NonTopologicalGraphRoundTrips) {
  Graph g;
  Node* x = g.AddInput("x", Type::Static(DType::kF32, {2}));
  Node* a = g.AddNode("Add", {x->output(), Value{}}, 1);
  Node* b = g.AddNode("Neg", {a->output()}, 1);
  g.SetInput(a, 1, b->output());  // a cycle
  g.AddOutput("y", b->output());
  const std::string text = PrintGraph(g);
  EXPECT_NE(text.find("%1 = Add(%0, %2)"), std::string::npos) << text;
  auto parsed = ParseGraph(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(PrintGraph(**parsed), text);
  ExpectSameGraph(g, **parsed);
}

// The narrow types print as values (narrow-float NaNs by their code) and parse back to the
// same bytes; a value the type cannot hold is an error, not a silent rounding to NaN.
TEST(TextTest, NarrowTypesRoundTrip) {
  Graph g;
  g.AddConstant("e4", Make<uint8_t>(DType::kF8E4M3FN, {5}, {0x38, 0xc1, 0x7e, 0xff, 0x01}));
  g.AddConstant("e5", Make<uint8_t>(DType::kF8E5M2, {3}, {0x7c, 0xfe, 0x80}));
  g.AddConstant("uz", Make<uint8_t>(DType::kF8E4M3FNUZ, {2}, {0x80, 0x7f}));
  g.AddConstant("e8", Make<uint8_t>(DType::kF8E8M0, {2}, {127, 0xff}));
  g.AddConstant("f4", Make<uint8_t>(DType::kF4E2M1, {3}, {0x7, 0x8, 0x1}));
  g.AddConstant("i4", Make<int8_t>(DType::kI4, {3}, {-8, 7, -1}));
  g.AddConstant("u2", Make<uint8_t>(DType::kU2, {2}, {0, 3}));
  const std::string text = PrintGraph(g);
  EXPECT_NE(text.find("tensor<f8e4m3fn[5]>[1, -2.25, 448, nan:0xff, 0.001953125]"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("tensor<f8e5m2[3]>[inf, nan:0xfe, -0]"), std::string::npos) << text;
  EXPECT_NE(text.find("tensor<f8e4m3fnuz[2]>[nan:0x80, 240]"), std::string::npos) << text;
  EXPECT_NE(text.find("tensor<f8e8m0[2]>[1, nan:0xff]"), std::string::npos) << text;
  EXPECT_NE(text.find("tensor<f4e2m1[3]>[6, -0, 0.5]"), std::string::npos) << text;
  EXPECT_NE(text.find("tensor<i4[3]>[-8, 7, -1]"), std::string::npos) << text;
  EXPECT_NE(text.find("tensor<u2[2]>[0, 3]"), std::string::npos) << text;
  auto parsed = ParseGraph(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << text;
  EXPECT_EQ(PrintGraph(**parsed), text);
  ExpectSameGraph(g, **parsed);

  for (const char* bad :
       {"tensor<f8e4m3fn[1]>[500]", "tensor<f8e4m3fn[1]>[inf]", "tensor<f4e2m1[1]>[nan]",
        "tensor<f8e4m3fn[1]>[nan:0x7e]", "tensor<i4[1]>[8]", "tensor<u2[1]>[-1]",
        "tensor<f4e2m1[1]>[100]", "tensor<f8e8m0[1]>[0]", "tensor<f8e8m0[1]>[-4]"}) {
    SCOPED_TRACE(bad);
    auto r = ParseGraph(absl::StrCat("graph g opset=1 {\n  %0 = A() {t=", bad, "}\n}"));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(r.status().message().find("not representable") != std::string::npos ||
                r.status().message().find("not a NaN of") != std::string::npos ||
                r.status().message().find("integer out of range") != std::string::npos)
        << r.status();
  }
}

TEST(TextTest, LargeConstantsInlineHexOrElided) {
  Graph g;
  g.AddConstant("c16", Tensor::FromF32({16}, std::vector<float>(16, 1.f)));
  g.AddConstant("c17", Tensor::FromF32({17}, std::vector<float>(17, 1.f)));
  const std::string exact = PrintGraph(g);
  EXPECT_NE(exact.find("tensor<f32[16]>[1, 1, 1,"), std::string::npos);
  EXPECT_NE(exact.find("tensor<f32[17]>#0000803f0000803f"), std::string::npos);
  PrintOptions o;
  o.elide_large_constants = true;
  const std::string elided = PrintGraph(g, o);
  EXPECT_NE(elided.find("tensor<f32[16]>[1, 1, 1,"), std::string::npos);
  EXPECT_NE(elided.find("{value=tensor<f32[17]>...}"), std::string::npos) << elided;
  absl::StatusOr<std::unique_ptr<Graph>> r = ParseGraph(elided);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("3:41: elided constant data"), std::string::npos)
      << r.status();
}

TEST(TextTest, GraphNamesNeedingQuotes) {
  for (const std::string name : {"", "my model", "return", "9lives", "x.y"}) {
    Graph g;
    g.set_name(name);
    auto r = ParseGraph(PrintGraph(g));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ((*r)->name(), name);
  }
}

// The example in docs/ir.md parses and prints back as written (minus its comment line),
// so the documentation stays true.
TEST(TextTest, DocsExampleRoundTrips) {
  std::ifstream in(std::string(KILN_SOURCE_DIR) + "/docs/ir.md");
  ASSERT_TRUE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  const size_t start = doc.find("```\n// comments");
  ASSERT_NE(start, std::string::npos);
  const size_t body = doc.find("graph main", start);
  const size_t end = doc.find("```", body);
  ASSERT_NE(end, std::string::npos);
  const std::string example = doc.substr(body, end - body);
  auto r = ParseGraph(doc.substr(start + 4, end - start - 4));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(PrintGraph(**r), example);
  EXPECT_EQ((*r)->nodes().back()->domain(), "com.microsoft");
}

struct BadCase {
  const char* text;
  const char* error;  // expected substring, with line:column
};

TEST(TextTest, BadTextGivesPositionedErrors) {
  const BadCase cases[] = {
      {"", "1:1: expected 'graph', found end of input"},
      {"graf g opset=1 {}", "1:1: expected 'graph', found \"graf\""},
      {"graph g {}", "1:9: expected 'opset=' after the graph name"},
      {"graph g opset=x {}", "1:15: expected the opset version, found \"x\""},
      {"graph g opset=1 {\n  %0 = Relu(%1)\n}", "2:13: value %1 is used but never defined"},
      {"graph g opset=1 {\n  %0 = Relu(%1\n}", "3:1: expected ',' or ')' after an operand"},
      {"graph g opset=1 {\n  %0 = Relu(x)\n}", "2:13: expected an operand ('%N' or '_')"},
      {"graph g opset=1 {\n  %0 = Input() : f33[2]\n}", "2:18: unknown dtype 'f33'"},
      {"graph g opset=1 {\n  %0 = Input() : f32[2,-1]\n}", "2:24: negative dimension"},
      {"graph g opset=1 {\n  %0 = Input() : f32[2 3]\n}",
       "2:24: expected ',' or ']' in a shape, found \"3]\""},
      {"graph g opset=1 {\n  %0 = A() : f32[2] \"unterminated\n}", "2:21: unterminated string"},
      {"graph g opset=1 {\n  %0 = A() {s=\"a\\qb\"}\n}", "2:17: unknown escape in string"},
      {"graph g opset=1 {\n  %0 = A() {s=\"\\x4\"}\n}", "2:16: expected two hex digits after \\x"},
      {"graph g opset=1 {\n  %0 = A()\n  %0 = B()\n}", "3:3: value %0 is defined twice"},
      {"graph g opset=1 {\n  %0 = A() {a=1, a=2}\n}", "2:18: duplicate attribute 'a'"},
      {"graph g opset=1 {\n  %0 = A() {a=[]}\n}", "2:15: an empty list needs its type"},
      {"graph g opset=1 {\n  %0 = A() {a=[1, \"x\"]}\n}", "2:19: a list mixes strings and numbers"},
      {"graph g opset=1 {\n  %0 = A() {a=ints[1.5]}\n}", "2:20: expected an integer"},
      {"graph g opset=1 {\n  %0 = A() {a=1.2.3}\n}", "2:15: malformed number"},
      {"graph g opset=1 {\n  %0 = A() {a=12abc}\n}", "2:15: malformed number"},
      {"graph g opset=1 {\n  %0 = A() {a=99999999999999999999}\n}",
       "2:15: integer out of range for int64"},
      {"graph g opset=1 {\n  %0 = A() {a=1e99}\n}", "2:15: number out of range for f32"},
      {"graph g opset=1 {\n  %0 = A() {a=}\n}", "2:15: expected an attribute value"},
      {"graph g opset=1 {\n  %0 = A() {t=tensor<f32[2]>[1]}\n}",
       "2:29: the tensor has 2 elements but 1 are given"},
      {"graph g opset=1 {\n  %0 = A() {t=tensor<f32[1]>[1, 2]}\n}",
       "2:33: too many elements: the tensor has 1"},
      {"graph g opset=1 {\n  %0 = A() {t=tensor<f32[1]>#0000}\n}",
       "2:30: expected 8 hex digits of tensor data, found 4"},
      {"graph g opset=1 {\n  %0 = A() {t=tensor<f32[1000000000000]>#00}\n}",
       "2:42: expected 8000000000000 hex digits of tensor data, found 2"},
      {"graph g opset=1 {\n  %0 = A() {t=tensor<f32[4294967296,4294967296]>[]}\n}",
       "2:15: element count overflows int64"},
      {"graph g opset=1 {\n  %0 = A() {t=tensor<i8[1]>[300]}\n}",
       "2:29: integer out of range for i8"},
      {"graph g opset=1 {\n  %0 = A() {t=tensor<u64[1]>[-1]}\n}",
       "2:30: expected a non-negative integer"},
      {"graph g opset=1 {\n  %0 = A() {t=tensor<i32[1]>[1.5]}\n}", "2:30: expected an integer"},
      {"graph g opset=1 {\n  %0 = A() {t=tensor<f16[1]>[1e6]}\n}",
       "2:30: number out of range for f16"},
      {"graph g opset=1 {\n  %0 = A() {t=tensor<f32[1]>[nan:0x3f800000]}\n}",
       "2:30: bits after 'nan:' are not a NaN of f32"},
      {"graph g opset=1 {\n  %0 = A() {t=tensor<f32[1]>[-nan:0x7fc00000]}\n}",
       "2:30: a NaN with explicit bits takes no sign"},
      {"graph g opset=1 {\n  %0 = A() {t=tensor<f32[1]>}\n}", "2:29: expected tensor data"},
      {"graph g opset=1 {\n  %0 = A() {t=tensor<f32[1]>...}\n}", "2:29: elided constant data"},
      {"graph g opset=1 {\n  %0 = A() {t=tensor<q8[1]>[1]}\n}", "2:22: unknown dtype 'q8'"},
      {"graph g opset=1 {\n  %0, %1 = Split() : f32[1]\n}",
       "3:1: expected ',' and a type for each of the 2 results"},
      {"graph g opset=1 {\n  %0 = A() : f32[1], f32[1]\n}", "2:22: more types than the 1 results"},
      {"graph g opset=1 {\n  A() : f32[1]\n}", "2:7: a node without results has no types"},
      {"graph g opset=1 {\n  %0 = Input(%0) : f32[1]\n}",
       "2:8: an Input node has no operands and exactly one result"},
      {"graph g opset=1 {\n  %0 = A() @ x\n}", "2:14: expected a quoted provenance name"},
      {"graph g opset=1 {\n  %99999999999999999999 = A()\n}", "2:3: value number out of range"},
      {"graph g opset=1 {\n  % 1 = A()\n}", "2:5: expected digits after '%', found \"1\""},
      {"graph g opset=1 {\n  %0 = kiln.()\n}", "2:13: expected an op name after '.'"},
      {"graph g opset=1 {\n  %0 = A()\n  return \"y\" %0\n}",
       "3:14: expected ':' after the graph output name"},
      {"graph g opset=1 {\n  return \"y\": %3\n}", "2:15: value %3 is used but never defined"},
      {"graph g opset=1 {\n  return\n  %0 = A()\n}",
       "3:3: expected '}' after the return statement"},
      {"graph g opset=1 {\n  %0 = A()\n",
       "3:1: expected '}' closing the graph, found end of input"},
      {"graph g opset=1 {\n}\nextra", "3:1: expected end of input after the graph's '}'"},
      {"graph g opset=1 {\n  %0 = A(\x01)\n}", "2:10: expected an operand"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.text);
    absl::StatusOr<std::unique_ptr<Graph>> r = ParseGraph(c.text);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.error), std::string::npos) << r.status();
  }
}

// Every prefix of a valid text is rejected cleanly (no crash, InvalidArgument); and
// random single-byte edits either fail cleanly or give a graph that round-trips.
TEST(TextTest, TruncatedAndMutatedTextNeverCrashes) {
  const std::string text = PrintGraph(*BuildRichGraph());
  for (size_t len = 0; len + 2 < text.size(); ++len) {
    auto r = ParseGraph(std::string_view(text).substr(0, len));
    ASSERT_FALSE(r.ok()) << len;
    ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  }
  std::mt19937 rng(1234);
  const std::string alphabet = "%_,()[]{}<>:=@.\"\\#?*-+0129aefxn \n/";
  int parsed_ok = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string t = text;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) t[rng() % t.size()] = alphabet[rng() % alphabet.size()];
    auto r = ParseGraph(t);
    if (!r.ok()) {
      ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
      continue;
    }
    ++parsed_ok;
    const std::string once = PrintGraph(**r);
    auto again = ParseGraph(once);
    ASSERT_TRUE(again.ok()) << again.status() << "\n" << t;
    ASSERT_EQ(PrintGraph(**again), once);
  }
  // Some edits (inside strings, digits of values) keep the text valid; make sure the
  // round-trip branch above was exercised.
  EXPECT_GT(parsed_ok, 50);
}

}  // namespace
}  // namespace kiln
