// ONNX round trip of kiln's fused ops (domain "kiln", version 1): a graph holding every
// fused op (optional inputs omitted in the middle and at the end, SkipLayerNorm with one
// and with two outputs, initializer weights) is exported, checked to declare the "kiln"
// opset 1, imported again, and must print the same IR and compute bit-identical outputs
// on the reference executor. The importer rejects other versions of the domain with
// Unimplemented.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "kiln/ir/text.h"
#include "kiln/ir/verifier.h"
#include "kiln/onnx/exporter.h"
#include "kiln/onnx/importer.h"
#include "kiln/reference/executor.h"
#include "onnx/onnx_pb.h"

namespace kiln {
namespace {

// Every fused op, with optional inputs omitted in the middle and at the end. Weights are
// constants (exported as initializers, which the importer puts first: so they come first
// here too); types on every value (exported as value_info).
constexpr char kFused[] = R"(graph fused opset=21 {
  %3 = Constant() {value=tensor<f32[5,6]>[0.1, -0.2, 0.3, 0.4, -0.5, 0.6, 0.7, 0.8, -0.9, 1.0, 0.15, 0.25, -0.35, 0.45, 0.55, 0.65, -0.75, 0.85, 0.95, 0.05, 0.12, -0.22, 0.32, 0.42, 0.52, 0.62, 0.72, -0.82, 0.92, 0.11]} : f32[5,6] "word"
  %4 = Constant() {value=tensor<f32[4,6]>[0.3, 0.1, -0.4, 0.1, 0.5, -0.9, 0.2, 0.6, 0.5, -0.3, 0.5, 0.8, 0.9, -0.7, 0.9, 0.3, 0.2, 0.3, -0.8, 0.4, 0.6, 0.2, -0.6, 0.4]} : f32[4,6] "pos"
  %5 = Constant() {value=tensor<f32[2,6]>[0.01, 0.02, -0.03, 0.04, 0.05, -0.06, 0.07, -0.08, 0.09, 0.1, -0.11, 0.12]} : f32[2,6] "seg"
  %6 = Constant() {value=tensor<f32[6]>[1.1, 0.9, 1.2, 0.8, 1.05, 0.95]} : f32[6] "gamma"
  %7 = Constant() {value=tensor<f32[6]>[0.1, -0.1, 0.2, -0.2, 0.05, -0.05]} : f32[6] "beta"
  %9 = Constant() {value=tensor<f32[18,6]>#)"
                          R"(PLACEHOLDER_QKV_W} : f32[18,6] "qkv_w"
  %10 = Constant() {value=tensor<f32[18]>[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, -0.1, -0.2, -0.3, -0.4, -0.5, -0.6, -0.7, -0.8, -0.9]} : f32[18] "qkv_b"
  %12 = Constant() {value=tensor<i64[1]>[1]} : i64[1] "one"
  %23 = Constant() {value=tensor<f32[4]>[0.5, 1.5, -1.0, 2.0]} : f32[4] "g4"
  %0 = Input() : i64[batch,4] "input_ids"
  %1 = Input() : i64[batch,4] "token_type_ids"
  %2 = Input() : f32[batch,4] "attention_mask"
  %8 = kiln.EmbedLayerNorm(%0, %1, _, %3, %4, %5, %6, %7) {epsilon=1e-12} : f32[batch,4,6] @ "emb"
  %11 = kiln.Linear(%8, %9, %10) {trans_w=1} : f32[batch,4,18] @ "qkv"
  %13 = Unsqueeze(%2, %12) : f32[batch,1,4]
  %14 = Unsqueeze(%13, %12) : f32[batch,1,1,4]
  %15 = kiln.MultiHeadAttention(%11, %14) {num_heads=2, scale=0.57735026} : f32[batch,4,6] @ "attn"
  %16, %17 = kiln.SkipLayerNorm(%15, %8, %6, %7, %7) {epsilon=1e-5} : f32[batch,4,6], f32[batch,4,6] @ "sln1"
  %18 = kiln.Linear(%16, %4) {activation="gelu_tanh", trans_w=1} : f32[batch,4,4] @ "ffn"
  %19 = kiln.RMSNorm(%18, %23) {epsilon=1e-6} : f32[batch,4,4]
  %20 = kiln.SkipLayerNorm(%17, %16, %6) : f32[batch,4,6] @ "sln2"
  %21 = kiln.Pool(%20, %2) {mode="mean", normalize=1} : f32[batch,6] @ "pool"
  %22 = kiln.Pool(%20) {mode="cls"} : f32[batch,6]
  return "pooled": %21, "cls": %22, "rms": %19, "sum": %17
})";

std::string FusedText() {
  // 108 weights printed inline would exceed max_inline_elements; spell them in hex bytes.
  std::string hex;
  std::mt19937 rng(3);
  for (int i = 0; i < 108; ++i) {
    const float v = static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 1000.0f;
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    for (int b = 0; b < 4; ++b)
      hex += absl::StrCat(absl::Hex((bits >> (8 * b)) & 0xff, absl::kZeroPad2));
  }
  std::string text = kFused;
  const std::string key = "PLACEHOLDER_QKV_W";
  text.replace(text.find(key), key.size(), hex);
  return text;
}

// The exporter names unnamed values ("kiln_<id>_<i>") and ONNX nodes ("<provenance>#<id>"),
// which the importer keeps as value names and provenance: clear both so the comparison is
// about ops, domains, attributes, wiring, types, constants, inputs and outputs.
std::string Normalized(const Graph& g, bool keep_names = false) {
  std::unique_ptr<Graph> c = g.Clone();
  for (const auto& p : c->nodes()) {
    p->set_provenance({});
    if (p->is_input() || p->is_constant() || keep_names) continue;
    for (int i = 0; i < p->num_outputs(); ++i) p->set_output_name(i, "");
  }
  return PrintGraph(*c);
}

absl::StatusOr<std::unique_ptr<Graph>> RoundTrip(const Graph& g) {
  absl::StatusOr<std::string> bytes = ExportOnnxBytes(g);
  if (!bytes.ok()) return bytes.status();
  return ImportOnnxBytes(*bytes, "");
}

std::unique_ptr<Graph> MustParse(const std::string& text) {
  auto g = ParseGraph(text);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return nullptr;
  EXPECT_TRUE(VerifyGraph(**g).ok()) << VerifyGraph(**g);
  return std::move(*g);
}

absl::flat_hash_map<std::string, Tensor> Feeds(int64_t batch) {
  Tensor ids(DType::kI64, {batch, 4}), seg(DType::kI64, {batch, 4}), mask(DType::kF32, {batch, 4});
  for (int64_t i = 0; i < ids.NumElements(); ++i) {
    ids.SetFromDouble(i, (i * 3 + 1) % 5);
    seg.SetFromDouble(i, i % 4 >= 2);
    mask.SetFromDouble(i, i % 4 == 3 ? 0.0 : 1.0);
  }
  // The additive mask convention is the caller's business; here the raw 0/1 mask is added.
  return {{"input_ids", ids}, {"token_type_ids", seg}, {"attention_mask", mask}};
}

TEST(FusedRoundTripTest, ExportImportGivesTheSameIrAndOutputs) {
  auto g = MustParse(FusedText());
  ASSERT_TRUE(g);
  absl::StatusOr<std::string> bytes = ExportOnnxBytes(*g);
  ASSERT_TRUE(bytes.ok()) << bytes.status();

  onnx::ModelProto model;
  ASSERT_TRUE(model.ParseFromString(*bytes));
  int kiln_imports = 0;
  for (const auto& imp : model.opset_import())
    if (imp.domain() == "kiln") {
      ++kiln_imports;
      EXPECT_EQ(imp.version(), 1);
    }
  EXPECT_EQ(kiln_imports, 1);
  int kiln_nodes = 0;
  for (const auto& n : model.graph().node()) kiln_nodes += n.domain() == "kiln";
  EXPECT_EQ(kiln_nodes, 9);

  absl::StatusOr<std::unique_ptr<Graph>> back = ImportOnnxBytes(*bytes, "");
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_TRUE(VerifyGraph(**back).ok()) << VerifyGraph(**back);
  EXPECT_EQ(Normalized(**back), Normalized(*g));
  // Graph input, constant and graph output names survive as they are.
  EXPECT_NE(PrintGraph(**back).find("\"token_type_ids\""), std::string::npos);
  EXPECT_NE(PrintGraph(**back).find("f32[6] \"gamma\""), std::string::npos);
  // A second round trip is a fixpoint, value names included (provenance grows a "#id"
  // suffix per export: the exporter's node naming).
  absl::StatusOr<std::unique_ptr<Graph>> again = RoundTrip(**back);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(Normalized(**again, true), Normalized(**back, true));

  for (int64_t batch : {1, 3}) {
    auto feeds = Feeds(batch);
    auto want = RunReference(*g, feeds);
    auto got = RunReference(**back, feeds);
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(want->size(), got->size());
    for (size_t i = 0; i < want->size(); ++i) {
      EXPECT_TRUE((*want)[i].BitwiseEqual((*got)[i])) << "output " << i << " batch " << batch;
      for (int64_t j = 0; j < (*want)[i].NumElements(); ++j)
        ASSERT_TRUE(std::isfinite((*want)[i].GetAsDouble(j))) << "output " << i;
    }
  }
}

TEST(FusedRoundTripTest, TrailingOmittedInputIsDroppedOnImport) {
  // IR convention: a trailing omitted optional input may be null or absent; ONNX export
  // writes "" and the importer drops trailing empty names.
  auto g = MustParse(R"(graph g opset=21 {
  %0 = Input() : f32[2,3] "x"
  %1 = Input() : f32[3,4] "w"
  %2 = kiln.Linear(%0, %1, _) : f32[2,4]
  return "y": %2
})");
  ASSERT_TRUE(g);
  absl::StatusOr<std::unique_ptr<Graph>> back = RoundTrip(*g);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(Normalized(**back), Normalized(*MustParse(R"(graph g opset=21 {
  %0 = Input() : f32[2,3] "x"
  %1 = Input() : f32[3,4] "w"
  %2 = kiln.Linear(%0, %1) : f32[2,4]
  return "y": %2
})")));
}

// The default-domain opset (and IR version) of an export is kExportOpset, or the opset of
// the newest op in the graph — here TensorScatter (opset 24), which the import of
// com.microsoft GroupQueryAttention adds to a model of any opset: at 21 the file would not
// read back.
TEST(FusedRoundTripTest, ExportOpsetCoversTheNewestOp) {
  const auto versions = [](const std::string& text) -> std::pair<int64_t, int64_t> {
    auto g = MustParse(text);
    if (!g) return {-1, -1};
    absl::StatusOr<std::string> bytes = ExportOnnxBytes(*g);
    onnx::ModelProto model;
    if (!bytes.ok() || !model.ParseFromString(*bytes)) return {-1, -1};
    for (const auto& imp : model.opset_import())
      if (imp.domain().empty()) return {imp.version(), model.ir_version()};
    return {-1, -1};
  };
  EXPECT_EQ(versions(R"(graph g opset=21 {
  %0 = Input() : f32[2,3] "x"
  %1 = Relu(%0) : f32[2,3]
  return "y": %1
})"),
            (std::pair<int64_t, int64_t>{kExportOpset, 9}));
  const std::string scatter = R"(graph g opset=21 {
  %0 = Input() : f32[1,2,4,3] "cache"
  %1 = Input() : f32[1,2,1,3] "new"
  %2 = Input() : i64[1] "at"
  %3 = TensorScatter(%0, %1, %2) {axis=2} : f32[1,2,4,3]
  return "y": %3
})";
  EXPECT_EQ(versions(scatter), (std::pair<int64_t, int64_t>{24, 12}));
  auto g = MustParse(scatter);
  ASSERT_TRUE(g);
  absl::StatusOr<std::unique_ptr<Graph>> back = RoundTrip(*g);
  ASSERT_TRUE(back.ok()) << back.status();
}

TEST(FusedRoundTripTest, OtherKilnDomainVersionsAreUnimplemented) {
  auto g = MustParse(FusedText());
  ASSERT_TRUE(g);
  absl::StatusOr<std::string> bytes = ExportOnnxBytes(*g);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  onnx::ModelProto model;
  ASSERT_TRUE(model.ParseFromString(*bytes));
  for (int64_t version : {0, 2}) {
    for (auto& imp : *model.mutable_opset_import())
      if (imp.domain() == "kiln") imp.set_version(version);
    std::string modified;
    ASSERT_TRUE(model.SerializeToString(&modified));
    auto r = ImportOnnxBytes(modified, "");
    ASSERT_FALSE(r.ok()) << "version " << version;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented) << r.status();
    EXPECT_NE(r.status().message().find(absl::StrCat("opset ", version, " of domain 'kiln'")),
              std::string::npos)
        << r.status();
  }
}

TEST(FusedRoundTripTest, UnknownKilnOpAndMissingRequiredInputAreRejected) {
  auto g = MustParse(FusedText());
  ASSERT_TRUE(g);
  absl::StatusOr<std::string> bytes = ExportOnnxBytes(*g);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  onnx::ModelProto model;
  ASSERT_TRUE(model.ParseFromString(*bytes));
  {
    onnx::ModelProto m = model;
    for (auto& n : *m.mutable_graph()->mutable_node())
      if (n.domain() == "kiln" && n.op_type() == "RMSNorm") n.set_op_type("FancyNorm");
    std::string s;
    ASSERT_TRUE(m.SerializeToString(&s));
    auto r = ImportOnnxBytes(s, "");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented) << r.status();
    EXPECT_NE(r.status().message().find("kiln.FancyNorm"), std::string::npos) << r.status();
  }
  {
    // EmbedLayerNorm's word_emb (slot 3) is required even though slots 1, 2 may be empty.
    onnx::ModelProto m = model;
    for (auto& n : *m.mutable_graph()->mutable_node())
      if (n.op_type() == "EmbedLayerNorm") n.set_input(3, "");
    std::string s;
    ASSERT_TRUE(m.SerializeToString(&s));
    auto r = ImportOnnxBytes(s, "");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_NE(r.status().message().find("input 3 is required"), std::string::npos) << r.status();
  }
}

}  // namespace
}  // namespace kiln
