// KV-cache signature detection and the decode rewrite (generation.h).
#include "compiler/generation.h"

#include <algorithm>
#include <limits>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"

#include "absl/strings/str_cat.h"
#include "kiln/ir/ops.h"
#include "kiln/support/status.h"
#include "passes/rewrite_util.h"

namespace kiln::compiler {
namespace {

int InputIndex(const Graph& g, const std::string& name) {
  for (size_t i = 0; i < g.inputs().size(); ++i)
    if (g.inputs()[i]->output_info(0).name == name) return static_cast<int>(i);
  return -1;
}

// The Concat's axis normalized against rank 4, or -1.
int64_t ConcatAxis(const Node& n) {
  const int64_t axis = n.attr_int_or("axis", 0);
  return axis < 0 ? axis + 4 : axis;
}

const Dim* DimAt(const Node& input, int d) {
  const Type& t = input.output_info(0).type;
  if (!t.has_rank() || t.rank() <= d) return nullptr;
  return &(*t.shape)[d];
}

// How a graph output appends this step's rows to a past input (null: it does not):
// Concat(past, new) on axis 2 (torch.onnx / optimum; the rows' cache slots are the
// position_ids input), or TensorScatter(Pad(past), new, rows){axis 2, linear} (the
// com.microsoft GroupQueryAttention expansion: batch row b's new rows from slot rows[b]).
struct Append {
  Node* node = nullptr;  // the Concat or the TensorScatter
  Node* pad = nullptr;   // the TensorScatter's Pad
  const Node* past = nullptr;
};

Append AppendOf(Value v) {
  Append a;
  Node* n = v.node;
  if (n == nullptr || !n->domain().empty() || n->num_inputs() < 2 || !n->input(0)) return a;
  if (n->op() == "Concat" && n->num_inputs() == 2 && ConcatAxis(*n) == 2) {
    a.past = n->input(0).node;
  } else if (n->op() == "TensorScatter" && n->num_inputs() == 3 && n->input(2) &&
             (n->attr_int_or("axis", -2) == 2 || n->attr_int_or("axis", -2) == -2) &&
             (n->attr_string("mode") == nullptr || *n->attr_string("mode") == "linear")) {
    Node* pad = n->input(0).node;
    if (pad->op() != "Pad" || !pad->domain().empty() || !pad->input(0)) return a;
    a.pad = pad;
    a.past = pad->input(0).node;
  } else {
    return a;
  }
  if (!a.past->is_input()) return Append{};
  a.node = n;
  return a;
}

}  // namespace

absl::StatusOr<KvSignature> FindKvSignature(const Graph& g) {
  KvSignature sig;
  sig.input_ids = InputIndex(g, "input_ids");
  sig.attention_mask = InputIndex(g, "attention_mask");
  sig.position_ids = InputIndex(g, "position_ids");
  for (const auto& [index, name] :
       {std::pair{sig.input_ids, "input_ids"}, std::pair{sig.attention_mask, "attention_mask"}})
    if (index < 0)
      return absl::InvalidArgumentError(absl::StrCat(
          "--decode-context needs a KV-cache decoder with inputs input_ids, attention_mask and "
          "(unless its caches are GroupQueryAttention's) position_ids (optimum's names); this "
          "model has no input '",
          name, "'"));
  bool concats = false;  // a cache appended by Concat: its slots are position_ids
  for (size_t o = 0; o < g.outputs().size(); ++o) {
    const Append append = AppendOf(g.outputs()[o].value);
    if (append.node == nullptr) continue;
    const Node& past = *append.past;
    const Dim* p = DimAt(past, 2);
    if (past.output_info(0).type.rank() != 4 || !p->is_symbol()) continue;
    concats |= append.pad == nullptr;
    if (!sig.past.empty() && sig.past != p->symbol())
      return absl::InvalidArgumentError(
          absl::StrCat("--decode-context: past input '", past.output_info(0).name,
                       "' has past length '", p->symbol(), "', the others '", sig.past, "'"));
    sig.past = p->symbol();
    const int in = InputIndex(g, past.output_info(0).name);
    sig.caches.push_back({in, static_cast<int32_t>(o)});
  }
  if (sig.caches.empty())
    return absl::InvalidArgumentError(
        "--decode-context needs a KV-cache decoder: no graph output is a past input "
        "concatenated with this step's keys or values on axis 2 (present.* = Concat(past.*, "
        "new), as torch.onnx and optimum export with use_cache=True) or written into it "
        "(com.microsoft GroupQueryAttention's present)");
  if (concats) {
    if (sig.position_ids < 0)
      return absl::InvalidArgumentError(
          "--decode-context: the model appends to its cache with Concat, so it needs an input "
          "position_ids (the cache slot of each new token); it has none");
    const Type& positions = g.inputs()[sig.position_ids]->output_info(0).type;
    if (positions.dtype != DType::kI64 || positions.rank() != 2)
      return absl::InvalidArgumentError(
          absl::StrCat("--decode-context: position_ids must be int64 [batch, sequence], got ",
                       positions.ToString()));
  }
  const Node& ids = *g.inputs()[sig.input_ids];
  const Dim* b = DimAt(ids, 0);
  const Dim* s = DimAt(ids, 1);
  if (ids.output_info(0).type.rank() != 2 || !s->is_symbol())
    return absl::InvalidArgumentError(absl::StrCat(
        "--decode-context: input_ids must be [batch, sequence] with a symbolic sequence (the "
        "prompt lengths: give them with --profile sequence=..., not --shape), got ",
        ids.output_info(0).type.ToString()));
  sig.batch = b->is_symbol() ? b->symbol() : "";  // a fixed batch (--shape batch=N) is fine
  sig.sequence = s->symbol();
  if (sig.past == sig.batch || sig.past == sig.sequence)
    return absl::InvalidArgumentError(
        absl::StrCat("--decode-context: the past length symbol '", sig.past,
                     "' is also a dim of input_ids; it must be a symbol of its own"));
  const Dim* t = DimAt(*g.inputs()[sig.attention_mask], 1);
  if (g.inputs()[sig.attention_mask]->output_info(0).type.rank() != 2 || t == nullptr)
    return absl::InvalidArgumentError(
        absl::StrCat("--decode-context: attention_mask must be [batch, past + sequence], got ",
                     g.inputs()[sig.attention_mask]->output_info(0).type.ToString()));
  if (t->is_symbol() && t->symbol() != sig.past && t->symbol() != sig.sequence &&
      t->symbol() != sig.batch)
    sig.total = t->symbol();
  return sig;
}

absl::StatusOr<KvPaging> ChooseKvPaging(const std::vector<int64_t>& capacities, int64_t max_batch,
                                        int64_t block_size, int64_t blocks) {
  if (capacities.empty() || max_batch <= 0)
    return KILN_INTERNAL("paging without capacities or batch");
  const int64_t largest = *std::max_element(capacities.begin(), capacities.end());
  if (block_size < 0 || blocks < 0)
    return absl::InvalidArgumentError("--kv-block-size and --kv-cache-blocks must be positive");
  if (block_size == 0) {
    // 128: in bench/attention_bench.cc (BM_CacheAttentionPaged) blocks of 16 made a decode
    // step's attention 1.04-1.45x the contiguous cache's at 512-4096 keys, 128 0.83-1.10x
    // (one dot-product call per block run); the granularity is a few KiB per block.
    block_size = 128;
    for (int64_t c : capacities)
      while (c % block_size != 0) block_size /= 2;
  }
  for (int64_t c : capacities)
    if (c % block_size != 0)
      return absl::InvalidArgumentError(absl::StrCat("--kv-block-size ", block_size,
                                                     " does not divide the decode capacity ", c,
                                                     " (capacities must be whole blocks)"));
  const int64_t per_sequence = largest / block_size;
  if (blocks == 0) {
    if (MulOverflows(max_batch, per_sequence, &blocks) ||
        blocks == std::numeric_limits<int64_t>::max())
      return absl::InvalidArgumentError("the default cache pool size overflows");
    ++blocks;
  }
  if (blocks < per_sequence + 1)
    return absl::InvalidArgumentError(absl::StrCat(
        "--kv-cache-blocks ", blocks, ": one sequence at the largest capacity (", largest,
        " slots) needs ", per_sequence, " blocks of ", block_size, ", plus the scratch block"));
  return KvPaging{block_size, blocks};
}

absl::StatusOr<PlanSignature> DecodeSignature(const Plan& plan, const KvSignature& kv,
                                              const KvPaging& paging) {
  PlanSignature sig;
  sig.program = PlanProgram::kDecode;
  sig.inputs = plan.inputs;
  sig.outputs = plan.outputs;
  for (const PlanInPlace& pair : kv.caches) {
    PlanTensorSig& past = sig.inputs[pair.input];
    if (past.dims.size() != 4 || !past.dims[1].is_known() || !past.dims[3].is_known())
      return absl::InvalidArgumentError(
          absl::StrCat("--decode-context: cache input '", past.name,
                       "' needs known heads and head size to be paged, got [",
                       past.dims[0].ToString(), ", ", past.dims[1].ToString(), ", ",
                       past.dims[2].ToString(), ", ", past.dims[3].ToString(), "]"));
    past.dims = {Dim::Known(paging.blocks), past.dims[1], Dim::Known(paging.block_size),
                 past.dims[3]};
    sig.outputs[pair.output].dims = past.dims;
  }
  sig.inputs.push_back({kBlockTableInput,
                        DType::kI64,
                        {plan.inputs[kv.input_ids].dims[0], Dim::Symbol(kBlocksSymbol)}});
  for (const std::string& s : plan.paddable_symbols)
    if (s == kv.batch) sig.paddable_symbols.push_back(s);
  return sig;
}

absl::Status RewriteForDecode(Graph& g, const KvSignature& sig, int64_t capacity,
                              const KvPaging& paging) {
  const Value positions = sig.position_ids >= 0 ? g.inputs()[sig.position_ids]->output(0) : Value();
  if (InputIndex(g, kBlockTableInput) >= 0)
    return absl::InvalidArgumentError(
        absl::StrCat("decode program: the model has an input named '", kBlockTableInput,
                     "', the name kiln gives the cache's block table"));
  const Type& ids = g.inputs()[sig.input_ids]->output_info(0).type;
  if (!ids.is_static() || capacity % paging.block_size != 0)
    return KILN_INTERNAL("decode program: input_ids %s, capacity %d, block size %d", ids.ToString(),
                         capacity, paging.block_size);
  const Value table =
      g.AddInput(kBlockTableInput,
                 Type::Static(DType::kI64, {(*ids.shape)[0].value(), capacity / paging.block_size}))
          ->output(0);
  for (const PlanInPlace& pair : sig.caches) {
    Node* past = g.inputs()[pair.input];
    const std::string& name = past->output_info(0).name;
    const Value out = g.outputs()[pair.output].value;
    const Append append = AppendOf(out);
    Node* concat = append.node;  // the Concat or TensorScatter
    if (concat == nullptr || append.past != past)
      return absl::InvalidArgumentError(absl::StrCat(
          "decode program: output '", g.outputs()[pair.output].name, "' is no longer past '", name,
          "' with this step's rows appended after "
          "specialization (",
          out.node ? out.node->Describe() : "nothing", ")"));
    Node* reader = append.pad ? append.pad : concat;
    for (const Use& u : past->output_info(0).uses)
      if (u.user != reader)
        return absl::InvalidArgumentError(
            absl::StrCat("decode program: past input '", name, "' is read by ", u.user->Describe(),
                         " besides the ", reader->op(),
                         " that appends to it, so kiln cannot make it the cache"));
    Value slots = positions;  // [B, 1]: the cache slot of the step's one new row
    if (append.pad) {
      // Pad only extends the rows' end (pads [0,0,0,0, 0,0,n,0]); the rows go at slot
      // rows[b] of batch row b.
      const std::optional<std::vector<int64_t>> pads =
          append.pad->num_inputs() > 1 ? rewrite::IntConstant(append.pad->input(1)) : std::nullopt;
      const std::string* mode = append.pad->attr_string("mode");
      if (!pads || pads->size() != 8 || (mode && *mode != "constant") ||
          append.pad->num_inputs() > 2 || append.pad->output_info(0).uses.size() != 1)
        return absl::InvalidArgumentError(
            absl::StrCat("decode program: ", append.pad->Describe(), " before the cache write of '",
                         name, "' does not just add rows at the end of the cache axis"));
      for (int i = 0; i < 8; ++i)
        if (i != 6 && (*pads)[i] != 0)
          return absl::InvalidArgumentError(
              absl::StrCat("decode program: ", append.pad->Describe(), " pads '", name,
                           "' on an axis other than the end of the cache axis"));
      Node* axes = g.InsertNodeBefore(concat, "Constant", {}, 1);
      axes->set_attr("value", Tensor::FromI64({1}, {1}));
      axes->set_output_type(0, Type::Static(DType::kI64, {1}));
      Node* unsqueeze =
          g.InsertNodeBefore(concat, "Unsqueeze", {concat->input(2), axes->output(0)}, 1);
      unsqueeze->set_provenance(concat->provenance());
      slots = unsqueeze->output(0);
    }
    if (!slots) return KILN_INTERNAL("decode program: no cache slots for '%s'", name);
    Type cache = past->output_info(0).type;
    if (!cache.is_static() || !concat->output_info(0).type.is_static())
      return KILN_INTERNAL("decode program: '%s' is not static after specialization", name);
    (*cache.shape)[2] = Dim::Known(capacity);
    if (cache != concat->output_info(0).type)
      return absl::InvalidArgumentError(absl::StrCat(
          "decode program: output '", g.outputs()[pair.output].name, "' is ",
          concat->output_info(0).type.ToString(), ", not the cache ", cache.ToString()));
    // Everything but the graph output must be a fused attention reading keys or values.
    for (const Use& u : concat->output_info(0).uses) {
      const Node& n = *u.user;
      if (n.domain() != "kiln" || n.op() != "Attention" || (u.operand != 1 && u.operand != 2))
        return absl::InvalidArgumentError(absl::StrCat(
            "decode program: the cache '", name, "' is read by ", n.Describe(), " (input ",
            u.operand,
            "), not by a fused attention's keys or values, so it cannot be paged (docs/"
            "generation.md; the attention of this model did not fuse: see kiln opt "
            "--fusion-report)"));
    }
    Type pool = cache;
    (*pool.shape)[0] = Dim::Known(paging.blocks);
    (*pool.shape)[2] = Dim::Known(paging.block_size);
    past->set_output_type(0, pool);
    Node* write = g.InsertNodeBefore(concat, "CacheWrite",
                                     {past->output(0), concat->input(1), slots, table}, 1, "kiln");
    write->set_output_type(0, pool);
    write->set_output_name(0, concat->output_info(0).name);
    write->set_provenance(concat->provenance());
    g.ReplaceAllUsesWith(concat->output(0), write->output(0));
    rewrite::RemoveIfDead(g, {concat});
  }
  // Each attention over a pool reads it through the table (input 4; the mask may be absent).
  for (const auto& node : g.nodes()) {
    Node* n = node.get();
    if (n->domain() != "kiln" || n->op() != "Attention") continue;
    const Value k = n->input(1), v = n->input(2);
    const bool k_pool = k && k.node->op() == "CacheWrite",
               v_pool = v && v.node->op() == "CacheWrite";
    if (!k_pool && !v_pool) continue;
    if (k_pool != v_pool || n->num_inputs() > 4)
      return absl::InvalidArgumentError(absl::StrCat(
          "decode program: ", n->Describe(),
          " reads only one of its keys and values from the cache, so it cannot be paged"));
    while (n->num_inputs() < 4) g.AddNodeInput(n, Value{});
    g.AddNodeInput(n, table);
  }
  return g.TopoSort();  // the new input was added after the nodes that read it
}

int LogitsOutput(const Graph& g) {
  for (size_t o = 0; o < g.outputs().size(); ++o)
    if (g.outputs()[o].name == "logits") return static_cast<int>(o);
  return -1;
}

namespace {

// A value of the rows the last-token rewrite narrows: static [B, S, ...] of rank 3.
bool IsRows(const Type& t, int64_t b, int64_t s) {
  const std::optional<std::vector<int64_t>> d = t.StaticDims();
  return d && d->size() == 3 && (*d)[0] == b && (*d)[1] == s;
}

// Whether `n` computes each [b, s] row of its outputs from the same row of its non-constant
// inputs alone (and constants read whole, not broadcast over the rows), all of them rows.
bool RowWise(const Node& n, int64_t b, int64_t s) {
  const OpInfo* info = FindOp(n.domain(), n.op());
  if (info == nullptr || !(info->traits & (kRowwise | kElementwise))) return false;
  if ((info->traits & kRowwise) && n.has_attr("axis")) {
    const int64_t axis = n.attr_int_or("axis", -1);
    if (axis != -1 && axis != 2) return false;
  }
  int rows = 0;
  for (const Value& v : n.inputs()) {
    if (!v) continue;
    if (!v.node->is_constant()) {
      if (!IsRows(v.type(), b, s)) return false;
      ++rows;
      continue;
    }
    if (info->traits & kRowwise) continue;  // weights, gamma: read whole
    // An elementwise constant must not stretch over the rows (dims 0 and 1 of rank 3).
    const Type& t = v.type();
    if (!t.has_rank() || t.rank() > 3) return false;
    for (int i = 0; i < t.rank(); ++i) {
      const int at = 3 - t.rank() + i;
      const Dim& d = (*t.shape)[i];
      if (at < 2 && !(d.is_known() && d.value() == 1)) return false;
    }
  }
  if (rows == 0) return false;
  for (int o = 0; o < n.num_outputs(); ++o)
    if (!n.output_info(o).uses.empty() && !IsRows(n.output_info(o).type, b, s)) return false;
  return IsRows(n.output_info(0).type, b, s);
}

}  // namespace

absl::StatusOr<LastTokenRewrite> RewriteForLastToken(Graph& g, const KvSignature& sig) {
  const int out = LogitsOutput(g);
  const Type& ids = g.inputs()[sig.input_ids]->output_info(0).type;
  const std::optional<std::vector<int64_t>> id_dims = ids.StaticDims();
  if (out < 0 || !id_dims || id_dims->size() != 2)
    return KILN_INTERNAL("prefill program: no output 'logits' or input_ids %s not static",
                         ids.ToString());
  const int64_t b = (*id_dims)[0], s = (*id_dims)[1];
  const Value logits = g.outputs()[out].value;
  if (!IsRows(logits.type(), b, s) || logits.type().dtype != DType::kF32)
    return absl::InvalidArgumentError(
        absl::StrCat("prefill program: output 'logits' is ", logits.type().ToString(),
                     ", not f32 [batch, sequence, vocab] = [", b, ", ", s,
                     ", vocab] (compile with --prefill-logits all to keep it as exported)"));
  const Value mask = g.inputs()[sig.attention_mask]->output(0);
  const Type& mask_type = mask.type();
  if (mask_type.StaticDims() != std::vector<int64_t>{b, s})
    return absl::InvalidArgumentError(absl::StrCat("prefill program: attention_mask is ",
                                                   mask_type.ToString(), ", not [", b, ", ", s,
                                                   "] (an empty past)"));

  // The nodes that may run on the last row: decided consumers first (reverse topological
  // order), each needing every use of its results to be such a node or the logits output.
  absl::flat_hash_set<const Node*> narrowed;
  absl::flat_hash_map<const Node*, int> graph_outputs;  // producer -> outputs it gives
  for (const GraphOutput& o : g.outputs())
    if (o.value) ++graph_outputs[o.value.node];
  for (auto it = g.nodes().rbegin(); it != g.nodes().rend(); ++it) {
    const Node& n = **it;
    if (n.is_input() || n.is_constant() || !RowWise(n, b, s)) continue;
    bool feeds = false, only = true;
    if (auto go = graph_outputs.find(&n); go != graph_outputs.end()) {
      only = go->second == 1 && logits.node == &n;
      feeds = only;
    }
    for (int o = 0; o < n.num_outputs() && only; ++o)
      for (const Use& u : n.output_info(o).uses) {
        only &= narrowed.count(u.user) > 0;
        feeds = true;
      }
    if (feeds && only) narrowed.insert(&n);
  }
  // The values read into that set from outside it: the cut the rows are taken at.
  std::vector<Value> cut;
  for (const auto& node : g.nodes()) {
    if (!narrowed.count(node.get())) continue;
    for (const Value& v : node->inputs())
      if (v && !v.node->is_constant() && !narrowed.count(v.node) &&
          std::find(cut.begin(), cut.end(), v) == cut.end())
        cut.push_back(v);
  }
  const bool f32 = std::all_of(cut.begin(), cut.end(),
                               [](const Value& v) { return v.type().dtype == DType::kF32; });
  if (narrowed.empty() || !f32) {
    narrowed.clear();
    cut = {logits};
  }
  LastTokenRewrite done{static_cast<int>(narrowed.size()), static_cast<int>(cut.size())};
  for (size_t i = 0; i < cut.size(); ++i) {
    const Value v = cut[i];
    const Type& t = v.type();
    const int64_t h = (*t.shape)[2].value();
    const std::string base =
        v.name().empty() ? absl::StrCat("last_token", i) : absl::StrCat(v.name(), ".last_token");
    // Appended: the TopoSort below puts them after the value's producer.
    Node* pool = g.AddNode("Pool", {v, mask}, 1, "kiln");
    pool->set_attr("mode", std::string("last"));
    pool->set_output_type(0, Type::Static(t.dtype, {b, h}));
    pool->set_output_name(0, base);
    pool->set_provenance(v.node->provenance());
    Node* axes = g.AddConstant(absl::StrCat(base, ".axes"), Tensor::FromI64({1}, {1}));
    Node* row = g.AddNode("Unsqueeze", {pool->output(0), axes->output(0)}, 1);
    row->set_output_type(0, Type::Static(t.dtype, {b, 1, h}));
    row->set_output_name(0, absl::StrCat(base, ".row"));
    row->set_provenance(v.node->provenance());
    if (narrowed.empty()) {  // the logits themselves
      g.SetOutputValue(out, row->output(0));
      continue;
    }
    for (const auto& node : g.nodes())
      if (narrowed.count(node.get()))
        for (int k = 0; k < node->num_inputs(); ++k)
          if (node->input(k) == v) g.SetInput(node.get(), k, row->output(0));
  }
  // The narrowed nodes' types are inferred again ([B, 1, ...]).
  for (const auto& node : g.nodes())
    if (narrowed.count(node.get()))
      for (int o = 0; o < node->num_outputs(); ++o)
        node->set_output_type(o, Type{node->output_info(o).type.dtype, std::nullopt});
  KILN_RETURN_IF_ERROR(g.TopoSort());
  return done;
}

}  // namespace kiln::compiler
