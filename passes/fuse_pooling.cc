// fuse-pooling: replaces sentence-transformers' pooling heads with one kiln.Pool
// (docs/fused-ops.md), so a bi-encoder's [B, S, H] masked product and its reductions run
// as one pass over the hidden states.
//   Σ_s h·m / Clip(Σ_s m, 1e-9) (/ max(‖·‖₂, 1e-12)) == Pool(h, mask){mean, normalize}
//   h[:, 0] / max(‖h[:, 0]‖₂, 1e-12) == Pool(h){cls, normalize=1}
// Mean root: Div(ReduceSum(Mul(h, m), axes=[1], keepdims=0),
//                Clip|Max(ReduceSum(m, axes=[1], keepdims=0), 1e-9)),
// m = the mask [B, S] through Unsqueeze(-1) (or the equivalent Reshape), an optional
// Expand to h's shape and a Cast to float, in any order (numerator and denominator may use
// separate copies of the chain). Normalization (F.normalize, p=2, last axis):
// Div(x, [Expand](Clip|Max(ReduceL2(x, axes=[-1], keepdims=1), 1e-12))) or with
// Sqrt(ReduceSum(Pow(x, 2) | Mul(x, x))) for the norm; fused into the mean Pool when it
// follows one. CLS root: that normalization of Gather(h, 0, axis=1), or of Slice(h, 0:1 on
// axis 1) squeezed to [B, H]. A CLS Gather without normalization stays (it is already one
// op), and so does a BERT pooler's Gather -> Linear -> Tanh.
// Limits: epsilons must be 1e-9 (mean) and 1e-12 (normalize) as kiln.Pool fixes them; the
// mask must be [B, S]; masked max pooling and weighted-mean pooling are not recognised.
// Near-misses (a masked sum over the wrong axis, another epsilon, an interior value read
// elsewhere) are reported with their reason.
#include <algorithm>
#include <cmath>
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

using rewrite::ConstantOf;
using rewrite::IsOp;
using rewrite::ProducerIs;

constexpr const char* kKind = "pooling";
constexpr double kMeanEps = 1e-9;
constexpr double kNormEps = 1e-12;

bool DimCompatible(const Dim& a, const Dim& b) {
  return a.is_unknown() || b.is_unknown() || a == b;
}

std::string Label(Value v) {
  if (!v.name().empty()) return absl::StrCat("'", v.name(), "'");
  return v.node->Describe();
}

bool NearlyEqual(double a, double b) { return std::abs(a - b) <= 1e-6 * std::abs(b); }

// The constant axes of a reduction (input 1), normalized against `rank`.
std::optional<std::vector<int64_t>> ReduceAxes(const Node* r, int rank) {
  if (r->num_inputs() < 2 || !r->input(1)) return std::nullopt;
  auto axes = rewrite::IntConstant(r->input(1));
  if (!axes) return std::nullopt;
  for (int64_t& a : *axes) a = a < 0 ? a + rank : a;
  return axes;
}

// The mask [B, S] under a chain of Unsqueeze(-1)/Reshape(+[1]) (exactly one), Expand and
// Cast-to-float nodes that turns it into a [B, S, 1|H] float multiplier.
struct MaskChain {
  Value mask;
  std::vector<const Node*> nodes;
};

std::optional<MaskChain> TraceMask(Value v) {
  MaskChain c;
  int raised = 0;
  for (int depth = 0; depth < 6 && v; ++depth) {
    Node* n = v.node;
    if (IsOp(n, "Cast") && IsFloat(DType(n->output_info(0).type.dtype))) {
      c.nodes.push_back(n);
      v = n->input(0);
    } else if (IsOp(n, "Expand")) {
      c.nodes.push_back(n);
      v = n->input(0);
    } else if (IsOp(n, "Unsqueeze") || IsOp(n, "Reshape")) {
      const Value in = n->input(0);
      const Type& ti = in.type();
      const Type& to = n->output_info(0).type;
      if (ti.rank() != 2 || to.rank() != 3) return std::nullopt;
      if (IsOp(n, "Unsqueeze")) {
        const auto axes = n->num_inputs() > 1 ? rewrite::IntConstant(n->input(1)) : std::nullopt;
        if (!axes || axes->size() != 1 || ((*axes)[0] != -1 && (*axes)[0] != 2))
          return std::nullopt;
      } else if (!((*to.shape)[2] == Dim::Known(1) && (*to.shape)[0] == (*ti.shape)[0] &&
                   (*to.shape)[1] == (*ti.shape)[1] && !(*ti.shape)[0].is_unknown() &&
                   !(*ti.shape)[1].is_unknown())) {
        return std::nullopt;
      }
      c.nodes.push_back(n);
      ++raised;
      v = in;
    } else {
      break;
    }
  }
  if (raised != 1 || !v || v.type().rank() != 2) return std::nullopt;
  c.mask = v;
  return c;
}

// Clip(x, eps, _) or Max(x, eps) (either order): returns (x, eps).
std::optional<std::pair<Value, double>> MatchClampMin(Value v) {
  if (Node* clip = ProducerIs(v, "Clip")) {
    if (clip->num_inputs() < 2 || !clip->input(1)) return std::nullopt;
    if (clip->num_inputs() > 2 && clip->input(2)) return std::nullopt;
    auto eps = rewrite::ScalarConstant(clip->input(1));
    if (!eps) return std::nullopt;
    return std::make_pair(clip->input(0), *eps);
  }
  if (Node* mx = ProducerIs(v, "Max")) {
    if (mx->num_inputs() != 2) return std::nullopt;
    auto m = rewrite::MatchCommuted(
        mx, [](Value) { return true; },
        [](Value e) { return rewrite::ScalarConstant(e).has_value(); });
    // A one-element eps of higher rank would broadcast the result to that rank.
    if (!m || !rewrite::ScalarRankFits(m->second, m->first).empty()) return std::nullopt;
    return std::make_pair(m->first, *rewrite::ScalarConstant(m->second));
  }
  return std::nullopt;
}

// An L2 normalization over the last axis of the rank-2 value `x`, rooted at Div `d`.
struct Normalize {
  Node* div = nullptr;
  std::vector<const Node*> nodes;  // the whole chain, div included
};

// nullopt: not a normalization of x. A non-empty `reason`: one, but not kiln.Pool's.
std::optional<Normalize> MatchNormalize(Node* d, Value x, std::string* reason) {
  if (!IsOp(d, "Div") || d->num_inputs() != 2 || d->input(0) != x) return std::nullopt;
  Normalize nz;
  nz.div = d;
  nz.nodes.push_back(d);
  Value den = d->input(1);
  if (Node* e = ProducerIs(den, "Expand")) {
    nz.nodes.push_back(e);
    if (Node* shape = ProducerIs(e->input(1), "Shape"); shape && shape->input(0) == x)
      nz.nodes.push_back(shape);  // expand_as(x)
    den = e->input(0);
  }
  Node* clamp = den.node;
  auto cm = MatchClampMin(den);
  if (!cm) return std::nullopt;
  nz.nodes.push_back(clamp);
  Value norm = cm->first;
  const int rank = x.type().rank();
  auto last_axis_keep = [&](const Node* r) {
    const auto axes = ReduceAxes(r, rank);
    return axes && *axes == std::vector<int64_t>{rank - 1} && r->attr_int_or("keepdims", 1) == 1;
  };
  if (Node* l2 = ProducerIs(norm, "ReduceL2"); l2 && l2->input(0) == x) {
    nz.nodes.push_back(l2);
    if (!last_axis_keep(l2)) *reason = "the L2 norm is not over the last axis with keepdims=1";
  } else if (Node* sq = ProducerIs(norm, "Sqrt")) {
    Node* rs = ProducerIs(sq->input(0), "ReduceSum");
    if (rs == nullptr) return std::nullopt;
    Node* p = rs->input(0).node;
    const bool squares =
        (IsOp(p, "Pow") && p->input(0) == x && rewrite::ScalarConstant(p->input(1)) == 2.0 &&
         rewrite::ScalarRankFits(p->input(1), x).empty()) ||
        (IsOp(p, "Mul") && p->input(0) == x && p->input(1) == x);
    if (!squares) return std::nullopt;
    nz.nodes.insert(nz.nodes.end(), {sq, rs, p});
    if (!last_axis_keep(rs)) *reason = "the L2 norm is not over the last axis with keepdims=1";
  } else {
    return std::nullopt;
  }
  if (reason->empty() && !NearlyEqual(cm->second, kNormEps))
    *reason =
        absl::StrCat("the normalization clamps the norm at ", cm->second, "; kiln.Pool uses 1e-12");
  if (reason->empty() && rank != 2)
    *reason = absl::StrCat("the normalized value has rank ", rank, ", not [B, H]");
  return nz;
}

// Mean pooling rooted at Div `d`.
struct MeanPool {
  Node* div = nullptr;
  Value hidden, mask;
  std::vector<const Node*> nodes;  // must be used only inside the pattern
  std::vector<const Node*> chain;  // mask chains: may be shared (go with the root if not)
};

// nullopt: not a masked mean. A non-empty `reason`: a near-miss.
std::optional<MeanPool> MatchMean(Node* d, std::string* reason) {
  if (!IsOp(d, "Div") || d->num_inputs() != 2) return std::nullopt;
  Node* rs = ProducerIs(d->input(0), "ReduceSum");
  Node* mul = rs ? ProducerIs(rs->input(0), "Mul") : nullptr;
  if (mul == nullptr || mul->num_inputs() != 2) return std::nullopt;
  std::optional<MaskChain> chain;
  MeanPool mp;
  for (int i = 0; i < 2 && !chain; ++i) {
    chain = TraceMask(mul->input(i));
    mp.hidden = mul->input(1 - i);
  }
  if (!chain) return std::nullopt;
  mp.div = d;
  mp.mask = chain->mask;
  mp.nodes = {d, rs, mul};
  mp.chain = chain->nodes;
  const Type& ht = mp.hidden.type();
  if (ht.rank() != 3 || !IsFloat(ht.dtype)) {
    *reason = absl::StrCat("the masked hidden state ", Label(mp.hidden), " has type ",
                           ht.ToString(), ", not [B, S, H]");
    return mp;
  }
  const Type& pt = mul->output_info(0).type;
  if (pt.has_rank() && (pt.rank() != 3 || !DimCompatible((*pt.shape)[0], (*ht.shape)[0]) ||
                        !DimCompatible((*pt.shape)[1], (*ht.shape)[1]) ||
                        !DimCompatible((*pt.shape)[2], (*ht.shape)[2]))) {
    *reason = absl::StrCat("the masked product has type ", pt.ToString(),
                           ", not the hidden state's ", ht.ToString());
    return mp;
  }
  const auto axes = ReduceAxes(rs, 3);
  if (!axes || *axes != std::vector<int64_t>{1}) {
    *reason = absl::StrCat("the masked sum reduces axes [",
                           axes ? absl::StrJoin(*axes, ",") : std::string("?"),
                           "], not the sequence axis 1");
    return mp;
  }
  if (rs->attr_int_or("keepdims", 1) != 0) {
    *reason = "the masked sum keeps the reduced axis (keepdims=1); kiln.Pool yields [B, H]";
    return mp;
  }
  const Type& mt = mp.mask.type();
  if (!DimCompatible((*mt.shape)[0], (*ht.shape)[0]) ||
      !DimCompatible((*mt.shape)[1], (*ht.shape)[1])) {
    *reason = absl::StrCat("the mask ", Label(mp.mask), " has type ", mt.ToString(),
                           ", not [B, S] of the hidden state ", ht.ToString());
    return mp;
  }
  auto cm = MatchClampMin(d->input(1));
  Node* rd = cm ? ProducerIs(cm->first, "ReduceSum") : nullptr;
  std::optional<MaskChain> den_chain = rd ? TraceMask(rd->input(0)) : std::nullopt;
  if (!den_chain || den_chain->mask != mp.mask) {
    *reason = absl::StrCat("the divisor ", Label(d->input(1)),
                           " is not Clip(ReduceSum(mask), 1e-9) of the same mask");
    return mp;
  }
  const auto den_axes = ReduceAxes(rd, 3);
  if (!den_axes || *den_axes != std::vector<int64_t>{1} || rd->attr_int_or("keepdims", 1) != 0) {
    *reason = "the mask count is not a sum over axis 1 with keepdims=0";
    return mp;
  }
  if (!NearlyEqual(cm->second, kMeanEps)) {
    *reason = absl::StrCat("the mask count is clamped at ", cm->second, "; kiln.Pool uses 1e-9");
    return mp;
  }
  mp.nodes.insert(mp.nodes.end(), {d->input(1).node, rd});
  for (const Node* n : den_chain->nodes)
    if (std::find(mp.chain.begin(), mp.chain.end(), n) == mp.chain.end()) mp.chain.push_back(n);
  return mp;
}

// The CLS token of a [B, S, H] value: Gather(h, 0, axis=1), or Slice(h, [0], [1], [1])
// followed by Squeeze([1]) or a Reshape to [B, H].
std::optional<std::pair<Value, std::vector<const Node*>>> MatchCls(Value x) {
  if (Node* g = ProducerIs(x, "Gather")) {
    const Tensor* idx = ConstantOf(g->input(1));
    if (g->attr_int_or("axis", 0) == 1 && idx && idx->rank() == 0 && IsInteger(idx->dtype()) &&
        idx->GetAsInt64(0) == 0 && g->input(0).type().rank() == 3)
      return std::make_pair(g->input(0), std::vector<const Node*>{g});
    return std::nullopt;
  }
  Node* sq = ProducerIs(x, "Squeeze");
  if (sq == nullptr) sq = ProducerIs(x, "Reshape");
  Node* sl = sq ? ProducerIs(sq->input(0), "Slice") : nullptr;
  if (sl == nullptr || sl->num_inputs() < 4 || x.type().rank() != 2) return std::nullopt;
  if (IsOp(sq, "Squeeze") &&
      (sq->num_inputs() < 2 || rewrite::IntConstant(sq->input(1)) != std::vector<int64_t>{1}))
    return std::nullopt;
  const Value h = sl->input(0);
  if (h.type().rank() != 3) return std::nullopt;
  const bool steps_ok = sl->num_inputs() < 5 || !sl->input(4) ||
                        rewrite::IntConstant(sl->input(4)) == std::vector<int64_t>{1};
  if (rewrite::IntConstant(sl->input(1)) != std::vector<int64_t>{0} ||
      rewrite::IntConstant(sl->input(2)) != std::vector<int64_t>{1} ||
      rewrite::IntConstant(sl->input(3)) != std::vector<int64_t>{1} || !steps_ok)
    return std::nullopt;
  return std::make_pair(h, std::vector<const Node*>{sq, sl});
}

// Interior nodes (all but `root`) read outside `nodes`: the first one, or nullptr.
const Node* LeakingNode(const Graph& g, const std::vector<const Node*>& nodes, const Node* root) {
  for (const Node* n : nodes)
    if (n != root && !rewrite::UsedOnlyBy(g, n, nodes)) return n;
  return nullptr;
}

// A mean pooling (with the normalization after it, when one fits) or a normalized CLS
// token, rooted at a Div.
struct PoolMatch {
  Node* root = nullptr;
  std::optional<MeanPool> mean;
  std::optional<std::pair<Value, std::vector<const Node*>>> cls;  // (h, its nodes)
  std::optional<Normalize> nz;
  std::string reason;                 // the matchers' near-miss reason
  std::vector<const Node*> involved;  // what a near-miss names
};

class PoolRule final : public fusion::FusionRule<PoolMatch> {
 public:
  bool IsRoot(const Node& n) const override { return IsOp(&n, "Div"); }

  std::optional<PoolMatch> Recognize(const Graph&, Node* n, fusion::FusionSession&) override {
    PoolMatch m;
    m.root = n;
    if (std::optional<MeanPool> mp = MatchMean(n, &m.reason)) {
      m.involved = mp->nodes;
      m.mean = std::move(mp);
      return m;
    }
    // CLS + normalization, rooted at the normalization's Div.
    if (n->num_inputs() != 2 || !n->input(0)) return std::nullopt;
    m.cls = MatchCls(n->input(0));
    if (!m.cls) return std::nullopt;
    m.nz = MatchNormalize(n, n->input(0), &m.reason);
    if (!m.nz) return std::nullopt;
    m.involved = m.nz->nodes;
    m.involved.insert(m.involved.end(), m.cls->second.begin(), m.cls->second.end());
    return m;
  }

  std::string Check(const Graph& g, PoolMatch& m, fusion::FusionSession& s) override {
    if (!m.reason.empty()) return m.reason;
    Node* n = m.root;
    if (m.cls) {
      if (const Node* leak = LeakingNode(g, m.involved, n))
        return absl::StrCat("the CLS token ", Label(Value{const_cast<Node*>(leak), 0}),
                            " is also read outside the normalization");
      return "";
    }
    if (const Node* leak = LeakingNode(g, m.mean->nodes, n))
      return absl::StrCat("interior value ", Label(Value{const_cast<Node*>(leak), 0}),
                          " is also read outside the mean pooling");
    // A following normalization of the pooled value joins the Pool.
    for (const Use& u : n->output_info(0).uses) {
      std::string why;
      m.nz = MatchNormalize(u.user, n->output(0), &why);
      if (m.nz && why.empty()) {
        std::vector<const Node*> all = m.nz->nodes;
        all.push_back(n);
        if (!LeakingNode(g, all, m.nz->div)) break;
      } else if (m.nz) {
        s.Missed(kKind, m.nz->nodes, why);
      }
      m.nz.reset();
    }
    return "";
  }

  absl::Status Rewrite(Graph& g, PoolMatch& m, fusion::FusionSession& s) override {
    if (m.cls) {
      Fuse(g, m.root, "cls", true, m.cls->first, Value{}, m.involved, s);
      return absl::OkStatus();
    }
    const MeanPool& mp = *m.mean;
    std::vector<const Node*> nodes = mp.nodes;
    if (m.nz) nodes.insert(nodes.end(), m.nz->nodes.begin(), m.nz->nodes.end());
    nodes.insert(nodes.end(), mp.chain.begin(), mp.chain.end());  // provenance only
    Fuse(g, m.nz ? m.nz->div : m.root, "mean", m.nz.has_value(), mp.hidden, mp.mask, nodes, s);
    return absl::OkStatus();
  }

  std::string_view Kind(const PoolMatch&) const override { return kKind; }
  std::vector<const Node*> Involved(const PoolMatch& m) const override { return m.involved; }

 private:
  // Pool(hidden, mask?){mode, normalize} replacing `root`; the pattern's nodes (the mask
  // chains too, unless read elsewhere) go with it.
  static void Fuse(Graph& g, Node* root, const std::string& mode, bool normalize, Value hidden,
                   Value mask, const std::vector<const Node*>& nodes, fusion::FusionSession& s) {
    std::vector<Value> inputs{hidden};
    if (mask) inputs.push_back(mask);
    Node* pool = g.InsertNodeBefore(root, "Pool", inputs, 1, "kiln");
    pool->set_attr("mode", mode);
    pool->set_attr("normalize", int64_t{normalize ? 1 : 0});
    Type t = root->output_info(0).type;
    if (!t.has_rank() && hidden.type().rank() == 3)
      t = Type{hidden.type().dtype,
               std::vector<Dim>{(*hidden.type().shape)[0], (*hidden.type().shape)[2]}};
    pool->set_output_type(0, t);
    pool->set_output_name(0, root->output_info(0).name);
    pool->set_provenance({});
    rewrite::UnionProvenance(pool, nodes);
    g.ReplaceAllUsesWith(root->output(0), pool->output(0));
    s.Count(absl::StrCat("fused ", mode, normalize ? " + normalize" : ""));
    s.RemoveIfDead(g, {root});
  }
};

}  // namespace

std::unique_ptr<Pass> CreateFusePoolingPass() {
  return std::make_unique<fusion::RulePass<PoolRule>>(
      "fuse-pooling", "masked mean / CLS pooling (+ L2 normalization) -> kiln.Pool");
}

}  // namespace kiln
