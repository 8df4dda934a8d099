// The `kiln` command line: one binary, one subcommand per job.
#include <cstdio>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "kiln/kiln.h"
#include "tools/cli.h"

namespace {

constexpr char kUsage[] =
    "kiln " KILN_VERSION
    " - an ahead-of-time graph compiler for ONNX models\n"
    "\n"
    "usage: kiln <command> [options]\n"
    "\n"
    "commands:\n"
    "  inspect MODEL.onnx   import a model and print its IR and an op histogram\n"
    "  inspect PLAN.kiln    print a plan's buckets: memory plan and kernel calls\n"
    "  opt MODEL.onnx       run an optimization pipeline; print the IR or write ONNX/dot\n"
    "  run MODEL.onnx       run a model on the reference executor and summarize outputs\n"
    "  compile MODEL.onnx   compile a model ahead of time into a plan file (-o OUT.kiln)\n"
    "  run PLAN.kiln        run a compiled plan and summarize outputs (--trace for a profile)\n"
    "  bench PLAN.kiln      measure a plan: load, first run, p50/p90 latency, throughput\n"
    "  generate PLAN.kiln   generate tokens with a KV-cache decoder plan (--decode-context)\n"
    "  plan-info PLAN.kiln  describe a plan (no weights read) and check it runs here\n"
    "  verify MODEL PLAN    compare a plan's outputs with the model's fp32 plan (accuracy)\n"
    "  kernels              list a target's plan kernels and their contracts\n"
    "\n"
    "`kiln <command> --help` describes a command's options.\n"
    "exit codes: 0 ok, 1 internal error, 2 invalid model or arguments, 3 unsupported,\n"
    "4 an accuracy gate not met (compile --accept, verify)\n";

}  // namespace

int main(int argc, char** argv) {
  using namespace kiln::cli;
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return kExitInvalid;
  }
  const std::string cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    std::fputs(kUsage, stdout);
    return kExitOk;
  }
  if (cmd == "--version") {
    const kiln::CudaDeviceInfo cuda = kiln::QueryCudaDevice(0);
    std::printf("kiln " KILN_VERSION "\ncuda: %s\ngpu: %s\n", cuda.build.c_str(),
                cuda.available ? absl::StrCat(cuda.name, " (sm_", cuda.sm, ")").c_str()
                               : cuda.reason.c_str());
    return kExitOk;
  }
  if (cmd == "inspect") return RunInspect(argc, argv);
  if (cmd == "run") return RunRun(argc, argv);
  if (cmd == "opt") return RunOpt(argc, argv);
  if (cmd == "compile") return RunCompile(argc, argv);
  if (cmd == "bench") return RunBench(argc, argv);
  if (cmd == "generate") return RunGenerate(argc, argv);
  if (cmd == "plan-info") return RunPlanInfo(argc, argv);
  if (cmd == "kernels") return RunKernels(argc, argv);
  if (cmd == "verify") return RunVerify(argc, argv);
  std::fprintf(stderr, "kiln: error: unknown command '%s' (see kiln --help)\n", cmd.c_str());
  return kExitInvalid;
}
