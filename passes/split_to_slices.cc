// split-to-slices: Split(x, split?){axis} → one Slice(x, [offset], [offset + size], [axis])
// per output, when the sizes are known (a constant `split` input, or an equal split of a
// static extent along the axis).
// Why: no plan kernel takes a Split (on the cpu it ran as a `ref` step — 12 % of a
// GPT-2-small KV export's prefill, whose heads-form attention keeps the packed qkv
// Split — and a cuda plan could not lower it at all), while every target has a strided
// `slice` kernel. Runs after the fusions, whose matchers (fuse-attention's qkv split, the
// rotary and glu halves) look for the Split itself.
// Limits: an equal split needs the extent along the axis static and divisible by the
// number of outputs; sizes must be non-negative and sum to the extent (else the node is
// left for the reference executor, which reports it).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kiln/support/status.h"
#include "passes/passes.h"

namespace kiln {
namespace {

Value I64Vector(Graph& g, const std::string& name, int64_t v) {
  return g.AddConstant(name, Tensor::FromI64({1}, {v}))->output(0);
}

// The output sizes of `n`, or empty when they are not known here.
std::vector<int64_t> SplitSizes(const Node& n, int64_t extent) {
  const int k = n.num_outputs();
  if (n.num_inputs() > 1 && n.input(1)) {
    const Tensor* t = n.input(1).node->constant_value();
    if (t == nullptr || t->dtype() != DType::kI64 || t->rank() != 1 || t->NumElements() != k)
      return {};
    std::vector<int64_t> sizes(t->data<int64_t>(), t->data<int64_t>() + k);
    int64_t sum = 0;
    for (int64_t s : sizes) {
      if (s < 0) return {};
      sum += s;
    }
    return extent < 0 || sum == extent ? sizes : std::vector<int64_t>{};
  }
  if (extent < 0 || k <= 0 || extent % k != 0) return {};
  return std::vector<int64_t>(k, extent / k);
}

class SplitToSlicesPass final : public Pass {
 public:
  std::string_view name() const override { return "split-to-slices"; }
  std::string_view description() const override {
    return "Split with known sizes -> one Slice per output (every target has a slice kernel)";
  }

 protected:
  absl::StatusOr<bool> RunImpl(Graph& g, const PassContext&) override {
    std::vector<Node*> splits;
    for (const auto& p : g.nodes())
      if (p->op() == "Split" && p->domain().empty() && p->num_inputs() >= 1 && p->input(0))
        splits.push_back(p.get());
    bool changed = false;
    for (Node* n : splits) {
      const Type& t = n->input(0).type();
      if (!t.has_rank() || t.rank() == 0) continue;
      int64_t axis = n->attr_int_or("axis", 0);
      if (axis < 0) axis += t.rank();
      if (axis < 0 || axis >= t.rank()) continue;
      const Dim& d = (*t.shape)[axis];
      const std::vector<int64_t> sizes = SplitSizes(*n, d.is_known() ? d.value() : -1);
      if (sizes.empty()) continue;
      const std::string base =
          n->output_info(0).name.empty() ? absl::StrCat("split", n->id()) : n->output_info(0).name;
      int64_t offset = 0;
      for (int i = 0; i < n->num_outputs(); ++i) {
        const std::string stem = absl::StrCat(base, "/slice", i);
        Node* slice = g.InsertNodeBefore(
            n, "Slice",
            {n->input(0), I64Vector(g, stem + "/starts", offset),
             I64Vector(g, stem + "/ends", offset + sizes[i]), I64Vector(g, stem + "/axes", axis)},
            1);
        slice->set_output_type(0, n->output_info(i).type);
        slice->set_output_name(0, n->output_info(i).name);
        slice->set_provenance(n->provenance());
        g.ReplaceAllUsesWith(n->output(i), slice->output(0));
        offset += sizes[i];
      }
      KILN_RETURN_IF_ERROR(g.RemoveNode(n));
      Count("Split -> Slices");
      changed = true;
    }
    if (changed) KILN_RETURN_IF_ERROR(g.TopoSort());  // the new constants were appended
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateSplitToSlicesPass() { return std::make_unique<SplitToSlicesPass>(); }

}  // namespace kiln
