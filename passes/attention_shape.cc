// Shape facts for the attention matcher (see attention_shape.h): what each element of a
// Reshape target is (a constant, or dim i of some tensor via Shape/Gather/Unsqueeze/
// Concat), whether a Reshape provably keeps its input's leading [B, S] dims or its whole
// [B, N, S, D] head layout, and the dynamo SDPA batched Kᵀ chain.
#include "passes/attention_shape.h"

#include <algorithm>

#include "kiln/ir/ops.h"
#include "passes/rewrite_util.h"

namespace kiln::attention {
namespace {

using rewrite::ConstantOf;
using rewrite::IsOp;

const std::vector<Dim>* ShapeOf(Value v) {
  if (!v) return nullptr;
  const Type& t = v.type();
  return t.shape ? &*t.shape : nullptr;
}

std::optional<ShapeElem> ScalarElem(Value v);

int RankOf(Value v) { return v ? v.type().rank() : -1; }

bool IsKiln(const Node* n, std::string_view op) {
  return n != nullptr && n->domain() == "kiln" && n->op() == op;
}

// True when broadcasting `other` against a rank-`rank` value cannot change its dims 0
// and 1: `other` has at most rank - 2 dims, or its dims aligned with 0 and 1 are 1.
bool LeavesLeadingDims(Value other, int rank) {
  const std::vector<Dim>* s = ShapeOf(other);
  if (s == nullptr || rank < 2) return false;
  const int r = static_cast<int>(s->size());
  for (int i = 0; i < 2; ++i) {
    const int j = i - (rank - r);  // the dim of `other` aligned with output dim i
    if (j >= 0 && !((*s)[j].is_known() && (*s)[j].value() == 1)) return false;
  }
  return r <= rank;
}

// The inputs of `n` (producing `v`) whose leading [B, S] dims `v` provably has.
std::vector<Value> LeadingDimSources(Value v) {
  const Node* n = v.node;
  const int rank = RankOf(v);
  std::vector<Value> out;
  if (n == nullptr || n->num_inputs() == 0 || !n->input(0)) return out;
  const Value x = n->input(0);
  const OpInfo* info = FindOp(n->domain(), n->op());
  if (HasTrait(info, kElementwise) && n->num_inputs() == 1) {
    out.push_back(x);
  } else if (HasTrait(info, kElementwise) && HasTrait(info, kBroadcasting) &&
             n->num_inputs() == 2 && rank >= 2) {
    for (int i = 0; i < 2; ++i)
      if (n->input(i) && RankOf(n->input(i)) == rank && LeavesLeadingDims(n->input(1 - i), rank))
        out.push_back(n->input(i));
  } else if (IsKiln(n, "Linear") || IsOp(n, "MatMul")) {
    if (n->num_inputs() >= 2 && RankOf(x) >= 3 && RankOf(n->input(1)) == 2) out.push_back(x);
  } else if (IsOp(n, "LayerNormalization") || IsKiln(n, "RMSNorm") ||
             IsKiln(n, "MultiHeadAttention")) {
    if (v.index == 0) out.push_back(x);  // (LayerNormalization's Mean/InvStdDev reduce)
  } else if (IsKiln(n, "SkipLayerNorm") || IsKiln(n, "SkipRMSNorm")) {
    if (v.index <= 1) out.push_back(x);  // Y and Sum have X's shape
  } else if (IsKiln(n, "EmbedLayerNorm")) {
    if (RankOf(x) == 2) out.push_back(x);
  } else if (IsOp(n, "Split")) {
    const int r = RankOf(x);
    int64_t axis = n->attr_int_or("axis", 0);
    if (axis < 0) axis += r;
    if (r >= 3 && axis >= 2) out.push_back(x);
  } else if (IsOp(n, "Transpose")) {
    const std::vector<int64_t>* p = n->attr_ints("perm");
    if (p && p->size() >= 3 && (*p)[0] == 0 && (*p)[1] == 1) out.push_back(x);
  } else if (IsOp(n, "Gather") && n->num_inputs() == 2) {
    if (n->attr_int_or("axis", 0) == 0 && RankOf(n->input(1)) >= 2) out.push_back(n->input(1));
  }
  return out;
}

}  // namespace

bool SameKnownDim(const Dim& a, const Dim& b) { return !a.is_unknown() && a == b; }

std::vector<Value> SameLeadingDims(Value v, int depth) {
  std::vector<Value> seen;
  if (!v) return seen;
  std::vector<std::pair<Value, int>> work = {{v, depth}};
  seen.push_back(v);
  while (!work.empty() && seen.size() < 256) {
    auto [cur, d] = work.back();
    work.pop_back();
    if (d <= 0) continue;
    for (const Value& src : LeadingDimSources(cur)) {
      if (std::find(seen.begin(), seen.end(), src) != seen.end()) continue;
      seen.push_back(src);
      work.push_back({src, d - 1});
    }
  }
  return seen;
}

// Elements of a 1-D i64 shape vector, as far as they can be told apart.
std::optional<std::vector<ShapeElem>> DescribeShape(Value v, int depth) {
  if (!v || depth < 0) return std::nullopt;
  if (std::optional<std::vector<int64_t>> c = rewrite::IntConstant(v)) {
    std::vector<ShapeElem> out;
    for (int64_t x : *c) out.push_back({ShapeElem::kConst, x, {}, 0});
    return out;
  }
  const Node* n = v.node;
  if (IsOp(n, "Shape")) {
    const std::vector<Dim>* s = ShapeOf(n->input(0));
    if (s == nullptr) return std::nullopt;
    const int64_t r = static_cast<int64_t>(s->size());
    int64_t start = n->attr_int_or("start", 0), end = n->attr_int_or("end", r);
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = std::clamp<int64_t>(start, 0, r);
    end = std::clamp<int64_t>(end, 0, r);
    std::vector<ShapeElem> out;
    for (int64_t i = start; i < end; ++i) out.push_back({ShapeElem::kDimOf, 0, n->input(0), i});
    return out;
  }
  if (IsOp(n, "Concat")) {
    std::vector<ShapeElem> out;
    for (const Value& piece : n->inputs()) {
      std::optional<std::vector<ShapeElem>> d = DescribeShape(piece, depth - 1);
      if (!d) {
        const std::vector<Dim>* s = ShapeOf(piece);
        if (s == nullptr || s->size() != 1 || !(*s)[0].is_known()) return std::nullopt;
        d = std::vector<ShapeElem>(static_cast<size_t>((*s)[0].value()));
      }
      out.insert(out.end(), d->begin(), d->end());
    }
    return out;
  }
  if (IsOp(n, "Unsqueeze") && n->num_inputs() >= 1) {
    std::optional<ShapeElem> e = ScalarElem(n->input(0));
    if (e) return std::vector<ShapeElem>{*e};
  }
  if (IsOp(n, "Gather") && n->num_inputs() == 2) {
    std::optional<std::vector<int64_t>> idx = rewrite::IntConstant(n->input(1));
    const Tensor* it = ConstantOf(n->input(1));
    std::optional<std::vector<ShapeElem>> src = DescribeShape(n->input(0), depth - 1);
    if (idx && it->rank() == 1 && src) {
      std::vector<ShapeElem> out;
      const int64_t r = static_cast<int64_t>(src->size());
      for (int64_t i : *idx) {
        if (i < 0) i += r;
        if (i < 0 || i >= r) return std::nullopt;
        out.push_back((*src)[i]);
      }
      return out;
    }
  }
  return std::nullopt;
}

namespace {

// A scalar i64 that is one dim of a tensor (Gather(Shape(x), i) with scalar i) or a constant.
std::optional<ShapeElem> ScalarElem(Value v) {
  if (const Tensor* t = ConstantOf(v)) {
    if (t->NumElements() == 1 && IsInteger(t->dtype()))
      return ShapeElem{ShapeElem::kConst, t->GetAsInt64(0), {}, 0};
    return std::nullopt;
  }
  const Node* n = v ? v.node : nullptr;
  if (!IsOp(n, "Gather") || n->num_inputs() != 2) return std::nullopt;
  const Tensor* it = ConstantOf(n->input(1));
  if (it == nullptr || it->rank() != 0 || !IsInteger(it->dtype())) return std::nullopt;
  std::optional<std::vector<ShapeElem>> src = DescribeShape(n->input(0));
  if (!src) return std::nullopt;
  int64_t i = it->GetAsInt64(0);
  const int64_t r = static_cast<int64_t>(src->size());
  if (i < 0) i += r;
  if (i < 0 || i >= r) return std::nullopt;
  return (*src)[i];
}

// True when element `i` (< 2) of a Reshape target provably copies dim i of the Reshape
// input `x`; `same_bs` lists values known to share x's leading [B, S] dims (x included).
bool CopiesDim(const std::optional<std::vector<ShapeElem>>& target, int i, Value x, bool allowzero,
               const std::vector<Value>& same_bs) {
  if (!target || static_cast<int>(target->size()) <= i) return false;
  const ShapeElem& e = (*target)[i];
  const std::vector<Dim>* xs = ShapeOf(x);
  const Dim* xd = xs && static_cast<int>(xs->size()) > i ? &(*xs)[i] : nullptr;
  if (e.kind == ShapeElem::kConst) {
    if (e.value == 0 && !allowzero) return true;  // Reshape's "copy this dim"
    return xd && xd->is_known() && xd->value() == e.value;
  }
  if (e.kind != ShapeElem::kDimOf) return false;
  const std::vector<Dim>* ys = ShapeOf(e.of);
  if (xd && ys && e.dim >= 0 && e.dim < static_cast<int64_t>(ys->size()) &&
      SameKnownDim(*xd, (*ys)[e.dim]))
    return true;
  if (e.dim != i) return false;
  for (const Value& y : SameLeadingDims(e.of))
    if (std::find(same_bs.begin(), same_bs.end(), y) != same_bs.end()) return true;
  return false;
}

}  // namespace

// Leading dims [B, S] of Reshape `r` equal those of its input, from types or the target.
bool KeepsBatchAndSequence(const Node* r, const std::vector<Value>& same_bs) {
  const bool allowzero = r->attr_int_or("allowzero", 0) != 0;
  const std::vector<Dim>* in = ShapeOf(r->input(0));
  const std::vector<Dim>* out = ShapeOf(const_cast<Node*>(r)->output(0));
  std::optional<std::vector<ShapeElem>> target = DescribeShape(r->input(1));
  std::vector<Value> related;
  for (const Value& s : same_bs)
    for (const Value& y : SameLeadingDims(s))
      if (std::find(related.begin(), related.end(), y) == related.end()) related.push_back(y);
  for (const Value& y : SameLeadingDims(r->input(0)))
    if (std::find(related.begin(), related.end(), y) == related.end()) related.push_back(y);
  for (int i = 0; i < 2; ++i) {
    const bool by_type =
        in && out && in->size() > 2 && out->size() > 2 && SameKnownDim((*in)[i], (*out)[i]);
    if (!by_type && !CopiesDim(target, i, r->input(0), allowzero, related)) return false;
  }
  return true;
}

Value BatchedKeyTranspose(Value v, std::vector<Node*>* via) {
  Node* r2 = rewrite::ProducerIs(v, "Reshape");
  Node* t = r2 ? rewrite::ProducerIs(r2->input(0), "Transpose") : nullptr;
  Node* r1 = t ? rewrite::ProducerIs(t->input(0), "Reshape") : nullptr;
  const std::vector<int64_t>* perm = t ? t->attr_ints("perm") : nullptr;
  if (r1 == nullptr || perm == nullptr || *perm != std::vector<int64_t>{0, 2, 1} ||
      r1->num_inputs() < 2 || r2->num_inputs() < 2)
    return {};
  const std::vector<Dim>* in = ShapeOf(r1->input(0));
  const std::vector<Dim>* o1 = ShapeOf(r1->output(0));
  const std::vector<Dim>* o2 = ShapeOf(r2->output(0));
  if (!in || !o1 || !o2 || o1->size() != 3 || o2->size() != 4) return {};
  if (in->size() == 5) {
    // The repeat_kv expansion [B, Nkv, n, S, D] reshaped straight to [B·Nkv·n, S, D]
    // (reshape-simplification joined its [B, Nkv·n, S, D] Reshape into this one).
    if (!(*in)[1].is_known() || !(*in)[2].is_known() || !(*o2)[1].is_known() ||
        (*o2)[1].value() != (*in)[1].value() * (*in)[2].value() ||
        !SameKnownDim((*o1)[1], (*in)[3]) || !SameKnownDim((*o1)[2], (*in)[4]) ||
        !SameKnownDim((*o2)[2], (*in)[4]) || !SameKnownDim((*o2)[3], (*in)[3]))
      return {};
  } else if (in->size() != 4 || !SameKnownDim((*o1)[1], (*in)[2]) ||
             !SameKnownDim((*o1)[2], (*in)[3]) || !SameKnownDim((*o2)[1], (*in)[1]) ||
             !SameKnownDim((*o2)[2], (*in)[3]) || !SameKnownDim((*o2)[3], (*in)[2])) {
    return {};
  }
  *via = {r2, t, r1};
  return r1->input(0);
}

bool KeepsHeadLayout(const Node* r, int64_t heads, int64_t head_dim,
                     const std::vector<Value>& same_layout_in) {
  if (r->num_inputs() < 2) return false;
  const Value x = r->input(0);
  const std::vector<Dim>* in = ShapeOf(x);
  const std::vector<Dim>* out = ShapeOf(const_cast<Node*>(r)->output(0));
  std::optional<std::vector<ShapeElem>> target = DescribeShape(r->input(1));
  if (!target || target->size() != 4 || (in && in->size() != 4)) return false;
  const bool allowzero = r->attr_int_or("allowzero", 0) != 0;
  std::vector<Value> same_layout = same_layout_in;
  same_layout.push_back(x);
  const int64_t known[4] = {-1, heads, -1, head_dim};
  int inferred = 0;
  for (int i = 0; i < 4; ++i) {
    const ShapeElem& e = (*target)[i];
    if (in && out && out->size() == 4 && SameKnownDim((*in)[i], (*out)[i])) continue;
    if (e.kind == ShapeElem::kConst) {
      if (e.value == 0 && !allowzero) continue;
      if (e.value == -1 && ++inferred == 1) continue;
      if (known[i] > 0 && e.value == known[i]) continue;
      if (in && (*in)[i].is_known() && (*in)[i].value() == e.value) continue;
      return false;
    }
    if (e.kind != ShapeElem::kDimOf) return false;
    const std::vector<Dim>* ys = ShapeOf(e.of);
    if (in && ys && e.dim >= 0 && e.dim < static_cast<int64_t>(ys->size()) &&
        SameKnownDim((*in)[i], (*ys)[e.dim]))
      continue;
    if ((i == 0 || i == 2) && e.dim == i &&
        std::find(same_layout.begin(), same_layout.end(), e.of) != same_layout.end())
      continue;
    return false;
  }
  return true;
}

}  // namespace kiln::attention
