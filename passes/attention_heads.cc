// Attention matcher, head paths: from an attention MatMul operand back through the head
// split (Transpose + Reshape, scalar Muls anywhere on the Q and K paths, fuse-rotary's
// kiln.Rotary on the Q and K heads, HF's repeat_kv expansion on the K and V heads) to the
// [B, S, H] projection, and the heads / head size the split Reshape implies
// (attention_match.h).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "passes/attention_match_internal.h"
#include "passes/attention_shape.h"
#include "passes/rewrite_util.h"

namespace kiln::attention::internal {

using rewrite::ConstantOf;
using rewrite::IsOp;
using rewrite::ProducerIs;

namespace {

bool ScalarShaped(Value v) {
  if (const Tensor* t = ConstantOf(v)) return t->NumElements() == 1;
  const std::vector<Dim>* s = ShapeOf(v);
  if (s == nullptr) return false;
  for (const Dim& d : *s)
    if (!(d.is_known() && d.value() == 1)) return false;
  return true;
}

// Skips Mul/Div by a scalar on a Q/K path; a non-constant scalar is an issue.
Value SkipScales(Value v, HeadPath& p, std::string* issue) {
  for (int i = 0; i < 4 && v; ++i) {
    std::optional<double> f;
    std::optional<int> data = ScaleOperand(v.node, &f);
    if (!data) break;
    if (!f && issue->empty())
      *issue = absl::StrFormat(
          "the attention scale (%s) is computed at run time and did not "
          "fold to a constant (give static shapes, --shape)",
          Name(v.node));
    p.nodes.push_back(v.node);
    p.scale_ops.push_back(v.node);
    p.scale *= f.value_or(1.0);
    v = v.node->input(*data);
  }
  return v;
}

// HF repeat_kv on [B, Nkv, S, D] heads x:
//   Reshape(Expand(Unsqueeze(x, axes = [2]), [B, Nkv, n, S, D]), [B, Nkv·n, S, D]).
// Fills p.repeat / p.repeat_reshape and returns x; null when `v` is not made so. A chain
// of these ops whose shapes cannot be proved to be that sets *issue.
Value SkipRepeatKv(Value v, HeadPath& p, std::string* issue) {
  Node* r = ProducerIs(v, "Reshape");
  Node* e = r ? ProducerIs(r->input(0), "Expand") : nullptr;
  Node* u = e ? ProducerIs(e->input(0), "Unsqueeze") : nullptr;
  if (u == nullptr) return {};
  std::optional<std::vector<int64_t>> axes;
  if (u->num_inputs() > 1 && u->input(1)) axes = rewrite::IntConstant(u->input(1));
  const std::vector<Dim>* x = ShapeOf(u->input(0));
  const std::vector<Dim>* ex = ShapeOf(e->output(0));
  const std::vector<Dim>* out = ShapeOf(r->output(0));
  const bool ok =
      axes && (*axes == std::vector<int64_t>{2}) && x && x->size() == 4 && ex && ex->size() == 5 &&
      out && out->size() == 4 && (*ex)[2].is_known() && (*ex)[2].value() >= 1 &&
      SameDim((*ex)[0], (*x)[0]) && SameDim((*ex)[1], (*x)[1]) && SameDim((*ex)[3], (*x)[2]) &&
      SameDim((*ex)[4], (*x)[3]) && SameDim((*out)[0], (*x)[0]) && SameDim((*out)[2], (*x)[2]) &&
      SameDim((*out)[3], (*x)[3]) && (*x)[1].is_known() && (*out)[1].is_known() &&
      (*out)[1].value() == (*x)[1].value() * (*ex)[2].value();
  if (!ok) {
    if (issue->empty())
      *issue = absl::StrFormat(
          "the grouped-query expansion %s -> %s -> %s is not provably repeat_kv "
          "(Unsqueeze axis 2 of [B, Nkv, S, D], Expand to [B, Nkv, n, S, D], Reshape to "
          "[B, Nkv*n, S, D]; give static shapes, --shape)",
          Name(u), Name(e), Name(r));
    return {};
  }
  p.repeat = (*ex)[2].value();
  p.repeat_reshape = r;
  p.nodes.insert(p.nodes.end(), {r, e, u});
  return u->input(0);
}

// The repeat_kv expansion Expand(Unsqueeze(x, axes = [2]), [B, Nkv, n, S, D]) whose 5-D
// result `v` a joined Reshape reads: fills p.repeat and returns x (null if not so).
Value SkipExpandedKv(Value v, HeadPath& p) {
  Node* e = ProducerIs(v, "Expand");
  Node* u = e ? ProducerIs(e->input(0), "Unsqueeze") : nullptr;
  if (u == nullptr || u->num_inputs() < 2 || !u->input(1)) return {};
  const std::optional<std::vector<int64_t>> axes = rewrite::IntConstant(u->input(1));
  const std::vector<Dim>* x = ShapeOf(u->input(0));
  const std::vector<Dim>* ex = ShapeOf(v);
  if (!axes || *axes != std::vector<int64_t>{2} || !x || x->size() != 4 || !ex || ex->size() != 5 ||
      !(*ex)[2].is_known() || (*ex)[2].value() < 1)
    return {};
  for (int i : {0, 1, 2, 3})
    if (!SameDim((*ex)[i < 2 ? i : i + 1], (*x)[i])) return {};
  p.repeat = (*ex)[2].value();
  p.nodes.insert(p.nodes.end(), {e, u});
  return u->input(0);
}

// axis as a rank-`rank` input's dim (negative counted from the end), or -1.
int64_t AxisOf(int64_t axis, int rank) { return axis < 0 ? axis + rank : axis; }

// The constant axes of a Squeeze / Unsqueeze / Slice operand (input `i`), else nullopt.
std::optional<std::vector<int64_t>> AxesInput(const Node* n, int i) {
  if (n->num_inputs() > i && n->input(i)) return rewrite::IntConstant(n->input(i));
  return std::nullopt;
}

// ModernBERT's packed head split, from the Squeeze in front of the head Transpose:
// Squeeze(part, axes = [2]) where part is output i of Split(r, [1, 1, 1], axis = 2) or
// Slice(r, [i], [i + 1], axes = [2]), r = Reshape([B, S, 3H] -> [B, S, 3, N, D]).
bool WalkPackedPart(Node* sq, HeadPath& p) {
  const std::optional<std::vector<int64_t>> sq_axes = AxesInput(sq, 1);
  Value part = sq->input(0);
  const std::vector<Dim>* pd = ShapeOf(part);
  if (!sq_axes || sq_axes->size() != 1 || !pd || pd->size() != 5 || AxisOf((*sq_axes)[0], 5) != 2)
    return false;
  Node* r = nullptr;
  Node* picker = part.node;
  int64_t index = -1;
  if (IsOp(picker, "Split") && picker->num_outputs() == 3) {
    if (AxisOf(picker->attr_int_or("axis", 0), 5) != 2) return false;
    if (const auto sizes = AxesInput(picker, 1); sizes && *sizes != std::vector<int64_t>{1, 1, 1})
      return false;
    index = part.index;
    r = ProducerIs(picker->input(0), "Reshape");
  } else if (IsOp(picker, "Slice") && picker->num_inputs() >= 4) {
    const auto starts = AxesInput(picker, 1), ends = AxesInput(picker, 2),
               axes = AxesInput(picker, 3);
    const auto steps = AxesInput(picker, 4);
    if (!starts || !ends || !axes || starts->size() != 1 || ends->size() != 1 ||
        axes->size() != 1 || AxisOf((*axes)[0], 5) != 2 ||
        (picker->num_inputs() > 4 && picker->input(4) &&
         (!steps || *steps != std::vector<int64_t>{1})))
      return false;
    index = (*starts)[0];
    if (index < 0 || index > 2 || (*ends)[0] != index + 1) return false;
    r = ProducerIs(picker->input(0), "Reshape");
  }
  if (r == nullptr || r->num_inputs() < 2) return false;
  const std::vector<Dim>* out = ShapeOf(r->output(0));
  if (!out || out->size() != 5 || !(*out)[2].is_known() || (*out)[2].value() != 3) return false;
  p.nodes.insert(p.nodes.end(), {sq, picker, r});
  p.reshape = r;
  p.packed_part = index;
  p.proj = r->input(0);
  return true;
}

// What lies between the head Transpose's [B, N, S, D] output and the attention MatMul
// operand `v` (or, for K, the Kᵀ Transpose): scales (Q, K), repeat_kv (K, V), kiln.Rotary
// (Q, K). Returns the value the head Transpose should produce.
Value SkipHeadOps(Value v, PathKind kind, HeadPath& p, std::string* issue) {
  const bool qk = kind != PathKind::kV;
  if (qk) v = SkipScales(v, p, issue);
  if (kind != PathKind::kQ)
    if (Value x = SkipRepeatKv(v, p, issue)) v = qk ? SkipScales(x, p, issue) : x;
  if (qk && v && v.node->domain() == "kiln" && v.node->op() == "Rotary") {
    p.rotary = v.node;
    p.nodes.push_back(v.node);
    v = SkipScales(v.node->input(0), p, issue);
  }
  return v;
}

}  // namespace

bool SameDim(const Dim& a, const Dim& b) { return !a.is_unknown() && a == b; }

const std::vector<Dim>* ShapeOf(Value v) {
  if (!v) return nullptr;
  const Type& t = v.type();
  return t.shape ? &*t.shape : nullptr;
}

std::optional<int> ScaleOperand(const Node* n, std::optional<double>* factor) {
  if (n == nullptr || n->num_inputs() != 2 || !n->input(0) || !n->input(1)) return std::nullopt;
  const bool mul = IsOp(n, "Mul"), div = IsOp(n, "Div");
  if (!mul && !div) return std::nullopt;
  int data = -1;
  if (ScalarShaped(n->input(1)) && !ScalarShaped(n->input(0)))
    data = 0;
  else if (mul && ScalarShaped(n->input(0)) && !ScalarShaped(n->input(1)))
    data = 1;
  if (data < 0) return std::nullopt;
  const Tensor* c = ConstantOf(n->input(1 - data));
  if (c != nullptr && IsFloat(c->dtype())) {
    const double v = c->GetAsDouble(0);
    *factor = div ? 1.0 / v : v;
  } else {
    *factor = std::nullopt;
  }
  return data;
}

bool PermIs(const Node* t, std::vector<int64_t> perm) {
  const std::vector<int64_t>* p = t->attr_ints("perm");
  return p != nullptr && *p == perm;
}

std::string Name(const Node* n) {
  return n->provenance().empty() ? absl::StrCat(n->op(), " #", n->id()) : n->provenance()[0];
}

int64_t LastDim(Value v) {
  const std::vector<Dim>* s = ShapeOf(v);
  return s && !s->empty() && s->back().is_known() ? s->back().value() : -1;
}

std::string AnalyzeSplit(HeadPath& p, const char* which) {
  const Node* r = p.reshape;
  if (p.packed_part >= 0) {
    const std::vector<Dim>* in = ShapeOf(r->input(0));
    const std::vector<Dim>* out = ShapeOf(p.reshape->output(0));
    std::vector<Value> same_bs = {r->input(0)};
    if (Value src = ProjectionInput(p.proj)) same_bs.push_back(src);
    if (!in || in->size() != 3 || !(*out)[3].is_known() || !(*out)[4].is_known())
      return absl::StrFormat(
          "the packed %s head split reshapes %s to %s; expected [B, S, 3H] -> "
          "[B, S, 3, N, D] with static N and D",
          which, in ? DimsString(*in) : "?", DimsString(*out));
    if (!KeepsBatchAndSequence(r, same_bs))
      return absl::StrFormat(
          "the packed %s head split Reshape does not provably keep the [batch, sequence] "
          "dims of its input",
          which);
    p.heads = (*out)[3].value();
    p.head_dim = (*out)[4].value();
    const int64_t h = LastDim(r->input(0));
    if (h > 0 && h != 3 * p.heads * p.head_dim)
      return absl::StrFormat("packed head split inconsistent: %s is [.., %d], not 3 x %d x %d",
                             which, h, p.heads, p.head_dim);
    return "";
  }
  const std::vector<Dim>* in = ShapeOf(r->input(0));
  const std::vector<Dim>* out = ShapeOf(p.reshape->output(0));
  if ((in && in->size() != 3) || (out && out->size() != 4))
    return absl::StrFormat(
        "the %s head split reshapes %s to %s; expected [B, S, H] -> "
        "[B, S, N, D]",
        which, in ? DimsString(*in) : "?", out ? DimsString(*out) : "?");
  std::vector<Value> same_bs = {r->input(0), p.proj};
  if (Value src = ProjectionInput(p.proj)) same_bs.push_back(src);
  if (!KeepsBatchAndSequence(r, same_bs))
    return absl::StrFormat(
        "the %s head split Reshape does not provably keep the [batch, "
        "sequence] dims of its input",
        which);
  std::optional<std::vector<ShapeElem>> target = DescribeShape(r->input(1));
  int64_t n = -1, d = -1;
  if (target && target->size() == 4) {
    const ShapeElem& en = (*target)[2];
    const ShapeElem& ed = (*target)[3];
    if (en.kind == ShapeElem::kConst) n = en.value;
    if (ed.kind == ShapeElem::kConst) d = ed.value;
  }
  if (out && out->size() == 4) {
    if (n <= 0 && (*out)[2].is_known()) n = (*out)[2].value();
    if (d <= 0 && (*out)[3].is_known()) d = (*out)[3].value();
  }
  const int64_t h = LastDim(r->input(0));
  if (n == -1 && d > 0 && h > 0 && h % d == 0) n = h / d;
  if (d == -1 && n > 0 && h > 0 && h % n == 0) d = h / n;
  if (n <= 0 || d <= 0)
    return absl::StrFormat(
        "the number of heads or the head size of the %s head split is "
        "not known",
        which);
  if (h > 0 && n * d != h)
    return absl::StrFormat(
        "head split inconsistent: %s is split into %d heads of %d but "
        "its hidden size is %d",
        which, n, d, h);
  p.heads = n;
  p.head_dim = d;
  return "";
}

bool WalkHeads(Value v, PathKind kind, HeadPath& p, std::string* issue) {
  if (kind != PathKind::kV) v = SkipScales(v, p, issue);
  if (kind == PathKind::kK) {
    Node* t = ProducerIs(v, "Transpose");
    std::vector<Node*> via;
    if (t && PermIs(t, {0, 1, 3, 2})) {
      via = {t};
      v = t->input(0);
    } else {
      v = BatchedKeyTranspose(v, &via);
      if (!v) return false;
    }
    p.nodes.insert(p.nodes.end(), via.begin(), via.end());
    if (ShapeOf(v) && ShapeOf(v)->size() == 5) {
      v = SkipExpandedKv(v, p);
      if (!v) return false;
    }
  }
  if (kind != PathKind::kQ && p.repeat == 1)
    if (Value x = SkipRepeatKv(v, p, issue)) v = x;
  if (kind == PathKind::kK) v = SkipScales(v, p, issue);
  const std::vector<Dim>* s = ShapeOf(v);
  if (!v || s == nullptr || s->size() != 4 || !(*s)[1].is_known() || !(*s)[3].is_known() ||
      (*s)[1].value() <= 0 || (*s)[3].value() <= 0)
    return false;
  p.heads_value = v;
  p.heads = (*s)[1].value();
  p.head_dim = (*s)[3].value();
  return true;
}

bool WalkHeadPath(Value v, PathKind kind, HeadPath& p, std::string* issue) {
  const bool scaled = kind != PathKind::kV;
  if (kind == PathKind::kK)
    v = SkipScales(v, p, issue);
  else
    v = SkipHeadOps(v, kind, p, issue);
  // Kᵀ: Transpose [0, 2, 3, 1] of the split, or [0, 1, 3, 2] (or the batched form) after
  // the usual [0, 2, 1, 3].
  Node* t = ProducerIs(v, "Transpose");
  std::vector<Node*> via;
  Value kt;
  if (kind == PathKind::kK && t && PermIs(t, {0, 1, 3, 2})) {
    via = {t};
    kt = t->input(0);
  } else if (kind == PathKind::kK) {
    kt = BatchedKeyTranspose(v, &via);
  }
  if (kt && ShapeOf(kt) && ShapeOf(kt)->size() == 5) {
    kt = SkipExpandedKv(kt, p);
    if (!kt) return false;
  }
  if (kt) {
    p.nodes.insert(p.nodes.end(), via.begin(), via.end());
    t = ProducerIs(SkipHeadOps(kt, kind, p, issue), "Transpose");
    if (t == nullptr || !PermIs(t, {0, 2, 1, 3})) return false;
  } else if (t == nullptr || !PermIs(t, kind == PathKind::kK ? std::vector<int64_t>{0, 2, 3, 1}
                                                             : std::vector<int64_t>{0, 2, 1, 3})) {
    return false;
  }
  p.nodes.push_back(t);
  v = t->input(0);
  if (scaled) v = SkipScales(v, p, issue);
  // GPT-J: kiln.Rotary on the [B, S, N, D] split, before the head Transpose.
  if (scaled && p.rotary == nullptr && v && v.node->domain() == "kiln" &&
      v.node->op() == "Rotary") {
    p.rotary = v.node;
    p.rotary_before_transpose = true;
    p.nodes.push_back(v.node);
    v = SkipScales(v.node->input(0), p, issue);
  }
  if (Node* sq = ProducerIs(v, "Squeeze")) return WalkPackedPart(sq, p);
  Node* r = ProducerIs(v, "Reshape");
  if (r == nullptr || r->num_inputs() < 2) return false;
  p.nodes.push_back(r);
  p.reshape = r;
  v = r->input(0);
  if (scaled) v = SkipScales(v, p, issue);
  p.proj = v;
  return true;
}

}  // namespace kiln::attention::internal
