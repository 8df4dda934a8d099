// The JSON object of `kiln plan-info --json`, shared with the Python package's
// Plan.info() so the two never disagree.
#include "tools/plan_info_json.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/cpu/cpu_context.h"
#include "kiln/passes/precision_report.h"
#include "tools/json.h"
#include "tools/plan_util.h"

namespace kiln::cli {

Compat CheckCompat(const Plan& plan) {
  Compat c;
  if (plan.target == PlanTarget::kCpu) {
    c.reasons.push_back("target cpu runs here");
  } else {
    const CudaDeviceInfo dev = QueryCudaDevice(0);
    bool sm_ok = false;
    for (int32_t plan_sm : plan.cuda_sms)
      for (int build_sm : dev.build_sms)
        sm_ok |= dev.available && plan_sm / 10 == dev.sm / 10 && plan_sm <= dev.sm &&
                 build_sm / 10 == dev.sm / 10 && build_sm <= dev.sm;
    if (!dev.built || !dev.available) {
      c.ok = false;
      c.reasons.push_back(absl::StrCat("target cuda: ", dev.reason));
    } else if (!sm_ok) {
      c.ok = false;
      c.reasons.push_back(absl::StrCat("target cuda: ", dev.name, " is sm_", dev.sm,
                                       ", not covered by the plan's and this build's SMs"));
    } else {
      c.reasons.push_back(absl::StrCat("target cuda runs on ", dev.name, " (sm_", dev.sm, ")"));
    }
  }
  const std::string here(Version());
  if (plan.manifest.kiln_version == here) {
    c.reasons.push_back(absl::StrCat("kiln ", here, " = this kiln"));
  } else {
    c.ok = false;
    c.reasons.push_back(
        absl::StrCat("compiled by kiln ", plan.manifest.kiln_version, ", this is kiln ", here));
  }
  c.reasons.push_back(absl::StrCat("cpu isa ", std::string(cpu::IsaName(cpu::DetectIsa())),
                                   ", chosen at run time"));
  if (plan.target == PlanTarget::kCpu) {
    // What a bf16 / int8 plan's GEMMs run on here (never a refusal: every path runs).
    bool bf16 = false, int8 = false;
    for (const PlanPrecisionNote& n : plan.precision_notes) {
      bf16 |= n.precision == "bf16";
      int8 |= n.precision == "int8";
    }
    const cpu::Isa isa = cpu::DetectIsa();
    if (bf16)
      c.reasons.push_back(cpu::HasAvx512Bf16(isa)
                              ? "bf16 GEMMs on avx512_bf16"
                              : "no avx512_bf16: the bf16 GEMMs run on fp32 weights widened at "
                                "load (same results, no bf16 speed-up)");
    if (int8)
      c.reasons.push_back(cpu::HasAvx512Vnni(isa)    ? "int8 GEMMs on avx512_vnni"
                          : isa == cpu::Isa::kScalar ? "int8 GEMMs on the scalar path"
                                                     : "int8 GEMMs on avx2 (no avx512_vnni)");
  }
  return c;
}

// The precision notes grouped: "int8: 36 kiln.QuantLinear", "fp32: 4 kiln.Linear (why)".
std::vector<std::string> PrecisionLines(const Plan& plan) {
  std::vector<PrecisionNote> notes;
  notes.reserve(plan.precision_notes.size());
  int64_t fixed = 0, per_row = 0;
  double lo = 0, hi = 0;
  for (const PlanPrecisionNote& n : plan.precision_notes) {
    notes.push_back({.op = n.op, .precision = n.precision, .reason = n.reason});
    if (n.precision != "int8") continue;
    if (n.x_absmax <= 0) {
      ++per_row;
      continue;
    }
    lo = fixed == 0 ? n.x_absmax : std::min(lo, n.x_absmax);
    hi = std::max(hi, n.x_absmax);
    ++fixed;
  }
  std::vector<std::string> lines = PrecisionSummary(notes);
  if (fixed > 0)
    lines.push_back(absl::StrFormat(
        "int8 activations: %d static (calibrated |x| ranges %.3g to %.3g), %d per row", fixed, lo,
        hi, per_row));
  return lines;
}

std::string PlanInfoJson(const PlanInfo& info, const std::string& path) {
  const Plan& plan = info.plan;
  const Compat compat = CheckCompat(plan);
  JsonWriter w;
  w.BeginObject();
  if (path.empty()) {
    w.Key("plan").Null();
  } else {
    w.Key("plan").String(path);
  }
  w.Key("format_version").Int(info.format_version);
  w.Key("file_bytes").Int(static_cast<int64_t>(info.file_bytes));
  w.Key("metadata_bytes").Int(static_cast<int64_t>(info.metadata_bytes));
  w.Key("weights_offset").Int(static_cast<int64_t>(info.weights_offset));
  w.Key("weights_bytes").Int(static_cast<int64_t>(info.weights_bytes));
  w.Key("target").String(std::string(PlanTargetName(plan.target)));
  w.Key("cuda_sms").BeginArray();
  for (int32_t sm : plan.cuda_sms) w.Int(sm);
  w.EndArray();
  w.Key("manifest").BeginObject();
  w.Key("kiln_version").String(plan.manifest.kiln_version);
  w.Key("cuda_toolkit_version").String(plan.manifest.cuda_toolkit_version);
  w.Key("cublas_version").String(plan.manifest.cublas_version);
  w.EndObject();
  w.Key("model_sha256").String(HexSha256(plan.model_sha256));
  w.Key("compile_options").String(plan.compile_options);
  // "inputs" and "outputs" of the plan or of a program signature.
  auto write_io = [&w](const std::vector<PlanTensorSig>& inputs,
                       const std::vector<PlanTensorSig>& outputs) {
    for (const char* key : {"inputs", "outputs"}) {
      const auto& sigs = std::string(key) == "inputs" ? inputs : outputs;
      w.Key(key).BeginArray();
      for (const PlanTensorSig& s : sigs) {
        w.BeginObject();
        w.Key("name").String(s.name);
        w.Key("dtype").String(std::string(DTypeName(s.dtype)));
        w.Key("dims").BeginArray();
        for (const Dim& d : s.dims) d.is_symbol() ? w.String(d.symbol()) : w.Int(d.value());
        w.EndArray();
        w.EndObject();
      }
      w.EndArray();
    }
  };
  write_io(plan.inputs, plan.outputs);
  w.Key("paddable_symbols").BeginArray();
  for (const std::string& s : plan.paddable_symbols) w.String(s);
  w.EndArray();
  w.Key("signatures").BeginArray();
  for (const PlanSignature& ps : plan.signatures) {
    w.BeginObject();
    w.Key("program").String(std::string(PlanProgramName(ps.program)));
    write_io(ps.inputs, ps.outputs);
    w.Key("paddable_symbols").BeginArray();
    for (const std::string& s : ps.paddable_symbols) w.String(s);
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.Key("precision_notes").BeginArray();
  for (const PlanPrecisionNote& n : plan.precision_notes) {
    w.BeginObject().Key("op").String(n.op).Key("precision").String(n.precision);
    w.Key("reason").String(n.reason).Key("nodes").BeginArray();
    for (const std::string& node : n.nodes) w.String(node);
    w.EndArray();
    if (n.x_absmax != 0) w.Key("x_absmax").Double(n.x_absmax);
    w.EndObject();
  }
  w.EndArray();
  w.Key("buckets").BeginArray();
  for (const PlanBucket& b : plan.buckets) {
    w.BeginObject();
    w.Key("bindings").BeginObject();
    for (const auto& [sym, val] : b.bindings) w.Key(sym).Int(val);
    w.EndObject();
    w.Key("program").String(std::string(PlanProgramName(b.program)));
    if (!b.in_place.empty()) {
      w.Key("in_place").BeginArray();
      for (const PlanInPlace& ip : b.in_place)
        w.BeginObject()
            .Key("input")
            .String(plan.inputs[ip.input].name)
            .Key("output")
            .String(plan.outputs[ip.output].name)
            .EndObject();
      w.EndArray();
    }
    w.Key("steps").Int(static_cast<int64_t>(b.steps.size()));
    w.Key("buffers").Int(static_cast<int64_t>(b.buffers.size()));
    w.Key("arena_bytes").Int(b.arena_bytes);
    w.Key("no_reuse_bytes").Int(b.no_reuse_bytes);
    w.Key("peak_live_bytes").Int(b.peak_live_bytes);
    w.EndObject();
  }
  w.EndArray();
  w.Key("compatible").Bool(compat.ok);
  w.Key("compatibility").BeginArray();
  for (const std::string& r : compat.reasons) w.String(r);
  w.EndArray();
  w.EndObject();
  return w.str();
}

}  // namespace kiln::cli
