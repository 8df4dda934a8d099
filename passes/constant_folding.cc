// constant-folding: replaces every pure node whose inputs are all Constants with Constant
// nodes holding its outputs, computed by the reference kernels (EvaluateNode), and folds
// Shape of any value whose selected dims are known from its type (no evaluation needed).
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
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace kiln {
namespace {

constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max();

int64_t SatMul(int64_t a, int64_t b) {
  int64_t r;
  if (a < 0 || b < 0 || MulOverflows(a, b, &r)) return kUnbounded;
  return r;
}

int64_t SatAdd(int64_t a, int64_t b) {
  int64_t r;
  if (a < 0 || b < 0 || AddOverflows(a, b, &r)) return kUnbounded;
  return r;
}

int64_t Product(absl::Span<const int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) n = SatMul(n, std::max<int64_t>(d, 0));
  return n;
}

// Element count of numpy broadcasting `a` with `b`, saturating; dims that do not
// broadcast take the larger (the kernel will report the error).
std::vector<int64_t> BroadcastBound(absl::Span<const int64_t> a, absl::Span<const int64_t> b) {
  const size_t r = std::max(a.size(), b.size());
  std::vector<int64_t> out(r, 1);
  for (size_t i = 0; i < r; ++i) {
    const int64_t x = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const int64_t y = i < r - b.size() ? 1 : b[i - (r - b.size())];
    out[i] = std::max(x, y);
  }
  return out;
}

// Exact bytes of output `i` when its stored type is static with a known dtype.
std::optional<int64_t> StaticBytes(const Node& n, int i) {
  const Type& t = n.output_info(i).type;
  if (t.dtype == DType::kUndefined || DTypeSize(t.dtype) == 0) return std::nullopt;
  std::optional<std::vector<int64_t>> dims = t.StaticDims();
  if (!dims) return std::nullopt;
  return SatMul(Product(*dims), static_cast<int64_t>(DTypeSize(t.dtype)));
}

// An upper bound on the bytes of the node's largest output, from its constant inputs,
// for ops whose output may be larger than their inputs. `ins[i]` is null when omitted.
int64_t BoundOutputBytes(const Node& n, const OpInfo* info, const std::vector<const Tensor*>& ins) {
  auto in = [&](size_t i) -> const Tensor* { return i < ins.size() ? ins[i] : nullptr; };
  // Element size: the stored output dtype when known, else the widest (8 bytes).
  int64_t elem = 8;
  bool all_known = true;
  int64_t widest = 0;
  for (int i = 0; i < n.num_outputs(); ++i) {
    const DType dt = n.output_info(i).type.dtype;
    if (dt == DType::kUndefined) all_known = false;
    widest = std::max<int64_t>(widest, static_cast<int64_t>(DTypeSize(dt)));
  }
  if (all_known && widest > 0) elem = widest;

  const std::string& op = n.op();
  if (n.domain().empty() && op == "ConstantOfShape") {
    std::optional<std::vector<int64_t>> shape = rewrite::IntList(in(0));
    if (!shape) return 0;  // the kernel rejects it before allocating
    const Tensor* v = n.attr_tensor("value");
    const int64_t es = v ? static_cast<int64_t>(DTypeSize(v->dtype())) : 4;
    return SatMul(Product(*shape), es);
  }
  if (n.domain().empty() && op == "Expand") {
    std::optional<std::vector<int64_t>> shape = rewrite::IntList(in(1));
    if (!in(0) || !shape) return 0;
    return SatMul(Product(BroadcastBound(in(0)->dims(), *shape)),
                  static_cast<int64_t>(DTypeSize(in(0)->dtype())));
  }
  if (n.domain().empty() && op == "Range") {
    if (!in(0) || !in(1) || !in(2) || in(0)->NumElements() != 1 || in(1)->NumElements() != 1 ||
        in(2)->NumElements() != 1)
      return 0;
    const double start = in(0)->GetAsDouble(0), limit = in(1)->GetAsDouble(0),
                 delta = in(2)->GetAsDouble(0);
    if (delta == 0) return 0;
    const double count = std::ceil((limit - start) / delta);
    if (!(count < 9e18)) return std::isnan(count) ? 0 : kUnbounded;
    return SatMul(std::max<int64_t>(static_cast<int64_t>(count) + 1, 0),
                  static_cast<int64_t>(DTypeSize(in(0)->dtype())));
  }
  if (n.domain().empty() && (op == "MatMul" || op == "Gemm")) {
    if (!in(0) || !in(1)) return 0;
    const std::vector<int64_t>& a = in(0)->dims();
    const std::vector<int64_t>& b = in(1)->dims();
    if (op == "Gemm") {  // out [M, N] from 2-D A [M,K] (or [K,M]) and B [K,N] (or [N,K])
      if (a.size() != 2 || b.size() != 2) return 0;
      const int64_t m = n.attr_int_or("transA", 0) ? a[1] : a[0];
      const int64_t nn = n.attr_int_or("transB", 0) ? b[0] : b[1];
      return SatMul(SatMul(m, nn), elem);
    }
    if (a.empty() || b.empty()) return 0;
    const std::vector<int64_t> abatch(a.begin(), a.size() >= 2 ? a.end() - 2 : a.begin());
    const std::vector<int64_t> bbatch(b.begin(), b.size() >= 2 ? b.end() - 2 : b.begin());
    const int64_t m = a.size() >= 2 ? a[a.size() - 2] : 1;
    const int64_t nn = b.size() >= 2 ? b.back() : 1;
    return SatMul(SatMul(Product(BroadcastBound(abatch, bbatch)), SatMul(m, nn)), elem);
  }
  if (n.domain().empty() && op == "Gather") {
    if (!in(0) || !in(1)) return 0;
    return SatMul(SatMul(Product(in(0)->dims()), std::max<int64_t>(in(1)->NumElements(), 1)), elem);
  }
  if (n.domain().empty() && op == "Tile") {  // out[i] = data[i] * repeats[i]
    std::optional<std::vector<int64_t>> reps = rewrite::IntList(in(1));
    if (!in(0) || !reps) return 0;  // the kernel rejects it before allocating
    return SatMul(SatMul(Product(in(0)->dims()), Product(*reps)), elem);
  }
  if (n.domain().empty() && op == "Pad") {  // out[a] = data[a] + pads_begin[a] + pads_end[a]
    std::optional<std::vector<int64_t>> pads = rewrite::IntList(in(1));
    if (!in(0) || !pads) return 0;
    std::vector<int64_t> dims = in(0)->dims();
    const int64_t r = static_cast<int64_t>(dims.size());
    std::vector<int64_t> axes;
    if (std::optional<std::vector<int64_t>> a = rewrite::IntList(in(3)); in(3) && a) {
      axes = *a;
    } else if (in(3)) {
      return 0;
    } else {
      for (int64_t i = 0; i < r; ++i) axes.push_back(i);
    }
    const int64_t na = static_cast<int64_t>(axes.size());
    if (static_cast<int64_t>(pads->size()) != 2 * na) return 0;
    for (int64_t i = 0; i < na; ++i) {
      const int64_t ax = axes[i] < 0 ? axes[i] + r : axes[i];
      if (ax < 0 || ax >= r) return 0;
      // Negative pads crop; only growth can push the output over the limit.
      dims[ax] = SatAdd(dims[ax], SatAdd(std::max<int64_t>((*pads)[i], 0),
                                         std::max<int64_t>((*pads)[na + i], 0)));
    }
    return SatMul(Product(dims), elem);
  }
  if (n.domain().empty() && op == "OneHot") {  // out = indices dims with depth inserted
    if (!in(0) || !in(1) || in(1)->NumElements() != 1) return 0;
    const double depth = std::ceil(in(1)->GetAsDouble(0));
    if (!(depth >= 1)) return 0;  // the kernel rejects it (NaN too)
    if (!(depth < 9e18)) return kUnbounded;
    return SatMul(SatMul(Product(in(0)->dims()), static_cast<int64_t>(depth)), elem);
  }
  if (n.domain().empty() && op == "GatherND") {
    // out = indices.dims[:-1] + data.dims[batch_dims + q:], q = indices.dims[-1].
    if (!in(0) || !in(1) || in(1)->rank() < 1) return 0;
    const std::vector<int64_t>& d = in(0)->dims();
    const std::vector<int64_t>& id = in(1)->dims();
    const int64_t b = n.attr_int_or("batch_dims", 0), q = id.back();
    if (b < 0 || q < 0 || b > static_cast<int64_t>(d.size()) ||
        q > static_cast<int64_t>(d.size()) - b)
      return 0;
    return SatMul(SatMul(Product(absl::MakeConstSpan(id).first(id.size() - 1)),
                         Product(absl::MakeConstSpan(d).subspan(static_cast<size_t>(b + q)))),
                  elem);
  }
  if (n.domain().empty() && op == "NonZero") {  // [rank, count] of i64
    if (!in(0)) return 0;
    return SatMul(SatMul(std::max<int64_t>(in(0)->rank(), 1), Product(in(0)->dims())), 8);
  }
  if (n.domain().empty() && op == "Shape") {
    if (!in(0)) return 0;
    return SatMul(in(0)->rank(), 8);
  }
  // Reductions keep every unreduced dim, and an empty reduced axis still gives one
  // element: at most the product of the input dims with 0s counted as 1s.
  if (n.domain().empty() && (op.rfind("Reduce", 0) == 0 || op == "ArgMax")) {
    if (!in(0)) return 0;
    int64_t c = 1;
    for (int64_t d : in(0)->dims()) c = SatMul(c, std::max<int64_t>(d, 1));
    return SatMul(c, elem);
  }
  if (n.domain() == "kiln" && op == "Linear") {  // X[..., K] · W -> [..., M]
    if (!in(0) || !in(1) || in(0)->rank() < 1 || in(1)->rank() != 2) return 0;
    const std::vector<int64_t>& x = in(0)->dims();
    const int64_t m = n.attr_int_or("trans_w", 0) ? in(1)->dims()[0] : in(1)->dims()[1];
    return SatMul(SatMul(Product(absl::MakeConstSpan(x).first(x.size() - 1)), m), elem);
  }
  if (n.domain() == "kiln" && op == "Pool") {  // [B, S, H] -> [B, H]
    if (!in(0) || in(0)->rank() != 3) return 0;
    return SatMul(SatMul(in(0)->dims()[0], in(0)->dims()[2]), elem);
  }
  if (n.domain() == "kiln" && op == "EmbedLayerNorm") {  // ids [B, S], word [V, H] -> [B, S, H]
    if (!in(0) || !in(3) || in(3)->rank() != 2) return 0;
    return SatMul(SatMul(Product(in(0)->dims()), in(3)->dims()[1]), elem);
  }
  if (HasTrait(info, kBroadcasting)) {
    std::vector<int64_t> dims;
    for (const Tensor* t : ins)
      if (t) dims = BroadcastBound(dims, t->dims());
    return SatMul(Product(dims), elem);
  }
  // Every other op in the catalogue (src/ir/ops.cc) produces at most as many elements as
  // its inputs hold together: unary, normalizations, Softmax, CumSum, Trilu, Concat,
  // Split, Slice, Reshape, Transpose, Squeeze/Unsqueeze, Flatten, GatherElements (the
  // indices' shape), ScatterND (the data's), TopK (k <= the axis, checked by the kernel),
  // Size, and kiln SkipLayerNorm/RMSNorm/MultiHeadAttention. Ops whose output can exceed
  // their inputs (Tile, Pad, OneHot, GatherND, NonZero, Shape, reductions of empty axes,
  // Expand, ConstantOfShape, Range, MatMul/Gemm, Gather, broadcasting, kiln Linear, Pool,
  // EmbedLayerNorm) are bounded explicitly above. A new op that can grow its output
  // must be added there.
  int64_t total = 0;
  for (const Tensor* t : ins)
    if (t) total = SatAdd(total, std::max<int64_t>(t->NumElements(), 1));
  return SatMul(total, elem);
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
      std::optional<int64_t> b = StaticBytes(*n, i);
      if (!b) {
        all_static = false;
        break;
      }
      largest = std::max(largest, *b);
    }
    if (!all_static) largest = BoundOutputBytes(*n, info, ins);
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
