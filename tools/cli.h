// Shared pieces of the `kiln` CLI: argument scanning, exit codes, error printing.
// Exit codes: 0 ok, 1 internal error, 2 invalid model or arguments, 3 unsupported, 4 an
// accuracy gate not met (kiln compile --accept, kiln verify).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kiln/ir/graph.h"

namespace kiln::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;
inline constexpr int kExitInvalid = 2;
inline constexpr int kExitUnsupported = 3;
inline constexpr int kExitAccuracy = 4;  // absl::StatusCode::kAborted (kiln/verify.h)

// Maps a status to the exit code above.
int ExitCodeFor(const absl::Status& s);
// Prints "kiln: error: <message>" as one line on stderr and returns the exit code.
int Fail(const absl::Status& s);

// A simple argument cursor: flags `--name value` or `--name=value`, positionals.
class Args {
 public:
  Args(int argc, char** argv, int first);
  bool Done() const { return i_ >= args_.size(); }
  // True (and advances) if the current argument is the flag `name` (no value).
  bool Flag(const std::string& name);
  // True (and advances) if the current argument is `name` with a value; the value goes
  // to *out. Missing value -> records an error.
  bool Option(const std::string& name, std::string* out);
  // The current argument as a positional if it does not start with '-'.
  bool Positional(std::string* out);
  // The current argument, unconsumed (for error messages); advances.
  std::string Next();
  const absl::Status& status() const { return status_; }

 private:
  std::vector<std::string> args_;
  size_t i_;
  absl::Status status_;
};

// "1x128" -> {1, 128}; "scalar" or "" -> {}.
absl::Status ParseDims(const std::string& text, std::vector<int64_t>* dims);
// One --shape value: comma-separated NAME=D0xD1... for graph inputs (into `inputs`) or
// SYMBOL=N for symbolic dims (into `symbols`).
absl::Status ParseShapeSpec(const std::string& spec, const Graph& g,
                            std::map<std::string, std::vector<int64_t>>* inputs,
                            std::map<std::string, int64_t>* symbols);
// The same against a list of input names (a plan's signature, or a model not yet imported).
absl::Status ParseShapeSpec(const std::string& spec, const std::vector<std::string>& input_names,
                            std::map<std::string, std::vector<int64_t>>* inputs,
                            std::map<std::string, int64_t>* symbols);
// One --profile value: comma-separated SYMBOL=VALUES, VALUES either `a:b:c` (these points)
// or `lo..hi` (lo, hi and the powers of two between them); merged into `profile`, sorted
// and deduplicated.
absl::Status ParseProfileSpec(const std::string& spec,
                              std::map<std::string, std::vector<int64_t>>* profile);

int RunBench(int argc, char** argv);
int RunCompile(int argc, char** argv);
int RunGenerate(int argc, char** argv);

int RunInspect(int argc, char** argv);
int RunOpt(int argc, char** argv);
int RunPlanInfo(int argc, char** argv);
int RunKernels(int argc, char** argv);
int RunVerify(int argc, char** argv);
int RunRun(int argc, char** argv);

}  // namespace kiln::cli
