// Opset canonicalization: rewrites each imported node into its opset-21 signature so that
// passes and kernels never look at opset versions. In opsets 13..21 the ops of kiln's
// catalogue change signature only here:
//   - ReduceMean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare before opset 18: the
//     `axes` attribute becomes a constant i64 second input;
//   - Split from opset 18: the `num_outputs` attribute is checked against the output count
//     and removed (the output count carries it).
// Attributes that moved to inputs before opset 13 (ReduceSum/Squeeze/Unsqueeze axes,
// Split split, Slice starts/ends/axes/steps, Clip min/max, Dropout ratio, Pad pads/value,
// TopK k) are rejected as
// malformed, as are opset-18 attributes in older models. The full list is in
// docs/importer.md; keep the two in sync.
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "kiln/support/status.h"
#include "src/onnx/import_internal.h"

namespace kiln::onnx_import {
namespace {

bool IsAxesAttrReduce(const std::string& op) {
  static const auto* ops = new absl::flat_hash_set<std::string>{
      "ReduceMean", "ReduceMax",    "ReduceMin",       "ReduceProd",     "ReduceL1",
      "ReduceL2",   "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"};
  return ops->contains(op);
}

// Attributes that were inputs throughout opsets 13..21 (they moved before opset 13).
const std::vector<std::string>* LegacyAttrs(const std::string& op) {
  static const auto* table = new absl::flat_hash_map<std::string, std::vector<std::string>>{
      {"ReduceSum", {"axes"}},
      {"Squeeze", {"axes"}},
      {"Unsqueeze", {"axes"}},
      {"Split", {"split"}},
      {"Slice", {"starts", "ends", "axes", "steps"}},
      {"Clip", {"min", "max"}},
      {"Dropout", {"ratio", "is_test"}},
      {"Pad", {"pads", "value"}},
      {"TopK", {"k"}},
  };
  auto it = table->find(op);
  return it == table->end() ? nullptr : &it->second;
}

std::string FreshName(const std::string& base,
                      const absl::flat_hash_map<std::string, Value>& names) {
  std::string name = base;
  for (int i = 1; names.contains(name); ++i) name = absl::StrCat(base, "_", i);
  return name;
}

absl::Status Invalid(const Node* node, std::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat(node->Describe(), ": ", std::string(msg)));
}

absl::Status CanonicalizeReduce(Graph& graph, Node* node, int64_t opset,
                                absl::flat_hash_map<std::string, Value>& names) {
  if (opset >= 18) {
    if (node->has_attr("axes"))
      return Invalid(node, "attribute 'axes' is not allowed from opset 18 (axes is an input)");
    return absl::OkStatus();
  }
  if (node->num_inputs() > 1)
    return Invalid(node, absl::StrCat("takes 1 input before opset 18 (axes is an attribute), "
                                      "got ",
                                      node->num_inputs()));
  if (node->has_attr("noop_with_empty_axes"))
    return Invalid(node, "attribute 'noop_with_empty_axes' is only defined from opset 18");
  if (!node->has_attr("axes")) return absl::OkStatus();
  const std::vector<int64_t>* axes = node->attr_ints("axes");
  if (axes == nullptr) return Invalid(node, "attribute 'axes' must be of type INTS");
  const std::string& owner = node->provenance().front();
  const std::string name = FreshName(absl::StrCat(owner, "/axes"), names);
  Node* c = graph.AddConstant(name, VectorI64(*axes));
  c->add_provenance(owner);
  names[name] = c->output(0);
  graph.AddNodeInput(node, c->output(0));
  node->erase_attr("axes");
  return absl::OkStatus();
}

absl::Status CanonicalizeSplit(Node* node, int64_t opset) {
  if (opset < 18) {
    if (node->has_attr("num_outputs"))
      return Invalid(node, "attribute 'num_outputs' is only defined from opset 18");
    return absl::OkStatus();
  }
  if (!node->has_attr("num_outputs")) return absl::OkStatus();
  std::optional<int64_t> n = node->attr_int("num_outputs");
  if (!n) return Invalid(node, "attribute 'num_outputs' must be of type INT");
  if (node->num_inputs() > 1 && node->input(1))
    return Invalid(node, "has both the 'split' input and the 'num_outputs' attribute");
  if (*n != node->num_outputs())
    return Invalid(node, absl::StrCat("attribute num_outputs=", *n, " but the node has ",
                                      node->num_outputs(), " outputs"));
  node->erase_attr("num_outputs");
  return absl::OkStatus();
}

}  // namespace

absl::Status CanonicalizeNode(Graph& graph, Node* node, int64_t opset,
                              absl::flat_hash_map<std::string, Value>& names) {
  if (!node->domain().empty()) return absl::OkStatus();
  const std::string& op = node->op();
  if (const std::vector<std::string>* legacy = LegacyAttrs(op)) {
    for (const std::string& a : *legacy)
      if (node->has_attr(a))
        return Invalid(node, absl::StrCat("attribute '", a,
                                          "' is not allowed at opset 13 and later (it is an "
                                          "input or was removed)"));
  }
  if (IsAxesAttrReduce(op)) return CanonicalizeReduce(graph, node, opset, names);
  if (op == "Split") return CanonicalizeSplit(node, opset);
  return absl::OkStatus();
}

}  // namespace kiln::onnx_import
