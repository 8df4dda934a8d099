// The padding analysis (padding.h): per symbol, the batch case from the plan's signature
// and the sequence case from the optimized graph's position-mixing ops.
#include "compiler/padding.h"

#include <optional>

#include "absl/strings/ascii.h"
#include "kiln/ir/dim_expr.h"
#include "kiln/ir/ops.h"

namespace kiln::compiler {
namespace {

PositionMixing MixingOf(const Node& n) {
  const OpInfo* info = FindOp(n.domain(), n.op());
  return info ? info->mixing : PositionMixing::kNone;
}

// True when `node` (a kReducesAxes op in its opset-21 form: axes as input 1) may reduce over a
// dim of its data input that is `sym`. Axes that are not a constant count as "may".
bool ReducesOverSymbol(const Node& node, const std::string& sym) {
  const Type& t = node.input(0).type();
  if (!t.shape) return true;
  std::vector<int64_t> axes;
  if (node.num_inputs() > 1 && node.input(1)) {
    const Tensor* c = node.input(1).node->constant_value();
    if (c == nullptr) return true;
    for (int64_t i = 0; i < c->NumElements(); ++i) axes.push_back(c->GetAsInt64(i));
  }
  const int rank = static_cast<int>(t.shape->size());
  if (axes.empty()) {
    if (node.attr_int_or("noop_with_empty_axes", 0) != 0) return false;
    for (int i = 0; i < rank; ++i) axes.push_back(i);
  }
  for (int64_t axis : axes) {
    const int64_t a = axis < 0 ? axis + rank : axis;
    if (a < 0 || a >= rank) return true;
    const Dim& d = (*t.shape)[a];
    if (d.is_unknown() || (d.is_symbol() && d.symbol() == sym)) return true;
  }
  return false;
}

// The nodes that read, directly or through other nodes, the graph input `in`.
std::set<const Node*> ReachedFrom(const Node* in) {
  std::set<const Node*> seen;
  std::vector<const Node*> work{in};
  while (!work.empty()) {
    const Node* n = work.back();
    work.pop_back();
    for (int o = 0; o < n->num_outputs(); ++o)
      for (const Use& u : n->output_info(o).uses)
        if (seen.insert(u.user).second) work.push_back(u.user);
  }
  return seen;
}

}  // namespace

bool SequencePaddable(const Graph& g, const std::string& sym) {
  for (const auto& node : g.nodes()) {
    const PositionMixing mixing = MixingOf(*node);
    if (mixing == PositionMixing::kNormalizesAxis) return false;
    if (mixing == PositionMixing::kReducesAxes && ReducesOverSymbol(*node, sym)) return false;
  }
  for (const Node* in : g.inputs()) {
    const Type& t = in->output_info(0).type;
    if (absl::AsciiStrToLower(in->output_info(0).name).find("mask") == std::string::npos ||
        !IsInteger(t.dtype) || !t.shape)
      continue;
    bool non_leading = false;
    for (size_t d = 1; d < t.shape->size(); ++d)
      non_leading |= (*t.shape)[d].is_symbol() && (*t.shape)[d].symbol() == sym;
    if (!non_leading) continue;
    const std::set<const Node*> reached = ReachedFrom(in);
    auto mask_from_input = [&](const Node* n) {
      return n->num_inputs() > 1 && n->input(1) &&
             (n->input(1).node == in || reached.count(n->input(1).node));
    };
    bool consumed = false, all_honour = true;
    for (const auto& node : g.nodes()) {
      const Node* n = node.get();
      const PositionMixing mixing = MixingOf(*n);
      if (mixing != PositionMixing::kMaskedOrCausal && mixing != PositionMixing::kMaskedOrFirst)
        continue;
      const bool masked = mask_from_input(n);
      bool safe_unmasked;
      if (mixing == PositionMixing::kMaskedOrCausal) {
        safe_unmasked = n->attr_int_or("causal", 0) != 0;
      } else {
        const std::string* mode = n->attr_string("mode");
        safe_unmasked = mode != nullptr && *mode == "cls";
      }
      consumed |= masked;
      all_honour &= masked || safe_unmasked;
    }
    if (consumed && all_honour) return true;
  }
  return false;
}

std::vector<std::string> PaddableSymbols(const Plan& plan, const Graph& g,
                                         const std::set<std::string>& symbols) {
  std::vector<std::string> out;
  for (const std::string& sym : symbols) {
    bool over_expression = false;
    for (const PlanTensorSig& o : plan.outputs)
      for (const Dim& d : o.dims) {
        if (!d.is_symbol() || IsPlainSymbol(d)) continue;
        // An expression over `sym`, or a dim that is no expression ("?": unknown).
        const std::optional<std::set<std::string>> syms = SymbolsOfDim(d);
        if (!syms || syms->count(sym)) over_expression = true;
      }
    if (over_expression) continue;
    auto dim0_is_sym = [&](const std::vector<PlanTensorSig>& sigs) {
      for (const PlanTensorSig& s : sigs)
        if (s.dims.empty() || !s.dims[0].is_symbol() || s.dims[0].symbol() != sym) return false;
      return true;
    };
    const bool batch_case =
        !plan.inputs.empty() && dim0_is_sym(plan.inputs) && dim0_is_sym(plan.outputs);
    if (batch_case || SequencePaddable(g, sym)) out.push_back(sym);
  }
  return out;
}

}  // namespace kiln::compiler
