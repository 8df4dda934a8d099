// StepChecker: the contract check, operand slots and the memory rules shared by every
// kernel of every executor (see step_checker.h).
#include "runtime/step_checker.h"

#include "absl/strings/str_cat.h"

namespace kiln::runtime {

std::string StepWhere(int b, int s, const PlanStep& step) {
  return absl::StrFormat("bucket %d step %d (%s%s%s)", b, s, step.kernel,
                         step.provenance.empty() ? "" : ", ",
                         step.provenance.empty() ? "" : step.provenance.front());
}

absl::Status StepChecker::Wrap(const absl::Status& s) const {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(where_, ": ", s.message()));
}

absl::Status StepChecker::CheckContract() const {
  return Wrap(CheckStepContract(contract_, bucket_, step_));
}

const PlanParam* StepChecker::Find(std::string_view name) const {
  for (const PlanParam& p : step_.params)
    if (p.name == name) return &p;
  return nullptr;
}

int64_t StepChecker::Int(std::string_view name, int64_t fallback) const {
  const PlanParam* p = Find(name);
  const int64_t* v = p ? std::get_if<int64_t>(&p->value) : nullptr;
  return v ? *v : fallback;
}

double StepChecker::Float(std::string_view name) const {
  const PlanParam* p = Find(name);
  const double* v = p ? std::get_if<double>(&p->value) : nullptr;
  return v ? *v : 0.0;
}

const std::string& StepChecker::String(std::string_view name) const {
  static const std::string* empty = new std::string;
  const PlanParam* p = Find(name);
  const std::string* v = p ? std::get_if<std::string>(&p->value) : nullptr;
  return v ? *v : *empty;
}

const std::vector<int64_t>& StepChecker::Ints(std::string_view name) const {
  static const std::vector<int64_t>* empty = new std::vector<int64_t>;
  const PlanParam* p = Find(name);
  const auto* v = p ? std::get_if<std::vector<int64_t>>(&p->value) : nullptr;
  return v ? *v : *empty;
}

absl::StatusOr<int64_t> StepChecker::Product(std::initializer_list<int64_t> v,
                                             const char* what) const {
  int64_t p = 1;
  for (int64_t x : v)
    if (MulOverflows(p, x, &p)) return Err("%s overflows int64", what);
  return p;
}

const PlanBuffer* StepChecker::In(size_t i) const {
  if (i >= step_.inputs.size() || step_.inputs[i] < 0) return nullptr;
  return &bucket_.buffers[step_.inputs[i]];
}

const PlanBuffer* StepChecker::Out(size_t i) const {
  if (i >= step_.outputs.size() || step_.outputs[i] < 0) return nullptr;
  return &bucket_.buffers[step_.outputs[i]];
}

int64_t StepChecker::Elems(const PlanBuffer& b) {
  int64_t n = 1;
  for (int64_t d : b.dims) n *= d;  // ValidatePlan ruled out overflow
  return n;
}

absl::Status StepChecker::N(const PlanBuffer* b, int64_t n, const char* what) const {
  if (b != nullptr && Elems(*b) != n)
    return Err("%s %s has %d elements; the parameters need %d", what, DimsStr(b->dims), Elems(*b),
               n);
  return absl::OkStatus();
}

absl::Status StepChecker::LastDim(const PlanBuffer* b, int64_t n, const char* what,
                                  const char* param) const {
  if (b == nullptr || b->dims.empty() || b->dims.back() == n) return absl::OkStatus();
  return Err("%s %s: last dim is not %s = %d", what, DimsStr(b->dims), param, n);
}

absl::StatusOr<StepOperands> StepChecker::Resolve() const {
  struct Region {
    uint32_t slot;
    int64_t begin, end;
  };
  std::vector<Region> ins, outs;
  auto resolve = [&](int32_t idx, bool is_out, size_t pos, Operand* op) -> absl::Status {
    if (idx == -1) {
      *op = Operand{kNullSlot, 0};
      ins.push_back({kNullSlot, 0, 0});
      return absl::OkStatus();
    }
    const PlanBuffer& b = bucket_.buffers[idx];
    const int64_t used = Elems(b) * static_cast<int64_t>(DTypeSize(b.dtype));
    const int64_t align = static_cast<int64_t>(DTypeSize(b.dtype));
    const char* role = is_out ? "output" : "input";
    switch (b.kind) {
      case PlanBufferKind::kArena:
        op->slot = kArenaSlot;
        break;
      case PlanBufferKind::kWeight:
        if (is_out) return Err("output %d writes weight buffer %d (read-only)", pos, idx);
        op->slot = kWeightSlot;
        break;
      case PlanBufferKind::kInput:
      case PlanBufferKind::kOutput: {
        const bool in = b.kind == PlanBufferKind::kInput;
        if (in && is_out)
          return Err("output %d writes buffer %d, graph input %d (read-only)", pos, idx, b.binding);
        const PlanIo pio = IoOf(plan_, bucket_.program);
        const PlanTensorSig& sig = in ? pio.inputs[b.binding] : pio.outputs[b.binding];
        const int64_t cap = in ? io_.input_bytes[b.binding] : io_.output_bytes[b.binding];
        if (b.dtype != sig.dtype)
          return Err("%s %d: buffer %d is %s but graph %s '%s' is %s", role, pos, idx,
                     std::string(DTypeName(b.dtype)), in ? "input" : "output", sig.name,
                     std::string(DTypeName(sig.dtype)));
        if (used > cap)
          return Err("%s %d: buffer %d %s needs %d bytes but graph %s '%s' has %d in this bucket",
                     role, pos, idx, DimsStr(b.dims), used, in ? "input" : "output", sig.name, cap);
        op->slot = in ? BaseSlotOfInput(b.binding)
                      : BaseSlotOfOutput(static_cast<int>(pio.inputs.size()), b.binding);
        break;
      }
    }
    if (b.offset % align != 0)
      return Err("%s %d: buffer %d offset %d is not %d-byte aligned", role, pos, idx, b.offset,
                 align);
    op->offset = b.offset;
    (is_out ? outs : ins).push_back({op->slot, b.offset, b.offset + used});
    return absl::OkStatus();
  };
  StepOperands ops;
  ops.in.resize(step_.inputs.size());
  ops.out.resize(step_.outputs.size());
  for (size_t i = 0; i < step_.inputs.size(); ++i)
    KILN_RETURN_IF_ERROR(resolve(step_.inputs[i], false, i, &ops.in[i]));
  for (size_t i = 0; i < step_.outputs.size(); ++i)
    KILN_RETURN_IF_ERROR(resolve(step_.outputs[i], true, i, &ops.out[i]));
  auto overlap = [](const Region& a, const Region& b) {
    return a.slot == b.slot && a.slot != kNullSlot && a.begin < b.end && b.begin < a.end;
  };
  for (size_t i = 0; i < outs.size(); ++i) {
    for (size_t j = i + 1; j < outs.size(); ++j)
      if (overlap(outs[i], outs[j])) return Err("outputs %d and %d overlap", i, j);
    if (contract_.any_overlap) continue;
    for (size_t j = 0; j < ins.size(); ++j) {
      if (!overlap(outs[i], ins[j])) continue;
      const bool exact = outs[i].begin == ins[j].begin && outs[i].end == ins[j].end;
      if (contract_.inplace_ok && i == 0 && j == 0 && exact) continue;
      return Err("output %d overlaps input %d, which %s cannot compute in place", i, j,
                 step_.kernel);
    }
  }
  return ops;
}

}  // namespace kiln::runtime
