// Shape inference: gives every value a dtype and a shape whose dims are integers, symbols
// (`batch`) or small expressions of them (`2*sequence`, `(batch*sequence)/4`, see
// dim_expr.h). Every other pass reads these types, and the specialized shapes are what let
// constant folding remove a model's shape computations.
//
// 1. Specialization: PassContext::input_shapes (`--shape input_ids=1x128`) replaces a
//    named input's shape (rank and known dims must agree with the declared type) and binds
//    the symbols it covers; PassContext::symbol_values (`--shape batch=1`) binds symbols
//    directly. A symbol bound to two different values is an error. Bound symbols are then
//    substituted in every stored type. Without either, symbols stay symbolic.
// 2. Inference, in node order: each op's rule (shape_rules_*.cc) computes its outputs'
//    types from its inputs' types and from the tracked integer contents of small shape
//    tensors (shape_rules_values.cc: Constant, Shape, Gather, Concat, ... so that
//    Shape->Gather->Unsqueeze->Concat->Reshape chains resolve).
// 3. Merge with the declared (stored) type: a different dtype is an InvalidArgument naming
//    the node (onnxruntime refuses it too); a different rank, or two known dims that differ,
//    gives the inferred shape and a warning in PassContext::warnings when the caller collects
//    them (onnxruntime warns and runs such files: exporters write stale value_info), else
//    the same InvalidArgument (shape buckets' re-runs are strict); otherwise the more precise
//    dim wins (known over symbol over unknown; an inferred symbol over a declared one, since
//    the inferred one is tied to the graph inputs).
//
// Limits: ops without a rule (unknown ops, domains other than ONNX's and "kiln") keep
// their stored types; Input and Constant outputs are never re-inferred; a rule never
// guesses (what it cannot derive stays unknown). Reports changed iff some stored type
// became different, so a second run changes nothing. Counters: "values typed", "inputs
// specialized", and over non-constant
// values after the run: "static values", "symbolic values", "unknown values".
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kiln/ir/dim_expr.h"
#include "kiln/support/status.h"
#include "passes/passes.h"
#include "passes/shape_inference_internal.h"

namespace kiln {
namespace shape_inference {

const Type& RuleContext::input_type(int i) const {
  static const Type* const kUnknown = new Type();
  return has_input(i) ? node_.input(i).type() : *kUnknown;
}

const Contents* RuleContext::contents(int i) const {
  if (!has_input(i)) return nullptr;
  auto it = contents_.find(node_.input(i));
  return it == contents_.end() ? nullptr : &it->second;
}

std::optional<std::vector<int64_t>> RuleContext::const_ints(int i) const {
  const Contents* c = contents(i);
  return c ? c->Ints() : std::nullopt;
}

absl::Status RuleContext::Error(std::string_view msg) const {
  return absl::InvalidArgumentError(absl::StrCat(node_.Describe(), ": ", std::string(msg)));
}

Type MakeType(DType dtype, std::optional<Shape> shape) {
  Type t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  return t;
}

std::vector<Type> Outputs(const RuleContext& ctx, const Type& t) {
  return std::vector<Type>(ctx.node().num_outputs(), t);
}

absl::StatusOr<Dim> BroadcastDim(const RuleContext& ctx, const Dim& a, const Dim& b) {
  if (a == Dim::Known(1)) return b;
  if (b == Dim::Known(1)) return a;
  if (a.is_known() && b.is_known()) {
    if (a.value() != b.value())
      return ctx.Error(absl::StrCat("cannot broadcast dims ", a.value(), " and ", b.value()));
    return a;
  }
  // A known dim other than 1 wins: the other one is 1 or equal in any valid model.
  if (a.is_known()) return a;
  if (b.is_known()) return b;
  if (DimEq(a, b)) return a;
  return Dim();  // e.g. `s` vs `t`: either may be 1
}

absl::StatusOr<std::optional<Shape>> BroadcastShapes(
    const RuleContext& ctx, const std::vector<const std::optional<Shape>*>& shapes) {
  size_t rank = 0;
  for (const std::optional<Shape>* s : shapes) {
    if (!s->has_value()) return std::optional<Shape>();
    rank = std::max(rank, (*s)->size());
  }
  Shape out(rank, Dim::Known(1));
  for (const std::optional<Shape>* s : shapes) {
    const size_t offset = rank - (*s)->size();
    for (size_t j = 0; j < (*s)->size(); ++j) {
      KILN_ASSIGN_OR_RETURN(out[offset + j], BroadcastDim(ctx, out[offset + j], (**s)[j]));
    }
  }
  return std::optional<Shape>(std::move(out));
}

absl::StatusOr<int64_t> NormalizeAxis(const RuleContext& ctx, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return ctx.Error(absl::StrCat("axis ", axis, " is out of range for rank ", rank));
  return axis < 0 ? axis + rank : axis;
}

absl::StatusOr<std::vector<int64_t>> AxesAttr(const RuleContext& ctx, int64_t rank) {
  std::vector<int64_t> axes;
  if (const std::vector<int64_t>* a = ctx.node().attr_ints("axes")) {
    for (int64_t v : *a) {
      KILN_ASSIGN_OR_RETURN(int64_t n, NormalizeAxis(ctx, v, rank));
      axes.push_back(n);
    }
  } else {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  return axes;
}

Dim ElemDim(const std::optional<DimExpr>& e) { return e ? e->ToDim() : Dim(); }

}  // namespace shape_inference

namespace {

using shape_inference::Contents;
using shape_inference::ContentsMap;
using shape_inference::RuleContext;
using shape_inference::ShapeRule;

std::string DimsText(const std::vector<int64_t>& dims) { return absl::StrJoin(dims, "x"); }

Node* FindInput(const Graph& g, const std::string& name) {
  for (Node* in : g.inputs())
    if (in->output_info(0).name == name) return in;
  return nullptr;
}

// The symbol values the run applies: --shape symbols plus those bound by --shape inputs.
absl::StatusOr<std::map<std::string, int64_t>> BindSymbols(const Graph& g, const PassContext& ctx) {
  std::map<std::string, int64_t> values;
  std::map<std::string, std::string> where;
  for (const auto& [sym, v] : ctx.symbol_values) {
    if (v < 0)
      return absl::InvalidArgumentError(
          absl::StrCat("--shape ", sym, "=", v, ": a dimension must be >= 0"));
    values[sym] = v;
    where[sym] = absl::StrCat("--shape ", sym, "=", v);
  }
  for (const auto& [name, dims] : ctx.input_shapes) {
    const Node* in = FindInput(g, name);
    if (!in) {
      std::vector<std::string> names;
      for (const Node* n : g.inputs()) names.push_back(n->output_info(0).name);
      return absl::InvalidArgumentError(
          absl::StrCat("--shape names '", name,
                       "', which is not a graph input (inputs: ", absl::StrJoin(names, ", "), ")"));
    }
    const Type& t = in->output_info(0).type;
    const std::string given = absl::StrCat("--shape ", name, "=", DimsText(dims));
    for (int64_t d : dims)
      if (d < 0)
        return absl::InvalidArgumentError(absl::StrCat(given, ": a dimension must be >= 0"));
    if (!t.has_rank()) continue;
    if (t.rank() != static_cast<int>(dims.size()))
      return absl::InvalidArgumentError(absl::StrCat("graph input '", name, "' has rank ", t.rank(),
                                                     " (", t.ToString(), ") but ", given, " has ",
                                                     dims.size(), " dims"));
    for (size_t i = 0; i < dims.size(); ++i) {
      const Dim& d = (*t.shape)[i];
      if (d.is_known() && d.value() != dims[i])
        return absl::InvalidArgumentError(absl::StrCat("graph input '", name, "' dim ", i, " is ",
                                                       d.value(), " (", t.ToString(), ") but ",
                                                       given, " says ", dims[i]));
      if (!IsPlainSymbol(d)) continue;
      auto [it, inserted] = values.emplace(d.symbol(), dims[i]);
      if (!inserted && it->second != dims[i])
        return absl::InvalidArgumentError(absl::StrCat(
            "symbol '", d.symbol(), "' is bound to ", it->second, " by ", where[d.symbol()],
            " and to ", dims[i], " by graph input '", name, "' (", given, ")"));
      if (inserted) where[d.symbol()] = absl::StrCat("graph input '", name, "' (", given, ")");
    }
  }
  // Inputs whose declared dims are expressions ("2*batch"): check them once bound.
  for (const auto& [name, dims] : ctx.input_shapes) {
    const Type& t = FindInput(g, name)->output_info(0).type;
    if (!t.has_rank()) continue;
    for (size_t i = 0; i < dims.size(); ++i) {
      const Dim s = SubstituteDim((*t.shape)[i], values);
      if (s.is_known() && s.value() != dims[i])
        return absl::InvalidArgumentError(absl::StrCat(
            "graph input '", name, "' dim ", i, " is ", (*t.shape)[i].ToString(), " = ", s.value(),
            " with the bound symbols, but --shape ", name, "=", DimsText(dims), " says ", dims[i]));
    }
  }
  return values;
}

// The declared type `declared` of output i of `n` merged with the `inferred` one. A shape
// the inputs contradict gives way to the inferred one with a `warning`, or is an error when
// `warning` is null (no caller collects warnings: a shape bucket's re-run, where such a
// contradiction means the symbolic graph baked in a wrong declared dim).
absl::StatusOr<Type> Merge(const Node& n, int i, const Type& declared, const Type& inferred,
                           std::string* warning) {
  auto what = [&]() {
    const std::string& name = n.output_info(i).name;
    return absl::StrCat(n.Describe(), ": output ", i,
                        name.empty() ? "" : absl::StrCat(" '", name, "'"), " is declared ",
                        declared.ToString(), " but its inputs give ", inferred.ToString());
  };
  Type out = declared;
  if (inferred.dtype != DType::kUndefined) {
    if (declared.dtype != DType::kUndefined && declared.dtype != inferred.dtype)
      return absl::InvalidArgumentError(what());
    out.dtype = inferred.dtype;
  }
  if (!inferred.shape) return out;
  if (!declared.shape) {
    out.shape = inferred.shape;
    return out;
  }
  auto contradicted = [&]() -> absl::StatusOr<Type> {
    if (warning == nullptr) return absl::InvalidArgumentError(what());
    *warning =
        absl::StrCat(what(), "; using the inferred shape (onnxruntime also runs such files)");
    out.shape = inferred.shape;
    return out;
  };
  if (declared.rank() != inferred.rank()) return contradicted();
  for (size_t j = 0; j < declared.shape->size(); ++j) {
    const Dim& d = (*declared.shape)[j];
    const Dim& f = (*inferred.shape)[j];
    if (d.is_known() && f.is_known() && f.value() != d.value()) return contradicted();
  }
  for (size_t j = 0; j < declared.shape->size(); ++j) {
    const Dim& d = (*declared.shape)[j];
    const Dim& f = (*inferred.shape)[j];
    // A declared symbol or unknown dim: the inferred dim is at least as precise.
    if (!f.is_unknown() && !d.is_known()) (*out.shape)[j] = f;
  }
  return out;
}

ShapeRule FindRule(const Node& n) {
  if (n.domain() == "kiln") return shape_inference::FindFusedRule(n.op());
  if (!n.domain().empty()) return nullptr;  // no rules for other domains
  if (ShapeRule r = shape_inference::FindElementwiseRule(n.op())) return r;
  if (ShapeRule r = shape_inference::FindMathRule(n.op())) return r;
  if (ShapeRule r = shape_inference::FindMovementRule(n.op())) return r;
  if (ShapeRule r = shape_inference::FindVisionRule(n.op())) return r;
  return shape_inference::FindIndexingRule(n.op());
}

class ShapeInferencePass final : public Pass {
 public:
  std::string_view name() const override { return "shape-inference"; }
  std::string_view description() const override {
    return "static and symbolic types for every value; --shape specializes inputs and symbols";
  }

 protected:
  absl::StatusOr<bool> RunImpl(Graph& g, const PassContext& ctx) override {
    bool changed = false;
    int64_t typed = 0, specialized = 0;
    KILN_ASSIGN_OR_RETURN(const auto symbols, BindSymbols(g, ctx));

    // Specialize inputs and substitute bound symbols in every stored type.
    for (const auto& p : g.nodes()) {
      Node* n = p.get();
      if (n->is_constant()) continue;
      for (int i = 0; i < n->num_outputs(); ++i) {
        Type t = n->output_info(i).type;
        auto given =
            n->is_input() ? ctx.input_shapes.find(n->output_info(0).name) : ctx.input_shapes.end();
        if (given != ctx.input_shapes.end()) {
          t = Type::Static(t.dtype, given->second);
        } else if (t.shape && !symbols.empty()) {
          for (Dim& d : *t.shape) d = SubstituteDim(d, symbols);
        }
        if (t == n->output_info(i).type) continue;
        n->set_output_type(i, std::move(t));
        changed = true;
        ++(n->is_input() ? specialized : typed);
      }
    }

    ContentsMap contents;
    for (const auto& p : g.nodes()) {
      Node* n = p.get();
      if (n->is_constant()) {
        if (const Tensor* v = n->constant_value())
          if (auto c = shape_inference::ConstantContents(*v))
            contents[n->output(0)] = std::move(*c);
        continue;
      }
      if (n->is_input()) continue;
      const RuleContext rc(*n, contents);
      std::vector<Type> inferred(n->num_outputs());
      if (ShapeRule rule = FindRule(*n)) {
        KILN_ASSIGN_OR_RETURN(inferred, rule(rc));
        if (static_cast<int>(inferred.size()) != n->num_outputs())
          return KILN_INTERNAL("%s: shape rule gave %d types for %d outputs", n->Describe(),
                               inferred.size(), n->num_outputs());
      }
      for (int i = 0; i < n->num_outputs(); ++i) {
        std::string warning;
        KILN_ASSIGN_OR_RETURN(Type merged, Merge(*n, i, n->output_info(i).type, inferred[i],
                                                 ctx.warnings ? &warning : nullptr));
        if (!warning.empty()) {
          Count("declared shapes replaced by inferred ones");
          if (ctx.warnings) ctx.warnings->push_back(std::move(warning));
        }
        if (merged == n->output_info(i).type) continue;
        n->set_output_type(i, std::move(merged));
        changed = true;
        ++typed;
      }
      if (auto c = shape_inference::ComputeContents(rc, *n)) contents[n->output(0)] = std::move(*c);
    }

    int64_t num_static = 0, num_symbolic = 0, num_unknown = 0;
    for (const auto& p : g.nodes()) {
      if (p->is_constant()) continue;
      for (int i = 0; i < p->num_outputs(); ++i) {
        const Type& t = p->output_info(i).type;
        const bool unknown = t.dtype == DType::kUndefined || !t.has_rank() ||
                             std::any_of(t.shape->begin(), t.shape->end(),
                                         [](const Dim& d) { return d.is_unknown(); });
        if (unknown) {
          ++num_unknown;
        } else if (t.is_static()) {
          ++num_static;
        } else {
          ++num_symbolic;
        }
      }
    }
    Count("values typed", typed);
    Count("inputs specialized", specialized);
    Count("static values", num_static);
    Count("symbolic values", num_symbolic);
    Count("unknown values", num_unknown);
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateShapeInferencePass() { return std::make_unique<ShapeInferencePass>(); }

}  // namespace kiln
