// `kiln kernels [--target cpu|cuda]`: the plan kernels a target's executor runs, with their
// contracts (operands, dtypes, parameters, rules) as a Markdown table — the table
// docs/plan-kernels.md embeds (a test keeps the two identical).
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "plan/kernel_contract.h"
#include "tools/cli.h"

namespace kiln::cli {
namespace {

constexpr char kHelp[] =
    "usage: kiln kernels [--target cpu|cuda]\n"
    "\n"
    "Prints the kernel ids a plan for the target may contain, each with its contract:\n"
    "inputs and outputs (allowed dtypes, optional or weight-only), parameters (kind and\n"
    "range or choices) and the shape rule, as the Markdown table docs/plan-kernels.md\n"
    "shows. Lowering emits steps from this table and Executor::Create checks them\n"
    "against it.\n"
    "\n"
    "options:\n"
    "  --target cpu|cuda   the target (default cpu)\n";

}  // namespace

int RunKernels(int argc, char** argv) {
  Args args(argc, argv, 2);
  PlanTarget target = PlanTarget::kCpu;
  std::string v;
  while (!args.Done()) {
    if (args.Flag("--help") || args.Flag("-h")) {
      std::fputs(kHelp, stdout);
      return kExitOk;
    }
    if (args.Option("--target", &v)) {
      if (v == "cpu") {
        target = PlanTarget::kCpu;
      } else if (v == "cuda") {
        target = PlanTarget::kCuda;
      } else {
        return Fail(absl::InvalidArgumentError(
            absl::StrCat("--target: unknown target '", v, "' (want cpu or cuda)")));
      }
      continue;
    }
    if (!args.status().ok()) return Fail(args.status());
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "kernels: unexpected argument '", args.Next(), "' (see kiln kernels --help)")));
  }
  if (!args.status().ok()) return Fail(args.status());
  std::fputs(KernelContractsMarkdown(target).c_str(), stdout);
  return kExitOk;
}

}  // namespace kiln::cli
