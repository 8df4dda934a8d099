// Internals shared by the shape-inference pass (shape_inference.cc) and its rule files
// (shape_rules_*.cc): the per-node view a rule gets, the tracked integer contents of small
// shape tensors, and the helpers every family of rules needs (broadcasting, axes).
// A rule computes each output's Type from the inputs' stored types and tracked contents;
// whatever it cannot determine it leaves unknown. Rules return InvalidArgument (naming the
// node) only for inputs no valid model has (known dims that disagree, axes out of range).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "kiln/ir/dim_expr.h"
#include "kiln/ir/graph.h"

namespace kiln::shape_inference {

// Known integer contents of a small 0-D or 1-D integer (or bool, as 0/1) tensor; each
// element is a DimExpr (it may be negative: -1 in a Reshape shape) or nullopt (unknown).
struct Contents {
  static constexpr int kMaxElements = 64;
  bool scalar = false;  // rank 0 (exactly one element) rather than rank 1
  std::vector<std::optional<DimExpr>> elems;

  // The elements as integers when every one is a known constant.
  std::optional<std::vector<int64_t>> Ints() const;
};

struct ValueHash {
  size_t operator()(const Value& v) const {
    return std::hash<const void*>()(v.node) * 31 + static_cast<size_t>(v.index);
  }
};
using ContentsMap = absl::flat_hash_map<Value, Contents, ValueHash>;

// What a rule sees of the node being typed.
class RuleContext {
 public:
  RuleContext(const Node& node, const ContentsMap& contents) : node_(node), contents_(contents) {}
  const Node& node() const { return node_; }
  int num_inputs() const { return node_.num_inputs(); }
  // Present: within the operand list and not an omitted optional input.
  bool has_input(int i) const { return i >= 0 && i < node_.num_inputs() && node_.input(i); }
  // The stored type of input i; an unknown Type when absent.
  const Type& input_type(int i) const;
  // Tracked contents of input i, or nullptr.
  const Contents* contents(int i) const;
  // Contents of input i when every element is a known constant.
  std::optional<std::vector<int64_t>> const_ints(int i) const;
  // InvalidArgument "<node>: <msg>".
  absl::Status Error(std::string_view msg) const;

 private:
  const Node& node_;
  const ContentsMap& contents_;
};

using Shape = std::vector<Dim>;
// One Type per output of the node.
using ShapeRule = absl::StatusOr<std::vector<Type>> (*)(const RuleContext&);

Type MakeType(DType dtype, std::optional<Shape> shape);
inline Type UnknownType() { return Type(); }
// The same type for every output of the node.
std::vector<Type> Outputs(const RuleContext& ctx, const Type& t);

// Multidirectional (numpy) broadcasting of two dims / of several shapes. Shapes with
// unknown rank make the result's rank unknown (nullopt). Known dims that differ, neither
// being 1, are an error naming the node.
absl::StatusOr<Dim> BroadcastDim(const RuleContext& ctx, const Dim& a, const Dim& b);
absl::StatusOr<std::optional<Shape>> BroadcastShapes(
    const RuleContext& ctx, const std::vector<const std::optional<Shape>*>& shapes);

// Normalizes an axis in [-rank, rank) to [0, rank); an error naming the node otherwise.
absl::StatusOr<int64_t> NormalizeAxis(const RuleContext& ctx, int64_t axis, int64_t rank);
// The node's `axes` attribute normalized against `rank`, or every axis when it is absent.
absl::StatusOr<std::vector<int64_t>> AxesAttr(const RuleContext& ctx, int64_t rank);

// A Dim from a tracked element (unknown for nullopt, negative or complex values).
Dim ElemDim(const std::optional<DimExpr>& e);

// The rule tables of each family; the pass looks an op up in each. nullptr if absent.
ShapeRule FindElementwiseRule(std::string_view op);  // shape_rules_elementwise.cc
ShapeRule FindMathRule(std::string_view op);         // shape_rules_math.cc
ShapeRule FindMovementRule(std::string_view op);     // shape_rules_movement.cc
ShapeRule FindIndexingRule(std::string_view op);     // shape_rules_indexing.cc
ShapeRule FindVisionRule(std::string_view op);       // shape_rules_vision.cc
ShapeRule FindFusedRule(std::string_view op);        // shape_rules_fused.cc (domain "kiln")

// Contents of output 0 of a node whose output types are already set (shape_rules_values.cc).
// nullopt when the node's value is not a small integer vector or not derivable.
std::optional<Contents> ComputeContents(const RuleContext& ctx, const Node& node);
// Contents of a Constant node's value.
std::optional<Contents> ConstantContents(const Tensor& t);

}  // namespace kiln::shape_inference
