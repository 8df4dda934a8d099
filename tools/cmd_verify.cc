// `kiln verify MODEL.onnx PLAN.kiln`: the plan's outputs against the model's fp32 plan on the
// same inputs, per output (kiln/verify.h); exit 4 when a gate is not met.
#include <cstdio>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "kiln/support/npy.h"
#include "kiln/verify.h"
#include "tools/cli.h"
#include "tools/plan_util.h"

namespace kiln::cli {
namespace {

constexpr char kHelp[] =
    "usage: kiln verify MODEL.onnx PLAN.kiln [options]\n"
    "\n"
    "Runs the plan and the model's fp32 plan (compiled here, cpu, for each input shape) on\n"
    "the same inputs and compares every output: max abs error, max relative error (over the\n"
    "output's largest |fp32 value|), cosine per row (the last axis; positions an attention\n"
    "mask marks as padding are skipped) as its mean and its worst, and for score outputs\n"
    "(last dim < 8, e.g. a cross-encoder's logits) the rank agreement of the scores over all\n"
    "rows: Spearman's rho, the worst label column. Then checks the accuracy gates: the plan's\n"
    "precision defaults (fp16/bf16 cosine>=0.9999, int8 cosine>=0.99) or --accept's.\n"
    "\n"
    "options:\n"
    "  --calib DIR          input sets: DIR's .npz files (np.savez, arrays named by graph\n"
    "                       input) and sub-folders of INPUT.npy files, one set each\n"
    "  --input NAME=F.npy   one input set given input by input (repeatable; every input)\n"
    "  --samples N          without input sets: N seeded random valid sets (default 4) at\n"
    "                       the shapes of the plan's buckets, smallest to largest: token ids\n"
    "                       within the model's tables, masks with real padding\n"
    "  --seed S             their seed (default 0)\n"
    "  --accept SPEC        gates, e.g. cosine>=0.999,max_abs<=0.05,logits:rank_agreement>=0.99\n"
    "                       (metrics cosine, cosine_mean, max_abs, max_rel, rank_agreement;\n"
    "                       OUTPUT: limits one to that output); none: report only\n"
    "  --threads N          executor threads (default: one per core)\n"
    "  --json               the report as JSON on stdout\n"
    "\n"
    "exit codes: 0 gates met, 4 a gate not met, 2 bad arguments or inputs, 3 unsupported\n"
    "(a cuda plan: its accuracy is checked on a GPU by bench/gpu/check.sh).\n";

}  // namespace

int RunVerify(int argc, char** argv) {
  Args args(argc, argv, 2);
  std::string model, plan_path, v, accept;
  bool json = false, accept_given = false;
  VerifyOptions vo;
  std::map<std::string, std::string> input_files;
  while (!args.Done()) {
    if (args.Flag("--help") || args.Flag("-h")) {
      std::fputs(kHelp, stdout);
      return kExitOk;
    }
    if (args.Flag("--json")) {
      json = true;
      continue;
    }
    if (args.Option("--calib", &v)) {
      vo.calib_dir = v;
      continue;
    }
    if (args.Option("--accept", &v)) {
      accept = v;
      accept_given = true;
      continue;
    }
    if (args.Option("--input", &v)) {
      const size_t eq = v.find('=');
      if (eq == std::string::npos || eq == 0)
        return Fail(
            absl::InvalidArgumentError(absl::StrCat("--input: '", v, "' is not NAME=FILE.npy")));
      input_files[v.substr(0, eq)] = v.substr(eq + 1);
      continue;
    }
    if (args.Option("--samples", &v)) {
      if (!absl::SimpleAtoi(v, &vo.samples) || vo.samples < 1 || vo.samples > 1000)
        return Fail(absl::InvalidArgumentError(absl::StrCat("--samples: bad value '", v, "'")));
      continue;
    }
    if (args.Option("--seed", &v)) {
      if (!absl::SimpleAtoi(v, &vo.seed))
        return Fail(absl::InvalidArgumentError(absl::StrCat("--seed: bad value '", v, "'")));
      continue;
    }
    if (args.Option("--threads", &v)) {
      if (!absl::SimpleAtoi(v, &vo.threads) || vo.threads < 1)
        return Fail(absl::InvalidArgumentError(absl::StrCat("--threads: bad value '", v, "'")));
      continue;
    }
    if (!args.status().ok()) return Fail(args.status());
    if (model.empty() && args.Positional(&model)) continue;
    if (plan_path.empty() && args.Positional(&plan_path)) continue;
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("verify: unexpected argument '", args.Next(), "' (see kiln verify --help)")));
  }
  if (!args.status().ok()) return Fail(args.status());
  if (model.empty() || plan_path.empty())
    return Fail(absl::InvalidArgumentError(
        "verify: give the model and its plan: kiln verify MODEL.onnx PLAN.kiln"));
  absl::StatusOr<Plan> loaded = LoadPlanFile(plan_path);
  if (!loaded.ok()) return Fail(NamePlan(loaded.status(), plan_path));
  auto plan = std::make_shared<const Plan>(*std::move(loaded));
  if (!input_files.empty()) {
    std::map<std::string, Tensor> set;
    for (const auto& [name, file] : input_files) {
      absl::StatusOr<Tensor> t = ReadNpy(file);
      if (!t.ok()) return Fail(t.status());
      set.emplace(name, *std::move(t));
    }
    vo.input_sets.push_back(std::move(set));
  }
  if (accept_given) {
    absl::StatusOr<std::vector<AccuracyGate>> gates = ParseAccuracyGates(accept);
    if (!gates.ok()) return Fail(gates.status());
    vo.gates = *std::move(gates);
  } else {
    vo.gates = DefaultAccuracyGates(PlanPrecision(*plan));
  }
  absl::StatusOr<AccuracyReport> report = VerifyPlan(model, plan, vo);
  if (!report.ok()) return Fail(report.status());
  if (json)
    std::printf("%s\n", report->Json().c_str());
  else
    std::fputs(report->Text().c_str(), stdout);
  return report->ok() ? kExitOk : kExitAccuracy;
}

}  // namespace kiln::cli
