// The reference executor's graph walker and kernel dispatch. RunReference binds the
// graph inputs (checking dtype, rank, known dims and consistent symbolic dims), walks the
// nodes in their stored (topological) order, runs each through the kernel table and frees
// every intermediate tensor after its last use. Kernel errors keep their status code and
// gain the node's Describe() prefix. Limits: no subgraphs (If/Loop), no streaming; the
// graph must already be topologically ordered (the importer and TopoSort guarantee it).
#include "kiln/reference/executor.h"

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kiln/ir/ops.h"
#include "kiln/support/status.h"
#include "reference/kernels.h"

namespace kiln {
namespace {

// absl 20220623 StrCat does not take std::string_view.
std::string DName(DType d) { return std::string(DTypeName(d)); }

using reference::KernelFn;
using reference::KernelTable;

const KernelTable& Kernels() {
  static const KernelTable* table = [] {
    auto* t = new KernelTable();
    reference::RegisterElementwiseKernels(*t);
    reference::RegisterMathKernels(*t);
    reference::RegisterQuantizeKernels(*t);
    reference::RegisterMovementKernels(*t);
    reference::RegisterFusedKernels(*t);
    reference::RegisterOnnxAttentionKernels(*t);
    reference::RegisterVisionKernels(*t);
    reference::RegisterResizeKernels(*t);
    reference::RegisterDecoderKernels(*t);
    reference::RegisterLinalgKernels(*t);
    reference::RegisterSignalKernels(*t);
    reference::RegisterGridKernels(*t);
    reference::RegisterRecurrentKernels(*t);
    reference::RegisterSpectralKernels(*t);
    reference::RegisterDetectionKernels(*t);
    reference::RegisterLossKernels(*t);
    return t;
  }();
  return *table;
}

absl::Status Prefixed(const Node& node, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat(node.Describe(), ": ", s.message()));
}

std::string DimsString(absl::Span<const int64_t> dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ","), "]");
}

// Checks `t` against the declared type of graph input `name`, recording symbol sizes.
absl::Status BindInput(const std::string& name, const Type& declared, const Tensor& t,
                       absl::flat_hash_map<std::string, int64_t>& symbols) {
  if (!t.defined())
    return absl::InvalidArgumentError(absl::StrCat("graph input '", name,
                                                   "' is bound to an "
                                                   "undefined tensor"));
  if (declared.dtype != DType::kUndefined && declared.dtype != t.dtype())
    return absl::InvalidArgumentError(absl::StrCat("graph input '", name, "' expects dtype ",
                                                   DName(declared.dtype), " but got ",
                                                   DName(t.dtype())));
  if (t.NumElements() > 0 && (!t.storage() || t.storage()->size() < t.NumBytes()))
    return absl::InvalidArgumentError(
        absl::StrCat("graph input '", name, "' has fewer bytes than its shape needs"));
  if (!declared.has_rank()) return absl::OkStatus();
  if (declared.rank() != t.rank())
    return absl::InvalidArgumentError(absl::StrCat("graph input '", name, "' expects rank ",
                                                   declared.rank(), " (", declared.ToString(),
                                                   ") but got shape ", DimsString(t.dims())));
  for (int i = 0; i < t.rank(); ++i) {
    const Dim& d = (*declared.shape)[i];
    const int64_t actual = t.dims()[i];
    if (d.is_known() && d.value() != actual)
      return absl::InvalidArgumentError(
          absl::StrCat("graph input '", name, "' dim ", i, " must be ", d.value(), " (",
                       declared.ToString(), ") but got shape ", DimsString(t.dims())));
    if (d.is_symbol()) {
      auto [it, inserted] = symbols.emplace(d.symbol(), actual);
      if (!inserted && it->second != actual)
        return absl::InvalidArgumentError(
            absl::StrCat("graph input '", name, "' binds symbol '", d.symbol(), "' to ", actual,
                         " but an earlier input bound it to ", it->second));
    }
  }
  return absl::OkStatus();
}

struct ValueHash {
  size_t operator()(const Value& v) const {
    return std::hash<const void*>()(v.node) * 31 + static_cast<size_t>(v.index);
  }
};

}  // namespace

bool HasReferenceKernel(std::string_view domain, std::string_view op) {
  if (domain.empty() && op == "Constant") return true;
  return Kernels().contains(reference::KernelKey(domain, op));
}

absl::StatusOr<std::vector<Tensor>> EvaluateNode(const Node& node,
                                                 absl::Span<const Tensor* const> inputs) {
  if (node.is_constant()) {
    const Tensor* v = node.constant_value();
    if (v == nullptr)
      return absl::InvalidArgumentError(
          absl::StrCat(node.Describe(), ": Constant has no tensor 'value' attribute"));
    return std::vector<Tensor>{*v};
  }
  if (node.is_input())
    return absl::InvalidArgumentError(
        absl::StrCat(node.Describe(), ": graph inputs cannot be evaluated"));
  auto it = Kernels().find(reference::KernelKey(node.domain(), node.op()));
  if (it == Kernels().end())
    return absl::UnimplementedError(
        absl::StrCat(node.Describe(), ": the reference executor has no kernel for this op"));
  if (const OpInfo* info = FindOp(node.domain(), node.op())) {
    const int n = static_cast<int>(inputs.size());
    if (n > node.num_inputs())
      return KILN_INTERNAL("%s: %d inputs given for %d operands", node.Describe(), n,
                           node.num_inputs());
    if (info->max_inputs >= 0 && n > info->max_inputs)
      return absl::InvalidArgumentError(
          absl::StrCat(node.Describe(), ": takes at most ", info->max_inputs, " inputs, got ", n));
    if (node.num_outputs() < info->min_outputs ||
        (info->max_outputs >= 0 && node.num_outputs() > info->max_outputs))
      return absl::InvalidArgumentError(
          absl::StrCat(node.Describe(), ": has ", node.num_outputs(), " outputs; the op allows ",
                       info->min_outputs, "..",
                       info->max_outputs < 0 ? std::string("*") : absl::StrCat(info->max_outputs)));
  }
  absl::StatusOr<std::vector<Tensor>> out = it->second(node, inputs);
  if (!out.ok()) return Prefixed(node, out.status());
  if (static_cast<int>(out->size()) != node.num_outputs())
    return KILN_INTERNAL("%s: kernel returned %d outputs, node has %d", node.Describe(),
                         out->size(), node.num_outputs());
  return out;
}

absl::StatusOr<std::vector<Tensor>> RunReference(
    const Graph& g, const absl::flat_hash_map<std::string, Tensor>& inputs) {
  return RunReference(g, inputs, nullptr);
}

absl::StatusOr<std::vector<Tensor>> RunReference(
    const Graph& g, const absl::flat_hash_map<std::string, Tensor>& inputs,
    const ValueObserver& observe) {
  absl::flat_hash_map<Value, Tensor, ValueHash> live;
  absl::flat_hash_map<Value, int, ValueHash> remaining_uses;
  absl::flat_hash_set<Value, ValueHash> graph_outputs;

  // Bind inputs by name.
  absl::flat_hash_map<std::string, int64_t> symbols;
  absl::flat_hash_set<std::string> input_names;
  for (Node* in : g.inputs()) {
    const std::string& name = in->output_info(0).name;
    input_names.insert(name);
    auto it = inputs.find(name);
    if (it == inputs.end())
      return absl::InvalidArgumentError(absl::StrCat("graph input '", name, "' is not bound"));
    KILN_RETURN_IF_ERROR(BindInput(name, in->output_info(0).type, it->second, symbols));
    live[in->output()] = it->second;
    if (observe) observe(*in, 0, it->second);
  }
  for (const auto& [name, t] : inputs)
    if (!input_names.contains(name))
      return absl::InvalidArgumentError(absl::StrCat("'", name, "' is not an input of the graph"));

  // Count uses so intermediates can be freed after their last consumer.
  for (const auto& p : g.nodes())
    for (const Value& v : p->inputs())
      if (v) ++remaining_uses[v];
  for (const GraphOutput& o : g.outputs()) {
    if (!o.value)
      return absl::InvalidArgumentError(absl::StrCat("graph output '", o.name, "' has no value"));
    graph_outputs.insert(o.value);
  }

  std::vector<const Tensor*> args;
  for (const auto& p : g.nodes()) {
    Node* node = p.get();
    if (node->is_input()) continue;
    args.clear();
    for (int i = 0; i < node->num_inputs(); ++i) {
      const Value v = node->input(i);
      if (!v) {
        args.push_back(nullptr);
        continue;
      }
      auto it = live.find(v);
      if (it == live.end())
        return KILN_INTERNAL("%s: input %d is not computed yet (graph not topologically sorted?)",
                             node->Describe(), i);
      args.push_back(&it->second);
    }
    KILN_ASSIGN_OR_RETURN(std::vector<Tensor> outs, EvaluateNode(*node, args));
    if (observe)
      for (int i = 0; i < node->num_outputs() && i < static_cast<int>(outs.size()); ++i)
        observe(*node, i, outs[i]);
    for (int i = 0; i < node->num_outputs(); ++i) {
      const Value v = node->output(i);
      if (remaining_uses.contains(v) || graph_outputs.contains(v)) live[v] = std::move(outs[i]);
    }
    for (const Value& v : node->inputs()) {
      if (!v) continue;
      if (--remaining_uses[v] == 0 && !graph_outputs.contains(v)) live.erase(v);
    }
  }

  std::vector<Tensor> results;
  results.reserve(g.outputs().size());
  for (const GraphOutput& o : g.outputs()) {
    auto it = live.find(o.value);
    if (it == live.end()) return KILN_INTERNAL("graph output '%s' was never computed", o.name);
    results.push_back(it->second);
  }
  return results;
}

}  // namespace kiln
