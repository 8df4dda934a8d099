// reshape-simplification: collapses chains of shape-only ops (the catalogue's kReshape
// views: Reshape, Unsqueeze, Squeeze, Flatten — they never move data, only reinterpret
// its shape), which exporters emit in runs (BERT's Reshape->Transpose->Reshape heads,
// Unsqueeze chains on masks).
// Rules, looking upwards from each such node B whose data input comes from another one A
// that has no other user and is not a graph output:
//   - B = Reshape(A(x), s) with s a constant without 0 entries (or allowzero=1): B reads
//     x directly; s is kept ("composed reshapes").
//   - otherwise, when B's output dims are determinable — from its stored type (set by
//     shape inference) or derived from x's type and the constant axes/shape inputs of A
//     and B — B becomes Reshape(x, c) with c a new constant: known dims literally, a
//     symbolic dim equal to x's at the same position as 0 (copy), and at most one other
//     dim as -1 ("composed reshapes"; each Unsqueeze/Squeeze/Flatten absorbed this way
//     also counts as "converted to Reshape"). An Unsqueeze/Squeeze/Flatten is never
//     converted alone, only when it merges with a neighbour.
//   - a node of the family whose output dims equal its input dims (known or the same
//     symbol) is removed ("removed no-op reshapes").
//   - Softmax/LogSoftmax(Flatten(x, rank-1)) over the last axis -> Flatten(Softmax(x,
//     -1), rank-1) (the form the importer gives a pre-opset-13 Softmax), so the Flatten
//     composes with the Reshape after it ("moved a last-axis softmax above a flatten").
// Types of new nodes are B's (or the derived dims); provenance is the union of A and B.
// Limits: a chain through two unresolved dims (e.g. Reshape(x, [0, 0, 384]) of a
// Reshape whose output dims are unknown) is left alone, and so is an output with a
// literal 0-sized dim. A shape input that is not a Constant is only understood through
// the stored output type: run shape inference and constant folding first.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "kiln/ir/ops.h"
#include "kiln/support/status.h"
#include "passes/live_nodes.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace kiln {
namespace {

constexpr int kMaxRounds = 16;

using Dims = std::vector<Dim>;
using rewrite::IsOp;
using rewrite::IsSingleUseNode;
using rewrite::UnionProvenance;

// The catalogue's kReshape views (Reshape, Unsqueeze, Squeeze, Flatten).
bool IsShapeOnly(const Node* n) {
  const OpInfo* info = n ? FindOp(n->domain(), n->op()) : nullptr;
  return info != nullptr && info->view == ViewKind::kReshape;
}

// The integers of a Constant integer tensor (any integer dtype) of rank <= 1.
std::optional<std::vector<int64_t>> ConstInts(Value v) {
  const Tensor* t = rewrite::ConstantOf(v);
  if (t == nullptr || t->rank() > 1) return std::nullopt;
  return rewrite::IntConstant(v);
}

std::optional<Dims> TypeDims(Value v) {
  if (!v || !v.type().has_rank()) return std::nullopt;
  return *v.type().shape;
}

bool SameDim(const Dim& a, const Dim& b) { return !a.is_unknown() && a == b; }

// Axes normalized into [0, rank), distinct; nullopt when out of range.
std::optional<std::vector<int>> NormalizeAxes(const std::vector<int64_t>& axes, int rank) {
  std::vector<int> out;
  for (int64_t a : axes) {
    if (a < -rank || a >= rank) return std::nullopt;
    const int n = static_cast<int>(a < 0 ? a + rank : a);
    if (std::find(out.begin(), out.end(), n) != out.end()) return std::nullopt;
    out.push_back(n);
  }
  return out;
}

// The product of dims [lo, hi) as one Dim: known when all are known, the single
// non-known dim when all others are 1, unknown otherwise.
Dim ProductDim(const Dims& d, int lo, int hi) {
  int64_t prod = 1;
  std::optional<Dim> only;
  for (int i = lo; i < hi; ++i) {
    if (d[i].is_known()) {
      if (MulOverflows(prod, d[i].value(), &prod)) return Dim();
      continue;
    }
    if (only) return Dim();
    only = d[i];
  }
  if (!only) return Dim::Known(prod);
  return prod == 1 ? *only : Dim();
}

// Output dims of a shape-only node given its input dims, from its constant inputs and
// attributes; nullopt when they are not determinable.
std::optional<Dims> Derive(const Node* n, const Dims& in) {
  const int r = static_cast<int>(in.size());
  if (IsOp(n, "Reshape")) {
    if (n->num_inputs() < 2) return std::nullopt;
    std::optional<std::vector<int64_t>> s = ConstInts(n->input(1));
    if (!s) return std::nullopt;
    const bool allowzero = n->attr_int_or("allowzero", 0) != 0;
    Dims out;
    int infer = -1;
    for (size_t i = 0; i < s->size(); ++i) {
      const int64_t v = (*s)[i];
      if (v == -1) {
        if (infer >= 0) return std::nullopt;
        infer = static_cast<int>(i);
        out.push_back(Dim());
      } else if (v == 0 && !allowzero) {
        if (static_cast<int>(i) >= r) return std::nullopt;
        out.push_back(in[i]);
      } else if (v < 0) {
        return std::nullopt;
      } else {
        out.push_back(Dim::Known(v));
      }
    }
    if (infer < 0) return out;
    // -1: known when everything is known; the input's dim when all other dims match.
    bool all_known = true, others_match = static_cast<int>(out.size()) == r;
    int64_t total = 1, rest = 1;
    for (int i = 0; i < r; ++i) {
      all_known &= in[i].is_known();
      if (in[i].is_known() && MulOverflows(total, in[i].value(), &total)) return out;
    }
    for (size_t i = 0; i < out.size(); ++i) {
      if (static_cast<int>(i) == infer) continue;
      all_known &= out[i].is_known();
      if (out[i].is_known() && MulOverflows(rest, out[i].value(), &rest)) return out;
      if (others_match && !SameDim(out[i], in[i])) others_match = false;
    }
    if (all_known && rest > 0 && total % rest == 0) {
      out[infer] = Dim::Known(total / rest);
    } else if (others_match && rest != 0) {
      out[infer] = in[infer];
    }
    return out;
  }
  if (IsOp(n, "Unsqueeze")) {
    if (n->num_inputs() < 2) return std::nullopt;
    std::optional<std::vector<int64_t>> axes = ConstInts(n->input(1));
    if (!axes) return std::nullopt;
    const int out_rank = r + static_cast<int>(axes->size());
    std::optional<std::vector<int>> norm = NormalizeAxes(*axes, out_rank);
    if (!norm) return std::nullopt;
    Dims out;
    for (int i = 0, j = 0; i < out_rank; ++i) {
      const bool inserted = std::find(norm->begin(), norm->end(), i) != norm->end();
      if (!inserted && j >= r) return std::nullopt;
      out.push_back(inserted ? Dim::Known(1) : in[j++]);
    }
    return out;
  }
  if (IsOp(n, "Squeeze")) {
    std::vector<bool> drop(r, false);
    if (n->num_inputs() >= 2 && n->input(1)) {
      std::optional<std::vector<int64_t>> axes = ConstInts(n->input(1));
      if (!axes) return std::nullopt;
      std::optional<std::vector<int>> norm = NormalizeAxes(*axes, r);
      if (!norm) return std::nullopt;
      for (int a : *norm) {
        if (in[a].is_known() && in[a].value() != 1) return std::nullopt;
        drop[a] = true;
      }
    } else {
      for (int a = 0; a < r; ++a) {
        if (!in[a].is_known()) return std::nullopt;  // might be 1 at run time
        drop[a] = in[a].value() == 1;
      }
    }
    Dims out;
    for (int a = 0; a < r; ++a)
      if (!drop[a]) out.push_back(in[a]);
    return out;
  }
  if (IsOp(n, "Flatten")) {
    int64_t axis = n->attr_int_or("axis", 1);
    if (axis < -r || axis > r) return std::nullopt;
    if (axis < 0) axis += r;
    return Dims{ProductDim(in, 0, static_cast<int>(axis)),
                ProductDim(in, static_cast<int>(axis), r)};
  }
  return std::nullopt;
}

// Combines the stored dims with the derived ones, preferring known over symbolic over
// unknown; nullopt when neither exists or they contradict each other.
std::optional<Dims> Merge(const std::optional<Dims>& stored, const std::optional<Dims>& derived) {
  if (!stored) return derived;
  if (!derived) return stored;
  if (stored->size() != derived->size()) return std::nullopt;
  Dims out;
  for (size_t i = 0; i < stored->size(); ++i) {
    const Dim& a = (*stored)[i];
    const Dim& b = (*derived)[i];
    if (a.is_known() && b.is_known() && a.value() != b.value()) return std::nullopt;
    if (a.is_known())
      out.push_back(a);
    else if (b.is_known())
      out.push_back(b);
    else
      out.push_back(a.is_symbol() ? a : b);
  }
  return out;
}

// Output dims of a shape-only node: stored type merged with what its inputs determine.
std::optional<Dims> OutDims(Node* n, const std::optional<Dims>& in) {
  return Merge(TypeDims(n->output()), in ? Derive(n, *in) : std::nullopt);
}

// A Reshape shape constant producing `out` from x: known dims literally, x's own symbolic
// dims at the same position as 0, at most one -1. nullopt when not expressible.
std::optional<std::vector<int64_t>> ShapeSpec(const Dims& out, const std::optional<Dims>& x) {
  std::vector<int64_t> spec;
  bool inferred = false;
  for (size_t i = 0; i < out.size(); ++i) {
    const Dim& d = out[i];
    if (d.is_known()) {
      if (d.value() == 0) return std::nullopt;  // a literal 0 would mean "copy"
      spec.push_back(d.value());
    } else if (x && i < x->size() && SameDim(d, (*x)[i])) {
      spec.push_back(0);
    } else {
      if (inferred) return std::nullopt;
      inferred = true;
      spec.push_back(-1);
    }
  }
  return spec;
}

class ReshapeSimplificationPass final : public Pass {
 public:
  std::string_view name() const override { return "reshape-simplification"; }
  std::string_view description() const override {
    return "composes chains of Reshape/Unsqueeze/Squeeze/Flatten and removes no-op ones; "
           "moves a last-axis Softmax above a Flatten";
  }

 protected:
  absl::StatusOr<bool> RunImpl(Graph& g, const PassContext&) override {
    return live_.RunRounds(g, kMaxRounds, IsShapeOnly, [&](Node* b) { return Visit(g, b); });
  }

 private:
  absl::StatusOr<bool> Visit(Graph& g, Node* b) {
    if (b->num_inputs() < 1 || !b->input(0) || b->num_outputs() != 1) return false;
    if (IsOp(b, "Flatten")) {
      KILN_ASSIGN_OR_RETURN(bool moved, MoveSoftmaxAbove(g, b));
      if (moved) return true;
    }
    const Value in = b->input(0);
    const std::optional<Dims> in_dims = TypeDims(in);
    // No-op: output dims equal input dims.
    if (in_dims) {
      std::optional<Dims> out = OutDims(b, in_dims);
      if (out && out->size() == in_dims->size() &&
          std::equal(out->begin(), out->end(), in_dims->begin(), SameDim)) {
        g.ReplaceAllUsesWith(b->output(), in);
        KILN_RETURN_IF_ERROR(live_.RemoveIfDead(g, b->id()));
        Count("removed no-op reshapes");
        return true;
      }
    }
    Node* a = in.node;
    if (!IsShapeOnly(a) || a->num_inputs() < 1 || !a->input(0) || !IsSingleUseNode(g, a))
      return false;
    const Value x = a->input(0);
    const int a_id = a->id();
    const int converted = (IsOp(a, "Reshape") ? 0 : 1) + (IsOp(b, "Reshape") ? 0 : 1);

    // Reshape with a constant shape that does not refer to its input's dims.
    if (IsOp(b, "Reshape") && b->num_inputs() == 2) {
      std::optional<std::vector<int64_t>> s = ConstInts(b->input(1));
      if (s &&
          (b->attr_int_or("allowzero", 0) != 0 || std::find(s->begin(), s->end(), 0) == s->end())) {
        g.SetInput(b, 0, x);
        UnionProvenance(b, a);
        KILN_RETURN_IF_ERROR(live_.RemoveIfDead(g, a_id));
        Count("composed reshapes");
        if (converted) Count("converted to Reshape", converted);
        return true;
      }
    }

    const std::optional<Dims> x_dims = TypeDims(x);
    const std::optional<Dims> a_dims = OutDims(a, x_dims);
    const std::optional<Dims> b_dims = OutDims(b, a_dims);
    if (!b_dims) return false;
    std::optional<std::vector<int64_t>> spec = ShapeSpec(*b_dims, x_dims);
    if (!spec) return false;

    const int64_t rank = static_cast<int64_t>(spec->size());
    Node* shape = g.InsertNodeBefore(b, "Constant", {}, 1);
    shape->set_attr("value", Tensor::FromI64({rank}, *spec));
    shape->set_output_type(0, Type::Static(DType::kI64, {rank}));
    live_.Add(shape);
    if (IsOp(b, "Reshape") && b->num_inputs() == 2) {
      UnionProvenance(b, a);
      const int old_shape = b->input(1) ? b->input(1).node->id() : -1;
      g.SetInput(b, 0, x);
      g.SetInput(b, 1, shape->output());
      b->erase_attr("allowzero");
      KILN_RETURN_IF_ERROR(live_.RemoveIfDead(g, old_shape));
    } else {
      Node* r = g.InsertNodeBefore(b, "Reshape", {x, shape->output()}, 1);
      live_.Add(r);
      Type t = b->output_info(0).type;
      if (t.dtype == DType::kUndefined) t.dtype = x.type().dtype;
      t.shape = *b_dims;
      r->set_output_type(0, std::move(t));
      r->set_output_name(0, b->output_info(0).name);
      r->set_provenance(b->provenance());
      UnionProvenance(r, a);
      g.ReplaceAllUsesWith(b->output(), r->output());
      KILN_RETURN_IF_ERROR(live_.RemoveIfDead(g, b->id()));
    }
    // `a` may already be gone (removed with b as its last user).
    KILN_RETURN_IF_ERROR(live_.RemoveIfDead(g, a_id));
    Count("composed reshapes");
    if (converted) Count("converted to Reshape", converted);
    return true;
  }

  // Softmax/LogSoftmax(Flatten(x, r-1)) over its last axis, x of rank r, is
  // Flatten(Softmax(x, -1), r-1): the flatten keeps x's last axis whole, so the rows
  // normalized are the same. The importer writes the first form for a pre-opset-13
  // Softmax (src/onnx/canonicalize.cc); moving the Softmax above lets the Flatten merge
  // into the Reshape back to x's shape, leaving the opset-13 spelling the fusions know.
  absl::StatusOr<bool> MoveSoftmaxAbove(Graph& g, Node* flat) {
    const Value x = flat->input(0);
    if (!x.type().has_rank() || !IsSingleUseNode(g, flat)) return false;
    const int64_t r = x.type().rank();
    int64_t axis = flat->attr_int_or("axis", 1);
    if (axis < 0) axis += r;
    if (axis != r - 1) return false;
    const std::vector<Use>& uses = flat->output_info(0).uses;
    Node* sm = uses.front().user;
    if (!(IsOp(sm, "Softmax") || IsOp(sm, "LogSoftmax")) || sm->num_outputs() != 1) return false;
    const int64_t sm_axis = sm->attr_int_or("axis", -1);
    if (sm_axis != 1 && sm_axis != -1) return false;  // over the rows' elements (rank 2)
    Node* moved = g.InsertNodeBefore(sm, sm->op(), {x}, 1);
    moved->set_attr("axis", int64_t{-1});
    moved->set_provenance(sm->provenance());
    Type t = x.type();
    t.dtype = sm->output_info(0).type.dtype == DType::kUndefined ? t.dtype
                                                                 : sm->output_info(0).type.dtype;
    moved->set_output_type(0, std::move(t));
    live_.Add(moved);
    Node* back = g.InsertNodeBefore(sm, "Flatten", {moved->output()}, 1);
    back->set_attr("axis", axis);
    back->set_provenance(flat->provenance());
    back->set_output_type(0, sm->output_info(0).type);
    back->set_output_name(0, sm->output_info(0).name);
    live_.Add(back);
    const int sm_id = sm->id();
    g.ReplaceAllUsesWith(sm->output(), back->output());
    KILN_RETURN_IF_ERROR(live_.RemoveIfDead(g, sm_id));
    Count("moved a last-axis softmax above a flatten");
    return true;
  }

  // Nodes alive in the current round, and their removal.
  rewrite::LiveNodes live_;
};

}  // namespace

std::unique_ptr<Pass> CreateReshapeSimplificationPass() {
  return std::make_unique<ReshapeSimplificationPass>();
}

}  // namespace kiln
