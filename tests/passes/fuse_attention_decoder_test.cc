// Tests for fuse-attention on decoder blocks (Llama / Qwen2 / Mistral as the HF exporters
// write them): fuse-rotary's kiln.Rotary on the Q and K heads and the repeat_kv expansion
// of grouped K/V heads between the head split and the attention MatMuls. Each form fuses
// into one kiln.MultiHeadAttention with num_kv_heads and the rotary tables as inputs
// (structure, report counters, numeric equivalence on the reference executor), with and
// without fuse-qkv first; each near-miss reports its exact reason and leaves the graph.
// Tolerance 1e-5, as fuse_attention_test.cc: the fused op accumulates in double where the
// decomposed graph rounds each op to f32, on O(1) scores.
#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

#include "tests/passes/attention_test_graphs.h"
#include "tests/passes/pass_test_util.h"

namespace kiln {
namespace {

using attention_test::Emitter;
using attention_test::MaxDiffAfter;
using attention_test::NodesOf;
using testing::RunWithReport;

// B = 2, S = 5, N = 4 query heads of D = 4 (H = 16) over Nkv K/V heads.
constexpr int kB = 2, kS = 5, kN = 4, kD = 4, kH = kN * kD;

struct DecoderSpec {
  int kv_heads = 2;                    // Nkv; kN / Nkv = the repeat_kv factor (1: no expansion)
  bool rotary_q = true;                // kiln.Rotary on Q's heads
  bool rotary_k = true;                // ... on K's heads
  bool k_own_tables = false;           // K rotated with other tables than Q
  std::string table_dims = "1,1,5,4";  // cos / sin dims against [B, N, S, D]
  // A KV cache of `past` positions: inputs past_k / past_v [B, Nkv, past, D] concatenated in
  // front of this step's (rotated) K and V heads, which are the outputs present_k /
  // present_v; the mask and the scores then span L = past + S keys.
  int past = 0;
};

std::string Dims(std::initializer_list<int> d) {
  std::vector<std::string> s;
  for (int v : d) s.push_back(std::to_string(v));
  return absl::StrCat("f32[", absl::StrJoin(s, ","), "]");
}

std::string WeightLiteral(int rows, int cols, int seed) {
  std::vector<std::string> e;
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j)
      e.push_back(absl::StrFormat("%.2f", ((i * 7 + j * 3 + seed * 5) % 11 - 5) * 0.05));
  return absl::StrFormat("tensor<f32[%d,%d]>[%s]", rows, cols, absl::StrJoin(e, ", "));
}

// x [B, S, H] -> MatMul projections, head splits, rotary, repeat_kv, causal-masked
// attention (an additive [B, 1, S, S] mask input), head merge -> y [B, S, H].
std::string DecoderBlock(const DecoderSpec& s) {
  Emitter e;
  const int rep = kN / s.kv_heads;
  const int kL = kS + s.past;  // keys
  const std::string x = e.Node("Input()", Dims({kB, kS, kH}), "", "x");
  const std::string mask = e.Node("Input()", Dims({kB, 1, kS, kL}), "", "mask");
  std::string past_k, past_v;
  if (s.past > 0) {
    past_k = e.Node("Input()", Dims({kB, s.kv_heads, s.past, kD}), "", "past_k");
    past_v = e.Node("Input()", Dims({kB, s.kv_heads, s.past, kD}), "", "past_v");
  }
  const std::string tdims = absl::StrCat("f32[", s.table_dims, "]");
  const std::string cos = e.Node("Input()", tdims, "", "cos");
  const std::string sin = e.Node("Input()", tdims, "", "sin");
  std::string cos_k = cos, sin_k = sin;
  if (s.k_own_tables) {
    cos_k = e.Node("Input()", tdims, "", "cos_k");
    sin_k = e.Node("Input()", tdims, "", "sin_k");
  }
  auto heads = [&](int part, int n, const std::string& name) {
    const int width = n * kD;
    const std::string w = e.Const(WeightLiteral(kH, width, part), Dims({kH, width}));
    const std::string p =
        e.Node(absl::StrCat("MatMul(", x, ", ", w, ")"), Dims({kB, kS, width}), name + "_proj");
    const std::string shape =
        e.Const(absl::StrFormat("tensor<i64[4]>[%d, %d, %d, %d]", kB, kS, n, kD), "i64[4]");
    const std::string r = e.Node(absl::StrCat("Reshape(", p, ", ", shape, ")"),
                                 Dims({kB, kS, n, kD}), name + "_split");
    return e.Node(absl::StrCat("Transpose(", r, ") {perm=[0, 2, 1, 3]}"), Dims({kB, n, kS, kD}),
                  name + "_heads");
  };
  auto repeat_kv = [&](const std::string& v, const std::string& name) {
    if (rep == 1) return v;
    const std::string axes = e.Const("tensor<i64[1]>[2]", "i64[1]");
    const std::string u = e.Node(absl::StrCat("Unsqueeze(", v, ", ", axes, ")"),
                                 Dims({kB, s.kv_heads, 1, kL, kD}), name + "_unsqueeze");
    const std::string to =
        e.Const(absl::StrFormat("tensor<i64[5]>[%d, %d, %d, %d, %d]", kB, s.kv_heads, rep, kL, kD),
                "i64[5]");
    const std::string ex = e.Node(absl::StrCat("Expand(", u, ", ", to, ")"),
                                  Dims({kB, s.kv_heads, rep, kL, kD}), name + "_expand");
    const std::string shape =
        e.Const(absl::StrFormat("tensor<i64[4]>[%d, %d, %d, %d]", kB, kN, kL, kD), "i64[4]");
    return e.Node(absl::StrCat("Reshape(", ex, ", ", shape, ")"), Dims({kB, kN, kL, kD}),
                  name + "_repeat");
  };
  std::string q = heads(0, kN, "q"), k = heads(1, s.kv_heads, "k"), v = heads(2, s.kv_heads, "v");
  if (s.rotary_q)
    q = e.Node(absl::StrCat("kiln.Rotary(", q, ", ", cos, ", ", sin, ")"), Dims({kB, kN, kS, kD}),
               "q_rotary");
  if (s.rotary_k)
    k = e.Node(absl::StrCat("kiln.Rotary(", k, ", ", cos_k, ", ", sin_k, ")"),
               Dims({kB, s.kv_heads, kS, kD}), "k_rotary");
  std::vector<std::pair<std::string, std::string>> outputs;
  if (s.past > 0) {
    k = e.Node(absl::StrCat("Concat(", past_k, ", ", k, ") {axis=2}"),
               Dims({kB, s.kv_heads, kL, kD}), "present_k", "present_k");
    v = e.Node(absl::StrCat("Concat(", past_v, ", ", v, ") {axis=2}"),
               Dims({kB, s.kv_heads, kL, kD}), "present_v", "present_v");
    outputs = {{"present_k", k}, {"present_v", v}};
  }
  k = repeat_kv(k, "k");
  v = repeat_kv(v, "v");
  const std::string kt =
      e.Node(absl::StrCat("Transpose(", k, ") {perm=[0, 1, 3, 2]}"), Dims({kB, kN, kD, kL}), "kt");
  const std::string qk =
      e.Node(absl::StrCat("MatMul(", q, ", ", kt, ")"), Dims({kB, kN, kS, kL}), "qk");
  const std::string two = e.Const("tensor<f32[]>[2.0]", "f32[]");
  const std::string scaled =
      e.Node(absl::StrCat("Div(", qk, ", ", two, ")"), Dims({kB, kN, kS, kL}), "scale");
  const std::string masked =
      e.Node(absl::StrCat("Add(", scaled, ", ", mask, ")"), Dims({kB, kN, kS, kL}), "mask_add");
  const std::string p =
      e.Node(absl::StrCat("Softmax(", masked, ") {axis=-1}"), Dims({kB, kN, kS, kL}), "softmax");
  const std::string pv =
      e.Node(absl::StrCat("MatMul(", p, ", ", v, ")"), Dims({kB, kN, kS, kD}), "pv");
  const std::string mt =
      e.Node(absl::StrCat("Transpose(", pv, ") {perm=[0, 2, 1, 3]}"), Dims({kB, kS, kN, kD}));
  const std::string shape3 =
      e.Const(absl::StrFormat("tensor<i64[3]>[%d, %d, %d]", kB, kS, kH), "i64[3]");
  const std::string y =
      e.Node(absl::StrCat("Reshape(", mt, ", ", shape3, ")"), Dims({kB, kS, kH}), "merge", "y");
  outputs.insert(outputs.begin(), {"y", y});
  return e.Finish(outputs);
}

const Node* OnlyAttention(const Graph& g) {
  EXPECT_TRUE(NodesOf(g, "", "Softmax").empty());
  EXPECT_TRUE(NodesOf(g, "kiln", "Rotary").empty());
  EXPECT_TRUE(NodesOf(g, "", "Expand").empty());
  const std::vector<const Node*> mha = NodesOf(g, "kiln", "MultiHeadAttention");
  EXPECT_EQ(mha.size(), 1u);
  return mha.size() == 1 ? mha[0] : nullptr;
}

TEST(FuseAttentionDecoder, RotaryAndGroupedHeadsFuse) {
  for (int kv : {4, 2, 1}) {
    SCOPED_TRACE(absl::StrCat("Nkv=", kv));
    DecoderSpec s;
    s.kv_heads = kv;
    const std::string text = DecoderBlock(s);
    const testing::FusionRun r = RunWithReport({"fuse-attention"}, text);
    ASSERT_TRUE(r.graph);
    const Node* mha = OnlyAttention(*r.graph);
    ASSERT_NE(mha, nullptr);
    EXPECT_EQ(mha->attr_int_or("num_heads", 0), kN);
    EXPECT_EQ(mha->attr_int_or("num_kv_heads", kN), kv);
    EXPECT_FALSE(mha->has_attr("num_kv_heads") && kv == kN);
    ASSERT_EQ(mha->num_inputs(), 4);
    EXPECT_EQ(mha->input(0).node->op(), "Concat");
    EXPECT_EQ(mha->input(0).type().ToString(), absl::StrCat("f32[2,5,", (kN + 2 * kv) * kD, "]"));
    EXPECT_EQ(mha->input(1).name(), "mask");
    // [1, 1, S, D] tables lose the head axis: [1, S, D].
    for (int i : {2, 3}) {
      EXPECT_EQ(mha->input(i).node->op(), "Squeeze");
      EXPECT_EQ(mha->input(i).type().ToString(), "f32[1,5,4]");
    }
    EXPECT_EQ(r.report.kinds().at("attention").fused, 1);
    EXPECT_TRUE(r.report.kinds().at("attention").missed.empty());
    EXPECT_EQ(r.counters.at("rotary"), 1);
    EXPECT_EQ(r.counters.count("grouped-query"), kv == kN ? 0u : 1u);
    EXPECT_LE(MaxDiffAfter({"fuse-attention"}, text), 1e-5);
  }
}

// fuse-qkv first: one Linear of width (N + 2·Nkv)·D, its Split [N·D, Nkv·D, Nkv·D] dies
// and the fused op reads the packed projection.
TEST(FuseAttentionDecoder, AfterFuseQkvReadsThePackedProjection) {
  const std::string text = DecoderBlock(DecoderSpec{});
  const testing::FusionRun r = RunWithReport({"fuse-qkv", "fuse-attention"}, text);
  ASSERT_TRUE(r.graph);
  const Node* mha = OnlyAttention(*r.graph);
  ASSERT_NE(mha, nullptr);
  EXPECT_EQ(mha->input(0).node->op(), "Linear");
  EXPECT_EQ(mha->input(0).type().ToString(), "f32[2,5,32]");
  EXPECT_TRUE(NodesOf(*r.graph, "", "Split").empty());
  EXPECT_LE(MaxDiffAfter({"fuse-qkv", "fuse-attention"}, text), 1e-5);
}

// Tables shaped [S, D] (a batch axis added), [B, 1, S, D] (per-row positions: the head
// axis squeezed to [B, S, D]) and [1, 1, S, R < D] (partial rotary); no rotary at all
// leaves the fused op with (qkv, mask).
TEST(FuseAttentionDecoder, TableShapesAndNoRotary) {
  DecoderSpec flat;
  flat.table_dims = "5,4";
  testing::FusionRun r = RunWithReport({"fuse-attention"}, DecoderBlock(flat));
  const Node* mha = OnlyAttention(*r.graph);
  ASSERT_NE(mha, nullptr);
  EXPECT_EQ(mha->input(2).node->op(), "Unsqueeze");
  EXPECT_EQ(mha->input(2).type().ToString(), "f32[1,5,4]");
  EXPECT_LE(MaxDiffAfter({"fuse-attention"}, DecoderBlock(flat)), 1e-5);

  DecoderSpec batch;
  batch.table_dims = "2,1,5,4";
  r = RunWithReport({"fuse-attention"}, DecoderBlock(batch));
  mha = OnlyAttention(*r.graph);
  ASSERT_NE(mha, nullptr);
  EXPECT_EQ(mha->input(2).type().ToString(), "f32[2,5,4]");
  EXPECT_LE(MaxDiffAfter({"fuse-attention"}, DecoderBlock(batch)), 1e-5);

  // Partial rotary (R = 2 of D = 4, GPT-NeoX style): the fused op takes [1, S, 2] tables.
  DecoderSpec partial;
  partial.table_dims = "1,1,5,2";
  r = RunWithReport({"fuse-attention"}, DecoderBlock(partial));
  mha = OnlyAttention(*r.graph);
  ASSERT_NE(mha, nullptr);
  EXPECT_EQ(mha->input(2).type().ToString(), "f32[1,5,2]");
  EXPECT_LE(MaxDiffAfter({"fuse-attention"}, DecoderBlock(partial)), 1e-5);

  DecoderSpec none;
  none.rotary_q = none.rotary_k = false;
  r = RunWithReport({"fuse-attention"}, DecoderBlock(none));
  mha = OnlyAttention(*r.graph);
  ASSERT_NE(mha, nullptr);
  EXPECT_EQ(mha->num_inputs(), 2);
  EXPECT_EQ(mha->attr_int_or("num_kv_heads", 0), 2);
  EXPECT_LE(MaxDiffAfter({"fuse-attention"}, DecoderBlock(none)), 1e-5);
}

// A KV cache (past K/V concatenated in front, present K/V graph outputs): the heads form,
// kiln.Attention(q, present_k, present_v, mask) with the K/V head count taken from the
// present tensors (repeat_kv absorbed); the rotaries stay, since the present K is rotated;
// fuse-qkv leaves the projections apart (nothing to merge into a heads-form op).
TEST(FuseAttentionDecoder, KvCacheFusesIntoTheHeadsForm) {
  for (int kv : {4, 2, 1}) {
    for (bool qkv_first : {false, true}) {
      SCOPED_TRACE(absl::StrCat("Nkv=", kv, qkv_first ? " after fuse-qkv" : ""));
      DecoderSpec s;
      s.kv_heads = kv;
      s.past = 3;
      const std::string text = DecoderBlock(s);
      const std::vector<std::string> passes =
          qkv_first ? std::vector<std::string>{"fuse-qkv", "fuse-attention"}
                    : std::vector<std::string>{"fuse-attention"};
      const testing::FusionRun r = RunWithReport(passes, text);
      ASSERT_TRUE(r.graph);
      EXPECT_TRUE(NodesOf(*r.graph, "", "Softmax").empty());
      EXPECT_TRUE(NodesOf(*r.graph, "", "Expand").empty());
      EXPECT_TRUE(NodesOf(*r.graph, "kiln", "MultiHeadAttention").empty());
      EXPECT_EQ(NodesOf(*r.graph, "kiln", "Rotary").size(), 2u);
      const std::vector<const Node*> att = NodesOf(*r.graph, "kiln", "Attention");
      ASSERT_EQ(att.size(), 1u);
      ASSERT_EQ(att[0]->num_inputs(), 4);
      EXPECT_EQ(att[0]->input(0).node->op(), "Rotary");
      EXPECT_EQ(att[0]->input(1).name(), "present_k");
      EXPECT_EQ(att[0]->input(2).name(), "present_v");
      EXPECT_EQ(att[0]->input(1).type().ToString(), absl::StrCat("f32[2,", kv, ",8,4]"));
      EXPECT_EQ(att[0]->input(3).name(), "mask");
      EXPECT_FLOAT_EQ(att[0]->attr_float("scale").value_or(0), 0.5f);
      EXPECT_EQ(att[0]->output_info(0).type.ToString(), "f32[2,5,16]");
      EXPECT_EQ(r.counters.at("heads form"), 1);
      EXPECT_EQ(r.report.kinds().at("attention").fused, 1);
      if (qkv_first) EXPECT_TRUE(NodesOf(*r.graph, "", "Split").empty());
      EXPECT_LE(MaxDiffAfter(passes, text), 1e-5);
    }
  }
}

// The heads form when shape inference left the scores untyped: the mask's dtype comes
// from Q's heads and the score dims from the heads' shapes.
TEST(FuseAttentionDecoder, KvCacheWithUntypedScores) {
  DecoderSpec s;
  s.past = 3;
  std::string text = DecoderBlock(s);
  const std::string typed = ") : f32[2,4,5,8] @ \"qk\"";
  const size_t at = text.find(typed);
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, typed.size(), ") @ \"qk\"");
  const testing::FusionRun r = RunWithReport({"fuse-attention"}, text);
  ASSERT_TRUE(r.graph);
  EXPECT_EQ(NodesOf(*r.graph, "kiln", "Attention").size(), 1u);
  EXPECT_EQ(r.report.kinds().at("attention").fused, 1);
}

// Exactly one attention near-miss whose reason contains `reason`; nothing fused.
void ExpectMiss(const DecoderSpec& s, const std::string& reason) {
  const testing::FusionRun r = RunWithReport({"fuse-attention"}, DecoderBlock(s));
  ASSERT_TRUE(r.graph);
  EXPECT_TRUE(NodesOf(*r.graph, "kiln", "MultiHeadAttention").empty());
  const auto& kind = r.report.kinds().at("attention");
  EXPECT_EQ(kind.fused, 0);
  ASSERT_EQ(kind.missed.size(), 1u);
  EXPECT_NE(kind.missed[0].reason.find(reason), std::string::npos) << kind.missed[0].reason;
}

TEST(FuseAttentionDecoder, NearMisses) {
  DecoderSpec only_q;
  only_q.rotary_k = false;
  ExpectMiss(only_q, "only Q is rotated (q_rotary)");
  DecoderSpec only_k;
  only_k.rotary_q = false;
  ExpectMiss(only_k, "only K is rotated (k_rotary)");
  DecoderSpec tables;
  tables.k_own_tables = true;
  ExpectMiss(tables, "Q and K are rotated with different cos/sin tables (q_rotary, k_rotary)");
  DecoderSpec per_head;
  per_head.table_dims = "1,4,5,4";
  per_head.kv_heads = 4;
  ExpectMiss(per_head, "the rotary tables [1,4,5,4] of q_rotary are not [1 or B, 1, S, R]");
}

// ModernBERT's packed head split: Wqkv(x) [B, S, 3H] -> Reshape [B, S, 3, N, D] -> parts
// 0, 1, 2 on axis 2 (one Split, or three Slices as the dynamo export writes) -> Squeeze ->
// Transpose; rotary on Q and K. `order` gives the part each of Q, K, V takes.
std::string PackedBlock(bool slices, std::array<int, 3> order = {0, 1, 2}) {
  Emitter e;
  const std::string x = e.Node("Input()", Dims({kB, kS, kH}), "", "x");
  const std::string mask = e.Node("Input()", Dims({kB, 1, 1, kS}), "", "mask");
  const std::string cos = e.Node("Input()", "f32[1,1,5,4]", "", "cos");
  const std::string sin = e.Node("Input()", "f32[1,1,5,4]", "", "sin");
  const std::string w = e.Const(WeightLiteral(kH, 3 * kH, 7), Dims({kH, 3 * kH}));
  const std::string p =
      e.Node(absl::StrCat("MatMul(", x, ", ", w, ")"), Dims({kB, kS, 3 * kH}), "wqkv");
  const std::string shape =
      e.Const(absl::StrFormat("tensor<i64[5]>[%d, %d, 3, %d, %d]", kB, kS, kN, kD), "i64[5]");
  const std::string r =
      e.Node(absl::StrCat("Reshape(", p, ", ", shape, ")"), Dims({kB, kS, 3, kN, kD}), "qkv_split");
  const std::string part_t = Dims({kB, kS, 1, kN, kD});
  std::vector<std::string> parts;
  if (slices) {
    const std::string axes = e.Const("tensor<i64[1]>[2]", "i64[1]");
    for (int i = 0; i < 3; ++i) {
      const std::string a = e.Const(absl::StrFormat("tensor<i64[1]>[%d]", i), "i64[1]");
      const std::string b = e.Const(absl::StrFormat("tensor<i64[1]>[%d]", i + 1), "i64[1]");
      parts.push_back(e.Node(absl::StrCat("Slice(", r, ", ", a, ", ", b, ", ", axes, ")"), part_t));
    }
  } else {
    const std::string sizes = e.Const("tensor<i64[3]>[1, 1, 1]", "i64[3]");
    parts = e.Nodes(3, absl::StrCat("Split(", r, ", ", sizes, ") {axis=2}"),
                    absl::StrCat(part_t, ", ", part_t, ", ", part_t), "chunk");
  }
  const std::string sq_axes = e.Const("tensor<i64[1]>[-3]", "i64[1]");
  std::vector<std::string> heads;
  for (int i = 0; i < 3; ++i) {
    const std::string sq = e.Node(absl::StrCat("Squeeze(", parts[order[i]], ", ", sq_axes, ")"),
                                  Dims({kB, kS, kN, kD}));
    heads.push_back(
        e.Node(absl::StrCat("Transpose(", sq, ") {perm=[0, 2, 1, 3]}"), Dims({kB, kN, kS, kD})));
  }
  const std::string q = e.Node(absl::StrCat("kiln.Rotary(", heads[0], ", ", cos, ", ", sin, ")"),
                               Dims({kB, kN, kS, kD}), "q_rotary");
  const std::string k = e.Node(absl::StrCat("kiln.Rotary(", heads[1], ", ", cos, ", ", sin, ")"),
                               Dims({kB, kN, kS, kD}), "k_rotary");
  const std::string kt =
      e.Node(absl::StrCat("Transpose(", k, ") {perm=[0, 1, 3, 2]}"), Dims({kB, kN, kD, kS}));
  const std::string qk = e.Node(absl::StrCat("MatMul(", q, ", ", kt, ")"), Dims({kB, kN, kS, kS}));
  const std::string half = e.Const("tensor<f32[]>[0.5]", "f32[]");
  const std::string sc = e.Node(absl::StrCat("Mul(", qk, ", ", half, ")"), Dims({kB, kN, kS, kS}));
  const std::string m = e.Node(absl::StrCat("Add(", sc, ", ", mask, ")"), Dims({kB, kN, kS, kS}));
  const std::string pr = e.Node(absl::StrCat("Softmax(", m, ") {axis=-1}"), Dims({kB, kN, kS, kS}));
  const std::string pv =
      e.Node(absl::StrCat("MatMul(", pr, ", ", heads[2], ")"), Dims({kB, kN, kS, kD}));
  const std::string mt =
      e.Node(absl::StrCat("Transpose(", pv, ") {perm=[0, 2, 1, 3]}"), Dims({kB, kS, kN, kD}));
  const std::string s3 =
      e.Const(absl::StrFormat("tensor<i64[3]>[%d, %d, %d]", kB, kS, kH), "i64[3]");
  const std::string y =
      e.Node(absl::StrCat("Reshape(", mt, ", ", s3, ")"), Dims({kB, kS, kH}), "merge", "y");
  return e.Finish({{"y", y}});
}

TEST(FuseAttentionDecoder, ModernBertPackedSplitFuses) {
  for (bool slices : {false, true}) {
    SCOPED_TRACE(slices ? "slices" : "split");
    const std::string text = PackedBlock(slices);
    const testing::FusionRun r = RunWithReport({"fuse-qkv", "fuse-attention"}, text);
    ASSERT_TRUE(r.graph);
    const Node* mha = OnlyAttention(*r.graph);
    ASSERT_NE(mha, nullptr);
    // qkv is the packed projection itself: no Concat, no Split left, nothing for fuse-qkv.
    EXPECT_EQ(mha->input(0).node->op(), "MatMul");
    EXPECT_EQ(mha->input(0).type().ToString(), "f32[2,5,48]");
    EXPECT_FALSE(mha->has_attr("num_kv_heads"));
    EXPECT_TRUE(NodesOf(*r.graph, "", "Squeeze").size() == 2);  // the two tables'
    if (r.report.kinds().count("qkv")) {                        // fuse-qkv sees it already packed
      EXPECT_EQ(r.report.kinds().at("qkv").fused, 0);
      EXPECT_TRUE(r.report.kinds().at("qkv").missed.empty());
    }
    EXPECT_TRUE(r.report.kinds().at("attention").missed.empty());
    EXPECT_LE(MaxDiffAfter({"fuse-qkv", "fuse-attention"}, text), 1e-5);
  }
}

TEST(FuseAttentionDecoder, ModernBertPartsOutOfOrderAreAMiss) {
  const testing::FusionRun r = RunWithReport({"fuse-attention"}, PackedBlock(false, {1, 0, 2}));
  ASSERT_TRUE(r.graph);
  EXPECT_TRUE(NodesOf(*r.graph, "kiln", "MultiHeadAttention").empty());
  const auto& kind = r.report.kinds().at("attention");
  ASSERT_EQ(kind.missed.size(), 1u);
  EXPECT_EQ(kind.missed[0].reason,
            "Q, K and V are not parts 0, 1 and 2 of one packed [B, S, 3, N, D] head split");
}

}  // namespace
}  // namespace kiln
