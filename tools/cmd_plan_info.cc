// `kiln plan-info PLAN.kiln [--json]`: what a plan file holds and whether this machine can
// run it, from ReadPlanInfo — the header and metadata only; the weights section is neither
// read nor checksummed (a plan whose weights are damaged still describes itself here;
// `kiln run` / `kiln bench` then refuse it).
// Compatibility: a cpu plan runs anywhere (the CPU instruction set is reported, not
// required: the kernels choose a path at run time); a cuda plan needs this kiln's CUDA
// backend, a device that answers, and an SM among the plan's and this build's. The plan's
// kiln version must equal this kiln's (the kernel contract is not versioned separately yet).
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "kernels/cpu/cpu_context.h"
#include "kiln/kiln.h"
#include "tools/cli.h"
#include "tools/json.h"
#include "tools/plan_info_json.h"
#include "tools/plan_util.h"

namespace kiln::cli {
namespace {

constexpr char kHelp[] =
    "usage: kiln plan-info PLAN.kiln [--json]\n"
    "\n"
    "Describes a plan written by `kiln compile` from its header and metadata, without\n"
    "reading the weights: format version, target, manifest (kiln version), source model\n"
    "SHA-256, compile options, input/output signature, paddable symbols, per bucket the\n"
    "symbol bindings, step count, arena / no-reuse / peak-live bytes, the weights size, for a\n"
    "plan below fp32 the precision of its compute ops (what stays fp32, and why), and\n"
    "a line `compatible: yes|no (reasons)` for this machine: a cpu plan runs here (the\n"
    "CPU instruction set the kernels will use is listed for information); a cuda plan\n"
    "needs a CUDA-enabled kiln, a GPU (device 0) and an SM the plan and the build cover;\n"
    "and the plan's kiln version must equal this kiln's.\n"
    "  --json   print one JSON object instead\n";

}  // namespace

int RunPlanInfo(int argc, char** argv) {
  Args args(argc, argv, 2);
  std::string path;
  bool json = false;
  while (!args.Done()) {
    if (args.Flag("--help") || args.Flag("-h")) {
      std::fputs(kHelp, stdout);
      return kExitOk;
    }
    if (args.Flag("--json")) {
      json = true;
      continue;
    }
    if (path.empty() && args.Positional(&path)) continue;
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "plan-info: unexpected argument '", args.Next(), "' (see kiln plan-info --help)")));
  }
  if (path.empty())
    return Fail(absl::InvalidArgumentError("plan-info: no plan given (see kiln plan-info --help)"));
  auto info = ReadPlanInfoNamed(path);
  if (!info.ok()) return Fail(info.status());
  if (json) {
    std::printf("%s\n", PlanInfoJson(*info, path).c_str());
    return kExitOk;
  }
  const Plan& plan = info->plan;
  const Compat compat = CheckCompat(plan);

  std::printf("plan          %s (%s)\n", path.c_str(),
              HumanBytes(static_cast<int64_t>(info->file_bytes)).c_str());
  std::printf("format        version %u (this kiln reads %u)\n", info->format_version,
              kPlanFormatVersion);
  std::printf("target        %s%s\n", std::string(PlanTargetName(plan.target)).c_str(),
              plan.cuda_sms.empty()
                  ? ""
                  : absl::StrCat(" (sm ", absl::StrJoin(plan.cuda_sms, ", "), ")").c_str());
  std::string manifest = absl::StrCat("kiln ", plan.manifest.kiln_version);
  if (!plan.manifest.cuda_toolkit_version.empty())
    absl::StrAppend(&manifest, ", cuda ", plan.manifest.cuda_toolkit_version);
  if (!plan.manifest.cublas_version.empty())
    absl::StrAppend(&manifest, ", cublas ", plan.manifest.cublas_version);
  std::printf("manifest      %s\n", manifest.c_str());
  std::printf("model sha256  %s\n", HexSha256(plan.model_sha256).c_str());
  std::printf("options       %s\n",
              plan.compile_options.empty() ? "(none recorded)" : plan.compile_options.c_str());
  for (size_t i = 0; i < plan.inputs.size(); ++i)
    std::printf("%-13s %s\n", i == 0 ? "inputs" : "", SigString(plan.inputs[i]).c_str());
  for (size_t i = 0; i < plan.outputs.size(); ++i)
    std::printf("%-13s %s\n", i == 0 ? "outputs" : "", SigString(plan.outputs[i]).c_str());
  std::printf("paddable      %s\n", plan.paddable_symbols.empty()
                                        ? "(none)"
                                        : absl::StrJoin(plan.paddable_symbols, ", ").c_str());
  std::printf("weights       %s (%llu bytes at offset %llu, not read)\n",
              HumanBytes(static_cast<int64_t>(info->weights_bytes)).c_str(),
              static_cast<unsigned long long>(info->weights_bytes),
              static_cast<unsigned long long>(info->weights_offset));
  std::printf("metadata      %s\n", HumanBytes(static_cast<int64_t>(info->metadata_bytes)).c_str());
  const std::vector<std::string> precision = PrecisionLines(plan);
  for (size_t i = 0; i < precision.size(); ++i)
    std::printf("%-13s %s\n", i == 0 ? "precision" : "", precision[i].c_str());
  // A generation plan: its two programs and the context they allow.
  std::set<int64_t> capacities;
  size_t caches = 0;
  for (const PlanBucket& b : plan.buckets)
    if (b.program == PlanProgram::kDecode) {
      caches = b.in_place.size();
      for (const PlanInPlace& ip : b.in_place)
        if (plan.inputs[ip.input].dims.size() == 4 && plan.inputs[ip.input].dims[2].is_symbol())
          if (auto it = b.bindings.find(plan.inputs[ip.input].dims[2].symbol());
              it != b.bindings.end())
            capacities.insert(it->second);
    }
  if (!capacities.empty()) {
    std::printf(
        "generation    prefill (model program, empty past) + decode (one token per "
        "sequence, %zu K/V caches appended in place); capacities %s; max context %lld\n",
        caches, absl::StrJoin(capacities, ", ").c_str(),
        static_cast<long long>(*capacities.rbegin()));
    const PlanIo decode = IoOf(plan, PlanProgram::kDecode);
    const PlanBucket* any = nullptr;
    for (const PlanBucket& b : plan.buckets)
      if (b.program == PlanProgram::kDecode) any = &b;
    if (&decode.inputs != &plan.inputs && any && !any->in_place.empty()) {
      const std::vector<Dim>& pool = decode.inputs[any->in_place[0].input].dims;
      if (pool.size() == 4 && pool[0].is_known() && pool[2].is_known())
        std::printf(
            "%-13s paged: blocks of %lld slots, %lld blocks per K/V pool (block 0 the "
            "scratch block)\n",
            "", static_cast<long long>(pool[2].value()), static_cast<long long>(pool[0].value()));
    } else {
      std::printf(
          "%-13s contiguous cache (compiled before the paged cache: recompile to "
          "generate)\n",
          "");
    }
    for (const PlanTensorSig& out : plan.outputs)
      if (out.name == "logits" && out.dims.size() == 3)
        std::printf("%-13s prefill logits: %s\n", "",
                    out.dims[1].is_known() && out.dims[1].value() == 1
                        ? "each sequence's last token ([batch, 1, vocab])"
                        : "every prompt position (--prefill-logits all)");
  }
  // A packed program (docs/packing.md): its own signature.
  for (const PlanSignature& ps : plan.signatures) {
    const std::string name(PlanProgramName(ps.program));
    for (size_t i = 0; i < ps.inputs.size(); ++i)
      std::printf("%-13s %s\n", i == 0 ? (name + " in").c_str() : "",
                  SigString(ps.inputs[i]).c_str());
    for (size_t i = 0; i < ps.outputs.size(); ++i)
      std::printf("%-13s %s\n", i == 0 ? (name + " out").c_str() : "",
                  SigString(ps.outputs[i]).c_str());
  }
  if (HasProgram(plan, PlanProgram::kPacked))
    std::printf(
        "packing       a batch whose mask rows are prefixes of ones runs packed: its real "
        "tokens end to end, outputs back in the padded layout (docs/packing.md)\n");
  std::printf("buckets       %zu\n", plan.buckets.size());
  for (size_t i = 0; i < plan.buckets.size(); ++i) {
    const PlanBucket& b = plan.buckets[i];
    const std::string label = BucketLabel(plan, static_cast<int>(i));
    std::printf("  %zu [%s]: %zu steps, arena %s, no-reuse %s, peak live %s\n", i,
                label.empty() ? "static" : label.c_str(), b.steps.size(),
                HumanBytes(b.arena_bytes).c_str(), HumanBytes(b.no_reuse_bytes).c_str(),
                HumanBytes(b.peak_live_bytes).c_str());
  }
  std::printf("compatible: %s (%s)\n", compat.ok ? "yes" : "no",
              absl::StrJoin(compat.reasons, "; ").c_str());
  return kExitOk;
}

}  // namespace kiln::cli
