// fuse-layernorm: finds the decomposed layer normalization that opset < 17 exporters
// write and replaces it with ONNX LayerNormalization (axis=-1); the same chain without
// the mean subtraction becomes kiln.RMSNorm (docs/fused-ops.md).
//   LayerNorm: y = (x − mean(x)) / sqrt(mean((x − mean(x))²) + eps) · gamma + beta
//   RMSNorm:   y = x / sqrt(mean(x²) + eps) · gamma
// Root: the variance ReduceMean R2. Cheap match (no candidate, nothing reported):
// R2 reads Pow(d, 2) or Mul(d, d); R2 -> Add(eps) (optional) -> Sqrt -> Div(d, ·) or
// Mul(d, Reciprocal(·)) (canonicalize turns Pow(·, -0.5) into Reciprocal(Sqrt)). Then
// d = Sub(x, ReduceMean(x)) makes it a LayerNorm, anything else an RMSNorm of d.
// Checks, each a reported near-miss: float input; both reductions over the last axis
// only, keepdims=1, same axes (R2's axis taken against the rank of the value it
// reduces); eps a scalar constant; the one-element exponent and eps of rank <= x's known
// rank (else they broadcast the result to a higher rank); no interior value read
// elsewhere or a graph output. Absorbed when present: Mul by gamma and (LayerNorm) Add
// of beta, each a constant of [H] (or [1,..,1,H]) or a value typed [H]; without gamma the fused op
// gets a ones gamma (H must be static) and a non-[H] multiplier stays a Mul after it.
// Limits: E[x²]−E[x]² variance forms, ReduceSum/H means, normalization over several
// trailing axes and gamma folded into the reciprocal before the Mul are not matched;
// LayerNormalization ops already in the graph are not counted.
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "passes/fusion_rule.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace kiln {
namespace {

using rewrite::IsOp;
using rewrite::OtherOperand;
using rewrite::ProducerIs;
using rewrite::UserIs;

// Pow(d, 2) or Mul(d, d): d, else null.
Value SquaredValue(Node* sq) {
  if (IsOp(sq, "Mul") && sq->num_inputs() == 2 && sq->input(0) && sq->input(0) == sq->input(1))
    return sq->input(0);
  if (IsOp(sq, "Pow") && sq->num_inputs() == 2 && rewrite::ScalarConstant(sq->input(1)) == 2.0)
    return sq->input(0);
  return Value{};
}

struct NormMatch {
  bool layer = false;    // LayerNorm (mean subtracted) vs RMSNorm
  Value x;               // the normalized input
  Node* mean = nullptr;  // LayerNorm: ReduceMean(x)
  Node* sub = nullptr;   // LayerNorm: x − mean
  Node* square = nullptr;
  Node* var = nullptr;  // the root
  Node* add_eps = nullptr;
  Node* sqrt = nullptr;
  Node* recip = nullptr;
  Node* norm = nullptr;  // Div or Mul: the normalized value
  // Filled by Extend: absorbed gamma Mul / beta Add and their [H] operands.
  Node* gamma_mul = nullptr;
  Value gamma;
  std::optional<Tensor> gamma_const;
  Node* beta_add = nullptr;
  Value beta;
  std::optional<Tensor> beta_const;
  double eps = 0;  // set by Check

  const char* kind() const { return layer ? "layernorm" : "rmsnorm"; }
  // Pattern nodes up to the normalized value, in graph order.
  std::vector<Node*> Core() const {
    std::vector<Node*> out;
    for (Node* n : {mean, sub, square, var, add_eps, sqrt, recip, norm})
      if (n != nullptr) out.push_back(n);
    return out;
  }
  std::vector<const Node*> All() const {
    std::vector<const Node*> out;
    for (Node* n : Core()) out.push_back(n);
    for (Node* n : {gamma_mul, beta_add})
      if (n != nullptr) out.push_back(n);
    return out;
  }
};

// The structural chain rooted at variance ReduceMean `var`, or nullopt (not a candidate).
std::optional<NormMatch> RecognizeNorm(Node* var) {
  NormMatch m;
  m.var = var;
  if (var->num_inputs() < 1 || !var->input(0)) return std::nullopt;
  m.square = var->input(0).node;
  const Value d = SquaredValue(m.square);
  if (!d) return std::nullopt;
  Value v = var->output(0);
  if ((m.add_eps = UserIs(v, "Add"))) v = m.add_eps->output(0);
  if (!(m.sqrt = UserIs(v, "Sqrt"))) return std::nullopt;
  const Value s = m.sqrt->output(0);
  for (const Use& u : s.node->output_info(0).uses) {
    if (IsOp(u.user, "Div") && u.operand == 1 && u.user->input(0) == d) m.norm = u.user;
  }
  if (m.norm == nullptr) {
    if (!(m.recip = UserIs(s, "Reciprocal"))) return std::nullopt;
    for (const Use& u : m.recip->output_info(0).uses)
      if (IsOp(u.user, "Mul") && OtherOperand(u.user, m.recip->output(0)) == d) m.norm = u.user;
    if (m.norm == nullptr) return std::nullopt;
  }
  Node* sub = ProducerIs(d, "Sub");
  Node* mean =
      sub != nullptr && sub->num_inputs() == 2 ? ProducerIs(sub->input(1), "ReduceMean") : nullptr;
  if (mean != nullptr && sub->input(0) && mean->num_inputs() >= 1 &&
      mean->input(0) == sub->input(0)) {
    m.layer = true;
    m.sub = sub;
    m.mean = mean;
    m.x = sub->input(0);
  } else {
    m.x = d;
  }
  return m;
}

// "" when ReduceMean `r` reduces only the last axis of a rank-`rank` input with
// keepdims=1; else why not. `axes_out` gets the axes as written.
std::string CheckReduction(const Node* r, int rank, std::vector<int64_t>* axes_out) {
  if (r->attr_int_or("keepdims", 1) != 1)
    return absl::StrCat("ReduceMean ", rewrite::NodeLabel(r),
                        " has keepdims=0; the normalization broadcasts a kept axis");
  std::optional<std::vector<int64_t>> axes;
  if (r->num_inputs() >= 2 && r->input(1)) {
    axes = rewrite::IntConstant(r->input(1));
    if (!axes) return "the reduction axes are not a constant";
  } else {
    axes = std::vector<int64_t>{};
  }
  *axes_out = *axes;
  if (axes->empty())
    return r->attr_int_or("noop_with_empty_axes", 0) ? "the ReduceMean reduces nothing"
                                                     : "the ReduceMean reduces over all axes; "
                                                       "only the last axis is fused";
  const std::string desc = absl::StrCat("[", absl::StrJoin(*axes, ","), "]");
  if (axes->size() != 1)
    return absl::StrCat("normalizes over axes ", desc, "; only the last axis (-1) is fused");
  const int64_t a = (*axes)[0];
  if (a == -1 || (rank > 0 && a == rank - 1)) return "";
  if (rank < 0)
    return absl::StrCat("normalizes over axis ", a,
                        " of an input of unknown rank; cannot tell that it is the last");
  return absl::StrCat("normalizes over axis ", a, " of a rank-", rank,
                      " input; only the last axis (-1) is fused");
}

// "" when the core chain may be fused; else the near-miss reason. Sets `eps`.
std::string CheckCore(const Graph& g, const NormMatch& m, double* eps) {
  const DType dt = m.x.type().dtype;
  if (!IsFloat(dt))
    return absl::StrCat("input dtype ", std::string(DTypeName(dt)), " is not a float type");
  const int rank = m.x.type().has_rank() ? m.x.type().rank() : -1;
  // Pow(d, c): a one-element c with more dims than d broadcasts what R2 reduces.
  std::string why;
  if (IsOp(m.square, "Pow")) why = rewrite::ScalarRankFits(m.square->input(1), m.x);
  if (!why.empty()) return absl::StrCat("the exponent ", why);
  // R2's axis is checked against the rank of what it reduces (x's once c fits).
  const Type& sq_type = m.var->input(0).type();
  const int var_rank = sq_type.has_rank() ? sq_type.rank() : rank;
  std::vector<int64_t> var_axes, mean_axes;
  why = CheckReduction(m.var, var_rank, &var_axes);
  if (!why.empty()) return why;
  if (m.layer) {
    why = CheckReduction(m.mean, rank, &mean_axes);
    if (!why.empty()) return why;
  }
  *eps = 0;
  if (m.add_eps != nullptr) {
    const Value e = OtherOperand(m.add_eps, m.var->output(0));
    const Tensor* t = rewrite::ConstantOf(e);
    if (t == nullptr || t->NumElements() != 1 || !IsFloat(t->dtype()))
      return absl::StrCat("epsilon ", rewrite::ValueLabel(e), " is not a scalar constant");
    why = rewrite::ScalarRankFits(e, m.x);
    if (!why.empty()) return absl::StrCat("epsilon ", why);
    *eps = t->GetAsDouble(0);
  }
  return rewrite::CheckInterior(g, m.Core(), {m.norm});
}

// `v` as a [h] vector operand: a constant of [h] / [1,..,1,h] (rank <= `rank`) or a
// one-element constant (repeated h times), or a value typed [h] of dtype `dt`.
bool AsHVector(Value v, int64_t h, int rank, DType dt, std::optional<Tensor>* as_const) {
  if (!v || h < 0 || rank < 0) return false;
  if (const Tensor* t = rewrite::ConstantOf(v)) {
    if (t->dtype() != dt) return false;
    *as_const = rewrite::AsVector(*t, h, rank, /*expand_scalar=*/true);
    return as_const->has_value();
  }
  const Type& ty = v.type();
  return ty.dtype == dt && ty.rank() == 1 && (*ty.shape)[0].is_known() &&
         (*ty.shape)[0].value() == h;
}

// Absorbs a following gamma Mul and (LayerNorm) beta Add when they read [H] vectors.
void Extend(const Graph& g, NormMatch& m) {
  const DType dt = m.x.type().dtype;
  const int rank = m.x.type().rank();
  std::optional<int64_t> h = rewrite::StaticLastDim(m.x);
  Value out = m.norm->output(0);
  Node* user = rewrite::SingleUser(g, out);
  if (IsOp(user, "Mul")) {
    const Value gv = OtherOperand(user, out);
    if (gv != out && AsHVector(gv, h.value_or(-1), rank, dt, &m.gamma_const)) {
      m.gamma_mul = user;
      m.gamma = gv;
      out = user->output(0);
      user = rewrite::SingleUser(g, out);
    }
  }
  if (m.layer && IsOp(user, "Add")) {
    const Value bv = OtherOperand(user, out);
    if (bv != out && AsHVector(bv, h.value_or(-1), rank, dt, &m.beta_const)) {
      m.beta_add = user;
      m.beta = bv;
    }
  }
}

class NormRule final : public fusion::FusionRule<NormMatch> {
 public:
  bool IsRoot(const Node& n) const override { return IsOp(&n, "ReduceMean"); }
  std::optional<NormMatch> Recognize(const Graph&, Node* var, fusion::FusionSession&) override {
    return RecognizeNorm(var);
  }
  std::string Check(const Graph& g, NormMatch& m, fusion::FusionSession&) override {
    std::string why = CheckCore(g, m, &m.eps);
    if (!why.empty()) return why;
    Extend(g, m);
    if (m.gamma_mul == nullptr && !rewrite::StaticLastDim(m.x))
      return "no gamma follows and the hidden size is not static, so no ones gamma can be made";
    return "";
  }
  // LayerNormalization(x, gamma, beta){axis=-1, epsilon} or kiln.RMSNorm(x, gamma).
  absl::Status Rewrite(Graph& g, NormMatch& m, fusion::FusionSession& s) override {
    Node* last = m.beta_add ? m.beta_add : m.gamma_mul ? m.gamma_mul : m.norm;
    const DType dt = m.x.type().dtype;
    Value gamma = m.gamma, beta = m.beta;
    const std::string base = last->output_info(0).name;
    if (m.gamma_mul == nullptr) {
      const int64_t h = *rewrite::StaticLastDim(m.x);
      Tensor ones(dt, {h});
      for (int64_t i = 0; i < h; ++i) ones.SetFromDouble(i, 1.0);
      gamma = rewrite::InsertConstant(g, last, base + "_gamma", std::move(ones))->output(0);
      s.Count(absl::StrCat(m.kind(), " with ones gamma"));
    }
    if (m.gamma_const && rewrite::ConstantOf(m.gamma)->dims() != m.gamma_const->dims())
      gamma =
          rewrite::InsertConstant(g, last, m.gamma.name() + "_vector", *m.gamma_const)->output(0);
    if (m.beta_const && rewrite::ConstantOf(m.beta)->dims() != m.beta_const->dims())
      beta = rewrite::InsertConstant(g, last, m.beta.name() + "_vector", *m.beta_const)->output(0);
    Node* fused;
    if (m.layer) {
      std::vector<Value> in = {m.x, gamma};
      if (m.beta_add) in.push_back(beta);
      fused = g.InsertNodeBefore(last, "LayerNormalization", std::move(in), 1);
      fused->set_attr("axis", int64_t{-1});
    } else {
      fused = g.InsertNodeBefore(last, "RMSNorm", {m.x, gamma}, 1, "kiln");
    }
    fused->set_attr("epsilon", static_cast<float>(m.eps));
    fused->set_provenance({});
    rewrite::UnionProvenance(fused, m.All());
    fused->set_output_type(0, last->output_info(0).type);
    fused->set_output_name(0, base);
    g.ReplaceAllUsesWith(last->output(0), fused->output(0));
    std::vector<Node*> dead = m.Core();
    for (Node* n : {m.gamma_mul, m.beta_add})
      if (n != nullptr) dead.push_back(n);
    s.Count(m.kind());
    if (m.beta_add == nullptr && m.layer) s.Count("layernorm without beta");
    s.RemoveIfDead(g, dead);
    return absl::OkStatus();
  }
  std::string_view Kind(const NormMatch& m) const override { return m.kind(); }
  std::vector<const Node*> Involved(const NormMatch& m) const override { return m.All(); }
  std::string MissCounter(const NormMatch& m) const override {
    return absl::StrCat(m.kind(), " missed");
  }
};

}  // namespace

std::unique_ptr<Pass> CreateFuseLayerNormPass() {
  return std::make_unique<fusion::RulePass<NormRule>>(
      "fuse-layernorm",
      "decomposed LayerNorm -> LayerNormalization; decomposed RMSNorm -> kiln.RMSNorm");
}

}  // namespace kiln
