// The pass interface. A pass transforms a Graph in place and says whether it changed it.
// Subclasses implement RunImpl; the non-virtual Pass::Run wrapper is where timing,
// statistics and verification live (XLA's HloPassInterface shape). Passes are registered
// by name in one list (passes/registry.cc) and composed into pipelines that are data
// (passes/pipelines.cc).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "kiln/ir/graph.h"
#include "kiln/passes/fusion_report.h"
#include "kiln/passes/precision_report.h"
#include "kiln/target.h"

namespace kiln {

// What a pipeline run is told about the world.
struct PassContext {
  // Concrete sizes for symbolic dims (`--shape batch=1`) and for whole inputs
  // (`--shape input_ids=1x128`), applied by shape inference.
  std::map<std::string, int64_t> symbol_values;
  std::map<std::string, std::vector<int64_t>> input_shapes;
  // Constant folding skips outputs larger than this (bytes).
  int64_t fold_limit_bytes = int64_t{1} << 30;
  // When non-empty, DCE keeps only these graph outputs.
  std::vector<std::string> keep_outputs;
  // Run the verifier after every pass (tests always do; the CLI with --verify-each).
  bool verify_each = false;
  // Where fusion passes record what they fused and missed; may be null (then they only
  // fuse). Owned by the caller.
  FusionReport* fusion_report = nullptr;
  // What the graph is being compiled for. Only the passes whose job depends on it read
  // these (lower-precision); fusions and exact passes never do.
  PlanTarget target = PlanTarget::kCpu;
  Precision precision = Precision::kFp32;
  // Where the precision passes note each compute op's precision and why an op stays
  // higher (gemm-precision, lower-precision), and where numeric-safety leaves the ops
  // that must stay fp32; may be null. Owned by the caller.
  PrecisionReport* precision_report = nullptr;
  // Generation plans (--decode-context): lower-precision keeps the KV cache in f32 — each
  // graph output that appends this step's keys or values to a past input, and the fused
  // attentions reading it — so the decode program's cache pools stay f32 and no step
  // converts them (docs/generation.md).
  bool kv_cache_f32 = false;
  // Where passes leave what the user should hear though nothing failed (a declared output
  // shape the graph contradicts, replaced by the inferred one); may be null. Owned by the
  // caller, who prints them ("warning: ...").
  std::vector<std::string>* warnings = nullptr;
  // Valid input sets for passes that run the graph (numeric-safety's range calibration),
  // graph input name -> tensor; may be null (those passes then do nothing).
  const std::vector<absl::flat_hash_map<std::string, Tensor>>* calibration_inputs = nullptr;
  // cpu bf16/int8 plans: GEMM groups ("attention", "ffn") at another precision (bf16 or
  // fp32) than `precision` — --precision auto's fallbacks (gemm-precision).
  std::map<std::string, Precision> gemm_group_precision;
  // cpu bf16/int8 plans: the output heads' precision (a Linear whose result reaches a graph
  // output directly: an LM head, a classifier), which stay fp32 without it
  // (--head-precision; gemm-precision).
  std::optional<Precision> head_precision;
  // int8 plans: static activations — each QuantLinear's input quantized with one range
  // chosen by `observer` ("minmax", "percentile" of |x| at `percentile`, "entropy") from the
  // calibration runs (gemm-precision, passes/observers.h) instead of per row at run time.
  struct StaticActivations {
    bool enabled = false;
    std::string observer = "percentile";
    double percentile = 99.99;
  } static_activations;
};

// The precision of a plan's compute path outside its int8 GEMMs: a cuda int8 plan runs the
// rest in fp16 (the cuda kernels' fast path, as TensorRT's int8 builds fall back to fp16),
// a cpu int8 plan in fp32; any other plan at its `precision`.
inline Precision ComputePrecision(const PassContext& ctx) {
  if (ctx.precision != Precision::kInt8) return ctx.precision;
  return ctx.target == PlanTarget::kCuda ? Precision::kFp16 : Precision::kFp32;
}

// Counters a pass reports ("folded" -> 212, "removed Dropout" -> 24), per run.
using PassCounters = std::map<std::string, int64_t>;

class Pass {
 public:
  virtual ~Pass() = default;
  virtual std::string_view name() const = 0;
  // One line: what the pass does.
  virtual std::string_view description() const = 0;

  // Runs the pass: clears counters, calls RunImpl, verifies when asked. The bool is
  // "changed the graph".
  absl::StatusOr<bool> Run(Graph& g, const PassContext& ctx);
  const PassCounters& counters() const { return counters_; }

 protected:
  virtual absl::StatusOr<bool> RunImpl(Graph& g, const PassContext& ctx) = 0;
  void Count(const std::string& counter, int64_t n = 1) { counters_[counter] += n; }

 private:
  PassCounters counters_;
};

// Registers a pass defined outside kiln (or by a test) under `name`, after the built-in
// ones. Returns false if the name is taken. Not thread-safe: register before compiling.
bool RegisterPass(const std::string& name, std::unique_ptr<Pass> (*factory)());

// Creates a registered pass by name; nullptr if unknown.
std::unique_ptr<Pass> CreatePass(std::string_view name);
// All registered pass names, in registration order.
std::vector<std::string> RegisteredPassNames();

}  // namespace kiln
