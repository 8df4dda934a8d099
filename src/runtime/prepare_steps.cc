// Create-time checks of every plan step against docs/plan-kernels.md, and their
// translation into PreparedSteps (prepared_plan.h). Each kernel's rule reads the step's
// parameters, checks them against the operand buffers (dtype, element counts, last dims,
// broadcast rules) and fills the fields Run needs; StepChecker::Resolve (step_checker.cc)
// then resolves operands to base slots and applies the memory rules. ref steps:
// prepare_ref.cc.
// Limits: parameters must have exactly the documented types (ints int64, floats double,
// enums strings); extra parameters are ignored.
#include <algorithm>
#include <limits>
#include <string>

#include "runtime/step_checker.h"

namespace kiln::runtime {

// prepare_ref.cc
absl::Status PrepareRef(const StepChecker& c, const PlanBucket& bucket, PreparedStep& p);

namespace {

bool KernelFromName(const std::string& name, KernelId* id) {
  static const std::pair<const char*, KernelId> kNames[] = {
      {"copy", KernelId::kCopy},
      {"ref", KernelId::kRef},
      {"linear", KernelId::kLinear},
      {"layer_norm", KernelId::kLayerNorm},
      {"skip_layer_norm", KernelId::kSkipLayerNorm},
      {"attention", KernelId::kAttention},
      {"embed_layer_norm", KernelId::kEmbedLayerNorm},
      {"pool", KernelId::kPool},
      {"gelu", KernelId::kGelu},
      {"softmax", KernelId::kSoftmax},
  };
  for (const auto& [n, k] : kNames) {
    if (name == n) {
      *id = k;
      return true;
    }
  }
  return false;
}

absl::Status PrepareCopy(const StepChecker& c, PreparedStep& p) {
  KILN_RETURN_IF_ERROR(c.Arity(1, 1, 1, 1));
  KILN_ASSIGN_OR_RETURN(const PlanBuffer* x, c.In(0, "x"));
  KILN_ASSIGN_OR_RETURN(const PlanBuffer* y, c.Out(0, "y"));
  const int64_t bx = StepChecker::Elems(*x) * DTypeSize(x->dtype);
  const int64_t by = StepChecker::Elems(*y) * DTypeSize(y->dtype);
  if (bx != by) return c.Err("copies %d bytes into %d", bx, by);
  p.copy_bytes = bx;
  return c.Resolve(p, false, true);
}

absl::Status PrepareLinear(const StepChecker& c, const Plan& plan, const cpu::CpuContext& ctx,
                           LinearCache& linears, PreparedStep& p) {
  KILN_RETURN_IF_ERROR(c.Arity(2, 3, 1, 1));
  KILN_ASSIGN_OR_RETURN(p.m, c.Size("m"));
  KILN_ASSIGN_OR_RETURN(const int64_t k, c.Int("k", 1, std::numeric_limits<int64_t>::max()));
  KILN_ASSIGN_OR_RETURN(const int64_t n, c.Int("n", 1, std::numeric_limits<int64_t>::max()));
  KILN_ASSIGN_OR_RETURN(const bool trans_w, c.Flag("trans_w"));
  KILN_ASSIGN_OR_RETURN(const std::string act, c.String("activation"));
  cpu::Activation activation;
  if (act == "none")
    activation = cpu::Activation::kNone;
  else if (act == "gelu")
    activation = cpu::Activation::kGeluErf;
  else if (act == "gelu_tanh")
    activation = cpu::Activation::kGeluTanh;
  else if (act == "relu")
    activation = cpu::Activation::kRelu;
  else if (act == "tanh")
    activation = cpu::Activation::kTanh;
  else
    return c.Err("unknown activation '%s'", act);
  KILN_ASSIGN_OR_RETURN(const PlanBuffer* x, c.In(0, "x"));
  KILN_ASSIGN_OR_RETURN(const PlanBuffer* w, c.In(1, "w"));
  KILN_ASSIGN_OR_RETURN(const PlanBuffer* bias, c.In(2, "bias", true));
  KILN_ASSIGN_OR_RETURN(const PlanBuffer* y, c.Out(0, "y"));
  KILN_ASSIGN_OR_RETURN(const int64_t mk, c.Product({p.m, k}, "m*k"));
  KILN_ASSIGN_OR_RETURN(const int64_t mn, c.Product({p.m, n}, "m*n"));
  KILN_ASSIGN_OR_RETURN(const int64_t kn, c.Product({k, n}, "k*n"));
  KILN_RETURN_IF_ERROR(c.F32N(x, mk, "x"));
  KILN_RETURN_IF_ERROR(c.LastDim(x, k, "x", "k"));
  KILN_RETURN_IF_ERROR(c.F32N(w, kn, "w"));
  KILN_RETURN_IF_ERROR(c.F32N(bias, n, "bias"));
  KILN_RETURN_IF_ERROR(c.F32N(y, mn, "y"));
  KILN_RETURN_IF_ERROR(c.LastDim(y, n, "y", "n"));
  if (w->kind != PlanBufferKind::kWeight) return c.Err("w must be a weight buffer (constant)");
  if (bias != nullptr && bias->kind != PlanBufferKind::kWeight)
    return c.Err("bias must be a weight buffer (constant)");
  KILN_RETURN_IF_ERROR(c.Resolve(p, false, false));
  const LinearKey key{w->offset, bias ? bias->offset : -1,    k, n,
                      trans_w,   static_cast<int>(activation)};
  auto it = linears.find(key);
  if (it == linears.end()) {
    const float* wp = reinterpret_cast<const float*>(plan.weights.data() + w->offset);
    const float* bp =
        bias ? reinterpret_cast<const float*>(plan.weights.data() + bias->offset) : nullptr;
    // Borrowed: the plan's weights outlive the executor's PackedLinears (plan_ is held by
    // the Executor base, destroyed after them), so no plain copy of every weight is kept.
    auto packed = cpu::PackedLinear::Create({k, n, trans_w, activation}, wp, bp, ctx,
                                            std::max<int64_t>(p.m, 1), /*borrow_weights=*/true);
    if (!packed.ok()) return c.Err("prepacking the weights: %s", packed.status().message());
    it = linears.emplace(key, *std::move(packed)).first;
  }
  p.linear = it->second.get();
  // Create the oneDNN primitive for this bucket's m now, not on the first run.
  if (p.m > 0) {
    auto impl = p.linear->ImplName(ctx, p.m);
    if (!impl.ok()) return c.Err("preparing m=%d: %s", p.m, impl.status().message());
  }
  return absl::OkStatus();
}

absl::Status PrepareLayerNorm(const StepChecker& c, bool skip, PreparedStep& p) {
  if (skip)
    KILN_RETURN_IF_ERROR(c.Arity(3, 5, 1, 2));
  else
    KILN_RETURN_IF_ERROR(c.Arity(2, 3, 1, 1));
  KILN_ASSIGN_OR_RETURN(p.rows, c.Size("rows"));
  KILN_ASSIGN_OR_RETURN(p.n, c.Size("h"));
  KILN_ASSIGN_OR_RETURN(const double eps, c.Double("epsilon"));
  p.eps = static_cast<float>(eps);
  KILN_ASSIGN_OR_RETURN(const int64_t total, c.Product({p.rows, p.n}, "rows*h"));
  int i = 0;
  KILN_ASSIGN_OR_RETURN(const PlanBuffer* x, c.In(i++, "x"));
  KILN_RETURN_IF_ERROR(c.F32N(x, total, "x"));
  KILN_RETURN_IF_ERROR(c.LastDim(x, p.n, "x", "h"));
  if (skip) {
    KILN_ASSIGN_OR_RETURN(p.skip_rows, c.Int("skip_rows", 1, std::numeric_limits<int64_t>::max()));
    if (p.rows % p.skip_rows != 0)
      return c.Err("skip_rows %d does not divide rows %d", p.skip_rows, p.rows);
    KILN_ASSIGN_OR_RETURN(const int64_t skip_elems, c.Product({p.skip_rows, p.n}, "skip_rows*h"));
    KILN_ASSIGN_OR_RETURN(const PlanBuffer* sk, c.In(i++, "skip"));
    KILN_RETURN_IF_ERROR(c.F32N(sk, skip_elems, "skip"));
    KILN_RETURN_IF_ERROR(c.LastDim(sk, p.n, "skip", "h"));
  }
  KILN_ASSIGN_OR_RETURN(const PlanBuffer* gamma, c.In(i++, "gamma"));
  KILN_RETURN_IF_ERROR(c.F32N(gamma, p.n, "gamma"));
  KILN_ASSIGN_OR_RETURN(const PlanBuffer* beta, c.In(i++, "beta", true));
  KILN_RETURN_IF_ERROR(c.F32N(beta, p.n, "beta"));
  if (skip) {
    KILN_ASSIGN_OR_RETURN(const PlanBuffer* bias, c.In(i++, "bias", true));
    KILN_RETURN_IF_ERROR(c.F32N(bias, p.n, "bias"));
  }
  KILN_ASSIGN_OR_RETURN(const PlanBuffer* y, c.Out(0, "y"));
  KILN_RETURN_IF_ERROR(c.F32N(y, total, "y"));
  if (c.step().outputs.size() > 1) {
    KILN_ASSIGN_OR_RETURN(const PlanBuffer* sum, c.Out(1, "sum"));
    KILN_RETURN_IF_ERROR(c.F32N(sum, total, "sum"));
    p.has_sum = true;
  }
  return c.Resolve(p, true, false);
}

absl::Status PrepareAttention(const StepChecker& c, PreparedStep& p) {
  KILN_RETURN_IF_ERROR(c.Arity(1, 2, 1, 1));
  KILN_ASSIGN_OR_RETURN(p.batch, c.Size("batch"));
  KILN_ASSIGN_OR_RETURN(p.seq, c.Size("seq"));
  KILN_ASSIGN_OR_RETURN(p.heads, c.Int("num_heads", 1, std::numeric_limits<int64_t>::max()));
  KILN_ASSIGN_OR_RETURN(p.head_size, c.Int("head_size", 1, std::numeric_limits<int64_t>::max()));
  KILN_ASSIGN_OR_RETURN(const double scale, c.Double("scale"));
  p.scale = static_cast<float>(scale);
  KILN_ASSIGN_OR_RETURN(p.causal, c.Flag("causal"));
  KILN_ASSIGN_OR_RETURN(const int64_t y_elems,
                        c.Product({p.batch, p.seq, p.heads, p.head_size}, "B*S*N*D"));
  KILN_ASSIGN_OR_RETURN(const int64_t qkv_elems, c.Product({y_elems, 3}, "B*S*3*N*D"));
  KILN_ASSIGN_OR_RETURN(const PlanBuffer* qkv, c.In(0, "qkv"));
  KILN_ASSIGN_OR_RETURN(const PlanBuffer* mask, c.In(1, "mask", true));
  KILN_ASSIGN_OR_RETURN(const PlanBuffer* y, c.Out(0, "y"));
  KILN_RETURN_IF_ERROR(c.F32N(qkv, qkv_elems, "qkv"));
  // Not implied by B*S*3*N*D when B or S is 0.
  KILN_ASSIGN_OR_RETURN(const int64_t qkv_row,
                        c.Product({3, p.heads, p.head_size}, "3*num_heads*head_size"));
  KILN_RETURN_IF_ERROR(c.LastDim(qkv, qkv_row, "qkv", "3*num_heads*head_size"));
  KILN_RETURN_IF_ERROR(c.F32N(y, y_elems, "y"));
  if (mask != nullptr) {
    if (mask->dtype != DType::kF32 && mask->dtype != DType::kBool)
      return c.Err("mask must be f32 or bool, got %s", std::string(DTypeName(mask->dtype)));
    p.mask_bool = mask->dtype == DType::kBool;
    p.mask_dims = mask->dims;
    if (mask->dims.size() > 4) return c.Err("mask %s has rank > 4", DimsStr(mask->dims));
    const int64_t target[4] = {p.batch, p.heads, p.seq, p.seq};
    for (size_t i = 0; i < mask->dims.size(); ++i) {
      const int64_t d = mask->dims[mask->dims.size() - 1 - i], t = target[3 - i];
      if (d != 1 && d != t)
        return c.Err("mask %s does not broadcast to [B,N,S,S] = [%d,%d,%d,%d]", DimsStr(mask->dims),
                     p.batch, p.heads, p.seq, p.seq);
    }
  }
  return c.Resolve(p, false, false);
}

absl::Status PrepareEmbed(const StepChecker& c, PreparedStep& p) {
  KILN_RETURN_IF_ERROR(c.Arity(8, 8, 1, 1));
  KILN_ASSIGN_OR_RETURN(p.batch, c.Size("batch"));
  KILN_ASSIGN_OR_RETURN(p.seq, c.Size("seq"));
  KILN_ASSIGN_OR_RETURN(p.hidden, c.Int("hidden", 1, std::numeric_limits<int64_t>::max()));
  KILN_ASSIGN_OR_RETURN(const double eps, c.Double("epsilon"));
  p.eps = static_cast<float>(eps);
  KILN_ASSIGN_OR_RETURN(const int64_t tokens, c.Product({p.batch, p.seq}, "B*S"));
  KILN_ASSIGN_OR_RETURN(const int64_t y_elems, c.Product({tokens, p.hidden}, "B*S*hidden"));
  KILN_ASSIGN_OR_RETURN(const PlanBuffer* ids, c.In(0, "input_ids"));
  KILN_ASSIGN_OR_RETURN(const PlanBuffer* seg_ids, c.In(1, "segment_ids", true));
  KILN_ASSIGN_OR_RETURN(const PlanBuffer* pos_ids, c.In(2, "position_ids", true));
  KILN_ASSIGN_OR_RETURN(const PlanBuffer* word, c.In(3, "word"));
  KILN_ASSIGN_OR_RETURN(const PlanBuffer* pos, c.In(4, "pos"));
  KILN_ASSIGN_OR_RETURN(const PlanBuffer* seg, c.In(5, "segment", true));
  KILN_ASSIGN_OR_RETURN(const PlanBuffer* gamma, c.In(6, "gamma"));
  KILN_ASSIGN_OR_RETURN(const PlanBuffer* beta, c.In(7, "beta"));
  KILN_ASSIGN_OR_RETURN(const PlanBuffer* y, c.Out(0, "y"));
  if (ids->dtype != DType::kI64 && ids->dtype != DType::kI32)
    return c.Err("input_ids must be i64 or i32, got %s", std::string(DTypeName(ids->dtype)));
  p.ids_i32 = ids->dtype == DType::kI32;
  if (StepChecker::Elems(*ids) != tokens)
    return c.Err("input_ids %s does not have B*S = %d elements", DimsStr(ids->dims), tokens);
  for (const auto& [b, what] : {std::pair{seg_ids, "segment_ids"}, {pos_ids, "position_ids"}}) {
    if (b != nullptr && b->dtype != ids->dtype)
      return c.Err("%s is %s but input_ids is %s", what, std::string(DTypeName(b->dtype)),
                   std::string(DTypeName(ids->dtype)));
  }
  if (seg_ids != nullptr && StepChecker::Elems(*seg_ids) != tokens)
    return c.Err("segment_ids %s does not have B*S = %d elements", DimsStr(seg_ids->dims), tokens);
  if ((seg_ids == nullptr) != (seg == nullptr))
    return c.Err("segment_ids and the segment table must be given together");
  if (pos_ids != nullptr) {
    const auto& d = pos_ids->dims;
    if (d.size() == 2 && d[0] == p.batch && d[1] == p.seq)
      p.position_rows = p.batch;
    else if ((d.size() == 2 && d[0] == 1 && d[1] == p.seq) || (d.size() == 1 && d[0] == p.seq))
      p.position_rows = 1;
    else
      return c.Err("position_ids %s must be [B,S], [1,S] or [S] with B=%d S=%d", DimsStr(d),
                   p.batch, p.seq);
  }
  auto table = [&](const PlanBuffer* t, const char* what, int64_t* rows) -> absl::Status {
    if (t == nullptr) return absl::OkStatus();
    KILN_RETURN_IF_ERROR(c.F32(t, what));
    if (t->dims.size() != 2 || t->dims[1] != p.hidden)
      return c.Err("%s %s must be [rows, hidden=%d]", what, DimsStr(t->dims), p.hidden);
    *rows = t->dims[0];
    return absl::OkStatus();
  };
  KILN_RETURN_IF_ERROR(table(word, "word", &p.word_rows));
  KILN_RETURN_IF_ERROR(table(pos, "pos", &p.pos_rows));
  KILN_RETURN_IF_ERROR(table(seg, "segment", &p.segment_rows));
  if (pos_ids == nullptr && p.seq > p.pos_rows)
    return c.Err("seq %d exceeds the %d rows of the position table", p.seq, p.pos_rows);
  KILN_RETURN_IF_ERROR(c.F32N(gamma, p.hidden, "gamma"));
  KILN_RETURN_IF_ERROR(c.F32N(beta, p.hidden, "beta"));
  KILN_RETURN_IF_ERROR(c.F32N(y, y_elems, "y"));
  return c.Resolve(p, false, false);
}

absl::Status PreparePool(const StepChecker& c, PreparedStep& p) {
  KILN_RETURN_IF_ERROR(c.Arity(1, 2, 1, 1));
  KILN_ASSIGN_OR_RETURN(p.batch, c.Size("batch"));
  KILN_ASSIGN_OR_RETURN(p.seq, c.Size("seq"));
  KILN_ASSIGN_OR_RETURN(p.hidden, c.Size("hidden"));
  KILN_ASSIGN_OR_RETURN(const std::string mode, c.String("mode"));
  if (mode == "cls")
    p.cls = true;
  else if (mode != "mean")
    return c.Err("unknown mode '%s' (mean, cls)", mode);
  KILN_ASSIGN_OR_RETURN(p.normalize, c.Flag("normalize"));
  KILN_ASSIGN_OR_RETURN(const int64_t tokens, c.Product({p.batch, p.seq}, "B*S"));
  KILN_ASSIGN_OR_RETURN(const int64_t h_elems, c.Product({tokens, p.hidden}, "B*S*hidden"));
  KILN_ASSIGN_OR_RETURN(const int64_t y_elems, c.Product({p.batch, p.hidden}, "B*hidden"));
  if (p.cls && p.seq == 0 && y_elems > 0) return c.Err("cls pooling needs seq >= 1");
  KILN_ASSIGN_OR_RETURN(const PlanBuffer* hidden, c.In(0, "hidden"));
  KILN_ASSIGN_OR_RETURN(const PlanBuffer* mask, c.In(1, "mask", true));
  KILN_ASSIGN_OR_RETURN(const PlanBuffer* y, c.Out(0, "y"));
  KILN_RETURN_IF_ERROR(c.F32N(hidden, h_elems, "hidden"));
  KILN_RETURN_IF_ERROR(c.LastDim(hidden, p.hidden, "hidden", "hidden"));
  KILN_RETURN_IF_ERROR(c.F32N(y, y_elems, "y"));
  if (mask != nullptr) {
    if (mask->dtype != DType::kF32 && mask->dtype != DType::kI64)
      return c.Err("mask must be f32 or i64, got %s", std::string(DTypeName(mask->dtype)));
    p.mask_i64 = mask->dtype == DType::kI64;
    if (StepChecker::Elems(*mask) != tokens)
      return c.Err("mask %s does not have B*S = %d elements", DimsStr(mask->dims), tokens);
  }
  return c.Resolve(p, false, false);
}

absl::Status PrepareGelu(const StepChecker& c, PreparedStep& p) {
  KILN_RETURN_IF_ERROR(c.Arity(1, 1, 1, 1));
  KILN_ASSIGN_OR_RETURN(p.n, c.Size("n"));
  KILN_ASSIGN_OR_RETURN(p.tanh, c.Flag("tanh"));
  KILN_ASSIGN_OR_RETURN(const PlanBuffer* x, c.In(0, "x"));
  KILN_ASSIGN_OR_RETURN(const PlanBuffer* y, c.Out(0, "y"));
  KILN_RETURN_IF_ERROR(c.F32N(x, p.n, "x"));
  KILN_RETURN_IF_ERROR(c.F32N(y, p.n, "y"));
  return c.Resolve(p, true, false);
}

absl::Status PrepareSoftmax(const StepChecker& c, PreparedStep& p) {
  KILN_RETURN_IF_ERROR(c.Arity(1, 1, 1, 1));
  KILN_ASSIGN_OR_RETURN(p.rows, c.Size("rows"));
  KILN_ASSIGN_OR_RETURN(p.n, c.Size("n"));
  KILN_ASSIGN_OR_RETURN(const int64_t total, c.Product({p.rows, p.n}, "rows*n"));
  KILN_ASSIGN_OR_RETURN(const PlanBuffer* x, c.In(0, "x"));
  KILN_ASSIGN_OR_RETURN(const PlanBuffer* y, c.Out(0, "y"));
  KILN_RETURN_IF_ERROR(c.F32N(x, total, "x"));
  KILN_RETURN_IF_ERROR(c.LastDim(x, p.n, "x", "n"));
  KILN_RETURN_IF_ERROR(c.F32N(y, total, "y"));
  return c.Resolve(p, true, false);
}

}  // namespace

std::string StepWhere(int b, int s, const PlanStep& step) {
  return absl::StrFormat("bucket %d step %d (%s%s%s)", b, s, step.kernel,
                         step.provenance.empty() ? "" : ", ",
                         step.provenance.empty() ? "" : step.provenance.front());
}

absl::StatusOr<PreparedStep> PrepareStep(const Plan& plan, int b, int s, const PreparedBucket& io,
                                         const cpu::CpuContext& ctx, LinearCache& linears) {
  const PlanStep& step = plan.buckets[b].steps[s];
  StepChecker c(plan, b, s, io);
  PreparedStep p;
  p.source = &step;
  if (!KernelFromName(step.kernel, &p.kernel))
    return c.Err("unknown kernel '%s' for target cpu", step.kernel);
  switch (p.kernel) {
    case KernelId::kCopy:
      KILN_RETURN_IF_ERROR(PrepareCopy(c, p));
      break;
    case KernelId::kRef:
      KILN_RETURN_IF_ERROR(PrepareRef(c, plan.buckets[b], p));
      break;
    case KernelId::kLinear:
      KILN_RETURN_IF_ERROR(PrepareLinear(c, plan, ctx, linears, p));
      break;
    case KernelId::kLayerNorm:
      KILN_RETURN_IF_ERROR(PrepareLayerNorm(c, false, p));
      break;
    case KernelId::kSkipLayerNorm:
      KILN_RETURN_IF_ERROR(PrepareLayerNorm(c, true, p));
      break;
    case KernelId::kAttention:
      KILN_RETURN_IF_ERROR(PrepareAttention(c, p));
      break;
    case KernelId::kEmbedLayerNorm:
      KILN_RETURN_IF_ERROR(PrepareEmbed(c, p));
      break;
    case KernelId::kPool:
      KILN_RETURN_IF_ERROR(PreparePool(c, p));
      break;
    case KernelId::kGelu:
      KILN_RETURN_IF_ERROR(PrepareGelu(c, p));
      break;
    case KernelId::kSoftmax:
      KILN_RETURN_IF_ERROR(PrepareSoftmax(c, p));
      break;
  }
  return p;
}

}  // namespace kiln::runtime
