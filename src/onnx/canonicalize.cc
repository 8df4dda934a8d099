// Opset canonicalization: rewrites each imported node into its opset-21 signature so that
// passes and kernels never look at opset versions. For the ops of kiln's catalogue, ONNX
// changed signatures across opsets 7..27 only here (docs/importer.md has the table; keep
// the two in sync):
//   - attributes that later became inputs (ReduceSum/Squeeze/Unsqueeze `axes` and Split
//     `split` before 13, the other Reduce* `axes` before 18, Slice `starts`/`ends`/`axes`
//     and TopK `k` before 10, Clip `min`/`max` and Pad `pads`/`value` before 11, Dropout
//     `ratio` before 12) become constant inputs; from the opset that moved them they are
//     malformed, as is the input form before it;
//   - Softmax/LogSoftmax/Hardmax before 13 normalize the input flattened to 2-D at `axis`
//     (default 1): Flatten(x, axis) -> Softmax(axis=1) -> Reshape(Shape(x)); the
//     canonicalize pass folds the chain back into one Softmax(axis=-1) when `axis` is the
//     last axis, as exporters write it;
//   - Split from opset 18: `num_outputs` is checked against the output count and removed;
//   - Range `stash_type` (27: the precision of 16-bit Ranges; kiln computes Ranges in double,
//     which the default 1 — f32 arithmetic — matches to the output's rounding) are dropped;
//     QuantizeLinear `precision` (23) is dropped when it is 0 (the scale's type) or FLOAT
//     (what kiln computes in); other values are Unimplemented;
//   - DequantizeLinear `output_dtype` (23) becomes a Cast of the result;
//   - Resize before 11, (X, scales), becomes (X, _, scales) with asymmetric coordinates
//     (nearest: floor; a constant nearest downscale is Unimplemented);
//   - DFT before 20 without `axis` gets axis=1, its default then (-2 from 20).
// The remaining version differences in 7..27 are type lists or subsets of the opset-21
// behaviour (negative axes, broadcasting, optional inputs), which need no rewrite.
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "kiln/support/status.h"
#include "src/onnx/import_internal.h"

namespace kiln::onnx_import {
namespace {

// How a legacy attribute becomes an input.
enum class AttrAs {
  kInts,         // INTS -> i64 vector
  kIntVector1,   // INT -> i64 vector of one element (TopK k)
  kFloatLikeX,   // FLOAT -> a scalar of input 0's dtype (CastLike of an f32 constant)
  kFloatScalar,  // FLOAT -> f32 scalar (Dropout ratio, a type of its own)
};

struct LegacyAttr {
  const char* name;
  int slot;  // the input it becomes
  AttrAs as;
  bool required = false;
};

// An op whose attributes became inputs at opset `until`: before it the node takes one input
// and these attributes; from it the attributes are malformed.
struct LegacyForm {
  int until;
  std::vector<LegacyAttr> attrs;
};

const LegacyForm* FindLegacyForm(const std::string& op) {
  static const auto* table = [] {
    auto* t = new absl::flat_hash_map<std::string, LegacyForm>{
        {"ReduceSum", {13, {{"axes", 1, AttrAs::kInts}}}},
        {"Squeeze", {13, {{"axes", 1, AttrAs::kInts}}}},
        {"Unsqueeze", {13, {{"axes", 1, AttrAs::kInts}}}},
        {"Split", {13, {{"split", 1, AttrAs::kInts}}}},
        {"Slice",
         {10,
          {{"starts", 1, AttrAs::kInts, true},
           {"ends", 2, AttrAs::kInts, true},
           {"axes", 3, AttrAs::kInts}}}},
        {"TopK", {10, {{"k", 1, AttrAs::kIntVector1, true}}}},
        {"Clip", {11, {{"min", 1, AttrAs::kFloatLikeX}, {"max", 2, AttrAs::kFloatLikeX}}}},
        {"Pad", {11, {{"pads", 1, AttrAs::kInts, true}, {"value", 2, AttrAs::kFloatLikeX}}}},
        {"Dropout", {12, {{"ratio", 1, AttrAs::kFloatScalar}}}},
    };
    for (const char* op : {"ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                           "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"})
      t->emplace(op, LegacyForm{18, {{"axes", 1, AttrAs::kInts}}});
    return t;
  }();
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

// Adds a node named after `node` (its provenance) whose single output gets a fresh name.
Node* AddHelper(Graph& graph, const Node* node, const std::string& op, std::vector<Value> inputs,
                const std::string& suffix, absl::flat_hash_map<std::string, Value>& names) {
  const std::string& owner = node->provenance().front();
  Node* n = graph.AddNode(op, std::move(inputs), 1);
  n->set_provenance(node->provenance());
  const std::string name = FreshName(absl::StrCat(owner, "/", suffix), names);
  n->set_output_name(0, name);
  names[name] = n->output(0);
  return n;
}

Value AddConstant(Graph& graph, const Node* node, const std::string& suffix, Tensor t,
                  absl::flat_hash_map<std::string, Value>& names) {
  const std::string& owner = node->provenance().front();
  const std::string name = FreshName(absl::StrCat(owner, "/", suffix), names);
  Node* c = graph.AddConstant(name, std::move(t));
  c->add_provenance(owner);
  names[name] = c->output(0);
  return c->output(0);
}

// The attribute-era form of `node` (opset < form.until) into the input form.
absl::Status ConvertLegacyAttrs(Graph& graph, Node* node, const LegacyForm& form,
                                absl::flat_hash_map<std::string, Value>& names) {
  const std::string& op = node->op();
  if (node->num_inputs() > 1)
    return Invalid(
        node, absl::StrCat(op, " takes 1 input before opset ", form.until, " (",
                           form.attrs.front().name, " is an attribute), got ", node->num_inputs()));
  std::vector<Value> slots;
  for (const LegacyAttr& la : form.attrs) {
    if (!node->has_attr(la.name)) {
      if (la.required)
        return Invalid(
            node, absl::StrCat("attribute '", la.name, "' is required before opset ", form.until));
      continue;
    }
    Tensor t;
    switch (la.as) {
      case AttrAs::kInts: {
        const std::vector<int64_t>* v = node->attr_ints(la.name);
        if (v == nullptr)
          return Invalid(node, absl::StrCat("attribute '", la.name, "' must be of type INTS"));
        t = VectorI64(*v);
        break;
      }
      case AttrAs::kIntVector1: {
        std::optional<int64_t> v = node->attr_int(la.name);
        if (!v) return Invalid(node, absl::StrCat("attribute '", la.name, "' must be of type INT"));
        t = VectorI64({*v});
        break;
      }
      case AttrAs::kFloatLikeX:
      case AttrAs::kFloatScalar: {
        std::optional<float> v = node->attr_float(la.name);
        if (!v)
          return Invalid(node, absl::StrCat("attribute '", la.name, "' must be of type FLOAT"));
        t = Tensor::ScalarF32(*v);
        break;
      }
    }
    Value c = AddConstant(graph, node, la.name, std::move(t), names);
    if (la.as == AttrAs::kFloatLikeX)  // ONNX gives these the data's type T (f16, f32, f64)
      c = AddHelper(graph, node, "CastLike", {c, node->input(0)},
                    absl::StrCat(la.name, "_like_input"), names)
              ->output(0);
    if (static_cast<int>(slots.size()) <= la.slot) slots.resize(la.slot + 1);
    slots[la.slot] = c;
    node->erase_attr(la.name);
  }
  for (size_t i = 1; i < slots.size(); ++i) graph.AddNodeInput(node, slots[i]);
  return absl::OkStatus();
}

absl::Status CheckInputForm(const Node* node, const LegacyForm& form, int64_t opset) {
  for (const LegacyAttr& la : form.attrs)
    if (node->has_attr(la.name))
      return Invalid(
          node, absl::StrCat("attribute '", la.name, "' is not allowed from opset ", form.until,
                             " (it is input ", la.slot, "); this model is opset ", opset));
  return absl::OkStatus();
}

// Reduce* extras: `noop_with_empty_axes` exists from opset 18 (13 for ReduceSum).
absl::Status CheckReduceExtras(const Node* node, const LegacyForm& form, int64_t opset) {
  if (node->op().rfind("Reduce", 0) != 0 || opset >= form.until) return absl::OkStatus();
  if (node->has_attr("noop_with_empty_axes"))
    return Invalid(
        node,
        absl::StrCat("attribute 'noop_with_empty_axes' is only defined from opset ", form.until));
  return absl::OkStatus();
}

// Softmax/LogSoftmax before opset 13: the input is seen as 2-D, [prod(dims < axis),
// prod(dims >= axis)], and each row is normalized. axis defaults to 1.
// Puts `after` (a node made with a null input 0 and the rest of its inputs) behind
// output 0 of `node`: every user of that output reads `after`'s output instead, which
// also takes the ONNX name; the node's own output gets a fresh "<name>/<suffix>" one.
void InsertAfter(Graph& graph, Node* node, Node* after, const std::string& suffix,
                 absl::flat_hash_map<std::string, Value>& names) {
  const Value out = node->output(0);
  const std::string out_name = node->output_info(0).name;
  after->set_provenance(node->provenance());
  graph.ReplaceAllUsesWith(out, after->output(0));
  graph.SetInput(after, 0, out);
  const std::string inner = FreshName(absl::StrCat(out_name, "/", suffix), names);
  node->set_output_name(0, inner);
  names[inner] = out;
  after->set_output_name(0, out_name);
  if (!out_name.empty()) names[out_name] = after->output(0);
}

absl::Status CanonicalizeLegacySoftmax(Graph& graph, Node* node,
                                       absl::flat_hash_map<std::string, Value>& names) {
  std::optional<int64_t> axis = node->has_attr("axis") ? node->attr_int("axis") : 1;
  if (!axis) return Invalid(node, "attribute 'axis' must be of type INT");
  Value x = node->input(0);
  Node* flat = AddHelper(graph, node, "Flatten", {x}, "flat", names);
  flat->set_attr("axis", *axis);
  Node* shape = AddHelper(graph, node, "Shape", {x}, "shape", names);
  InsertAfter(graph, node, graph.AddNode("Reshape", {Value(), shape->output(0)}, 1), "rows", names);
  graph.SetInput(node, 0, flat->output(0));
  node->set_attr("axis", int64_t{1});
  return absl::OkStatus();
}

// DequantizeLinear from opset 23: `output_dtype` (0: the scale's type) becomes a Cast of
// the result (onnx computes in the scale's type and converts).
absl::Status CanonicalizeDequantizeOutput(Graph& graph, Node* node,
                                          absl::flat_hash_map<std::string, Value>& names) {
  if (!node->has_attr("output_dtype")) return absl::OkStatus();
  const std::optional<int64_t> to = node->attr_int("output_dtype");
  if (!to) return Invalid(node, "attribute 'output_dtype' must be of type INT");
  node->erase_attr("output_dtype");
  if (*to == 0) return absl::OkStatus();
  Node* cast = graph.AddNode("Cast", {Value()}, 1);
  cast->set_attr("to", *to);
  InsertAfter(graph, node, cast, "scale_dtype", names);
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

// Resize-10 is (X, scales) with asymmetric coordinates and, in nearest mode, the input
// position floor(y / scale) for upscaling; it becomes the opset-11 form (X, _, scales).
// Downscaling in nearest mode has no answer runtimes agree on (onnxruntime rounds up
// there): a constant scale below 1 is Unimplemented, a computed one is taken as floor.
absl::Status CanonicalizeResize10(Graph& graph, Node* node) {
  if (node->num_inputs() != 2) return Invalid(node, "Resize takes (X, scales) before opset 11");
  const std::string* mode = node->attr_string("mode");
  const bool nearest = mode == nullptr || *mode == "nearest";
  const Value scales = node->input(1);
  if (const Tensor* t = scales.node->constant_value(); nearest && t != nullptr) {
    for (int64_t i = 0; i < t->NumElements(); ++i)
      if (t->GetAsDouble(i) < 1.0)
        return absl::UnimplementedError(absl::StrCat(
            node->Describe(), ": nearest-mode downscaling before opset 11 (scale ",
            t->GetAsDouble(i), "): runtimes disagree on its rounding; re-export at opset >= 11"));
  }
  graph.SetInput(node, 1, Value());
  graph.AddNodeInput(node, scales);
  node->set_attr("coordinate_transformation_mode", std::string("asymmetric"));
  if (nearest) node->set_attr("nearest_mode", std::string("floor"));
  return absl::OkStatus();
}

// Attributes of opsets 22..27 that change nothing kiln computes.
absl::Status DropNewAttrs(Node* node, int64_t opset) {
  const std::string& op = node->op();
  if (op == "Range" && opset >= 27 && node->has_attr("stash_type")) {
    if (node->attr_int("stash_type") != 1)
      return absl::UnimplementedError(absl::StrCat(
          node->Describe(), ": stash_type other than 1 (16-bit arithmetic) is not supported"));
    node->erase_attr("stash_type");
  }
  if (op == "QuantizeLinear" && opset >= 23 && node->has_attr("precision")) {
    const std::optional<int64_t> p = node->attr_int("precision");
    constexpr int64_t kOnnxFloat = 1;
    if (p != 0 && p != kOnnxFloat)
      return absl::UnimplementedError(
          absl::StrCat(node->Describe(), ": precision other than 0 or FLOAT is not supported"));
    node->erase_attr("precision");
  }
  return absl::OkStatus();
}

}  // namespace

std::optional<int> LegacyInputCount(const std::string& op, int64_t opset) {
  const LegacyForm* form = FindLegacyForm(op);
  if (form == nullptr || opset >= form->until) return std::nullopt;
  return 1;
}

absl::Status CanonicalizeNode(Graph& graph, Node* node, int64_t opset,
                              absl::flat_hash_map<std::string, Value>& names) {
  if (FindContribOp(node->domain(), node->op()) != nullptr)
    return ExpandContribOp(graph, node, names);
  if (!node->domain().empty()) return absl::OkStatus();
  const std::string& op = node->op();
  if (const LegacyForm* form = FindLegacyForm(op)) {
    KILN_RETURN_IF_ERROR(CheckReduceExtras(node, *form, opset));
    if (opset < form->until) {
      KILN_RETURN_IF_ERROR(ConvertLegacyAttrs(graph, node, *form, names));
    } else {
      KILN_RETURN_IF_ERROR(CheckInputForm(node, *form, opset));
    }
  }
  if (op == "Dropout" && node->has_attr("is_test"))
    return Invalid(node, "attribute 'is_test' was removed in opset 7");
  if (op == "Dropout" && opset < 10 && node->num_outputs() > 1)
    return absl::UnimplementedError(
        absl::StrCat(node->Describe(),
                     ": the mask output of Dropout before opset 10 (of the data's type) "
                     "is not supported; kiln has the bool mask of opset 10 and later"));
  if ((op == "Softmax" || op == "LogSoftmax" || op == "Hardmax") && opset < 13)
    return CanonicalizeLegacySoftmax(graph, node, names);
  if (op == "Split") return CanonicalizeSplit(node, opset);
  if (op == "Resize" && opset < 11) return CanonicalizeResize10(graph, node);
  // DFT's default axis was 1 before opset 20 (an attribute), -2 from it (an input).
  if (op == "DFT" && opset < 20 && !node->has_attr("axis")) node->set_attr("axis", int64_t{1});
  if (op == "DequantizeLinear" && opset >= 23)
    KILN_RETURN_IF_ERROR(CanonicalizeDequantizeOutput(graph, node, names));
  return DropNewAttrs(node, opset);
}

}  // namespace kiln::onnx_import
