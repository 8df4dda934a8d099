// fuse-skip-layernorm: folds the residual Add in front of a LayerNormalization into
// kiln.SkipLayerNorm, and the one in front of a kiln.RMSNorm into kiln.SkipRMSNorm
// (docs/fused-ops.md), exposing the residual sum as the second output when something else
// reads it (pre-norm decoders; BERT's post-LN layers read only the LN).
//   Sum = X + skip (+ bias); Y = LayerNorm(Sum, last axis) · gamma + beta
//                            Y = RMSNorm(Sum) · gamma
// Root: LayerNormalization over the last axis or kiln.RMSNorm (runs after fuse-layernorm). Cheap
// match (no candidate, nothing reported): its input is Add(a, b) of two non-constant values, where
// an addend Add(p, c) (or the sum itself as Add(Add(p, q), c)) with c a constant [H] / [1,..,1,H]
// and no other reader gives the bias. Embedding sums (both addends Gathers or Adds of one) are left
// to fuse-embed-layernorm; a residual Add onto an embedding sum (GPT-2's layer 0: attention output
// + (wte + wpe)) is a skip sum. Near-misses (reported): neither addend has the sum's full shape (X
// must; skip may broadcast), the LayerNormalization normalizes more than the last axis, gamma/beta
// are not [H], its Mean/InvStdDev outputs are read, or a dtype differs. The report counts both
// forms under the kind "skip_layernorm". Limits: exactly one residual Add (a three-way sum keeps
// its inner Add); the LayerNormalization's stash_type is not carried (SkipLayerNorm computes in
// float).
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kiln/support/status.h"
#include "passes/fusion_rule.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace kiln {
namespace {

using rewrite::ConstantOf;
using rewrite::IsOp;
using rewrite::NodeLabel;
using rewrite::OtherOperand;
using rewrite::ProducerIs;

struct SkipMatch {
  Node* ln = nullptr;
  Node* sum = nullptr;       // the Add read by the LayerNormalization
  Node* bias_add = nullptr;  // the Add of the bias, when separate from `sum`
  Value a, b;                // the two addends (before choosing X)
  Value bias;
  std::optional<Tensor> bias_vec;
  std::vector<const Node*> Nodes() const {
    std::vector<const Node*> out;
    for (const Node* n : {bias_add, sum, ln})
      if (n != nullptr) out.push_back(n);
    return out;
  }
};

bool IsEmbeddingTerm(Value v) {
  if (ProducerIs(v, "Gather")) return true;
  Node* add = ProducerIs(v, "Add");
  if (add == nullptr) return false;
  for (const Value& in : add->inputs())
    if (ProducerIs(in, "Gather")) return true;
  return false;
}

// Add(p, c) with c a constant [h] vector and the Add read once: (p, c, vector).
std::optional<std::tuple<Value, Value, Tensor>> BiasAdd(const Graph& g, Node* add, int64_t h,
                                                        int rank) {
  if (!IsOp(add, "Add") || add->num_inputs() != 2 || !rewrite::HasSingleUse(g, add->output(0)))
    return std::nullopt;
  for (int i = 0; i < 2; ++i) {
    const Tensor* c = ConstantOf(add->input(i));
    const Value p = add->input(1 - i);
    if (c == nullptr || !p || ConstantOf(p)) continue;
    if (std::optional<Tensor> v = rewrite::AsVector(*c, h, rank))
      return std::make_tuple(p, add->input(i), *std::move(v));
  }
  return std::nullopt;
}

std::optional<SkipMatch> RecognizeSkip(const Graph& g, Node* ln) {
  if (ln->num_inputs() < 2 || !ln->input(0) || !ln->input(1)) return std::nullopt;
  Node* sum = ProducerIs(ln->input(0), "Add");
  if (sum == nullptr || sum->num_inputs() != 2 || !sum->input(0) || !sum->input(1))
    return std::nullopt;
  SkipMatch m;
  m.ln = ln;
  m.sum = sum;
  m.a = sum->input(0);
  m.b = sum->input(1);
  const std::optional<int64_t> h = rewrite::StaticLastDim(sum->output(0));
  const int rank = sum->output_info(0).type.rank();
  if (h && rank > 0) {
    // Add(Add(p, q), c): the bias is outermost.
    for (int i = 0; i < 2; ++i) {
      const Tensor* c = ConstantOf(sum->input(i));
      Node* inner = ProducerIs(sum->input(1 - i), "Add");
      std::optional<Tensor> v = c ? rewrite::AsVector(*c, *h, rank) : std::nullopt;
      if (!v || inner == nullptr || inner->num_inputs() != 2 ||
          !rewrite::HasSingleUse(g, inner->output(0)))
        continue;
      m.bias_add = sum;
      m.sum = inner;
      m.a = inner->input(0);
      m.b = inner->input(1);
      m.bias = sum->input(i);
      m.bias_vec = std::move(v);
      break;
    }
    // Add(Add(p, c), q): the bias inside one addend.
    for (Value* side : {&m.a, &m.b}) {
      if (m.bias_add != nullptr) break;
      if (auto pb = BiasAdd(g, ProducerIs(*side, "Add"), *h, rank)) {
        m.bias_add = side->node;
        *side = std::get<0>(*pb);
        m.bias = std::get<1>(*pb);
        m.bias_vec = std::get<2>(*pb);
      }
    }
  }
  if (!m.a || !m.b || ConstantOf(m.a) || ConstantOf(m.b)) return std::nullopt;
  if (IsEmbeddingTerm(m.a) && IsEmbeddingTerm(m.b)) return std::nullopt;
  return m;
}

// The LayerNormalization's gamma / beta operand as an [h] vector value, or why not.
std::string VectorOperand(Value v, int64_t h, const char* what) {
  const Type& t = v.type();
  if (t.rank() == 1 && (*t.shape)[0].is_known() && (*t.shape)[0].value() == h) return "";
  if (const Tensor* c = ConstantOf(v); c != nullptr && rewrite::AsVector(*c, h, c->rank()))
    return "";
  return absl::StrCat(what, " ", rewrite::ValueLabel(v), " has type ", t.ToString(),
                      "; SkipLayerNorm takes [", h, "]");
}

class SkipRule final : public fusion::FusionRule<SkipMatch> {
 public:
  bool IsRoot(const Node& n) const override { return IsOp(&n, "LayerNormalization") || IsRms(&n); }
  std::optional<SkipMatch> Recognize(const Graph& g, Node* ln, fusion::FusionSession&) override {
    return RecognizeSkip(g, ln);
  }
  std::string Check(const Graph& g, SkipMatch& m, fusion::FusionSession&) override {
    return CheckSkip(g, m);
  }
  absl::Status Rewrite(Graph& g, SkipMatch& m, fusion::FusionSession& s) override {
    // A Sum output read by a node placed before the LayerNormalization.
    if (Fuse(g, m, s)) s.NeedTopoSort();
    return absl::OkStatus();
  }
  std::string_view Kind(const SkipMatch&) const override { return "skip_layernorm"; }
  std::vector<const Node*> Involved(const SkipMatch& m) const override { return m.Nodes(); }
  std::string MissCounter(const SkipMatch&) const override { return "skip_layernorm missed"; }

 private:
  static bool IsRms(const Node* n) { return n->domain() == "kiln" && n->op() == "RMSNorm"; }

  // "" when fusable; orders m.a / m.b as (X, skip).
  static std::string CheckSkip(const Graph& g, SkipMatch& m) {
    Node* ln = m.ln;
    const bool rms = IsRms(ln);
    const Type& st = m.sum->output_info(0).type;
    const DType dt = st.dtype;
    if (!IsFloat(dt) || m.a.type().dtype != dt || m.b.type().dtype != dt)
      return absl::StrCat("the residual Add's operands are ", m.a.type().ToString(), " and ",
                          m.b.type().ToString(), "; both must be the same float type");
    const int rank = st.rank();
    const int64_t axis = rms ? -1 : ln->attr_int_or("axis", -1);
    if (rank < 1 || !(axis == -1 || axis == rank - 1))
      return absl::StrCat("LayerNormalization ", NodeLabel(ln), " normalizes from axis ", axis,
                          " of a rank-", rank,
                          " input; SkipLayerNorm normalizes the last axis only");
    if (m.a.type() != st && m.b.type() == st) std::swap(m.a, m.b);
    if (m.a.type() != st || !st.has_rank())
      return absl::StrCat("neither addend (", m.a.type().ToString(), ", ", m.b.type().ToString(),
                          ") has the sum's shape ", st.ToString());
    const std::optional<int64_t> h = rewrite::StaticLastDim(m.sum->output(0));
    if (!h) return "the hidden size (last dim of the sum) is not static";
    std::string why = VectorOperand(ln->input(1), *h, "gamma");
    if (why.empty() && !rms && ln->num_inputs() > 2 && ln->input(2))
      why = VectorOperand(ln->input(2), *h, "beta");
    if (!why.empty()) return why;
    for (int i = 1; i < ln->num_outputs(); ++i)
      if (!ln->output_info(i).uses.empty() || rewrite::IsGraphOutput(g, ln->output(i)))
        return absl::StrCat("LayerNormalization ", NodeLabel(ln),
                            " has its Mean/InvStdDev outputs read");
    return "";
  }

  // `v` as an exact [h] vector operand (a new constant when reshaped).
  static Value AsVectorValue(Graph& g, Node* before, Value v, int64_t h) {
    const Tensor* c = ConstantOf(v);
    if (c == nullptr || c->rank() == 1) return v;
    return rewrite::InsertConstant(g, before, absl::StrCat(v.name(), "_vector"),
                                   *rewrite::AsVector(*c, h, c->rank()))
        ->output(0);
  }

  // SkipLayerNorm(X, skip, gamma, beta?, bias?){epsilon} or SkipRMSNorm(X, skip, gamma,
  // bias?){epsilon} -> (Y, Sum?). True when the Sum output is read (the graph may need
  // reordering).
  static bool Fuse(Graph& g, const SkipMatch& m, fusion::FusionSession& s) {
    Node* ln = m.ln;
    const bool rms = IsRms(ln);
    Node* top = ln->input(0).node;  // its value is the residual sum
    const Value sum = top->output(0);
    const bool expose = !rewrite::ValueUsedOnlyBy(g, sum, {ln});
    const int64_t h = *rewrite::StaticLastDim(m.sum->output(0));  // checked by Check
    std::vector<Value> in = {m.a, m.b, AsVectorValue(g, ln, ln->input(1), h)};
    const bool has_beta = !rms && ln->num_inputs() > 2 && ln->input(2);
    if (!rms && (has_beta || m.bias_vec))
      in.push_back(has_beta ? AsVectorValue(g, ln, ln->input(2), h) : Value{});
    if (m.bias_vec) {
      Value b = m.bias;
      if (ConstantOf(b)->rank() != 1)
        b = rewrite::InsertConstant(g, ln, absl::StrCat(b.name(), "_vector"), *m.bias_vec)
                ->output(0);
      in.push_back(b);
    }
    Node* sln = g.InsertNodeBefore(ln, rms ? "SkipRMSNorm" : "SkipLayerNorm", std::move(in),
                                   expose ? 2 : 1, "kiln");
    sln->set_attr("epsilon", ln->attr_float_or("epsilon", rms ? 1e-6f : 1e-5f));
    sln->set_provenance({});
    rewrite::UnionProvenance(sln, m.Nodes());
    sln->set_output_type(0, ln->output_info(0).type);
    sln->set_output_name(0, ln->output_info(0).name);
    g.ReplaceAllUsesWith(ln->output(0), sln->output(0));
    if (expose) {
      sln->set_output_type(1, top->output_info(0).type);
      sln->set_output_name(1, top->output_info(0).name);
      g.ReplaceAllUsesWith(sum, sln->output(1));
      s.Count(rms ? "skip_rmsnorm with sum output" : "skip_layernorm with sum output");
    }
    if (rms)
      s.Count(m.bias_vec ? "skip_rmsnorm with bias" : "skip_rmsnorm");
    else
      s.Count(m.bias_vec ? "skip_layernorm with bias" : "skip_layernorm");
    std::vector<Node*> dead = {ln, m.sum};
    if (m.bias_add) dead.push_back(m.bias_add);
    s.RemoveIfDead(g, dead);
    return expose;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateFuseSkipLayerNormPass() {
  return std::make_unique<fusion::RulePass<SkipRule>>(
      "fuse-skip-layernorm",
      "residual Add (+ bias) + LayerNormalization / kiln.RMSNorm -> kiln.SkipLayerNorm / "
      "kiln.SkipRMSNorm");
}

}  // namespace kiln
