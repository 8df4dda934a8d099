// Lowering of a static graph to one plan bucket (docs/plan-kernels.md): each compute node
// becomes a step (an optimized kernel from lower_kernels.cc or "ref"), every value a step
// touches a buffer (weight / input / output / arena), alias ops (Reshape, Squeeze,
// Unsqueeze, Flatten, Identity) a second buffer over the same storage, and graph outputs
// that no step can write directly (inputs, constants, aliases, repeats) a trailing copy
// step. Arena buffers (an alias group is one buffer) go to the memory planner with the
// contract's in-place hints. On cuda, a Linear whose only reader is a residual Add becomes
// one linear step with the residual through cuBLASLt's C operand.
// Limits: the graph must be topologically ordered.
#include "compiler/lower.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/memory_planner.h"
#include "kiln/ir/ops.h"
#include "kiln/support/status.h"
#include "plan/crc32c.h"
#include "plan/kernel_contract.h"

namespace kiln::compiler {

int64_t WeightTable::Add(const Tensor& t) {
  const int64_t bytes = static_cast<int64_t>(t.NumBytes());
  const std::pair<const void*, int64_t> skey{t.storage().get(), bytes};
  if (auto it = by_storage_.find(skey); it != by_storage_.end()) return entries_[it->second].offset;
  const std::string_view data(reinterpret_cast<const char*>(t.raw()), static_cast<size_t>(bytes));
  const std::pair<int64_t, uint32_t> ckey{bytes, plan_internal::Crc32c(data)};
  std::vector<int>& same = by_content_[ckey];
  for (int e : same) {
    const Tensor& o = entries_[e].tensor;
    // Not remembered by t's storage: only entries_ keeps storages alive, and a freed one's
    // address can come back as another constant's storage (a later bucket's), which would
    // then take this entry's bytes.
    if (bytes == 0 || std::memcmp(o.raw(), t.raw(), static_cast<size_t>(bytes)) == 0)
      return entries_[e].offset;
  }
  const int64_t offset = (size_ + 63) / 64 * 64;
  entries_.push_back(Entry{t, offset});
  size_ = offset + bytes;
  same.push_back(static_cast<int>(entries_.size()) - 1);
  by_storage_[skey] = static_cast<int>(entries_.size()) - 1;
  return offset;
}

int64_t WeightTable::AddDerived(const Tensor& source, int kind,
                                const std::function<Tensor(const Tensor&)>& derive) {
  const std::tuple<const void*, int64_t, int> key{source.storage().get(),
                                                  static_cast<int64_t>(source.NumBytes()), kind};
  if (auto it = derived_.find(key); it != derived_.end()) return it->second;
  const int64_t offset = Add(derive(source));
  derived_.emplace(key, offset);
  derived_sources_.push_back(source);
  return offset;
}

// The blob is a zero-initialised Storage (padding bytes are deterministic) handed to the
// plan as a view it keeps alive: each constant is copied exactly once.
PlanWeights WeightTable::Build() const {
  if (size_ == 0) return PlanWeights();
  std::shared_ptr<Storage> blob = Storage::Allocate(static_cast<size_t>(size_));
  for (const PlanWeightPiece& p : Pieces())
    std::memcpy(blob->data() + p.offset, p.bytes.data(), p.bytes.size());
  const auto* data = reinterpret_cast<const uint8_t*>(blob->data());
  return PlanWeights::View(data, static_cast<size_t>(size_), std::move(blob));
}

std::vector<PlanWeightPiece> WeightTable::Pieces() const {
  std::vector<PlanWeightPiece> out;
  for (const Entry& e : entries_)
    if (e.tensor.NumBytes() > 0)
      out.push_back(
          {static_cast<uint64_t>(e.offset),
           std::string_view(reinterpret_cast<const char*>(e.tensor.raw()), e.tensor.NumBytes())});
  return out;
}

namespace {

// "f32[2,16] x i64[] -> f32[2,16]" for messages.
std::string NodeTypesText(const Node& n) {
  std::vector<std::string> in, out;
  for (const Value& v : n.inputs()) in.push_back(v ? v.type().ToString() : "-");
  for (int i = 0; i < n.num_outputs(); ++i) out.push_back(n.output_info(i).type.ToString());
  return absl::StrCat(absl::StrJoin(in, ", "), " -> ", absl::StrJoin(out, ", "));
}

// One arena allocation: a value and the aliases over it.
struct Group {
  int64_t bytes = 0;
  int64_t first = 0;
  int64_t last = 0;
  std::vector<int> buffers;
};

struct InplaceCandidate {
  int out_group;
  int in_group;
  int64_t step;
};

class BucketLowering {
 public:
  BucketLowering(const Graph& g, const std::vector<std::string>& input_names,
                 const LowerOptions& options, WeightTable& weights)
      : g_(g), options_(options), weights_(weights) {
    for (size_t i = 0; i < input_names.size(); ++i)
      input_binding_[input_names[i]] = static_cast<int32_t>(i);
  }

  absl::StatusOr<PlanBucket> Run() {
    // Graph outputs a step writes directly; the rest are copies at the end.
    std::vector<std::pair<int32_t, Value>> copies;
    for (size_t i = 0; i < g_.outputs().size(); ++i) {
      const Value v = g_.outputs()[i].value;
      const Node* p = v.node;
      if (p->is_input() || p->is_constant() || IsAliasOp(*p) || direct_output_.count(Key(v))) {
        copies.emplace_back(static_cast<int32_t>(i), v);
      } else {
        direct_output_[Key(v)] = static_cast<int32_t>(i);
      }
    }
    if (options_.target == PlanTarget::kCuda) FindResidualLinears();
    for (const auto& p : g_.nodes()) {
      const Node& n = *p;
      if (n.is_input() || n.is_constant() || IsAliasOp(n)) continue;  // buffers on demand
      if (deferred_.count(n.id())) continue;  // lowered with its residual Add
      if (auto it = residual_at_.find(n.id()); it != residual_at_.end()) {
        KILN_RETURN_IF_ERROR(LowerLinearResidual(*it->second.first, n, it->second.second));
        continue;
      }
      KILN_RETURN_IF_ERROR(LowerNode(n));
    }
    for (const auto& [index, v] : copies) {
      const int64_t step = static_cast<int64_t>(bucket_.steps.size());
      KILN_ASSIGN_OR_RETURN(const int src, Use(v, step));
      KILN_ASSIGN_OR_RETURN(const Type t, StaticType(*v.node, v.type(), "output"));
      const int dst = NewBuffer(PlanBufferKind::kOutput, t, index);
      PlanStep s;
      s.kernel = "copy";
      s.inputs = {src};
      s.outputs = {dst};
      s.provenance = v.node->provenance();
      bucket_.steps.push_back(std::move(s));
    }
    KILN_RETURN_IF_ERROR(PlanArena());
    KILN_RETURN_IF_ERROR(CheckContracts());
    return std::move(bucket_);
  }

 private:
  static std::pair<int, int> Key(const Value& v) { return {v.node->id(), v.index}; }

  absl::StatusOr<Type> StaticType(const Node& n, const Type& t, const char* what) {
    if (!t.is_static() || t.dtype == DType::kUndefined || DTypeSize(t.dtype) == 0)
      return absl::InvalidArgumentError(absl::StrCat(
          n.Describe(), ": ", what, " type ", t.ToString(),
          " is not static and numeric after specializing the bucket's shapes, so it cannot be "
          "lowered"));
    return t;
  }

  int NewBuffer(PlanBufferKind kind, const Type& t, int32_t binding) {
    PlanBuffer b;
    b.kind = kind;
    b.dtype = t.dtype;
    b.dims = *t.StaticDims();
    int64_t elems = 1;
    for (int64_t d : b.dims) elems *= d;
    b.bytes = elems * static_cast<int64_t>(DTypeSize(t.dtype));
    b.binding = (kind == PlanBufferKind::kInput || kind == PlanBufferKind::kOutput) ? binding : 0;
    bucket_.buffers.push_back(std::move(b));
    group_of_.push_back(-1);
    return static_cast<int>(bucket_.buffers.size()) - 1;
  }

  int NewArenaBuffer(const Type& t, int64_t step) {
    const int b = NewBuffer(PlanBufferKind::kArena, t, 0);
    groups_.push_back(Group{bucket_.buffers[b].bytes, step, step, {b}});
    group_of_[b] = static_cast<int>(groups_.size()) - 1;
    return b;
  }

  // The buffer holding `v`, created on first use for inputs, constants and aliases.
  absl::StatusOr<int> BufferOf(const Value& v) {
    if (auto it = buffer_of_.find(Key(v)); it != buffer_of_.end()) return it->second;
    const Node& p = *v.node;
    KILN_ASSIGN_OR_RETURN(const Type t, StaticType(p, v.type(), "output"));
    int b = -1;
    if (p.is_input()) {
      auto it = input_binding_.find(p.output_info(0).name);
      if (it == input_binding_.end())
        return KILN_INTERNAL("graph input '%s' is not in the plan's inputs", p.output_info(0).name);
      b = NewBuffer(PlanBufferKind::kInput, t, it->second);
    } else if (p.is_constant()) {
      const Tensor* value = p.constant_value();
      if (!value) return KILN_INTERNAL("%s has no value", p.Describe());
      b = NewBuffer(PlanBufferKind::kWeight, t, 0);
      bucket_.buffers[b].offset = weights_.Add(*value);
      bucket_.buffers[b].bytes = static_cast<int64_t>(value->NumBytes());
    } else if (IsAliasOp(p)) {
      KILN_ASSIGN_OR_RETURN(const int src, BufferOf(p.input(0)));
      const PlanBuffer& s = bucket_.buffers[src];
      if (s.dtype != t.dtype || s.bytes != NewBufferBytes(t))
        return absl::InvalidArgumentError(
            absl::StrCat(p.Describe(), ": output ", t.ToString(), " does not have its input's ",
                         s.bytes, " bytes of ", std::string(DTypeName(s.dtype))));
      PlanBuffer a = s;
      a.dims = *t.StaticDims();
      bucket_.buffers.push_back(std::move(a));
      group_of_.push_back(group_of_[src]);
      b = static_cast<int>(bucket_.buffers.size()) - 1;
      if (group_of_[b] >= 0) groups_[group_of_[b]].buffers.push_back(b);
    } else {
      return KILN_INTERNAL("%s: value used before the step that writes it", p.Describe());
    }
    buffer_of_[Key(v)] = b;
    return b;
  }

  static int64_t NewBufferBytes(const Type& t) {
    const std::vector<int64_t> dims = t.StaticDims().value_or(std::vector<int64_t>{});
    int64_t elems = 1;
    for (int64_t d : dims) elems *= d;
    return elems * static_cast<int64_t>(DTypeSize(t.dtype));
  }

  // BufferOf, and records that step `step` reads it.
  absl::StatusOr<int> Use(const Value& v, int64_t step) {
    KILN_ASSIGN_OR_RETURN(const int b, BufferOf(v));
    if (group_of_[b] >= 0) {
      Group& grp = groups_[group_of_[b]];
      grp.last = std::max(grp.last, step);
    }
    return b;
  }

  absl::Status LowerNode(const Node& n) {
    const int64_t step = static_cast<int64_t>(bucket_.steps.size());
    for (const Value& v : n.inputs())
      if (v) KILN_RETURN_IF_ERROR(StaticType(n, v.type(), "an input's").status());
    for (int i = 0; i < n.num_outputs(); ++i)
      KILN_RETURN_IF_ERROR(StaticType(n, n.output_info(i).type, "an output's").status());

    PlanStep s;
    s.provenance = n.provenance();
    bool inplace_ok = false;
    std::optional<KernelChoice> k;
    const bool device = options_.target != PlanTarget::kCpu;
    std::string why_not;
    if (options_.optimized_kernels || device) k = ChooseKernel(n, options_.target, &why_not);
    if (!k && device)
      return absl::UnimplementedError(absl::StrCat(
          n.Describe(), ": no ", std::string(PlanTargetName(options_.target)),
          " kernel takes this node (", NodeTypesText(n), "): ", why_not, "; a ",
          std::string(PlanTargetName(options_.target)),
          " plan has no host steps (`kiln kernels --target ",
          std::string(PlanTargetName(options_.target)), "` lists the kernels and their rules)"));
    size_t arity = static_cast<size_t>(n.num_inputs());
    std::vector<int> operands;
    if (k && !k->operands.empty()) {
      operands = k->operands;
      arity = operands.size();
    } else {
      for (int i = 0; i < n.num_inputs(); ++i) operands.push_back(i);
    }
    if (k) {
      arity = std::max(arity, static_cast<size_t>(k->num_inputs));
      s.kernel = std::move(k->kernel);
      s.params = std::move(k->params);
      inplace_ok = k->inplace_ok;
      AddTf32(n, s);
      // --no-flash-attention: the simple kernel, same operands and parameters.
      if (s.kernel == "flash_attention" && !options_.flash_attention) s.kernel = "attention";
      if (s.kernel == "packed_flash_attention" && !options_.flash_attention)
        s.kernel = "packed_attention";
    } else {
      KILN_ASSIGN_OR_RETURN(std::string text, RefNodeText(n));
      s.kernel = "ref";
      s.params.push_back(PlanParam{"node", std::move(text)});
      inplace_ok = HasTrait(FindOp(n.domain(), n.op()), kElementwise);
    }
    for (int i : operands) {
      const Value v = n.input(i);
      if (!v) {
        s.inputs.push_back(-1);
        continue;
      }
      if ((s.kernel == "block_quant_linear" && i == 1) ||
          (s.kernel == "block_quant_gather" && i == 0)) {
        KILN_ASSIGN_OR_RETURN(const int b, PackedCodes(v, step));
        s.inputs.push_back(b);
        continue;
      }
      KILN_ASSIGN_OR_RETURN(const int b, Use(v, step));
      s.inputs.push_back(b);
    }
    s.inputs.resize(arity, -1);
    for (int i = 0; i < n.num_outputs(); ++i) {
      Node* self = const_cast<Node*>(&n);
      const Value v = self->output(i);
      int b;
      if (auto it = direct_output_.find(Key(v)); it != direct_output_.end()) {
        b = NewBuffer(PlanBufferKind::kOutput, n.output_info(i).type, it->second);
      } else {
        b = NewArenaBuffer(n.output_info(i).type, step);
      }
      buffer_of_[Key(v)] = b;
      s.outputs.push_back(b);
    }
    // In-place: output 0 over input 0 when the kernel allows it; input 0 must not be read
    // again by this step through another operand, and its last use is settled at the end.
    if (inplace_ok && !s.inputs.empty() && s.inputs[0] >= 0 && group_of_[s.outputs[0]] >= 0 &&
        group_of_[s.inputs[0]] >= 0 &&
        bucket_.buffers[s.inputs[0]].dtype == bucket_.buffers[s.outputs[0]].dtype &&
        bucket_.buffers[s.inputs[0]].dims == bucket_.buffers[s.outputs[0]].dims) {
      const int in_group = group_of_[s.inputs[0]];
      bool reread = false;
      for (size_t i = 1; i < s.inputs.size(); ++i)
        reread |= s.inputs[i] >= 0 && group_of_[s.inputs[i]] == in_group;
      if (!reread) inplace_.push_back({group_of_[s.outputs[0]], in_group, step});
    }
    bucket_.steps.push_back(std::move(s));
    return absl::OkStatus();
  }

  // block_quant_linear's and block_quant_gather's codes: a u4 constant [N, K] (held one code
  // per byte) is stored as u8
  // [N, ceil(K / 2)], two codes per byte, low nibble first — half the plan's bytes for the
  // weights of an int4 model. Anything else keeps its own buffer.
  absl::StatusOr<int> PackedCodes(const Value& v, int64_t step) {
    const Tensor* codes = v.node->constant_value();
    if (codes == nullptr || codes->dtype() != DType::kU4 || codes->rank() != 2) return Use(v, step);
    if (auto it = packed_codes_.find(Key(v)); it != packed_codes_.end()) return it->second;
    const int64_t n = codes->dims()[0], k = codes->dims()[1], row = (k + 1) / 2;
    constexpr int kTwoCodesPerByte = 1;  // AddDerived's kind
    const int64_t offset = weights_.AddDerived(*codes, kTwoCodesPerByte, [&](const Tensor& c) {
      Tensor packed(DType::kU8, {n, row});
      const auto* src = reinterpret_cast<const uint8_t*>(c.raw());
      auto* dst = reinterpret_cast<uint8_t*>(packed.raw());
      std::memset(dst, 0, static_cast<size_t>(n * row));
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < k; ++i)
          dst[j * row + i / 2] |= static_cast<uint8_t>((src[j * k + i] & 15) << (4 * (i & 1)));
      return packed;
    });
    const int b = NewBuffer(PlanBufferKind::kWeight,
                            Type{DType::kU8, std::vector<Dim>{Dim::Known(n), Dim::Known(row)}}, 0);
    bucket_.buffers[b].bytes = n * row;
    bucket_.buffers[b].offset = offset;
    packed_codes_[Key(v)] = b;
    return b;
  }

  // --allow-tf32: the fp32 GEMMs of a cuda plan may use TF32 tensor cores.
  void AddTf32(const Node& n, PlanStep& s) const {
    if (!options_.allow_tf32 || (s.kernel != "linear" && s.kernel != "matmul") ||
        n.num_inputs() == 0 || !n.input(0) || n.input(0).type().dtype != DType::kF32)
      return;
    s.params.push_back(PlanParam{"tf32", int64_t{1}});
  }

  // cuda: Add(Linear(x) , r) with the Linear's result read by that Add only, activation
  // none, no broadcasting: one linear step whose residual goes through cuBLASLt's C operand
  // (beta = 1), emitted at the Add (both operands exist there). The CPU kernel has no
  // residual input, so cpu plans keep the Add.
  void FindResidualLinears() {
    std::set<std::pair<int, int>> graph_outputs;
    for (const GraphOutput& o : g_.outputs()) graph_outputs.insert(Key(o.value));
    for (const auto& p : g_.nodes()) {
      const Node& add = *p;
      if (!add.domain().empty() || add.op() != "Add" || add.num_inputs() != 2 ||
          add.num_outputs() != 1 || !add.input(0) || !add.input(1))
        continue;
      for (int side = 0; side < 2; ++side) {
        const Value y = add.input(side), r = add.input(1 - side);
        const Node& lin = *y.node;
        if (lin.domain() != "kiln" || lin.op() != "Linear" || r.node == &lin) continue;
        const std::string* act = lin.attr_string("activation");
        if ((act && *act != "none") || lin.output_info(0).uses.size() != 1 ||
            graph_outputs.count(Key(y)) || deferred_.count(lin.id()))
          continue;
        const auto yd = y.type().StaticDims(), rd = r.type().StaticDims(),
                   od = add.output_info(0).type.StaticDims();
        if (!yd || !rd || !od || *yd != *od || *rd != *od || r.type().dtype != y.type().dtype)
          continue;
        const std::optional<KernelChoice> k = ChooseKernel(lin, PlanTarget::kCuda);
        if (!k || k->kernel != "linear") continue;
        deferred_.insert(lin.id());
        residual_at_[add.id()] = {&lin, r};
        break;
      }
    }
  }

  absl::Status LowerLinearResidual(const Node& lin, const Node& add, Value residual) {
    const int64_t step = static_cast<int64_t>(bucket_.steps.size());
    std::optional<KernelChoice> k = ChooseKernel(lin, PlanTarget::kCuda);
    if (!k) return KILN_INTERNAL("%s: its linear kernel went away", lin.Describe());
    PlanStep s;
    s.kernel = std::move(k->kernel);
    s.params = std::move(k->params);
    AddTf32(lin, s);
    s.provenance = lin.provenance();
    for (const std::string& name : add.provenance()) s.provenance.push_back(name);
    for (int i = 0; i < 3; ++i) {
      const Value v = i < lin.num_inputs() ? lin.input(i) : Value{};
      if (!v) {
        s.inputs.push_back(-1);
        continue;
      }
      KILN_ASSIGN_OR_RETURN(const int b, Use(v, step));
      s.inputs.push_back(b);
    }
    KILN_ASSIGN_OR_RETURN(const int rb, Use(residual, step));
    s.inputs.push_back(rb);
    Node* self = const_cast<Node*>(&add);
    const Value out = self->output(0);
    int b;
    if (auto it = direct_output_.find(Key(out)); it != direct_output_.end())
      b = NewBuffer(PlanBufferKind::kOutput, add.output_info(0).type, it->second);
    else
      b = NewArenaBuffer(add.output_info(0).type, step);
    buffer_of_[Key(out)] = b;
    s.outputs.push_back(b);
    bucket_.steps.push_back(std::move(s));
    return absl::OkStatus();
  }

  absl::Status PlanArena() {
    std::vector<BufferRequest> requests(groups_.size());
    for (size_t i = 0; i < groups_.size(); ++i) {
      requests[i].id = static_cast<int64_t>(i);
      requests[i].bytes = groups_[i].bytes;
      requests[i].first_step = groups_[i].first;
      requests[i].last_step = groups_[i].last;
    }
    for (const InplaceCandidate& c : inplace_) {
      const Group& in = groups_[c.in_group];
      if (in.last == c.step && in.bytes == groups_[c.out_group].bytes)
        requests[c.out_group].inplace_of = c.in_group;
    }
    KILN_ASSIGN_OR_RETURN(const MemoryPlan mp, PlanMemory(requests));
    for (size_t i = 0; i < groups_.size(); ++i)
      for (int b : groups_[i].buffers) bucket_.buffers[b].offset = mp.offsets[i];
    bucket_.arena_bytes = mp.arena_bytes;
    bucket_.no_reuse_bytes = mp.no_reuse_bytes;
    bucket_.peak_live_bytes = mp.peak_live_bytes;
    return absl::OkStatus();
  }

  // Every step meets its contract: lowering and the executors read the same table, and
  // this catches a kernel choice that drifted from it before a plan is written.
  absl::Status CheckContracts() const {
    for (size_t s = 0; s < bucket_.steps.size(); ++s) {
      const PlanStep& step = bucket_.steps[s];
      const KernelContract* c = FindKernelContract(options_.target, step.kernel);
      if (c == nullptr)
        return KILN_INTERNAL("lowering emitted kernel '%s', which target %s does not have",
                             step.kernel, std::string(PlanTargetName(options_.target)));
      if (absl::Status st = CheckStepContract(*c, bucket_, step); !st.ok())
        return KILN_INTERNAL("lowering emitted step %d (%s, %s) against its contract: %s", s,
                             step.kernel, step.provenance.empty() ? "" : step.provenance[0],
                             std::string(st.message()));
    }
    return absl::OkStatus();
  }

  const Graph& g_;
  const LowerOptions options_;
  WeightTable& weights_;
  std::map<std::string, int32_t> input_binding_;
  std::map<std::pair<int, int>, int32_t> direct_output_;  // value -> graph output index
  std::map<std::pair<int, int>, int> buffer_of_;          // value -> buffer
  std::map<std::pair<int, int>, int> packed_codes_;       // u4 codes -> their packed buffer
  std::vector<int> group_of_;                             // buffer -> arena group or -1
  std::vector<Group> groups_;
  std::vector<InplaceCandidate> inplace_;
  std::set<int> deferred_;                                    // Linear nodes taken by
  std::map<int, std::pair<const Node*, Value>> residual_at_;  // their Add: node, residual
  PlanBucket bucket_;
};

}  // namespace

absl::StatusOr<PlanBucket> LowerBucket(const Graph& g, const std::vector<std::string>& input_names,
                                       const LowerOptions& options, WeightTable& weights) {
  return BucketLowering(g, input_names, options, weights).Run();
}

}  // namespace kiln::compiler
