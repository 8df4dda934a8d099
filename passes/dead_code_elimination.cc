// dce: removes what no kept graph output needs. In order:
//  1. unrequested graph outputs: with PassContext::keep_outputs non-empty only those
//     outputs stay (a name that is not a graph output is InvalidArgument);
//  2. no-op nodes, whose output is replaced by their input: every single-node no-op form
//     of passes/no_ops.h (Identity; Dropout in inference; Cast / CastLike to the input's
//     own dtype; Reshape, Expand and full Slice that keep the input type; Transpose with
//     the identity perm). DCE owns these forms (docs/passes.md, "No-op forms");
//  3. nodes (Constants included) that no graph output depends on.
// Why: exporters leave Identity and inference Dropout everywhere, folding leaves dead
// shape arithmetic, and a graph compiled for one output should not compute the others.
// A removed no-op's graph output keeps its name (GraphOutput::name); only its value moves
// to the no-op's input, which may be a graph input. Graph inputs are never removed: they
// are the model's signature.
// Limits: no-op detection trusts stored types (shape inference); equal symbolic dims are
// taken as equal sizes, as ONNX dim_param names mean.
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "kiln/support/status.h"
#include "passes/no_ops.h"
#include "passes/passes.h"

namespace kiln {
namespace {

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
      const Value src = noop::NoOpSource(g, n);
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
