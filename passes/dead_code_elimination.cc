// dce: removes what no kept graph output needs. In order:
//  1. unrequested graph outputs: with PassContext::keep_outputs non-empty only those
//     outputs stay (a name that is not a graph output is InvalidArgument);
//  2. no-op nodes, whose output is replaced by their input: Identity; Dropout in inference
//     (mask unused, training_mode absent or constant false, or ratio constant 0); Cast /
//     CastLike to the input's own dtype; Reshape, Expand and Slice whose output type equals
//     the input type (every dim known or a symbol, no "?"), Slice also only when its
//     constant params select the full range with step 1; Transpose with the identity perm;
//  3. nodes (Constants included) that no graph output depends on.
// Why: exporters leave Identity and inference Dropout everywhere, folding leaves dead
// shape arithmetic, and a graph compiled for one output should not compute the others.
// A removed no-op's graph output keeps its name (GraphOutput::name); only its value moves
// to the no-op's input, which may be a graph input. Graph inputs are never removed: they
// are the model's signature.
// Limits: no-op detection trusts stored types (shape inference); equal symbolic dims are
// taken as equal sizes, as ONNX dim_param names mean.
#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "kiln/support/status.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace kiln {
namespace {

using rewrite::IntList;
using rewrite::IsGraphOutput;

const Tensor* ConstantInput(const Node& n, int i) {
  return i < n.num_inputs() ? rewrite::ConstantOf(n.input(i)) : nullptr;
}

// A rank-known type with no unknown ("?") dims and a known dtype.
bool FullyDescribed(const Type& t) {
  if (t.dtype == DType::kUndefined || !t.shape) return false;
  return std::none_of(t.shape->begin(), t.shape->end(),
                      [](const Dim& d) { return d.is_unknown(); });
}

bool SameDescribedType(Node& n) {
  const Type& in = n.input(0).type();
  const Type& out = n.output_info(0).type;
  return FullyDescribed(in) && in == out;
}

bool IsFullSlice(Node& n) {
  if (n.num_inputs() < 3 || !SameDescribedType(n)) return false;
  const std::vector<Dim>& dims = *n.input(0).type().shape;
  const int64_t rank = static_cast<int64_t>(dims.size());
  std::optional<std::vector<int64_t>> starts = IntList(ConstantInput(n, 1));
  std::optional<std::vector<int64_t>> ends = IntList(ConstantInput(n, 2));
  if (!starts || !ends || starts->size() != ends->size()) return false;
  const size_t k = starts->size();
  std::vector<int64_t> axes(k), steps(k, 1);
  for (size_t i = 0; i < k; ++i) axes[i] = static_cast<int64_t>(i);
  if (n.num_inputs() > 3 && n.input(3)) {
    std::optional<std::vector<int64_t>> a = IntList(ConstantInput(n, 3));
    if (!a || a->size() != k) return false;
    axes = *a;
  }
  if (n.num_inputs() > 4 && n.input(4)) {
    std::optional<std::vector<int64_t>> s = IntList(ConstantInput(n, 4));
    if (!s || s->size() != k) return false;
    steps = *s;
  }
  for (size_t i = 0; i < k; ++i) {
    if (steps[i] != 1) return false;
    int64_t axis = axes[i];
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) return false;
    const Dim& d = dims[axis];
    int64_t s = (*starts)[i], e = (*ends)[i];
    if (d.is_known()) {
      const int64_t size = d.value();
      if (s < 0) s += size;
      if (e < 0) e += size;
      if (std::clamp<int64_t>(s, 0, size) != 0 || std::clamp<int64_t>(e, 0, size) != size)
        return false;
    } else if (s != 0 || e < std::numeric_limits<int32_t>::max()) {
      return false;  // symbolic dim: only the literal "0 to the end" form is provably full
    }
  }
  return true;
}

bool IsIdentityTranspose(Node& n) {
  const std::vector<int64_t>* perm = n.attr_ints("perm");
  if (perm == nullptr) return n.input(0).type().rank() >= 0 && n.input(0).type().rank() <= 1;
  for (size_t i = 0; i < perm->size(); ++i)
    if ((*perm)[i] != static_cast<int64_t>(i)) return false;
  return true;
}

// The value `n` forwards unchanged, or a null Value when `n` is not a no-op.
Value NoOpSource(const Graph& g, Node& n) {
  if (!n.domain().empty() || n.num_inputs() < 1 || !n.input(0) || n.num_outputs() < 1) return {};
  const Value x = n.input(0);
  if (n.op() == "Identity") return x;
  if (n.op() == "Dropout") {
    if (n.num_outputs() > 1 && (!n.output_info(1).uses.empty() || IsGraphOutput(g, n.output(1))))
      return {};
    const bool has_training = n.num_inputs() > 2 && n.input(2);
    if (!has_training || rewrite::BoolConstant(n.input(2)) == false) return x;
    const Tensor* ratio = ConstantInput(n, 1);
    if (ratio && IsFloat(ratio->dtype()) && ratio->NumElements() == 1 &&
        ratio->GetAsDouble(0) == 0.0)
      return x;
    return {};
  }
  if (n.op() == "Cast") {
    const std::optional<int64_t> to = n.attr_int("to");
    if (!to || x.type().dtype == DType::kUndefined) return {};
    return DTypeFromOnnx(static_cast<int32_t>(*to)) == x.type().dtype ? x : Value{};
  }
  if (n.op() == "CastLike") {
    if (n.num_inputs() < 2 || !n.input(1)) return {};
    const DType dt = x.type().dtype;
    return dt != DType::kUndefined && dt == n.input(1).type().dtype ? x : Value{};
  }
  if (n.op() == "Reshape" || n.op() == "Expand") return SameDescribedType(n) ? x : Value{};
  if (n.op() == "Slice") return IsFullSlice(n) ? x : Value{};
  if (n.op() == "Transpose") return IsIdentityTranspose(n) ? x : Value{};
  return {};
}

class DeadCodeEliminationPass final : public Pass {
 public:
  std::string_view name() const override { return "dce"; }
  std::string_view description() const override {
    return "removes unrequested outputs, no-op nodes and nodes no output depends on";
  }

 protected:
  absl::StatusOr<bool> RunImpl(Graph& g, const PassContext& ctx) override {
    bool changed = false;
    if (!ctx.keep_outputs.empty()) {
      KILN_ASSIGN_OR_RETURN(bool pruned, PruneOutputs(g, ctx.keep_outputs));
      changed = pruned;
    }
    for (const auto& p : g.nodes()) {
      Node& n = *p;
      const Value src = NoOpSource(g, n);
      if (!src) continue;
      g.ReplaceAllUsesWith(n.output(0), src);
      Count(absl::StrCat("removed ", n.op()));
      changed = true;
    }
    const int removed = g.RemoveDeadNodes();
    if (removed > 0) {
      Count("removed nodes", removed);
      changed = true;
    }
    return changed;
  }

 private:
  absl::StatusOr<bool> PruneOutputs(Graph& g, const std::vector<std::string>& keep) {
    const absl::flat_hash_set<std::string> wanted(keep.begin(), keep.end());
    absl::flat_hash_set<std::string> present;
    for (const GraphOutput& o : g.outputs()) present.insert(o.name);
    for (const std::string& name : keep)
      if (!present.contains(name))
        return absl::InvalidArgumentError(
            absl::StrCat("requested output '", name, "' is not an output of the graph"));
    std::vector<GraphOutput> kept;
    for (const GraphOutput& o : g.outputs())
      if (wanted.contains(o.name)) kept.push_back(o);
    const int64_t dropped = static_cast<int64_t>(g.outputs().size() - kept.size());
    if (dropped == 0) return false;
    g.ClearOutputs();
    for (GraphOutput& o : kept) g.AddOutput(std::move(o.name), o.value);
    Count("removed outputs", dropped);
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateDeadCodeEliminationPass() {
  return std::make_unique<DeadCodeEliminationPass>();
}

}  // namespace kiln
