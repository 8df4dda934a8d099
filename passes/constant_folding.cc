// constant-folding: replaces every pure node whose inputs are all Constants with Constant
// nodes holding its outputs, computed by the reference kernels (EvaluateNode), and folds
// Shape of any value whose selected dims are known from its type (no evaluation needed),
// and CastLike of a float Constant to a float value's known dtype (only the dtype of the
// second input matters: expansions cast their f32 constants like the model's data).
// Why: exporters rebuild position ids, attention-mask arithmetic and every
// Shape->Gather->Concat chain at run time; once shapes are known (shape inference) all of
// that is constant, and folding it removes the nodes and exposes more simplification.
// Walks nodes in order, so a folded node's Constant feeds its users' folding in the same
// run; each new Constant is inserted just before the node it replaces (topological order
// kept), keeps that node's output names and provenance; input Constants left unused by a
// fold are removed.
// Limits: an output bigger than PassContext::fold_limit_bytes is skipped, not an error;
// the size is taken from the node's static output type or, failing that, bounded from its
// constant inputs BEFORE evaluating (so a hostile ConstantOfShape never allocates), and
// re-checked after. A kernel error on constant inputs is returned (the graph would fail at
// run time too), except Unimplemented (no kernel, unsupported dtype, training Dropout),
// which skips the node. Ops without the kPure trait (and Input) are never folded.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "kiln/ir/ops.h"
#include "kiln/reference/executor.h"
#include "kiln/support/status.h"
#include "passes/fold_bounds.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace kiln {
namespace {

// CastLike(c, y): a float Constant c converted to y's known float dtype (each value rounded
// once, as Cast does), or nullopt.
std::optional<Tensor> CastLikeOfConstant(const Node& n) {
  if (n.num_inputs() != 2 || !n.input(0) || !n.input(1)) return std::nullopt;
  const Tensor* c = n.input(0).node->constant_value();
  const DType to = n.input(1).type().dtype;
  auto is_float = [](DType t) {
    return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16 || t == DType::kF64;
  };
  // (An f64 constant would round twice on its way to f16 through SetFromDouble's float.)
  if (c == nullptr || !is_float(c->dtype()) || c->dtype() == DType::kF64 || !is_float(to) ||
      c->NumElements() > 4096)
    return std::nullopt;
  Tensor out(to, c->dims());
  for (int64_t i = 0; i < c->NumElements(); ++i) out.SetFromDouble(i, c->GetAsDouble(i));
  return out;
}

// The dims Shape node `n` reports, as far as its input's type tells (rank must be known).
std::optional<std::vector<Dim>> ShapeDims(const Node& n) {
  const Value x = n.num_inputs() > 0 ? n.input(0) : Value{};
  if (!x || !x.type().has_rank()) return std::nullopt;
  const std::vector<Dim>& dims = *x.type().shape;
  const int64_t r = static_cast<int64_t>(dims.size());
  int64_t start = n.attr_int_or("start", 0);
  int64_t end = n.attr_int_or("end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, 0, r);
  if (end <= start) return std::vector<Dim>{};
  return std::vector<Dim>(dims.begin() + start, dims.begin() + end);
}

std::optional<Tensor> ToShapeTensor(const std::vector<Dim>& dims) {
  std::vector<int64_t> values;
  for (const Dim& d : dims) {
    if (!d.is_known()) return std::nullopt;
    values.push_back(d.value());
  }
  return Tensor::FromI64({static_cast<int64_t>(values.size())}, values);
}

// Shape's output when the selected dims of its input are known from the type alone.
std::optional<Tensor> ShapeFromType(const Node& n) {
  std::optional<std::vector<Dim>> dims = ShapeDims(n);
  if (!dims) return std::nullopt;
  return ToShapeTensor(*dims);
}

// Gather(Shape(x), constant indices) when the gathered dims are known, even if other dims
// of x are symbolic (x: [batch, seq, 384] -> Gather(Shape(x), 2) = 384).
std::optional<Tensor> GatherOfShape(const Node& n) {
  if (n.num_inputs() != 2 || !n.input(0) || !n.input(1)) return std::nullopt;
  const Node& shape = *n.input(0).node;
  if (!rewrite::IsOp(&shape, "Shape")) return std::nullopt;
  const int64_t axis = n.attr_int_or("axis", 0);
  if (axis != 0 && axis != -1) return std::nullopt;
  const Tensor* idx = n.input(1).node->constant_value();
  if (idx == nullptr || (idx->dtype() != DType::kI64 && idx->dtype() != DType::kI32))
    return std::nullopt;
  std::optional<std::vector<Dim>> dims = ShapeDims(shape);
  if (!dims) return std::nullopt;
  const int64_t size = static_cast<int64_t>(dims->size());
  Tensor out(DType::kI64, idx->dims());
  for (int64_t i = 0; i < idx->NumElements(); ++i) {
    int64_t k = idx->GetAsInt64(i);
    if (k < 0) k += size;
    if (k < 0 || k >= size || !(*dims)[k].is_known()) return std::nullopt;
    out.data<int64_t>()[i] = (*dims)[k].value();
  }
  return out;
}

class ConstantFoldingPass final : public Pass {
 public:
  std::string_view name() const override { return "constant-folding"; }
  std::string_view description() const override {
    return "evaluates pure nodes with constant inputs, and Shape of known shapes";
  }

 protected:
  absl::StatusOr<bool> RunImpl(Graph& g, const PassContext& ctx) override {
    std::vector<Node*> order;
    for (const auto& p : g.nodes()) order.push_back(p.get());
    bool changed = false;
    removed_.clear();
    for (Node* n : order) {
      if (removed_.contains(n)) continue;
      KILN_ASSIGN_OR_RETURN(bool folded, TryFold(g, n, ctx));
      changed = changed || folded;
    }
    return changed;
  }

 private:
  absl::StatusOr<bool> TryFold(Graph& g, Node* n, const PassContext& ctx) {
    if (n->is_input() || n->is_constant()) return false;
    const OpInfo* info = FindOp(n->domain(), n->op());
    if (!HasTrait(info, kPure)) return false;

    if (n->domain().empty() && n->num_outputs() == 1) {
      std::optional<Tensor> t;
      if (n->op() == "Shape") t = ShapeFromType(*n);
      if (n->op() == "Gather") t = GatherOfShape(*n);
      if (n->op() == "CastLike") t = CastLikeOfConstant(*n);
      if (t) {
        if (n->op() == "Gather") Count("folded Gather of Shape");
        KILN_RETURN_IF_ERROR(Replace(g, n, {std::move(*t)}));
        return true;
      }
    }

    std::vector<const Tensor*> ins;
    for (const Value& v : n->inputs()) {
      if (!v) {
        ins.push_back(nullptr);
        continue;
      }
      const Tensor* t = v.node->constant_value();
      if (t == nullptr) return false;
      ins.push_back(t);
    }
    if (n->num_outputs() == 0) return false;

    // Size cap, before evaluating: exact from static types, else a bound from the inputs.
    bool all_static = true;
    int64_t largest = 0;
    for (int i = 0; i < n->num_outputs(); ++i) {
      std::optional<int64_t> b = fold::StaticOutputBytes(*n, i);
      if (!b) {
        all_static = false;
        break;
      }
      largest = std::max(largest, *b);
    }
    if (!all_static) largest = fold::BoundOutputBytes(*n, info, ins);
    if (largest > ctx.fold_limit_bytes) {
      Count("skipped: over size limit");
      return false;
    }

    absl::StatusOr<std::vector<Tensor>> outs = EvaluateNode(*n, ins);
    if (!outs.ok()) {
      if (absl::IsUnimplemented(outs.status())) {
        Count("skipped: unimplemented");
        return false;
      }
      return outs.status();
    }
    if (static_cast<int>(outs->size()) != n->num_outputs())
      return KILN_INTERNAL("%s: evaluation gave %d outputs", n->Describe(), outs->size());
    for (const Tensor& t : *outs) {
      if (!t.defined()) return KILN_INTERNAL("%s: evaluation gave no tensor", n->Describe());
      if (static_cast<int64_t>(t.NumBytes()) > ctx.fold_limit_bytes) {
        Count("skipped: over size limit");
        return false;
      }
    }
    KILN_RETURN_IF_ERROR(Replace(g, n, std::move(*outs)));
    return true;
  }

  // Replaces every output of `n` with a new Constant inserted just before it, removes `n`,
  // then removes the input Constants the fold left without users.
  absl::Status Replace(Graph& g, Node* n, std::vector<Tensor> values) {
    for (int i = 0; i < n->num_outputs(); ++i) {
      const Value out = n->output(i);
      if (n->output_info(i).uses.empty() && !rewrite::IsGraphOutput(g, out)) continue;
      Node* c = g.InsertNodeBefore(n, "Constant", {}, 1);
      c->set_output_type(0, Type::Of(values[i]));
      c->set_output_name(0, n->output_info(i).name);
      c->set_attr("value", std::move(values[i]));
      c->set_provenance(n->provenance());
      g.ReplaceAllUsesWith(out, c->output());
    }
    std::vector<Node*> producers;
    for (const Value& v : n->inputs())
      if (v && std::find(producers.begin(), producers.end(), v.node) == producers.end())
        producers.push_back(v.node);
    const std::string op = n->domain().empty() ? n->op() : absl::StrCat(n->domain(), ".", n->op());
    KILN_RETURN_IF_ERROR(g.RemoveNode(n));
    removed_.insert(n);
    Count("folded nodes");
    Count(absl::StrCat("folded ", op));
    for (Node* p : producers) {
      if (!p->is_constant() || !p->output_info(0).uses.empty()) continue;
      bool is_output = false;
      for (const GraphOutput& o : g.outputs()) is_output = is_output || o.value.node == p;
      if (is_output) continue;
      KILN_RETURN_IF_ERROR(g.RemoveNode(p));
      removed_.insert(p);
      Count("removed unused constants");
    }
    return absl::OkStatus();
  }

  // Nodes this run removed (the walk's snapshot may still list them).
  absl::flat_hash_set<const Node*> removed_;
};

}  // namespace

std::unique_ptr<Pass> CreateConstantFoldingPass() {
  return std::make_unique<ConstantFoldingPass>();
}

}  // namespace kiln
