// fuse-embed-layernorm: replaces a Transformer's embedding block — word, position and
// optional token-type table lookups summed and layer-normalized — with one
// kiln.EmbedLayerNorm (docs/fused-ops.md), so the [B, S, H] sums never reach memory.
//   LN(word[ids] + pos[p] (+ type[t]) (+ C)) == EmbedLayerNorm(ids, t, p, word, pos', type)
// Root: LayerNormalization over the last axis, or a kiln.SkipLayerNorm — fuse-skip-layernorm
// runs first and may already have taken the embedding sum's last Add. The addends are
// collected through any tree of single-use Adds (any order and association); the sum
// itself (the LayerNorm's input, or the SkipLayerNorm's Sum output) may be read elsewhere,
// as GPT-2's is (it is also the first residual): it becomes the fused op's Sum output.
// Each addend must be one of:
//   * Gather(table [rows, H], ids) on axis 0 with i32/i64 ids: an embedding lookup;
//   * a constant broadcasting to [B, S, H] that does not vary over the batch: what constant
//     folding leaves of a lookup with constant ids (static shapes fold BERT's sliced
//     position ids and RoBERTa's buffered zero token types this way).
// Roles: the word lookup reads a graph input (the largest such table); the position slot
// takes a constant that varies along the sequence (as a [S, H] table read at 0..S-1, ids
// omitted), else the lookup whose ids are provably 0..S-1 (ids omitted), else the lookup
// with computed ids (RoBERTa's CumSum positions stay a computation feeding position_ids),
// else the larger table; the remaining lookup is the token type. Constants equal on every
// row are added into the smallest constant table other than the word table (exact: every
// position reads exactly one row of it).
// Position ids are "provably 0..S-1" for a constant holding 0..S-1 per row, and for
// Range(0, n, 1) or a Slice [0:n] on the last axis of a constant arange, seen through
// Unsqueeze(axes=[0]) and Expand, whose length equals input_ids' sequence dim (the same
// known size or symbol).
// Limits: at most three lookups; no fp16 mixing (tables, constants and LayerNorm share one
// dtype); a constant that varies along the sequence needs a known sequence length; a
// constant addend without a constant table to absorb it (and no position constant) is a
// miss. Near-misses (a candidate with an embedding lookup that cannot be fused) are
// reported with their reason; a residual stream that merely descends from the embedding
// sum (a foreign addend, every lookup below an Add read elsewhere) is not a candidate.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kiln/support/status.h"
#include "passes/fusion_rule.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace kiln {
namespace {

using rewrite::ConstantOf;
using rewrite::IsOp;
using rewrite::ProducerIs;

constexpr int kMaxAddDepth = 8;
constexpr const char* kKind = "embed_layernorm";

bool DimEq(const Dim& a, const Dim& b) { return !a.is_unknown() && a == b; }
// Not provably different: equal, or either unknown.
bool DimCompatible(const Dim& a, const Dim& b) {
  return a.is_unknown() || b.is_unknown() || a == b;
}

std::string Label(Value v) {
  if (!v.name().empty()) return absl::StrCat("'", v.name(), "' (", v.node->op(), ")");
  return v.node->Describe();
}

// An embedding lookup: Gather(table, ids) on axis 0, table rank 2, ids integer.
struct Lookup {
  Node* gather = nullptr;
  Value table, ids;
  int64_t rows() const {
    const Type& t = table.type();
    return t.rank() == 2 && (*t.shape)[0].is_known() ? (*t.shape)[0].value() : 0;
  }
};

std::optional<Lookup> AsLookup(Value v) {
  Node* g = ProducerIs(v, "Gather");
  if (g == nullptr || g->num_inputs() != 2 || g->attr_int_or("axis", 0) != 0) return std::nullopt;
  const Value table = g->input(0), ids = g->input(1);
  if (!table || !ids || table.type().rank() != 2) return std::nullopt;
  const DType it = ids.type().dtype;
  if (it != DType::kI64 && it != DType::kI32) return std::nullopt;
  return Lookup{g, table, ids};
}

// The embedding sum: leaves of the Add tree under the LayerNorm input(s).
struct Candidate {
  Node* root = nullptr;
  std::vector<Node*> adds;
  std::vector<Value> leaves;
  std::vector<bool> shared;  // per leaf: reached through an inner Add read elsewhere too
  Value gamma, beta;
  float epsilon = 1e-12f;
};

void Flatten(const Graph& g, Value v, int depth, bool shared, Candidate* c) {
  Node* add = ProducerIs(v, "Add");
  if (add != nullptr && depth < kMaxAddDepth && add->num_inputs() == 2 &&
      IsFloat(add->output_info(0).type.dtype)) {
    c->adds.push_back(add);
    shared = shared || (depth > 0 && !rewrite::HasSingleUse(g, v));
    Flatten(g, add->input(0), depth + 1, shared, c);
    Flatten(g, add->input(1), depth + 1, shared, c);
    return;
  }
  c->leaves.push_back(v);
  c->shared.push_back(shared);
}

// A sum with an addend that is neither a lookup nor a constant, whose lookups all sit
// below an Add read elsewhere too, is a residual stream (GPT-2's pre-LN layers add each
// block's output to the embedding sum), not an embedding block: no report.
bool IsResidualStream(const Candidate& c) {
  bool foreign = false, own_lookup = false;
  for (size_t i = 0; i < c.leaves.size(); ++i) {
    const bool lookup = AsLookup(c.leaves[i]).has_value();
    if (!lookup && !ConstantOf(c.leaves[i])) foreign = true;
    if (lookup && !c.shared[i]) own_lookup = true;
  }
  return foreign && !own_lookup;
}

// Reads the root into a Candidate when it looks like an embedding LayerNorm: at least two
// addends, one of them a lookup. nullopt means "not this pattern" (no report); a string
// in `reason` means a recognizable candidate that cannot be fused.
std::optional<Candidate> FindCandidate(const Graph& g, Node* n, std::string* reason) {
  Candidate c;
  c.root = n;
  const bool is_ln = IsOp(n, "LayerNormalization");
  const bool is_skip = n->domain() == "kiln" && n->op() == "SkipLayerNorm";
  if (!is_ln && !is_skip) return std::nullopt;
  if (n->num_inputs() < 2 || !n->input(0) || !n->input(1)) return std::nullopt;
  if (is_ln) {
    Flatten(g, n->input(0), 0, false, &c);
    c.gamma = n->input(1);
    c.beta = n->num_inputs() > 2 ? n->input(2) : Value{};
    c.epsilon = n->attr_float_or("epsilon", 1e-5f);
  } else {
    // Its inputs are the operands of the (fused) sum Add, one level down: an input read
    // elsewhere too is shared (GPT-2's layer-0 residual onto the embedding sum).
    Flatten(g, n->input(0), 1, false, &c);
    Flatten(g, n->input(1), 1, false, &c);
    if (n->num_inputs() < 3 || !n->input(2)) return std::nullopt;
    c.gamma = n->input(2);
    c.beta = n->num_inputs() > 3 ? n->input(3) : Value{};
    if (n->num_inputs() > 4 && n->input(4)) c.leaves.push_back(n->input(4));  // bias
    c.epsilon = n->attr_float_or("epsilon", 1e-5f);
  }
  if (c.leaves.size() < 2 ||
      std::none_of(c.leaves.begin(), c.leaves.end(),
                   [](Value v) { return AsLookup(v).has_value(); }) ||
      IsResidualStream(c))
    return std::nullopt;
  // From here on it is recognizably an embedding block.
  const Type& out = n->output_info(0).type;
  if (is_ln) {
    const int64_t axis = n->attr_int_or("axis", -1);
    if (!(axis == -1 || (out.has_rank() && axis == out.rank() - 1))) {
      *reason = absl::StrCat("LayerNormalization normalizes from axis ", axis,
                             ", not over the last axis only");
      return c;
    }
  }
  for (int i = 1; i < n->num_outputs() && is_ln; ++i) {
    if (!n->output_info(i).uses.empty() || rewrite::IsGraphOutput(g, n->output(i))) {
      *reason = absl::StrCat(n->Describe(), " output ", i,
                             " (mean or inv std dev) is read elsewhere; kiln.EmbedLayerNorm "
                             "does not expose it");
      return c;
    }
  }
  return c;
}

// Constant addends reduced to: P, a [S, H] table read at 0..S-1; r, one [H] row.
struct ConstTerms {
  std::vector<double> p;  // S*H, empty when absent
  std::vector<double> r;  // H, empty when absent
  std::vector<const Node*> nodes;
};

// Adds constant `t` (broadcasting to [B, S, H]) into `terms`. `seq` is S when known.
std::string AddConstant(const Tensor& t, int64_t h, std::optional<int64_t> seq, ConstTerms* terms) {
  if (t.rank() > 3) return absl::StrCat("a constant addend has rank ", t.rank());
  std::vector<int64_t> d(3 - t.rank(), 1);
  d.insert(d.end(), t.dims().begin(), t.dims().end());
  if (d[2] != h && d[2] != 1)
    return absl::StrCat("a constant addend has shape [", absl::StrJoin(t.dims(), ","),
                        "], which does not broadcast to hidden size ", h);
  const int64_t nb = d[0], ns = d[1], nh = d[2];
  auto at = [&](int64_t b, int64_t s, int64_t j) {
    return t.GetAsDouble((b * ns + s) * nh + (nh == 1 ? 0 : j));
  };
  for (int64_t b = 1; b < nb; ++b)
    for (int64_t s = 0; s < ns; ++s)
      for (int64_t j = 0; j < h; ++j)
        if (at(b, s, j) != at(0, s, j))
          return absl::StrCat("a constant addend of shape [", absl::StrJoin(t.dims(), ","),
                              "] varies over the batch");
  bool rows_equal = true;
  for (int64_t s = 1; s < ns && rows_equal; ++s)
    for (int64_t j = 0; j < h && rows_equal; ++j) rows_equal = at(0, s, j) == at(0, 0, j);
  if (rows_equal) {
    if (terms->r.empty()) terms->r.assign(h, 0.0);
    for (int64_t j = 0; j < h; ++j) terms->r[j] += at(0, 0, j);
    return "";
  }
  if (!seq || *seq != ns)
    return absl::StrCat("a constant addend varies along a sequence of ", ns,
                        " but the sequence length is ",
                        seq ? absl::StrCat(*seq) : std::string("not known (use --shape)"));
  if (terms->p.empty()) terms->p.assign(ns * h, 0.0);
  for (int64_t s = 0; s < ns; ++s)
    for (int64_t j = 0; j < h; ++j) terms->p[s * h + j] += at(0, s, j);
  return "";
}

// True when the constant `t` holds 0..S-1 along its last axis on every row.
bool IsRangeTensor(const Tensor& t, int64_t len) {
  if (t.rank() < 1 || t.dims().back() != len || !IsInteger(t.dtype())) return false;
  for (int64_t i = 0; i < t.NumElements(); ++i)
    if (t.GetAsInt64(i) != i % len) return false;
  return true;
}

// `v` (a scalar or [1] integer) provably equals S = `seq`: a constant, or
// Gather(Shape(x), k) of a value whose dim k is `seq`, through Unsqueeze/Squeeze/Reshape.
bool IsSeqLength(Value v, const Dim& seq) {
  for (int depth = 0; depth < 6 && v; ++depth) {
    if (const Tensor* t = ConstantOf(v))
      return seq.is_known() && t->NumElements() == 1 && t->GetAsInt64(0) == seq.value();
    Node* n = v.node;
    if (IsOp(n, "Unsqueeze") || IsOp(n, "Squeeze") || IsOp(n, "Reshape")) {
      v = n->input(0);
      continue;
    }
    Node* shape = IsOp(n, "Gather") ? ProducerIs(n->input(0), "Shape") : nullptr;
    const Tensor* k = shape ? ConstantOf(n->input(1)) : nullptr;
    if (k == nullptr || k->NumElements() != 1 || shape->has_attr("start") || shape->has_attr("end"))
      return false;
    const Type& xt = shape->input(0).type();
    const int64_t axis = k->GetAsInt64(0) < 0 ? k->GetAsInt64(0) + xt.rank() : k->GetAsInt64(0);
    return xt.has_rank() && axis >= 0 && axis < xt.rank() && DimEq((*xt.shape)[axis], seq);
  }
  return false;
}

// `v` provably holds 0..S-1 along its last axis (rows broadcast), S = `seq`.
bool IsPositionRange(Value v, const Dim& seq) {
  for (int depth = 0; depth < 8 && v; ++depth) {
    if (const Tensor* t = ConstantOf(v)) return seq.is_known() && IsRangeTensor(*t, seq.value());
    Node* n = v.node;
    if (IsOp(n, "Expand")) {
      v = n->input(0);
      continue;
    }
    if (IsOp(n, "Unsqueeze")) {
      const auto axes = n->num_inputs() > 1 ? rewrite::IntConstant(n->input(1)) : std::nullopt;
      if (!axes || *axes != std::vector<int64_t>{0}) return false;
      v = n->input(0);
      continue;
    }
    const Type& out = n->output_info(v.index).type;
    const bool len_typed = out.has_rank() && out.rank() >= 1 && DimEq(out.shape->back(), seq);
    if (IsOp(n, "Range") && n->num_inputs() == 3) {
      return (len_typed || IsSeqLength(n->input(1), seq)) &&
             rewrite::ScalarConstant(n->input(0)) == 0.0 &&
             rewrite::ScalarConstant(n->input(2)) == 1.0;
    }
    if (IsOp(n, "Slice") && n->num_inputs() >= 3) {
      const Tensor* data = ConstantOf(n->input(0));
      if (data == nullptr || !IsRangeTensor(*data, data->rank() ? data->dims().back() : 0))
        return false;
      const auto starts = rewrite::IntConstant(n->input(1));
      const auto axes = n->num_inputs() > 3 && n->input(3) ? rewrite::IntConstant(n->input(3))
                                                           : std::optional<std::vector<int64_t>>();
      const auto steps = n->num_inputs() > 4 && n->input(4) ? rewrite::IntConstant(n->input(4))
                                                            : std::optional<std::vector<int64_t>>();
      const int64_t last = data->rank() - 1;
      const bool axes_ok =
          (n->num_inputs() <= 3 || !n->input(3))
              ? data->rank() == 1
              : axes && axes->size() == 1 && ((*axes)[0] == last || (*axes)[0] == -1);
      const bool steps_ok =
          (n->num_inputs() <= 4 || !n->input(4)) || (steps && *steps == std::vector<int64_t>{1});
      // [0:S] of a 0..M-1 arange with M >= 2 (M = 1 would broadcast, not fail, if S > M).
      const bool len_ok = len_typed || (IsSeqLength(n->input(2), seq) && data->dims().back() >= 2 &&
                                        (!seq.is_known() || data->dims().back() >= seq.value()));
      return len_ok && starts && *starts == std::vector<int64_t>{0} && axes_ok && steps_ok;
    }
    return false;
  }
  return false;
}

// The matched, role-assigned block, ready to rewrite.
struct Plan {
  Candidate c;
  Lookup word;
  std::optional<Lookup> pos, seg;
  bool pos_implicit = false;
  std::optional<Tensor> pos_table;  // replaces pos->table (or is the table when !pos)
  std::optional<Tensor> seg_table;  // replaces seg->table
  std::vector<const Node*> nodes;   // everything the fused node replaces
  std::vector<Node*> shape_users;   // Shape(lookup) nodes, answered from the ids
  Value sum;                        // the embedding sum read elsewhere: becomes output Sum
};

Tensor FromDoubles(DType dt, std::vector<int64_t> dims, const std::vector<double>& v) {
  Tensor t(dt, std::move(dims));
  for (int64_t i = 0; i < t.NumElements(); ++i) t.SetFromDouble(i, v[i]);
  return t;
}

// Table `base` ([rows, H], constant) plus row `r` on every row.
Tensor AddRow(const Tensor& base, const std::vector<double>& r) {
  const int64_t h = base.dims()[1];
  std::vector<double> v(static_cast<size_t>(base.NumElements()));
  for (int64_t i = 0; i < base.NumElements(); ++i) v[i] = base.GetAsDouble(i) + r[i % h];
  return FromDoubles(base.dtype(), base.dims(), v);
}

// Matches a candidate; returns the plan or the reason it cannot be fused.
absl::StatusOr<Plan> MatchPlan(const Graph& g, Candidate c) {
  Plan p;
  const Type& out = c.root->output_info(0).type;
  const DType dt = out.dtype;
  std::vector<Lookup> lookups;
  std::vector<const Node*> interior{c.root};
  interior.insert(interior.end(), c.adds.begin(), c.adds.end());
  for (Value v : c.leaves) {
    if (auto l = AsLookup(v))
      lookups.push_back(*l);
    else if (!ConstantOf(v))
      return absl::NotFoundError(absl::StrCat(
          "addend ", Label(v),
          " is neither an embedding Gather on axis 0 with integer ids nor a constant"));
  }
  for (const Lookup& l : lookups) interior.push_back(l.gather);
  // Shape() of a lookup (DistilBERT reads the sequence length from the word embeddings)
  // is answered from its ids instead: Shape(table[ids]) == Concat(Shape(ids), [H]).
  for (const Lookup& l : lookups) {
    if (rewrite::IsGraphOutput(g, l.gather->output(0))) continue;
    for (const Use& u : l.gather->output_info(0).uses) {
      const bool in_pattern = std::find(interior.begin(), interior.end(), u.user) != interior.end();
      if (!in_pattern && IsOp(u.user, "Shape") && !u.user->has_attr("start") &&
          !u.user->has_attr("end") && l.table.type().rank() == 2 &&
          (*l.table.type().shape)[1].is_known() &&
          std::find(p.shape_users.begin(), p.shape_users.end(), u.user) == p.shape_users.end())
        p.shape_users.push_back(u.user);
    }
  }
  std::vector<const Node*> allowed = interior;
  allowed.insert(allowed.end(), p.shape_users.begin(), p.shape_users.end());
  // The sum itself (what the LayerNorm reads; a SkipLayerNorm root's Sum output) may be
  // read elsewhere: GPT-2's embedding sum is also the first residual. It becomes Sum.
  Node* top = ProducerIs(c.root->input(0), "Add");
  const bool is_skip = !IsOp(c.root, "LayerNormalization");
  if (is_skip && c.root->num_outputs() > 1 &&
      (!c.root->output_info(1).uses.empty() || rewrite::IsGraphOutput(g, c.root->output(1))))
    p.sum = c.root->output(1);
  for (const Node* a : interior) {
    if (a == c.root) continue;
    if (!is_skip && a == top && !rewrite::UsedOnlyBy(g, a, allowed)) {
      p.sum = top->output(0);
      continue;
    }
    if (!rewrite::UsedOnlyBy(g, a, allowed))
      return absl::NotFoundError(absl::StrCat("interior value ",
                                              Label(Value{const_cast<Node*>(a), 0}),
                                              " is also read outside the embedding sum"));
  }
  if (lookups.size() > 3)
    return absl::NotFoundError(
        absl::StrCat(lookups.size(), " embedding lookups; kiln.EmbedLayerNorm takes at most 3"));
  // Word: reads a graph input; the largest such table.
  auto word_it =
      std::max_element(lookups.begin(), lookups.end(), [](const Lookup& a, const Lookup& b) {
        const bool ai = a.ids.node->is_input(), bi = b.ids.node->is_input();
        return ai != bi ? bi : a.rows() < b.rows();
      });
  p.word = *word_it;
  lookups.erase(word_it);
  const Type& ids_t = p.word.ids.type();
  if (ids_t.rank() != 2)
    return absl::NotFoundError(absl::StrCat("word ids ", Label(p.word.ids), " have type ",
                                            ids_t.ToString(),
                                            "; kiln.EmbedLayerNorm needs [B, S]"));
  const Dim seq = (*ids_t.shape)[1];
  const Type& wt = p.word.table.type();
  const Dim hdim = (*wt.shape)[1];
  if (!hdim.is_known() || wt.dtype != dt || !IsFloat(dt))
    return absl::NotFoundError(absl::StrCat("word table ", Label(p.word.table), " has type ",
                                            wt.ToString(), " for a LayerNorm output of ",
                                            out.ToString()));
  const int64_t h = hdim.value();
  for (const Lookup& l : lookups) {
    const Type& t = l.table.type();
    if (t.dtype != dt || !DimEq((*t.shape)[1], hdim))
      return absl::NotFoundError(absl::StrCat("table ", Label(l.table), " has type ", t.ToString(),
                                              ", not [rows, ", h, "] of ",
                                              std::string(DTypeName(dt))));
    if (l.ids.type().rank() > 2 || l.ids.type().rank() < 1)
      return absl::NotFoundError(absl::StrCat("ids ", Label(l.ids), " have type ",
                                              l.ids.type().ToString(),
                                              "; kiln.EmbedLayerNorm needs [B, S] or [1, S]"));
  }
  for (Value v : {c.gamma, c.beta}) {
    if (v && (v.type().rank() != 1 || !DimEq((*v.type().shape)[0], hdim) || v.type().dtype != dt))
      return absl::NotFoundError(absl::StrCat("LayerNorm scale/bias ", Label(v), " has type ",
                                              v.type().ToString(), ", not [", h, "]"));
  }
  ConstTerms consts;
  const std::optional<int64_t> seq_len =
      seq.is_known() ? std::optional<int64_t>(seq.value()) : std::nullopt;
  for (Value v : c.leaves) {
    const Tensor* t = ConstantOf(v);
    if (t == nullptr) continue;
    if (t->dtype() != dt)
      return absl::NotFoundError(absl::StrCat("constant addend ", Label(v), " is ",
                                              std::string(DTypeName(t->dtype())),
                                              ", the embeddings are ", std::string(DTypeName(dt))));
    std::string why = AddConstant(*t, h, seq_len, &consts);
    if (!why.empty()) return absl::NotFoundError(why);
    consts.nodes.push_back(v.node);
  }
  auto seg_ok = [&](const Lookup& l) {
    const Type& t = l.ids.type();
    return t.rank() == 2 && DimCompatible((*t.shape)[0], (*ids_t.shape)[0]) &&
           DimCompatible((*t.shape)[1], seq);
  };
  if (!consts.p.empty()) {
    if (lookups.size() > 1)
      return absl::NotFoundError(
          "a position constant plus three embedding lookups; "
          "kiln.EmbedLayerNorm takes three terms");
    if (!consts.r.empty())
      for (size_t i = 0; i < consts.p.size(); ++i) consts.p[i] += consts.r[i % h];
    p.pos_implicit = true;
    p.pos_table = FromDoubles(dt, {*seq_len, h}, consts.p);
    if (!lookups.empty()) p.seg = lookups[0];
  } else {
    if (lookups.empty())
      return absl::NotFoundError("no position term: only the word lookup and row constants");
    // Position: provable range, else computed ids (or the one that cannot be a token type),
    // else the larger table.
    auto score = [&](const Lookup& l) {
      return std::make_tuple(IsPositionRange(l.ids, seq), !seg_ok(l), !l.ids.node->is_input(),
                             l.rows());
    };
    auto pos_it =
        std::max_element(lookups.begin(), lookups.end(),
                         [&](const Lookup& a, const Lookup& b) { return score(a) < score(b); });
    p.pos = *pos_it;
    lookups.erase(pos_it);
    if (!lookups.empty()) p.seg = lookups[0];
    p.pos_implicit = IsPositionRange(p.pos->ids, seq);
    if (!consts.r.empty()) {
      // Add the row into the smallest constant non-word table.
      std::optional<Lookup>* target = nullptr;
      for (std::optional<Lookup>* cand : {&p.pos, &p.seg})
        if (*cand && ConstantOf((*cand)->table) &&
            (target == nullptr || (*cand)->rows() < (**target).rows()))
          target = cand;
      if (target == nullptr)
        return absl::NotFoundError(
            "a constant addend has no constant position or token-type "
            "table to be folded into");
      Tensor folded = AddRow(*ConstantOf((**target).table), consts.r);
      (target == &p.pos ? p.pos_table : p.seg_table) = folded;
    }
  }
  if (p.seg && !seg_ok(*p.seg))
    return absl::NotFoundError(absl::StrCat("token-type ids ", Label(p.seg->ids), " have type ",
                                            p.seg->ids.type().ToString(), ", not input_ids' ",
                                            ids_t.ToString()));
  p.nodes = interior;
  p.nodes.insert(p.nodes.end(), consts.nodes.begin(), consts.nodes.end());
  p.c = std::move(c);
  return p;
}

Value InsertConstant(Graph& g, Node* before, const Tensor& t, const std::string& name) {
  Node* k = g.InsertNodeBefore(before, "Constant", {}, 1);
  k->set_attr("value", t);
  k->set_output_type(0, Type::Of(t));
  k->set_output_name(0, name);
  return k->output(0);
}

void RewritePlan(Graph& g, const Plan& p) {
  Node* root = p.c.root;
  const std::string base = root->output_info(0).name;
  Value pos_table = p.pos ? p.pos->table : Value{};
  if (p.pos_table) pos_table = InsertConstant(g, root, *p.pos_table, base + "/position_table");
  Value seg_table = p.seg ? p.seg->table : Value{};
  if (p.seg_table) seg_table = InsertConstant(g, root, *p.seg_table, base + "/token_type_table");
  Value beta = p.c.beta;
  if (!beta) {
    const int64_t h = (*p.word.table.type().shape)[1].value();
    Tensor zeros(p.word.table.type().dtype, {h});
    beta = InsertConstant(g, root, zeros, base + "/beta");
  }
  for (Node* shape : p.shape_users) {
    const Value ids = shape->input(0).node->input(1);
    const int64_t h = (*shape->input(0).node->input(0).type().shape)[1].value();
    Node* ids_shape = g.InsertNodeBefore(shape, "Shape", {ids}, 1);
    ids_shape->set_output_type(0, Type::Static(DType::kI64, {ids.type().rank()}));
    ids_shape->set_provenance(shape->provenance());
    Value hv = InsertConstant(g, shape, Tensor::FromI64({1}, {h}), base + "/hidden_size");
    Node* cat = g.InsertNodeBefore(shape, "Concat", {ids_shape->output(0), hv}, 1);
    cat->set_attr("axis", int64_t{0});
    cat->set_output_type(0, shape->output_info(0).type);
    cat->set_output_name(0, shape->output_info(0).name);
    cat->set_provenance(shape->provenance());
    g.ReplaceAllUsesWith(shape->output(0), cat->output(0));
  }
  Value pos_ids = p.pos && !p.pos_implicit ? p.pos->ids : Value{};
  Node* fused = g.InsertNodeBefore(root, "EmbedLayerNorm",
                                   {p.word.ids, p.seg ? p.seg->ids : Value{}, pos_ids, p.word.table,
                                    pos_table, seg_table, p.c.gamma, beta},
                                   p.sum ? 2 : 1, "kiln");
  fused->set_attr("epsilon", p.c.epsilon);
  fused->set_output_type(0, root->output_info(0).type);
  fused->set_output_name(0, base);
  fused->set_provenance({});
  rewrite::UnionProvenance(fused, p.nodes);
  g.ReplaceAllUsesWith(root->output(0), fused->output(0));
  if (p.sum) {
    fused->set_output_type(1, p.sum.type());
    fused->set_output_name(1, p.sum.name());
    g.ReplaceAllUsesWith(p.sum, fused->output(1));
  }
}

// A recognized embedding block and, once checked, how to fuse it.
struct EmbedMatch {
  Candidate c;
  std::string reason;  // FindCandidate's near-miss reason
  std::optional<Plan> plan;
};

class EmbedRule final : public fusion::FusionRule<EmbedMatch> {
 public:
  bool IsRoot(const Node& n) const override {
    return IsOp(&n, "LayerNormalization") || (n.domain() == "kiln" && n.op() == "SkipLayerNorm");
  }

  std::optional<EmbedMatch> Recognize(const Graph& g, Node* n, fusion::FusionSession&) override {
    EmbedMatch m;
    std::optional<Candidate> c = FindCandidate(g, n, &m.reason);
    if (!c) return std::nullopt;
    m.c = *std::move(c);
    return m;
  }

  std::string Check(const Graph& g, EmbedMatch& m, fusion::FusionSession&) override {
    if (!m.reason.empty()) return m.reason;
    absl::StatusOr<Plan> plan = MatchPlan(g, m.c);
    if (!plan.ok()) return std::string(plan.status().message());
    m.plan = *std::move(plan);
    return "";
  }

  absl::Status Rewrite(Graph& g, EmbedMatch& m, fusion::FusionSession& s) override {
    const Plan& p = *m.plan;
    RewritePlan(g, p);
    s.Count("fused EmbedLayerNorm");
    if (p.sum) {
      s.Count("with sum output");
      s.NeedTopoSort();  // a reader of the sum may come before the root
    }
    if (p.pos_implicit) s.Count("implicit position ids");
    // The root, the sum's Adds (the Sum output took the top one's readers, the root's
    // own read included) and the Shape() readers answered from the ids.
    std::vector<Node*> replaced = {p.c.root};
    replaced.insert(replaced.end(), p.c.adds.begin(), p.c.adds.end());
    replaced.insert(replaced.end(), p.shape_users.begin(), p.shape_users.end());
    s.RemoveIfDead(g, replaced);
    return absl::OkStatus();
  }

  std::string_view Kind(const EmbedMatch&) const override { return kKind; }
  // The root, the sum's Adds and the table lookups among the addends.
  std::vector<const Node*> Involved(const EmbedMatch& m) const override {
    std::vector<const Node*> involved(m.c.adds.begin(), m.c.adds.end());
    involved.push_back(m.c.root);
    for (Value v : m.c.leaves)
      if (auto l = AsLookup(v)) involved.push_back(l->gather);
    return involved;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateFuseEmbedLayerNormPass() {
  return std::make_unique<fusion::RulePass<EmbedRule>>(
      "fuse-embed-layernorm",
      "word/position/token-type embedding lookups + LayerNorm -> kiln.EmbedLayerNorm");
}

}  // namespace kiln
