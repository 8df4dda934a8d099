// Attention-block matcher shared by fuse-qkv and fuse-attention (see attention_match.h).
// The walk goes backwards from the Softmax through mask layers (Add, Where) and scale
// layers (Mul/Div by a scalar) to MatMul(Q, Kᵀ), forwards through an IsNaN guard (optional,
// required with a bool -inf mask: an unguarded fully masked row is NaN, the kernel gives 0)
// to MatMul(P, V) and the head merge, and from each MatMul operand back through the head
// split (Transpose + Reshape, scalar Muls anywhere on the Q and K paths) to a projection.
// Shape facts come from value types first and, when shapes are symbolic, from the
// Shape->Gather->Unsqueeze->Concat chains that build Reshape targets.
#include "passes/attention_match.h"

#include "kiln/ir/ops.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "passes/attention_match_internal.h"
#include "passes/attention_shape.h"
#include "passes/rewrite_util.h"

namespace kiln::attention {
namespace {

using internal::AnalyzeMasks;
using internal::AnalyzeSplit;
using internal::LastDim;
using internal::MaskLayer;
using internal::Name;
using internal::PathKind;
using internal::PermIs;
using internal::SameDim;
using internal::ScaleOperand;
using internal::ShapeOf;
using internal::UniformConstant;
using internal::WalkHeadPath;
using rewrite::ConstantOf;
using rewrite::IsGraphOutput;
using rewrite::IsOp;
using rewrite::ProducerIs;

// True when `v` is computed from a MatMul through at most `depth` Add/Mul/Div/Where ops.
bool LeadsToMatMul(Value v, int depth = 6) {
  if (!v || depth < 0) return false;
  const Node* n = v.node;
  if (IsOp(n, "MatMul")) return true;
  if (IsOp(n, "Add") || IsOp(n, "Mul") || IsOp(n, "Div")) {
    for (const Value& in : n->inputs())
      if (LeadsToMatMul(in, depth - 1)) return true;
    return false;
  }
  if (IsOp(n, "Where") && n->num_inputs() == 3)
    return LeadsToMatMul(n->input(1), depth - 1) || LeadsToMatMul(n->input(2), depth - 1);
  return false;
}

// LeadsToMatMul, also through data movement (views, Transpose, the gathers and slices
// that pick DeBERTa's relative-position terms out of their MatMul).
bool LeadsToMatMulThroughViews(Value v, int depth = 8) {
  if (!v || depth < 0) return false;
  const Node* n = v.node;
  if (n->num_inputs() >= 1 &&
      (IsView(FindOp(n->domain(), n->op())) || IsOp(n, "Transpose") || IsOp(n, "Gather") ||
       IsOp(n, "GatherElements") || IsOp(n, "Slice") || IsOp(n, "Expand")))
    return LeadsToMatMulThroughViews(n->input(0), depth - 1);
  if (IsOp(n, "Add") || IsOp(n, "Mul") || IsOp(n, "Div")) {
    for (const Value& in : n->inputs())
      if (LeadsToMatMulThroughViews(in, depth - 1)) return true;
    return false;
  }
  return LeadsToMatMul(v, 0);
}

// The [B, N, S, D] values on Q's path between its head Transpose and Q·Kᵀ.
std::vector<Value> QueryHeadValues(const AttentionBlock& b) {
  std::vector<Value> out;
  Value v = b.scores->input(0);
  for (int i = 0; i < 4 && v; ++i) {
    out.push_back(v);
    if (IsOp(v.node, "Transpose")) break;
    if (v.node->domain() == "kiln" && v.node->op() == "Rotary") {
      v = v.node->input(0);
      continue;
    }
    std::optional<double> f;
    std::optional<int> data = ScaleOperand(v.node, &f);
    if (!data) break;
    v = v.node->input(*data);
  }
  return out;
}

// True when everything computed from `n` (a Shape of an interior value) ends in `sorted`
// (the pattern's nodes, sorted by pointer): it dies with the pattern.
bool OnlyFeeds(const Graph& g, const Node* n, const std::vector<Node*>& sorted, int depth) {
  if (depth < 0) return false;
  for (int i = 0; i < n->num_outputs(); ++i) {
    if (IsGraphOutput(g, const_cast<Node*>(n)->output(i))) return false;
    for (const Use& u : n->output_info(i).uses)
      if (!std::binary_search(sorted.begin(), sorted.end(), u.user) &&
          !OnlyFeeds(g, u.user, sorted, depth - 1))
        return false;
  }
  return true;
}

// Q, K, V as outputs 0, 1, 2 of one Split into [N·D, Nkv·D, Nkv·D] on the last axis.
Node* QkvSplit(const AttentionBlock& b) {
  Node* s = b.q.proj.node;
  if (!IsOp(s, "Split") || s->num_outputs() != 3 || b.q.proj.index != 0 ||
      b.k.proj != Value{s, 1} || b.v.proj != Value{s, 2})
    return nullptr;
  const std::vector<Dim>* in = ShapeOf(s->input(0));
  if (in == nullptr) return nullptr;
  const int64_t r = static_cast<int64_t>(in->size());
  const int64_t axis = s->attr_int_or("axis", 0);
  if (r != 3 || (axis != -1 && axis != r - 1)) return nullptr;
  const int64_t h = b.num_heads * b.head_dim, kvh = b.num_kv_heads * b.head_dim;
  const std::vector<int64_t> want = {h, kvh, kvh};
  for (int i = 0; i < 3; ++i)
    if (LastDim(s->output(i)) != want[i]) return nullptr;
  if (s->num_inputs() > 1 && s->input(1)) {
    std::optional<std::vector<int64_t>> sizes = rewrite::IntConstant(s->input(1));
    if (!sizes || *sizes != want) return nullptr;
  } else if (h != kvh) {
    return nullptr;  // equal parts
  }
  return s;
}

// The rotary tables of Q's and K's kiln.Rotary as the fused op's [1 or B, S, R] inputs
// (b.cos, b.sin, b.table_fix); empty on success (or without rotary), else the reason.
std::string AnalyzeRotary(AttentionBlock& b) {
  const Node *qr = b.q.rotary, *kr = b.k.rotary;
  if (qr == nullptr && kr == nullptr) return "";
  if (qr == nullptr || kr == nullptr)
    return absl::StrFormat(
        "only %s is rotated (%s); the fused attention rotates Q and K with the same tables",
        qr ? "Q" : "K", Name(qr ? qr : kr));
  if (qr->input(1) != kr->input(1) || qr->input(2) != kr->input(2))
    return absl::StrFormat("Q and K are rotated with different cos/sin tables (%s, %s)", Name(qr),
                           Name(kr));
  if (b.q.rotary_before_transpose != b.k.rotary_before_transpose ||
      qr->attr_int_or("interleaved", 0) != kr->attr_int_or("interleaved", 0))
    return absl::StrFormat(
        "Q and K are rotated differently (%s, %s: one before the head Transpose or one "
        "interleaved)",
        Name(qr), Name(kr));
  b.rotary_interleaved = qr->attr_int_or("interleaved", 0) != 0;
  const std::vector<Dim>* t = ShapeOf(qr->input(1));
  const std::vector<Dim>* qs = ShapeOf(b.q.proj);
  if (t == nullptr || t->size() < 2 || t->size() > 4 || !t->back().is_known())
    return absl::StrFormat("the rotary tables of %s (%s) are not [.., S, R] with a static R",
                           Name(qr), t ? DimsString(*t) : "of unknown rank");
  const size_t r = t->size();
  const int64_t rot = t->back().value();
  // Tables of a rotary on [B, N, S, D]: [.., S, R] with the head axis at r - 3; on the
  // [B, S, N, D] split (before the transpose): [.., S, 1, R], the head axis at r - 2.
  const bool bsnd = b.q.rotary_before_transpose;
  if (bsnd && r < 2) return absl::StrFormat("the rotary tables of %s have rank 1", Name(qr));
  const size_t seq_at = bsnd ? r - 3 : r - 2, head_at = bsnd ? r - 2 : r - 3;
  if (bsnd && r < 3)
    return absl::StrFormat(
        "the rotary tables %s of %s, applied to the [B, S, N, D] split, are "
        "not [.., S, 1, R]",
        DimsString(*t), Name(qr));
  const Dim& seq = (*t)[seq_at];
  const bool heads_one =
      (!bsnd && r < 3) || ((*t)[head_at].is_known() && (*t)[head_at].value() == 1);
  const bool batch_ok = r < 4 || ((*t)[0].is_known() && (*t)[0].value() == 1) ||
                        (qs && qs->size() == 3 && SameDim((*t)[0], (*qs)[0]));
  const bool seq_ok = !(seq.is_known() && seq.value() == 1) ||
                      (qs && qs->size() == 3 && (*qs)[1].is_known() && (*qs)[1].value() == 1);
  if (rot <= 0 || rot % 2 != 0 || rot > b.head_dim || !heads_one || !batch_ok || !seq_ok)
    return absl::StrFormat(
        "the rotary tables %s of %s are not [1 or B, 1, S, R] (R even, at most the head size "
        "%d) against the heads [B, N, S, D]",
        DimsString(*t), Name(qr), b.head_dim);
  b.cos = qr->input(1);
  b.sin = qr->input(2);
  if (bsnd) {
    // [1 or B, S, 1, R] -> squeeze axis 2; [S, 1, R] is not taken (no batch axis to keep).
    if (r != 4)
      return absl::StrFormat("the rotary tables %s of %s are not [1 or B, S, 1, R]", DimsString(*t),
                             Name(qr));
    b.table_fix = AttentionBlock::TableFix::kSqueezeAxis2;
    return "";
  }
  b.table_fix = r == 4   ? AttentionBlock::TableFix::kSqueezeHeadAxis
                : r == 2 ? AttentionBlock::TableFix::kUnsqueezeBatch
                         : AttentionBlock::TableFix::kNone;
  return "";
}

// An Add among the score's producers (through views, Where's data operand, Mul/Div by
// scales) whose two operands both come from MatMuls: a score with terms beyond Q·Kᵀ.
Node* SumOfMatMuls(Value v, int depth = 6) {
  if (!v || depth < 0) return nullptr;
  Node* n = v.node;
  if (IsOp(n, "Add") && n->num_inputs() == 2) {
    if (LeadsToMatMulThroughViews(n->input(0)) && LeadsToMatMulThroughViews(n->input(1))) return n;
    for (const Value& in : n->inputs())
      if (Node* hit = SumOfMatMuls(in, depth - 1)) return hit;
    return nullptr;
  }
  if (IsOp(n, "Where") && n->num_inputs() == 3)
    return SumOfMatMuls(n->input(1), depth - 1) ? SumOfMatMuls(n->input(1), depth - 1)
                                                : SumOfMatMuls(n->input(2), depth - 1);
  if ((IsOp(n, "Mul") || IsOp(n, "Div")) && n->num_inputs() == 2)
    return SumOfMatMuls(n->input(0), depth - 1);
  if (n->num_inputs() >= 1 && IsView(FindOp(n->domain(), n->op())))
    return SumOfMatMuls(n->input(0), depth - 1);
  return nullptr;
}

// The MatMul(P, V) the Softmax's probabilities feed as operand 0, directly or through up
// to three views or elementwise ops (a Reshape back to [B·N, S, S], a Where that zeroes
// masked rows, a Cast, a Dropout); null if none.
Node* ProbabilitiesMatMul(Node* softmax) {
  std::vector<Value> frontier = {softmax->output(0)};
  for (int depth = 0; depth < 4 && !frontier.empty(); ++depth) {
    std::vector<Value> next;
    for (Value v : frontier)
      for (const Use& u : v.node->output_info(v.index).uses) {
        Node* n = u.user;
        if (IsOp(n, "MatMul") && u.operand == 0) return n;
        if (u.operand == 0 && n->num_outputs() >= 1 &&
            (IsView(FindOp(n->domain(), n->op())) || IsOp(n, "Cast") || IsOp(n, "Dropout")))
          next.push_back(n->output(0));
        if (IsOp(n, "Where") || IsOp(n, "Mul")) next.push_back(n->output(0));
      }
    frontier = std::move(next);
  }
  return nullptr;
}

}  // namespace

std::string DimsString(const std::vector<Dim>& dims) {
  std::vector<std::string> parts;
  for (const Dim& d : dims) parts.push_back(d.ToString());
  return absl::StrCat("[", absl::StrJoin(parts, ","), "]");
}

Value ProjectionInput(Value proj) {
  if (!proj) return {};
  Node* n = proj.node;
  auto linear = [](const Node* p) {
    return p && p->domain() == "kiln" && (p->op() == "Linear" || p->op() == "BlockQuantLinear");
  };
  if (linear(n)) return n->input(0);
  if (IsOp(n, "MatMul")) return n->input(0);
  if (IsOp(n, "Split")) return n->input(0);
  if (IsOp(n, "Add") && n->num_inputs() == 2) {
    for (int i = 0; i < 2; ++i) {
      Node* p = n->input(i).node;
      if ((IsOp(p, "MatMul") || linear(p)) && ConstantOf(n->input(1 - i)) != nullptr)
        return p->input(0);
    }
  }
  return {};
}

MatchResult MatchAttention(const Graph& g, Node* softmax, const rewrite::NodeOrder* order) {
  MatchResult r;
  AttentionBlock& b = r.block;
  if (!IsOp(softmax, "Softmax") || softmax->num_inputs() != 1) return r;
  b.softmax = softmax;

  // Backwards from the Softmax: mask layers and scale layers down to MatMul(Q, Kᵀ).
  std::vector<MaskLayer> masks;
  std::vector<Node*> score_scales;
  bool mask_before_scale = false;
  std::string scale_issue;
  Value cur = softmax->input(0);
  for (int step = 0; step < 8 && cur && !IsOp(cur.node, "MatMul"); ++step) {
    Node* n = cur.node;
    std::optional<double> f;
    if (IsOp(n, "Where") && n->num_inputs() == 3) {
      const bool a = LeadsToMatMul(n->input(1)), c = LeadsToMatMul(n->input(2));
      if (a == c) break;
      masks.push_back({n, true, a ? 1 : 2});
      if (!score_scales.empty()) mask_before_scale = true;
      cur = n->input(a ? 1 : 2);
    } else if (IsOp(n, "Add") && n->num_inputs() == 2) {
      const bool a = LeadsToMatMul(n->input(0)), c = LeadsToMatMul(n->input(1));
      if (a == c) break;
      masks.push_back({n, false, a ? 0 : 1});
      if (!score_scales.empty()) mask_before_scale = true;
      cur = n->input(a ? 0 : 1);
    } else if (std::optional<int> data = ScaleOperand(n, &f)) {
      if (!f && scale_issue.empty())
        scale_issue = absl::StrFormat(
            "the attention scale (%s) is computed at run time and "
            "did not fold to a constant (give static shapes, "
            "--shape)",
            Name(n));
      score_scales.push_back(n);
      b.scale *= f.value_or(1.0);
      cur = n->input(*data);
    } else {
      break;
    }
  }
  if (!cur || !IsOp(cur.node, "MatMul") || cur.node->num_inputs() != 2) {
    // Not Q·Kᵀ under scales and masks. When the probabilities still feed a MatMul the
    // block is attention-shaped, and the report says why it was not fused rather than
    // nothing (DeBERTa's disentangled attention adds score terms of its own).
    if (Node* ctx = ProbabilitiesMatMul(softmax)) {
      r.stage = Stage::kAttention;
      r.nodes = {softmax, ctx};
      if (!cur) {
        r.reason = "the Softmax's scores do not come from a MatMul";
      } else if (Node* sum = SumOfMatMuls(cur)) {
        r.nodes.insert(r.nodes.begin(), sum);
        r.reason = absl::StrFormat(
            "the scores add terms of other MatMuls (%s sums two MatMul results): attention "
            "with score terms beyond Q·Kᵀ, scales and masks (DeBERTa's disentangled "
            "content-to-position and position-to-content terms) has no fused kernel",
            Name(sum));
      } else {
        r.nodes.insert(r.nodes.begin(), cur.node);
        r.reason = absl::StrFormat(
            "the scores do not come from MatMul(Q, Kᵀ) through scales and masks: the walk "
            "back from the Softmax stops at %s",
            Name(cur.node));
      }
    }
    return r;
  }
  b.scores = cur.node;

  // Forwards: optional Where(IsNaN(P), 0, P) guard, then MatMul(P, V).
  Value p = softmax->output(0);
  for (const Use& u : softmax->output_info(0).uses) {
    Node* w = u.user;
    if (!IsOp(w, "Where") || w->num_inputs() != 3 || w->input(2) != p) continue;
    Node* isnan = ProducerIs(w->input(0), "IsNaN");
    std::optional<double> zero = UniformConstant(w->input(1));
    if (isnan && isnan->input(0) == p && zero && *zero == 0) {
      b.guard = w;
      b.interior.push_back(isnan);
      p = w->output(0);
      break;
    }
  }
  for (const Use& u : p.node->output_info(p.index).uses)
    if (IsOp(u.user, "MatMul") && u.operand == 0 && u.user->num_inputs() == 2) {
      b.context = u.user;
      break;
    }
  if (b.context == nullptr) return r;
  r.stage = Stage::kAttention;
  r.nodes = {b.scores, softmax, b.context};
  auto fail = [&](std::string why) {
    r.reason = std::move(why);
    return r;
  };

  // The three head splits back to the projections.
  std::string path_issue, split_why;
  Value q_proj;  // Q's projection, when its head split was found
  if (!WalkHeadPath(b.scores->input(0), PathKind::kQ, b.q, &path_issue)) {
    split_why = "Q is not split into heads by Reshape [B, S, N, D] + Transpose [0, 2, 1, 3]";
  } else {
    q_proj = b.q.proj;
    if (!WalkHeadPath(b.scores->input(1), PathKind::kK, b.k, &path_issue))
      split_why =
          "K is not split into heads and transposed by Reshape [B, S, N, D] + "
          "Transpose [0, 2, 3, 1] (or [0, 2, 1, 3] then [0, 1, 3, 2])";
    else if (!WalkHeadPath(b.context->input(1), PathKind::kV, b.v, &path_issue))
      split_why = "V is not split into heads by Reshape [B, S, N, D] + Transpose [0, 2, 1, 3]";
  }
  if (!split_why.empty()) {
    // Not three projections of one tensor: the heads form (a KV cache's K/V, each the past
    // concatenated with this step's heads, or K/V from elsewhere), if Q, K and V are plain
    // heads tensors. Else the split that broke is the reason.
    b.q = b.k = b.v = HeadPath{};
    path_issue.clear();
    if (!WalkHeads(b.scores->input(0), PathKind::kQ, b.q, &path_issue) ||
        !WalkHeads(b.scores->input(1), PathKind::kK, b.k, &path_issue) ||
        !WalkHeads(b.context->input(1), PathKind::kV, b.v, &path_issue))
      return fail(split_why);
    b.heads_form = true;
  } else {
    r.stage = Stage::kProjections;
    // Head counts.
    const std::pair<HeadPath*, const char*> paths[] = {{&b.q, "Q"}, {&b.k, "K"}, {&b.v, "V"}};
    for (const auto& [path, which] : paths) {
      std::string why = AnalyzeSplit(*path, which);
      if (!why.empty()) return fail(why);
    }
  }
  const int packed = (b.q.packed_part >= 0) + (b.k.packed_part >= 0) + (b.v.packed_part >= 0);
  if (packed > 0) {
    if (packed != 3 || b.q.proj != b.k.proj || b.q.proj != b.v.proj || b.q.packed_part != 0 ||
        b.k.packed_part != 1 || b.v.packed_part != 2)
      return fail("Q, K and V are not parts 0, 1 and 2 of one packed [B, S, 3, N, D] head split");
    b.packed_qkv = b.q.proj;
  }
  if (b.k.repeat != b.v.repeat)
    return fail(
        absl::StrFormat("K and V are expanded to the query heads differently (repeat_kv "
                        "x%d and x%d)",
                        b.k.repeat, b.v.repeat));
  if (b.q.heads != b.k.heads * b.k.repeat || b.k.heads != b.v.heads ||
      b.q.head_dim != b.k.head_dim || b.q.head_dim != b.v.head_dim)
    return fail(absl::StrFormat(
        "Q, K and V are split into heads that do not match (%dx%d, %dx%d, %dx%d, K/V "
        "repeated x%d)",
        b.q.heads, b.q.head_dim, b.k.heads, b.k.head_dim, b.v.heads, b.v.head_dim, b.k.repeat));
  b.num_heads = b.q.heads;
  b.num_kv_heads = b.k.heads;
  b.head_dim = b.q.head_dim;
  if (b.heads_form) {
    const std::vector<Dim>&qh = *ShapeOf(b.q.heads_value), &kh = *ShapeOf(b.k.heads_value),
          &vh = *ShapeOf(b.v.heads_value);
    for (int i : {0, 2})
      if (!kh[i].is_unknown() && !vh[i].is_unknown() && !SameDim(kh[i], vh[i]))
        return fail(
            absl::StrFormat("K and V heads %s and %s differ", DimsString(kh), DimsString(vh)));
    if (!qh[0].is_unknown() && !kh[0].is_unknown() && !SameDim(qh[0], kh[0]))
      return fail(absl::StrFormat("Q and K heads %s and %s differ in batch", DimsString(qh),
                                  DimsString(kh)));
    const DType dt = b.q.heads_value.type().dtype;
    if (b.k.heads_value.type().dtype != dt || b.v.heads_value.type().dtype != dt)
      return fail("Q, K and V heads differ in dtype");
  } else if (std::string why = AnalyzeRotary(b); !why.empty()) {
    return fail(why);
  }

  // Scale.
  if (!scale_issue.empty()) return fail(scale_issue);
  if (!path_issue.empty()) return fail(path_issue);
  const size_t sites = (score_scales.empty() ? 0 : 1) + (b.q.scale_ops.empty() ? 0 : 1) +
                       (b.k.scale_ops.empty() ? 0 : 1);
  if (score_scales.size() > 1 || b.q.scale_ops.size() > 1 || b.k.scale_ops.size() > 1 ||
      (!score_scales.empty() && sites > 1))
    return fail(
        "scores scaled twice (expected one scale: on the scores, on Q, or "
        "sqrt(scale) on both Q and K)");
  b.scale *= b.q.scale * b.k.scale;
  if (!(b.scale > 0) || !std::isfinite(b.scale))
    return fail(absl::StrFormat("attention scale %g is not a positive finite number", b.scale));

  // Softmax over the key axis.
  const std::vector<Dim>* sdims = ShapeOf(b.scores->output(0));
  const int64_t axis = softmax->attr_int_or("axis", -1);
  if (axis != -1 && !(sdims && sdims->size() == 4 && axis == 3))
    return fail(absl::StrFormat("Softmax over axis %d, not the last (key) axis", axis));

  // Masks (applied after the scale), causal pattern, mask shape.
  if (mask_before_scale)
    return fail("the scores are scaled after the mask is added; only scale-then-mask is fused");
  std::vector<Dim> scores4;
  if (sdims && sdims->size() == 4) {
    scores4 = *sdims;
  } else if (b.heads_form) {
    const std::vector<Dim>&qh = *ShapeOf(b.q.heads_value), &kh = *ShapeOf(b.k.heads_value);
    scores4 = {qh[0], Dim::Known(b.num_heads), qh[2], kh[2]};
  } else {
    const std::vector<Dim>* qs = ShapeOf(b.q.proj);
    const Dim bd = qs && qs->size() == 3 ? (*qs)[0] : Dim();
    const Dim sd = qs && qs->size() == 3 ? (*qs)[1] : Dim();
    scores4 = {bd, Dim::Known(b.num_heads), sd, sd};
  }
  std::reverse(masks.begin(), masks.end());  // in application order
  std::string mask_why = AnalyzeMasks(masks, scores4, b);
  if (!mask_why.empty()) return fail(mask_why);
  // A bool mask with a -inf fill can mask a whole row: softmax gives NaN there, which
  // only the IsNaN guard turns into the kernel's zeros.
  if ((b.mask.kind == MaskKind::kBoolKeep || b.mask.kind == MaskKind::kBoolDrop) &&
      b.guard == nullptr)
    return fail(
        "a fully masked row would be NaN in the model but 0 in "
        "kiln.MultiHeadAttention: add the IsNaN guard or use a finite fill");

  // Head merge: Transpose [0, 2, 1, 3] then Reshape [B, S, H].
  // (The TorchScript SDPA export first reshapes P·V to [B, -1, S, D], the shape it already
  // has: skipped when provably so.)
  Node* mt = nullptr;
  Node* mr = nullptr;
  Value ctx = b.context->output(0);
  for (const Use& u : b.context->output_info(0).uses)
    if (IsOp(u.user, "Reshape") && u.operand == 0 &&
        KeepsHeadLayout(u.user, b.num_heads, b.head_dim, QueryHeadValues(b)))
      b.context_reshape = u.user;
  if (b.context_reshape) ctx = b.context_reshape->output(0);
  for (const Use& u : ctx.node->output_info(ctx.index).uses)
    if (IsOp(u.user, "Transpose") && PermIs(u.user, {0, 2, 1, 3})) mt = u.user;
  if (mt != nullptr)
    for (const Use& u : mt->output_info(0).uses)
      if (IsOp(u.user, "Reshape") && u.operand == 0 && u.user->num_inputs() >= 2) mr = u.user;
  if (mr == nullptr)
    return fail(
        "the attention output is not merged back by Transpose [0, 2, 1, 3] + "
        "Reshape [B, S, H]");
  b.merge_transpose = mt;
  b.output = mr;
  {
    const int64_t h = b.num_heads * b.head_dim;
    std::vector<Value> same_bs = {mr->input(0)};
    if (q_proj) same_bs.push_back(q_proj);
    const std::vector<Dim>* out = ShapeOf(mr->output(0));
    std::optional<std::vector<ShapeElem>> target = DescribeShape(mr->input(1));
    bool last_ok = out && out->size() == 3 && (*out)[2].is_known() && (*out)[2].value() == h;
    if (!last_ok && target && target->size() == 3 && (*target)[2].kind == ShapeElem::kConst)
      last_ok = (*target)[2].value == h || (*target)[2].value == -1;
    const bool rank_ok = (out && out->size() == 3) || (target && target->size() == 3);
    if (!rank_ok || !last_ok || !KeepsBatchAndSequence(mr, same_bs)) {
      // Any other target is kept after the fused op, provided it does not copy dims 2 and
      // 3 of the [B, S, N, D] input (0 entries when allowzero = 0), which differ from
      // those of [B, S, H].
      bool keepable = target.has_value() || mr->attr_int_or("allowzero", 0) != 0;
      for (size_t i = 2; keepable && target && i < target->size(); ++i)
        keepable = mr->attr_int_or("allowzero", 0) != 0 ||
                   ((*target)[i].kind == ShapeElem::kConst && (*target)[i].value != 0);
      if (!keepable)
        return fail(
            absl::StrFormat("the head merge Reshape's target %s may copy the head "
                            "dims (a 0 past the [B, S] entries); only targets that "
                            "do not are fused",
                            out ? DimsString(*out) : "of unknown shape"));
      b.merge_kept = true;
    }
  }

  // Everything replaced.
  for (Node* n : b.q.nodes) b.interior.push_back(n);
  for (Node* n : b.k.nodes) b.interior.push_back(n);
  for (Node* n : b.v.nodes) b.interior.push_back(n);
  b.interior.push_back(b.scores);
  for (Node* n : score_scales) b.interior.push_back(n);
  for (const MaskLayer& l : masks) b.interior.push_back(l.node);
  b.interior.push_back(softmax);
  if (b.guard) b.interior.push_back(b.guard);
  b.interior.push_back(b.context);
  if (b.context_reshape) b.interior.push_back(b.context_reshape);
  b.interior.push_back(mt);
  if (!b.merge_kept) b.interior.push_back(mr);
  std::vector<Node*> sorted = b.interior;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  // Graph order, so provenance unions are deterministic.
  b.interior = sorted;
  if (order == nullptr || !order->Sort(b.interior)) {
    b.interior.clear();
    for (const auto& n : g.nodes())
      if (std::binary_search(sorted.begin(), sorted.end(), n.get())) b.interior.push_back(n.get());
  }
  r.nodes.assign(b.interior.begin(), b.interior.end());
  for (Node* n : b.interior) {
    if (n == mr) continue;
    for (int i = 0; i < n->num_outputs(); ++i) {
      const std::string value_name =
          n->output_info(i).name.empty() ? Name(n) : n->output_info(i).name;
      if (IsGraphOutput(g, n->output(i)))
        return fail(
            absl::StrFormat("interior value %s (%s) is a graph output", value_name, n->op()));
      for (const Use& u : n->output_info(i).uses)
        if (!std::binary_search(sorted.begin(), sorted.end(), u.user) &&
            !(b.merge_kept && n == mt && u.user == mr && u.operand == 0) &&
            !(IsOp(u.user, "Shape") && OnlyFeeds(g, u.user, sorted, 6)))
          return fail(
              absl::StrFormat("interior value %s (%s) is also read outside the "
                              "attention by %s",
                              value_name, n->op(), u.user->Describe()));
    }
  }

  // Where qkv comes from: one Split of a packed projection, or three projections of one
  // input (concatenated).
  if (!b.packed_qkv && !b.heads_form) b.qkv_split = QkvSplit(b);
  if (b.qkv_split == nullptr && !b.packed_qkv && !b.heads_form) {
    const Value sq = ProjectionInput(b.q.proj), sk = ProjectionInput(b.k.proj),
                sv = ProjectionInput(b.v.proj);
    if (!sq || !sk || !sv)
      return fail(
          "Q, K and V are not projections (Linear, MatMul, MatMul + Add) of one "
          "input");
    if (sq != sk || sq != sv) {
      if (sk == sv)
        return fail(
            "cross-attention (K/V from a different input than Q) is not "
            "fused yet");
      return fail("Q, K and V are projections of different inputs");
    }
    const int64_t h = b.num_heads * b.head_dim, kvh = b.num_kv_heads * b.head_dim;
    if (LastDim(b.q.proj) != h || LastDim(b.k.proj) != kvh || LastDim(b.v.proj) != kvh ||
        b.k.proj.type().dtype != b.q.proj.type().dtype ||
        b.v.proj.type().dtype != b.q.proj.type().dtype)
      return fail(
          "the Q, K and V projections do not all have the known shapes [B, S, N*D], "
          "[B, S, Nkv*D], [B, S, Nkv*D]");
  }
  r.stage = Stage::kComplete;
  return r;
}

}  // namespace kiln::attention
