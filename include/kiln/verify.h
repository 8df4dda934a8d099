// Accuracy of a plan against fp32, and the gate that fails a build on it (docs/precision.md,
// "Accuracy gates"). A plan below fp32 (bf16, int8) is run beside the same model's fp32 plan
// on the same inputs — held-out input sets from a folder, or seeded random valid inputs
// (token ids within the model's own tables, attention masks with real padding) — and each
// output is compared: max abs and relative error, cosine per row (mean and worst), and for
// score outputs the agreement of their rankings (Spearman's rho). `kiln verify` prints
// these; `kiln compile --accept` (and CompileToFileGated) fails the compile when a gate is
// not met, leaving no plan file behind.
//
// The oracle is the fp32 plan compiled here for each sample's shape (the reference
// executor, in double, would take minutes on BERT-base; kiln's fp32 plans match it to ~1e-5,
// tests/compiler). Rows: the last axis of an output, except positions an attention mask
// marks as padding (outputs whose leading dims are the mask's [batch, sequence]); an output
// whose last dim is below 8 holds scores (a cross-encoder's logits): its cosine is over all
// its scores of every sample as one vector (a batch-1 sample's one logit has no direction
// of its own), and its ranking is compared over every row of every sample.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "kiln/kiln.h"

namespace kiln {

// One bound: `metric` of output `output` ("" = every output) at least (>=) or at most (<=)
// `bound`. Metrics: cosine (worst row), cosine_mean, max_abs, max_rel (max abs error over
// the output's largest |fp32 value|), rank_agreement (score outputs only).
struct AccuracyGate {
  std::string output;
  std::string metric;
  bool at_least = true;
  double bound = 0;
  std::string ToString() const;  // "cosine>=0.99", "logits:rank_agreement>=0.99"
};

// "cosine>=0.999,max_abs<=0.05,logits:rank_agreement>=0.99"; "none" is no gate at all.
absl::StatusOr<std::vector<AccuracyGate>> ParseAccuracyGates(std::string_view spec);
// The gates a precision gets unless --accept says otherwise: fp16 and bf16 cosine >= 0.9999,
// int8 cosine >= 0.99, fp32 none.
std::vector<AccuracyGate> DefaultAccuracyGates(std::string_view precision);
// The precision a plan was compiled at ("fp32", "bf16", ...), from its compile options.
std::string PlanPrecision(const Plan& plan);

struct OutputAccuracy {
  std::string name;
  bool scores = false;  // last dim < 8: one cosine over all scores, ranking over rows
  int64_t rows = 0;     // rows compared, over all samples (scores: rows of scores)
  double max_abs = 0, max_rel = 0;
  double cosine_mean = 1, cosine_worst = 1;
  std::optional<double> rank_agreement;  // scores with >= 3 rows: Spearman's rho, worst column
  // The value of `metric` (nullopt: not defined for this output).
  std::optional<double> Metric(std::string_view metric) const;
};

struct AccuracyReport {
  std::string precision;  // the plan's
  int samples = 0;
  std::string inputs;  // "4 seeded random input sets" / "3 input sets from DIR"
  std::vector<OutputAccuracy> outputs;
  std::vector<AccuracyGate> gates;
  std::vector<std::string> failures;  // "logits: cosine 0.9812, wants >= 0.99"
  bool ok() const { return failures.empty(); }
  std::string Text() const;  // a table, one line per output, then the gates
  std::string Json() const;
};

struct VerifyOptions {
  std::vector<AccuracyGate> gates;
  // The gated compiles: each attempt's precision's DefaultAccuracyGates instead of `gates`
  // (what `kiln compile` does without --accept).
  bool default_gates = false;
  // Input sets: a folder of .npz files (one set each, arrays named by graph input) and/or
  // sub-folders of <input>.npy files; empty: `samples` seeded random valid input sets at
  // the shapes of the plan's buckets.
  std::string calib_dir;
  // Input sets given directly (graph input name -> tensor), used before calib_dir.
  std::vector<std::map<std::string, Tensor>> input_sets;
  int samples = 4;
  uint64_t seed = 0;
  int threads = 0;  // executor threads (0: one per core)
  // The options the plan was compiled with, when known (the oracle then uses the same
  // optimization level and disabled passes); otherwise -O2.
  std::optional<CompileOptions> compile_options;
};

// Runs `plan` (cpu) and the model's fp32 plan on the same inputs and compares each output.
// The report's failures list the gates not met; the call itself fails only on errors (bad
// inputs, a model that does not compile).
absl::StatusOr<AccuracyReport> VerifyPlan(const std::string& model_path,
                                          std::shared_ptr<const Plan> plan,
                                          const VerifyOptions& options);

// CompileToFile with the accuracy gate: the plan goes to a temporary file beside
// `plan_path`, is verified, and is renamed over `plan_path` only when every gate holds
// (verify.gates, or each attempt's defaults with verify.default_gates; none: no
// verification). A gate not met removes the temporary file, leaves `plan_path` as it was,
// and returns Aborted with the measured figures; `report` (may be null) receives them
// either way. compile.precision "auto" (cpu) tries int8, then int8 with the attention
// GEMMs in bf16, then bf16, then fp32, keeping the first that meets its gates (progress
// lines say which).
absl::StatusOr<PlanInfo> CompileToFileGated(const std::string& model_path,
                                            const std::string& plan_path,
                                            const CompileOptions& compile,
                                            const VerifyOptions& verify,
                                            AccuracyReport* report = nullptr);
// The same, in memory (Compile instead of CompileToFile).
absl::StatusOr<Plan> CompileGated(const std::string& model_path, const CompileOptions& compile,
                                  const VerifyOptions& verify, AccuracyReport* report = nullptr);

// Input sets from a folder (VerifyOptions::calib_dir), checked against the plan's model
// signature: every input present with its dtype, no extra array, no NaN or inf in a float
// input; errors name the file. Sorted by file name.
absl::StatusOr<std::vector<std::map<std::string, Tensor>>> ReadInputSets(const Plan& plan,
                                                                         const std::string& dir);

}  // namespace kiln
