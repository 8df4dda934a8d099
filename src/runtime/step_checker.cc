// StepChecker::Resolve: operand slots and the memory rules shared by every kernel
// (see step_checker.h).
#include "runtime/step_checker.h"

namespace kiln::runtime {

absl::Status StepChecker::Resolve(PreparedStep& p, bool in_place, bool any_overlap) const {
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
        const PlanTensorSig& sig = in ? plan_.inputs[b.binding] : plan_.outputs[b.binding];
        const int64_t cap = in ? io_.input_bytes[b.binding] : io_.output_bytes[b.binding];
        if (b.dtype != sig.dtype)
          return Err("%s %d: buffer %d is %s but graph %s '%s' is %s", role, pos, idx,
                     std::string(DTypeName(b.dtype)), in ? "input" : "output", sig.name,
                     std::string(DTypeName(sig.dtype)));
        if (used > cap)
          return Err("%s %d: buffer %d %s needs %d bytes but graph %s '%s' has %d in this bucket",
                     role, pos, idx, DimsStr(b.dims), used, in ? "input" : "output", sig.name, cap);
        op->slot = in ? BaseSlotOfInput(b.binding)
                      : BaseSlotOfOutput(static_cast<int>(plan_.inputs.size()), b.binding);
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
  p.in.resize(step_.inputs.size());
  p.out.resize(step_.outputs.size());
  for (size_t i = 0; i < step_.inputs.size(); ++i)
    KILN_RETURN_IF_ERROR(resolve(step_.inputs[i], false, i, &p.in[i]));
  for (size_t i = 0; i < step_.outputs.size(); ++i)
    KILN_RETURN_IF_ERROR(resolve(step_.outputs[i], true, i, &p.out[i]));
  auto overlap = [](const Region& a, const Region& b) {
    return a.slot == b.slot && a.slot != kNullSlot && a.begin < b.end && b.begin < a.end;
  };
  for (size_t i = 0; i < outs.size(); ++i) {
    for (size_t j = i + 1; j < outs.size(); ++j)
      if (overlap(outs[i], outs[j])) return Err("outputs %d and %d overlap", i, j);
    if (any_overlap) continue;
    for (size_t j = 0; j < ins.size(); ++j) {
      if (!overlap(outs[i], ins[j])) continue;
      const bool exact = outs[i].begin == ins[j].begin && outs[i].end == ins[j].end;
      if (in_place && i == 0 && j == 0 && exact) continue;
      return Err("output %d overlaps input %d, which %s cannot compute in place", i, j,
                 step_.kernel);
    }
  }
  return absl::OkStatus();
}

}  // namespace kiln::runtime
