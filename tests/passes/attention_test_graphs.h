// IR-text generator for the fuse-qkv and fuse-attention tests: one self-attention layer
// (B=2, S=4, N=2 heads, D=4, H=8) in the forms different exporters produce — projection
// style (incl. GPT-2's Conv1D c_attn), K transpose style (incl. the dynamo SDPA batched
// form), where the scale sits, mask style, guards, head merge target, static or symbolic
// dims (with the Shape chains the TorchScript and dynamo exporters build) — plus helpers to
// run a pass with a fusion report and compare numerically on {0,1}-valued int/bool inputs
// (the additive-mask chain (1 - m) * min overflows for other integers).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "kiln/ir/graph.h"
#include "kiln/passes/fusion_report.h"
#include "tests/passes/pass_test_util.h"

namespace kiln::attention_test {

constexpr int kB = 2, kS = 4, kN = 2, kD = 4, kH = 8;

enum class Proj { kPacked, kLinear, kMatMulAdd };
enum class Scale { kDiv, kMul, kOnQ, kOnQK, kNone, kTwice, kRuntime };
enum class MaskStyle {
  kNone,
  kAdditive,        // f32 input [B,1,1,S] added
  kAttentionChain,  // (1 - Cast(Reshape(attention_mask))) * float_min, BERT style
  kBoolKeep,        // Where(bool [B,1,1,S], scores, -inf)
  kBoolDrop,        // Where(bool [B,1,1,S], -inf, scores)
  kBoolFinite,      // Where(bool [B,1,1,S], scores, -10000)
  kCausal,          // Where(tril constant [1,1,S,S], scores, float_min)
  kCausalAdditive,  // causal Where, then the f32 [B,1,1,S] input added
  kRank2,           // f32 input [B,S] added directly (malformed)
  kBoolToAdditive,  // Where(bool [B,1,1,S], 0, float_min) added (transformers >= 4.48)
};

// How batch and sequence appear in the types and in the head split / merge targets.
enum class Dims {
  kStatic,              // B = 2, S = 4; constant Reshape targets
  kSymbolicOtherInput,  // batch/seq symbols; the head split target is built from
                        // Shape(token_type_ids) with allowzero=1 (the dynamo export)
  kSymbolicUnknownSeq,  // x is [batch, seq, H] but everything after the projections has an
                        // unknown sequence dim (TorchScript BERT's sliced position ids
                        // defeat shape inference); targets from Gather(Shape(x), i)
};

struct Spec {
  Proj proj = Proj::kLinear;
  Dims dims = Dims::kStatic;
  bool k_two_transposes = false;
  bool batched_k = false;           // Kᵀ via Reshape [B·N, S, D], Transpose [0, 2, 1], Reshape
                                    // [B, N, D, S] (the dynamo SDPA export)
  bool split_allowzero = false;     // head split Reshapes with allowzero=1 (dynamo)
  bool context_reshape = false;     // P·V reshaped to [B, -1, S, D] first (TorchScript SDPA)
  bool flat_merge = false;          // heads merged straight to [B·S, H] (GPT-2 static)
  bool merge_copies_heads = false;  // merge target [0, 0, 0, D]: keeps [B, S, N, D]
  bool unrelated_dims = false;      // kSymbolicOtherInput with token_type_ids [b2, s2]
  bool conv1d_qkv = false;          // GPT-2 c_attn: Reshape x to [B·S, H], packed Linear,
                                    // Reshape to [B, S, 3H], Split into 3 without sizes
  Scale scale = Scale::kDiv;
  MaskStyle mask = MaskStyle::kNone;
  bool guard = false;
  int64_t softmax_axis = -1;
  bool probs_output = false;
  bool cross = false;                  // K and V projected from input "enc"
  std::vector<int> order = {0, 1, 2};  // emission order of the Q, K, V projections
  std::string activation_q = "none";
  // Provenance of the packed Linear and of its Split (Proj::kPacked).
  std::string packed_prov = "qkv_proj";
  std::string split_prov;
};

// Deterministic small weights: projection p (0 = Q, 1 = K, 2 = V), element (i, j).
inline float WeightAt(int p, int i, int j) {
  return static_cast<float>(((i * 7 + j * 3 + p * 5) % 11) - 5) * 0.05f;
}
inline float BiasAt(int p, int j) { return static_cast<float>(((j * 3 + p) % 5) - 2) * 0.1f; }

inline std::string F(float v) { return absl::StrFormat("%.2f", v); }

// The [H, H] weight of projection p, or the packed [H, 3H] [Wq | Wk | Wv].
inline std::string WeightLiteral(int p) {
  std::vector<std::string> e;
  for (int i = 0; i < kH; ++i)
    for (int j = 0; j < kH; ++j) e.push_back(F(WeightAt(p, i, j)));
  return absl::StrFormat("tensor<f32[%d,%d]>[%s]", kH, kH, absl::StrJoin(e, ", "));
}
inline std::string PackedWeightLiteral() {
  std::vector<std::string> e;
  for (int i = 0; i < kH; ++i)
    for (int p = 0; p < 3; ++p)
      for (int j = 0; j < kH; ++j) e.push_back(F(WeightAt(p, i, j)));
  return absl::StrFormat("tensor<f32[%d,%d]>[%s]", kH, 3 * kH, absl::StrJoin(e, ", "));
}
inline std::string BiasLiteral(int p) {
  std::vector<std::string> e;
  for (int j = 0; j < kH; ++j) e.push_back(F(BiasAt(p, j)));
  return absl::StrFormat("tensor<f32[%d]>[%s]", kH, absl::StrJoin(e, ", "));
}
inline std::string PackedBiasLiteral() {
  std::vector<std::string> e;
  for (int p = 0; p < 3; ++p)
    for (int j = 0; j < kH; ++j) e.push_back(F(BiasAt(p, j)));
  return absl::StrFormat("tensor<f32[%d]>[%s]", 3 * kH, absl::StrJoin(e, ", "));
}
inline std::string TrilLiteral() {
  std::vector<std::string> e;
  for (int q = 0; q < kS; ++q)
    for (int k = 0; k < kS; ++k) e.push_back(k <= q ? "true" : "false");
  return absl::StrFormat("tensor<bool[1,1,%d,%d]>[%s]", kS, kS, absl::StrJoin(e, ", "));
}

// Appends numbered nodes; each call returns the new value's name ("%7").
class Emitter {
 public:
  std::string Node(const std::string& expr, const std::string& type, const std::string& prov = "",
                   const std::string& name = "") {
    std::string v = absl::StrCat("%", next_++);
    absl::StrAppend(&body_, "  ", v, " = ", expr, " : ", type);
    if (!name.empty()) absl::StrAppend(&body_, " \"", name, "\"");
    AppendProvenance(prov);
    return v;
  }
  // Several results: "%a, %b, %c = expr : t1, t2, t3".
  std::vector<std::string> Nodes(int n, const std::string& expr, const std::string& types,
                                 const std::string& prov = "") {
    std::vector<std::string> vs;
    for (int i = 0; i < n; ++i) vs.push_back(absl::StrCat("%", next_++));
    absl::StrAppend(&body_, "  ", absl::StrJoin(vs, ", "), " = ", expr, " : ", types);
    AppendProvenance(prov);
    return vs;
  }
  std::string Const(const std::string& literal, const std::string& type) {
    return Node(absl::StrCat("Constant() {value=", literal, "}"), type);
  }
  std::string Finish(const std::vector<std::pair<std::string, std::string>>& outs) const {
    std::vector<std::string> r;
    for (const auto& [n, v] : outs) r.push_back(absl::StrCat("\"", n, "\": ", v));
    return absl::StrCat("graph main opset=17 {\n", body_, "  return ", absl::StrJoin(r, ", "),
                        "\n}");
  }

 private:
  // `prov` is one name, or an already quoted list ("a", "b").
  void AppendProvenance(const std::string& prov) {
    if (!prov.empty())
      absl::StrAppend(&body_, " @ ", prov[0] == '"' ? prov : absl::StrCat("\"", prov, "\""));
    body_ += "\n";
  }
  std::string body_;
  int next_ = 0;
};

inline const std::string kT3 = absl::StrFormat("f32[%d,%d,%d]", kB, kS, kH);
inline const std::string kT4 = absl::StrFormat("f32[%d,%d,%d,%d]", kB, kS, kN, kD);  // [B,S,N,D]
inline const std::string kTh = absl::StrFormat("f32[%d,%d,%d,%d]", kB, kN, kS, kD);  // [B,N,S,D]
inline const std::string kTt = absl::StrFormat("f32[%d,%d,%d,%d]", kB, kN, kD, kS);  // [B,N,D,S]
inline const std::string kTs = absl::StrFormat("f32[%d,%d,%d,%d]", kB, kN, kS, kS);  // scores

// The mask-input part of a graph (emitted right after x); returns the mask operand(s).
struct MaskValues {
  std::string additive, cond;
};
inline MaskValues EmitMaskInputs(Emitter& e, MaskStyle m, const std::string& b = "2",
                                 const std::string& sq = "4") {
  MaskValues mv;
  const std::string m4 = absl::StrCat("[", b, ",1,1,", sq, "]");
  switch (m) {
    case MaskStyle::kAdditive:
    case MaskStyle::kCausalAdditive:
      mv.additive = e.Node("Input()", "f32" + m4, "", "mask");
      break;
    case MaskStyle::kRank2:
      mv.additive = e.Node("Input()", absl::StrCat("f32[", b, ",", sq, "]"), "", "mask");
      break;
    case MaskStyle::kAttentionChain: {
      const std::string am =
          e.Node("Input()", absl::StrCat("i64[", b, ",", sq, "]"), "", "attention_mask");
      std::string r;
      if (b == "2" && sq == "4") {
        const std::string shape =
            e.Const(absl::StrFormat("tensor<i64[4]>[%d, 1, 1, %d]", kB, kS), "i64[4]");
        r = e.Node(absl::StrCat("Reshape(", am, ", ", shape, ")"), "i64" + m4);
      } else {
        const std::string axes = e.Const("tensor<i64[2]>[1, 2]", "i64[2]");
        r = e.Node(absl::StrCat("Unsqueeze(", am, ", ", axes, ")"), "i64" + m4);
      }
      const std::string c = e.Node(absl::StrCat("Cast(", r, ") {to=1}"), "f32" + m4);
      const std::string one = e.Const("tensor<f32[]>[1.0]", "f32[]");
      const std::string sub = e.Node(absl::StrCat("Sub(", one, ", ", c, ")"), "f32" + m4);
      const std::string mn = e.Const("tensor<f32[]>[-3.4028235e+38]", "f32[]");
      mv.additive = e.Node(absl::StrCat("Mul(", sub, ", ", mn, ")"), "f32" + m4, "mask_mul");
      break;
    }
    case MaskStyle::kBoolKeep:
    case MaskStyle::kBoolDrop:
    case MaskStyle::kBoolFinite:
      mv.cond = e.Node("Input()", "bool" + m4, "", "mask");
      break;
    case MaskStyle::kBoolToAdditive: {
      mv.cond = e.Node("Input()", "bool" + m4, "", "mask");
      const std::string zero = e.Const("tensor<f32[]>[0.0]", "f32[]");
      const std::string mn = e.Const("tensor<f32[]>[-3.4028235e+38]", "f32[]");
      mv.additive = e.Node(absl::StrCat("Where(", mv.cond, ", ", zero, ", ", mn, ")"), "f32" + m4,
                           "mask_where");
      break;
    }
    default:
      break;
  }
  return mv;
}

// One attention layer per `s`. Provenance: "qk" (Q·Kᵀ), "softmax", "pv" (P·V), "merge".
inline std::string AttentionGraph(const Spec& s) {
  const bool symbolic = s.dims != Dims::kStatic;
  const std::string B = symbolic ? "batch" : absl::StrCat(kB);
  const std::string S = symbolic ? "seq" : absl::StrCat(kS);
  const std::string P = s.dims == Dims::kSymbolicUnknownSeq ? "?" : S;  // after projections
  auto f32 = [](std::vector<std::string> d) {
    return absl::StrCat("f32[", absl::StrJoin(d, ","), "]");
  };
  const std::string N = absl::StrCat(kN), D = absl::StrCat(kD), H = absl::StrCat(kH);
  const std::string t3x = f32({B, S, H}), t3 = f32({B, P, H}), t4 = f32({B, P, N, D}),
                    th = f32({B, N, P, D}), tt = f32({B, N, D, P}), ts = f32({B, N, P, P});
  Emitter e;
  const std::string x = e.Node("Input()", t3x, "", "x");
  const std::string enc = s.cross ? e.Node("Input()", t3x, "", "enc") : "";
  const std::string temp = s.scale == Scale::kRuntime ? e.Node("Input()", "f32[]", "", "t") : "";
  const std::string tti = s.dims == Dims::kSymbolicOtherInput
                              ? e.Node("Input()",
                                       s.unrelated_dims ? std::string("i64[b2,s2]")
                                                        : absl::StrCat("i64[", B, ",", S, "]"),
                                       "", "token_type_ids")
                              : "";
  const MaskValues mv = EmitMaskInputs(e, s.mask, B, S);
  std::string proj[3];
  const char* pname[3] = {"q", "k", "v"};
  if (s.proj == Proj::kPacked) {
    const std::string w = e.Const(PackedWeightLiteral(), absl::StrFormat("f32[%d,%d]", kH, 3 * kH));
    const std::string b = e.Const(PackedBiasLiteral(), absl::StrFormat("f32[%d]", 3 * kH));
    const std::string t3p = f32({B, P, absl::StrCat(3 * kH)});
    std::string lin;
    if (s.conv1d_qkv) {
      const std::string flat = e.Const(absl::StrFormat("tensor<i64[2]>[-1, %d]", kH), "i64[2]");
      const std::string x2 = e.Node(absl::StrCat("Reshape(", x, ", ", flat, ")"),
                                    absl::StrFormat("f32[%d,%d]", kB * kS, kH));
      const std::string l2 = e.Node(
          absl::StrCat("kiln.Linear(", x2, ", ", w, ", ", b, ") {activation=\"none\", trans_w=0}"),
          absl::StrFormat("f32[%d,%d]", kB * kS, 3 * kH), s.packed_prov);
      const std::string back =
          e.Const(absl::StrFormat("tensor<i64[3]>[%d, %d, %d]", kB, kS, 3 * kH), "i64[3]");
      lin = e.Node(absl::StrCat("Reshape(", l2, ", ", back, ")"), t3p);
    } else {
      lin = e.Node(
          absl::StrCat("kiln.Linear(", x, ", ", w, ", ", b, ") {activation=\"none\", trans_w=0}"),
          t3p, s.packed_prov);
    }
    const std::string sizes =
        s.conv1d_qkv
            ? ""
            : absl::StrCat(", ", e.Const(absl::StrFormat("tensor<i64[3]>[%d, %d, %d]", kH, kH, kH),
                                         "i64[3]"));
    std::vector<std::string> outs =
        e.Nodes(3, absl::StrCat("Split(", lin, sizes, ") {axis=", s.conv1d_qkv ? "2" : "-1", "}"),
                absl::StrJoin(std::vector<std::string>{t3, t3, t3}, ", "), s.split_prov);
    for (int i = 0; i < 3; ++i) proj[i] = outs[i];
  } else {
    for (int p : s.order) {
      const std::string src = (s.cross && p > 0) ? enc : x;
      const std::string w = e.Const(WeightLiteral(p), absl::StrFormat("f32[%d,%d]", kH, kH));
      const std::string b = e.Const(BiasLiteral(p), absl::StrFormat("f32[%d]", kH));
      if (s.proj == Proj::kLinear) {
        proj[p] = e.Node(absl::StrFormat("kiln.Linear(%s, %s, %s) {activation=\"%s\", trans_w=0}",
                                         src, w, b, p == 0 ? s.activation_q : "none"),
                         t3, absl::StrCat(pname[p], "_proj"));
      } else {
        const std::string mm = e.Node(absl::StrCat("MatMul(", src, ", ", w, ")"), t3,
                                      absl::StrCat(pname[p], "_matmul"));
        proj[p] =
            e.Node(absl::StrCat("Add(", b, ", ", mm, ")"), t3, absl::StrCat(pname[p], "_add"));
      }
    }
  }
  // Head split target [B, S, N, D].
  std::string shape4;
  if (s.dims == Dims::kSymbolicOtherInput) {
    const std::string b0 = e.Node(absl::StrCat("Shape(", tti, ") {end=1, start=0}"), "i64[1]");
    const std::string s0 = e.Node(absl::StrCat("Shape(", tti, ") {end=2, start=1}"), "i64[1]");
    const std::string rest = e.Const(absl::StrFormat("tensor<i64[2]>[-1, %d]", kD), "i64[2]");
    shape4 = e.Node(absl::StrCat("Concat(", b0, ", ", s0, ", ", rest, ") {axis=0}"), "i64[4]");
  } else if (s.dims == Dims::kSymbolicUnknownSeq) {
    const std::string sh = e.Node(absl::StrCat("Shape(", x, ")"), "i64[3]");
    const std::string axes = e.Const("tensor<i64[1]>[0]", "i64[1]");
    std::string dims[2];
    for (int i = 0; i < 2; ++i) {
      const std::string idx = e.Const(absl::StrFormat("tensor<i64[]>[%d]", i), "i64[]");
      const std::string g = e.Node(absl::StrCat("Gather(", sh, ", ", idx, ") {axis=0}"), "i64[]");
      dims[i] = e.Node(absl::StrCat("Unsqueeze(", g, ", ", axes, ")"), "i64[1]");
    }
    const std::string rest = e.Const(absl::StrFormat("tensor<i64[2]>[%d, %d]", kN, kD), "i64[2]");
    shape4 =
        e.Node(absl::StrCat("Concat(", dims[0], ", ", dims[1], ", ", rest, ") {axis=0}"), "i64[4]");
  } else {
    shape4 = e.Const(absl::StrFormat("tensor<i64[4]>[%d, %d, %d, %d]", kB, kS, kN, kD), "i64[4]");
  }
  const std::string shape3 = e.Const(absl::StrFormat("tensor<i64[3]>[0, 0, %d]", kH), "i64[3]");
  const std::string split_attrs =
      s.split_allowzero || s.dims == Dims::kSymbolicOtherInput ? " {allowzero=1}" : "";
  // (With unrelated dims, shape inference would type the split by the target: [b2, s2, ..].)
  const std::string t4split = s.unrelated_dims ? f32({"b2", "s2", N, D}) : t4;
  auto split = [&](const std::string& v) {
    return e.Node(absl::StrCat("Reshape(", v, ", ", shape4, ")", split_attrs), t4split);
  };
  const std::string qh =
      e.Node(absl::StrCat("Transpose(", split(proj[0]), ") {perm=[0, 2, 1, 3]}"), th);
  std::string q = qh;
  std::string k;
  if (s.k_two_transposes) {
    const std::string k1 =
        e.Node(absl::StrCat("Transpose(", split(proj[1]), ") {perm=[0, 2, 1, 3]}"), th);
    k = e.Node(absl::StrCat("Transpose(", k1, ") {perm=[0, 1, 3, 2]}"), tt);
  } else if (s.batched_k) {
    const std::string kh =
        e.Node(absl::StrCat("Transpose(", split(proj[1]), ") {perm=[0, 2, 1, 3]}"), th);
    std::string t1, t2;
    if (symbolic) {
      const std::string m1 = e.Const("tensor<i64[1]>[-1]", "i64[1]");
      const std::string sd = e.Node(absl::StrCat("Shape(", kh, ") {start=2}"), "i64[2]");
      t1 = e.Node(absl::StrCat("Concat(", m1, ", ", sd, ") {axis=0}"), "i64[3]");
      const std::string bn = e.Node(absl::StrCat("Shape(", kh, ") {end=2, start=0}"), "i64[2]");
      const std::string dd = e.Const(absl::StrFormat("tensor<i64[1]>[%d]", kD), "i64[1]");
      const std::string ss = e.Node(absl::StrCat("Shape(", kh, ") {end=3, start=2}"), "i64[1]");
      t2 = e.Node(absl::StrCat("Concat(", bn, ", ", dd, ", ", ss, ") {axis=0}"), "i64[4]");
    } else {
      t1 = e.Const(absl::StrFormat("tensor<i64[3]>[-1, %d, %d]", kS, kD), "i64[3]");
      t2 = e.Const(absl::StrFormat("tensor<i64[4]>[%d, %d, %d, %d]", kB, kN, kD, kS), "i64[4]");
    }
    const std::string bnd = symbolic ? "?" : absl::StrCat(kB * kN);
    const std::string r1 = e.Node(absl::StrCat("Reshape(", kh, ", ", t1, ")"), f32({bnd, P, D}));
    const std::string tr =
        e.Node(absl::StrCat("Transpose(", r1, ") {perm=[0, 2, 1]}"), f32({bnd, D, P}));
    k = e.Node(absl::StrCat("Reshape(", tr, ", ", t2, ")"), tt);
  } else {
    k = e.Node(absl::StrCat("Transpose(", split(proj[1]), ") {perm=[0, 2, 3, 1]}"), tt);
  }
  const std::string v =
      e.Node(absl::StrCat("Transpose(", split(proj[2]), ") {perm=[0, 2, 1, 3]}"), th);
  if (s.scale == Scale::kOnQ) {
    q = e.Node(absl::StrCat("Mul(", q, ", ", e.Const("tensor<f32[]>[0.5]", "f32[]"), ")"), th);
  } else if (s.scale == Scale::kOnQK) {
    const std::string c = e.Const("tensor<f32[]>[0.70710677]", "f32[]");
    q = e.Node(absl::StrCat("Mul(", q, ", ", c, ")"), th);
    k = e.Node(absl::StrCat("Mul(", k, ", ", c, ")"), tt);
  }
  std::string sc = e.Node(absl::StrCat("MatMul(", q, ", ", k, ")"), ts, "qk");
  switch (s.scale) {
    case Scale::kDiv:
      sc = e.Node(absl::StrCat("Div(", sc, ", ", e.Const("tensor<f32[]>[2.0]", "f32[]"), ")"), ts);
      break;
    case Scale::kMul:
      sc = e.Node(absl::StrCat("Mul(", sc, ", ", e.Const("tensor<f32[]>[0.5]", "f32[]"), ")"), ts);
      break;
    case Scale::kTwice:
      sc = e.Node(absl::StrCat("Mul(", sc, ", ", e.Const("tensor<f32[]>[0.5]", "f32[]"), ")"), ts);
      sc = e.Node(absl::StrCat("Div(", sc, ", ", e.Const("tensor<f32[]>[2.0]", "f32[]"), ")"), ts);
      break;
    case Scale::kRuntime:
      sc = e.Node(absl::StrCat("Mul(", sc, ", ", temp, ")"), ts, "runtime_scale");
      break;
    default:
      break;
  }
  const std::string neg_inf = "tensor<f32[]>[-inf]";
  switch (s.mask) {
    case MaskStyle::kAdditive:
    case MaskStyle::kAttentionChain:
    case MaskStyle::kRank2:
    case MaskStyle::kBoolToAdditive:
      sc = e.Node(absl::StrCat("Add(", sc, ", ", mv.additive, ")"), ts);
      break;
    case MaskStyle::kBoolKeep:
      sc = e.Node(absl::StrCat("Where(", mv.cond, ", ", sc, ", ", e.Const(neg_inf, "f32[]"), ")"),
                  ts);
      break;
    case MaskStyle::kBoolDrop:
      sc = e.Node(absl::StrCat("Where(", mv.cond, ", ", e.Const(neg_inf, "f32[]"), ", ", sc, ")"),
                  ts);
      break;
    case MaskStyle::kBoolFinite:
      sc = e.Node(absl::StrCat("Where(", mv.cond, ", ", sc, ", ",
                               e.Const("tensor<f32[]>[-10000.0]", "f32[]"), ")"),
                  ts);
      break;
    case MaskStyle::kCausal:
    case MaskStyle::kCausalAdditive: {
      const std::string tril = e.Const(TrilLiteral(), absl::StrFormat("bool[1,1,%d,%d]", kS, kS));
      const std::string mn = e.Const("tensor<f32[]>[-3.4028235e+38]", "f32[]");
      sc = e.Node(absl::StrCat("Where(", tril, ", ", sc, ", ", mn, ")"), ts);
      if (s.mask == MaskStyle::kCausalAdditive)
        sc = e.Node(absl::StrCat("Add(", sc, ", ", mv.additive, ")"), ts);
      break;
    }
    default:
      break;
  }
  const std::string probs =
      e.Node(absl::StrFormat("Softmax(%s) {axis=%d}", sc, s.softmax_axis), ts, "softmax");
  std::string p = probs;
  if (s.guard) {
    const std::string nan =
        e.Node(absl::StrCat("IsNaN(", probs, ")"), absl::StrCat("bool", ts.substr(3)));
    p = e.Node(
        absl::StrCat("Where(", nan, ", ", e.Const("tensor<f32[]>[0.0]", "f32[]"), ", ", probs, ")"),
        ts);
  }
  std::string ctx = e.Node(absl::StrCat("MatMul(", p, ", ", v, ")"), th, "pv");
  if (s.context_reshape) {
    std::string t;
    if (symbolic) {
      const std::string b0 = e.Node(absl::StrCat("Shape(", ctx, ") {end=1, start=0}"), "i64[1]");
      const std::string m1 = e.Const("tensor<i64[1]>[-1]", "i64[1]");
      const std::string s0 = e.Node(absl::StrCat("Shape(", qh, ") {end=3, start=2}"), "i64[1]");
      const std::string d = e.Const(absl::StrFormat("tensor<i64[1]>[%d]", kD), "i64[1]");
      t = e.Node(absl::StrCat("Concat(", b0, ", ", m1, ", ", s0, ", ", d, ") {axis=0}"), "i64[4]");
    } else {
      t = e.Const(absl::StrFormat("tensor<i64[4]>[%d, -1, %d, %d]", kB, kS, kD), "i64[4]");
    }
    ctx = e.Node(absl::StrCat("Reshape(", ctx, ", ", t, ")"), th);
  }
  const std::string ct = e.Node(absl::StrCat("Transpose(", ctx, ") {perm=[0, 2, 1, 3]}"), t4);
  std::string y;
  if (s.merge_copies_heads) {
    const std::string t = e.Const(absl::StrFormat("tensor<i64[4]>[0, 0, 0, %d]", kD), "i64[4]");
    y = e.Node(absl::StrCat("Reshape(", ct, ", ", t, ")"), t4, "merge", "attn");
  } else if (s.flat_merge) {
    const std::string flat = e.Const(absl::StrFormat("tensor<i64[2]>[-1, %d]", kH), "i64[2]");
    y = e.Node(absl::StrCat("Reshape(", ct, ", ", flat, ")"),
               absl::StrFormat("f32[%d,%d]", kB * kS, kH), "merge", "attn");
  } else {
    y = e.Node(absl::StrCat("Reshape(", ct, ", ", shape3, ")"), t3, "merge", "attn");
  }
  std::vector<std::pair<std::string, std::string>> outs = {{"y", y}};
  if (s.probs_output) outs.push_back({"probs", probs});
  return e.Finish(outs);
}

inline std::vector<const Node*> NodesOf(const Graph& g, const std::string& domain,
                                        const std::string& op) {
  std::vector<const Node*> out;
  for (const auto& n : g.nodes())
    if (n->domain() == domain && n->op() == op) out.push_back(n.get());
  return out;
}

// Max abs difference of `passes`' result vs the original over three seeds, with int and
// bool inputs drawn from {0, 1}.
inline double MaxDiffAfter(const std::vector<std::string>& passes, const std::string& text) {
  auto original = testing::Parse(text);
  const testing::FusionRun r = testing::RunWithReport(passes, text);
  if (!original || !r.graph) return INFINITY;
  double worst = 0;
  for (uint64_t seed : {1u, 2u, 3u}) {
    auto feeds = testing::RandomInputs(*original, seed, {{"batch", kB}, {"seq", kS}},
                                       /*int_high=*/2);
    worst = std::max(worst, testing::MaxAbsDiff(*original, *r.graph, feeds));
  }
  return worst;
}

}  // namespace kiln::attention_test
