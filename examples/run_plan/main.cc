// run_plan: the smallest complete program on kiln's public API. It loads a compiled plan
// (.kiln), creates an Executor, builds one input tensor per graph input for the shape
// given on the command line, runs once and prints each output's name, dtype, dims and a
// checksum.
//
//   run_plan PLAN.kiln [SYMBOL=N]... [--threads N]
//
// Each symbolic input dim (e.g. `batch`, `sequence`) takes its value from SYMBOL=N, or
// else from the plan's first bucket. Inputs are deterministic: integer inputs whose name
// contains "mask" are ones, "token_type"/"segment" zeros, other integers ids in [1, 50];
// float inputs (ones for masks) cycle through [-1, 1]; bools are true.
// Limits: string inputs are not supported; one run, no timing (see `kiln bench`).
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "kiln/kiln.h"
#include "kiln/support/status.h"

namespace {

struct Args {
  std::string plan_path;
  std::map<std::string, int64_t> symbols;
  int threads = 0;
};

absl::StatusOr<int64_t> ParseInt(const std::string& text, const std::string& what) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(text, &v)) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: '%s' is not an integer", what, text));
  }
  return v;
}

absl::StatusOr<Args> ParseArgs(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads") {
      if (i + 1 >= argc) return absl::InvalidArgumentError("--threads needs a value");
      KILN_ASSIGN_OR_RETURN(int64_t t, ParseInt(argv[++i], "--threads"));
      if (t < 0 || t > 4096) {
        return absl::InvalidArgumentError(absl::StrFormat("--threads %d is out of range", t));
      }
      args.threads = static_cast<int>(t);
    } else if (const size_t eq = a.find('='); eq != std::string::npos && eq > 0) {
      KILN_ASSIGN_OR_RETURN(int64_t v, ParseInt(a.substr(eq + 1), a.substr(0, eq)));
      if (v <= 0) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s: the value must be positive, got %d", a.substr(0, eq), v));
      }
      args.symbols[a.substr(0, eq)] = v;
    } else if (args.plan_path.empty() && !a.empty() && a[0] != '-') {
      args.plan_path = a;
    } else {
      return absl::InvalidArgumentError(absl::StrFormat("unexpected argument '%s'", a));
    }
  }
  if (args.plan_path.empty()) {
    return absl::InvalidArgumentError("usage: run_plan PLAN.kiln [SYMBOL=N]... [--threads N]");
  }
  return args;
}

// The concrete dims of one plan input under the command-line bindings.
absl::StatusOr<std::vector<int64_t>> InputDims(const kiln::Plan& plan,
                                               const kiln::PlanTensorSig& sig,
                                               const std::map<std::string, int64_t>& symbols) {
  std::vector<int64_t> dims;
  for (const kiln::Dim& d : sig.dims) {
    if (d.is_known()) {
      dims.push_back(d.value());
      continue;
    }
    if (!d.is_symbol()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("input '%s' has a dim of unknown size", sig.name));
    }
    if (auto it = symbols.find(d.symbol()); it != symbols.end()) {
      dims.push_back(it->second);
      continue;
    }
    const auto* first = plan.buckets.empty() ? nullptr : &plan.buckets.front().bindings;
    if (first == nullptr || !first->contains(d.symbol())) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "input '%s': give a value for symbol '%s' (%s=N)", sig.name, d.symbol(), d.symbol()));
    }
    dims.push_back(first->at(d.symbol()));
  }
  return dims;
}

absl::StatusOr<kiln::Tensor> MakeInput(const kiln::PlanTensorSig& sig, std::vector<int64_t> dims) {
  if (sig.dtype == kiln::DType::kString || kiln::DTypeSize(sig.dtype) == 0) {
    return absl::UnimplementedError(
        absl::StrFormat("input '%s' has dtype %s, which run_plan cannot fill", sig.name,
                        std::string(kiln::DTypeName(sig.dtype))));
  }
  KILN_ASSIGN_OR_RETURN(kiln::Tensor t, kiln::Tensor::Create(sig.dtype, std::move(dims)));
  const std::string name = absl::AsciiStrToLower(sig.name);
  const bool mask = absl::StrContains(name, "mask");
  const bool segment = absl::StrContains(name, "token_type") || absl::StrContains(name, "segment");
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    double v = 1.0;  // masks and bools
    if (!mask && sig.dtype != kiln::DType::kBool) {
      if (kiln::IsFloat(sig.dtype)) {
        v = static_cast<double>(i % 17 - 8) / 8.0;
      } else {
        v = segment ? 0.0 : static_cast<double>(1 + (i * 7) % 50);
      }
    }
    t.SetFromDouble(i, v);
  }
  return t;
}

std::string DimsString(const std::vector<int64_t>& dims) {
  return absl::StrFormat("[%s]", absl::StrJoin(dims, ","));
}

absl::Status Run(const Args& args) {
  KILN_ASSIGN_OR_RETURN(kiln::Plan loaded, kiln::LoadPlanFile(args.plan_path));
  auto plan = std::make_shared<const kiln::Plan>(std::move(loaded));
  for (const auto& [symbol, value] : args.symbols) {
    bool used = false;
    for (const auto& sig : plan->inputs) {
      for (const kiln::Dim& d : sig.dims) used = used || d.symbol() == symbol;
    }
    if (!used) {
      return absl::InvalidArgumentError(
          absl::StrFormat("symbol '%s' is not a dim of any input of %s", symbol, args.plan_path));
    }
  }
  kiln::ExecutorOptions options;
  options.num_threads = args.threads;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<kiln::Executor> executor,
                        kiln::Executor::Create(plan, options));

  std::vector<kiln::Tensor> inputs;
  std::vector<kiln::TensorView> views;
  for (const kiln::PlanTensorSig& sig : plan->inputs) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> dims, InputDims(*plan, sig, args.symbols));
    KILN_ASSIGN_OR_RETURN(kiln::Tensor t, MakeInput(sig, std::move(dims)));
    std::printf("input %s %s %s\n", sig.name.c_str(),
                std::string(kiln::DTypeName(t.dtype())).c_str(), DimsString(t.dims()).c_str());
    views.push_back({t.dtype(), t.dims(), t.raw()});
    inputs.push_back(std::move(t));
  }

  kiln::RunStats stats;
  KILN_ASSIGN_OR_RETURN(std::vector<kiln::Tensor> outputs, executor->Run(views, &stats));
  if (outputs.size() != plan->outputs.size()) {
    return absl::InternalError(absl::StrFormat("the executor returned %d outputs, the plan has %d",
                                               outputs.size(), plan->outputs.size()));
  }
  std::printf("bucket %d%s\n", stats.bucket, stats.padded ? " (padded)" : "");
  for (size_t i = 0; i < outputs.size(); ++i) {
    const kiln::Tensor& t = outputs[i];
    double sum = 0.0, abs_sum = 0.0;
    for (int64_t j = 0; j < t.NumElements(); ++j) {
      const double v = t.GetAsDouble(j);
      sum += v;
      abs_sum += std::fabs(v);
    }
    std::printf("output %s %s %s sum=%.6g abs_sum=%.6g\n", plan->outputs[i].name.c_str(),
                std::string(kiln::DTypeName(t.dtype())).c_str(), DimsString(t.dims()).c_str(), sum,
                abs_sum);
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  absl::StatusOr<Args> args = ParseArgs(argc, argv);
  absl::Status status = args.ok() ? Run(*args) : args.status();
  if (!status.ok()) {
    std::fprintf(stderr, "run_plan: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
