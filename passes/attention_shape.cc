// Shape facts for the attention matcher (see attention_shape.h): what each element of a
// Reshape target is (a constant, or dim i of some tensor via Shape/Gather/Unsqueeze/
// Concat), and whether a Reshape provably keeps its input's leading [B, S] dims.
#include "passes/attention_shape.h"

#include <algorithm>

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

bool SameDim(const Dim& a, const Dim& b) { return !a.is_unknown() && a == b; }

std::optional<ShapeElem> ScalarElem(Value v);

}  // namespace

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
// input `x`; `same_bs` lists values known to share x's leading [B, S] dims.
bool CopiesDim(const std::optional<std::vector<ShapeElem>>& target, int i, Value x,
               const std::vector<Value>& same_bs) {
  if (!target || static_cast<int>(target->size()) <= i) return false;
  const ShapeElem& e = (*target)[i];
  const std::vector<Dim>* xs = ShapeOf(x);
  if (e.kind == ShapeElem::kConst) {
    if (e.value == 0) return true;  // Reshape's "copy this dim" (allowzero = 0)
    return xs && static_cast<int>(xs->size()) > i && (*xs)[i].is_known() &&
           (*xs)[i].value() == e.value;
  }
  if (e.kind == ShapeElem::kDimOf && e.dim == i)
    return std::find(same_bs.begin(), same_bs.end(), e.of) != same_bs.end();
  return false;
}

}  // namespace

// Leading dims [B, S] of Reshape `r` equal those of its input, from types or the target.
bool KeepsBatchAndSequence(const Node* r, const std::vector<Value>& same_bs) {
  if (r->attr_int_or("allowzero", 0) != 0) return false;
  const std::vector<Dim>* in = ShapeOf(r->input(0));
  const std::vector<Dim>* out = ShapeOf(const_cast<Node*>(r)->output(0));
  std::optional<std::vector<ShapeElem>> target = DescribeShape(r->input(1));
  for (int i = 0; i < 2; ++i) {
    const bool by_type = in && out && in->size() > 2 && out->size() > 2 &&
                         SameDim((*in)[i], (*out)[i]);
    if (!by_type && !CopiesDim(target, i, r->input(0), same_bs)) return false;
  }
  return true;
}

}  // namespace kiln::attention
