// The `kiln` command line: one binary, one subcommand per job.
#include <cstdio>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "kiln/kiln.h"
#include "tools/cli.h"

namespace kiln::cli {

int ExitCodeFor(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kOk:
      return kExitOk;
    case absl::StatusCode::kUnimplemented:
      return kExitUnsupported;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kResourceExhausted:
      return kExitInvalid;
    default:
      return kExitInternal;
  }
}

int Fail(const absl::Status& s) {
  std::string msg(s.message());
  for (char& c : msg)
    if (c == '\n') c = ' ';
  const char* kind = s.code() == absl::StatusCode::kUnimplemented ? "unsupported" : "error";
  std::fprintf(stderr, "kiln: %s: %s\n", kind, msg.c_str());
  return ExitCodeFor(s);
}

Args::Args(int argc, char** argv, int first) : i_(0) {
  for (int i = first; i < argc; ++i) args_.emplace_back(argv[i]);
}

bool Args::Flag(const std::string& name) {
  if (Done() || args_[i_] != name) return false;
  ++i_;
  return true;
}

bool Args::Option(const std::string& name, std::string* out) {
  if (Done()) return false;
  const std::string& a = args_[i_];
  if (a == name) {
    if (i_ + 1 >= args_.size()) {
      status_ = absl::InvalidArgumentError(absl::StrCat(name, " needs a value"));
      ++i_;
      return false;
    }
    *out = args_[i_ + 1];
    i_ += 2;
    return true;
  }
  if (a.rfind(name + "=", 0) == 0) {
    *out = a.substr(name.size() + 1);
    ++i_;
    return true;
  }
  return false;
}

bool Args::Positional(std::string* out) {
  if (Done() || (args_[i_].size() > 1 && args_[i_][0] == '-')) return false;
  *out = args_[i_++];
  return true;
}

std::string Args::Next() { return Done() ? "" : args_[i_++]; }

}  // namespace kiln::cli

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
    "  plan-info PLAN.kiln  describe a plan (no weights read) and check it runs here\n"
    "  kernels              list a target's plan kernels and their contracts\n"
    "\n"
    "`kiln <command> --help` describes a command's options.\n"
    "exit codes: 0 ok, 1 internal error, 2 invalid model or arguments, 3 unsupported\n";

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
  if (cmd == "plan-info") return RunPlanInfo(argc, argv);
  if (cmd == "kernels") return RunKernels(argc, argv);
  std::fprintf(stderr, "kiln: error: unknown command '%s' (see kiln --help)\n", cmd.c_str());
  return kExitInvalid;
}
