// Lowering of one static (fully specialized) graph to a plan bucket: buffers, kernel
// steps and the activation memory plan, per docs/plan-kernels.md. kiln::Compile
// (compile.cc) calls LowerBucket once per shape bucket with one WeightTable shared by all
// buckets, so identical constant bytes are stored once in the plan's weights blob.
// Limits: the graph must be topologically ordered and every value a step touches must
// have static dims (InvalidArgument naming the node otherwise); kernel choice is in
// lower_kernels.cc; ops with no optimized kernel become "ref" steps.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "kiln/ir/graph.h"
#include "kiln/plan/plan.h"

namespace kiln::compiler {

// The weights blob being built: constants deduplicated by content (size + CRC32C, then
// memcmp), each at a 64-byte aligned offset, in first-use order (deterministic).
class WeightTable {
 public:
  // The blob offset of `t`'s bytes, adding them when no identical bytes are stored yet.
  int64_t Add(const Tensor& t);
  // Add(derive(source)), derived once per source storage and `kind` however many buckets
  // ask (int4 codes repacked two per byte, the same in every bucket).
  int64_t AddDerived(const Tensor& source, int kind,
                     const std::function<Tensor(const Tensor&)>& derive);
  int64_t size() const { return size_; }
  int64_t num_unique() const { return static_cast<int64_t>(entries_.size()); }
  // Copies each unique constant once into a 64-byte aligned blob.
  PlanWeights Build() const;
  // The same blob as pieces viewing the constants themselves (in offset order, valid while
  // this table lives), for WritePlanFile to stream without building it.
  std::vector<PlanWeightPiece> Pieces() const;

 private:
  struct Entry {
    Tensor tensor;  // keeps the bytes alive until Build / the plan is written
    int64_t offset = 0;
  };
  std::vector<Entry> entries_;
  // Lookup only (never iterated): same storage (only of entries_' tensors, which keep
  // their storage alive, so an address is never reused while listed), then same content.
  absl::flat_hash_map<std::pair<const void*, int64_t>, int> by_storage_;
  absl::flat_hash_map<std::pair<int64_t, uint32_t>, std::vector<int>> by_content_;
  // (source storage, bytes, kind) -> offset; `derived_sources_` keeps those storages alive,
  // so an address is never reused while listed.
  std::map<std::tuple<const void*, int64_t, int>, int64_t> derived_;
  std::vector<Tensor> derived_sources_;
  int64_t size_ = 0;
};

struct LowerOptions {
  PlanTarget target = PlanTarget::kCpu;
  // cpu: false lowers every compute node to "ref" (-O0: the plan runs on the reference
  // kernels only). cuda has no host steps and ignores it.
  bool optimized_kernels = true;
  // cuda: fp32 linear/matmul steps get tf32 = 1 (CompileOptions::allow_tf32).
  bool allow_tf32 = false;
  // cuda: fp16/bf16 attention with head size 8, 16, 32, 64 or 128 runs on the flash kernel
  // (flash_attention); false keeps the simple attention kernel (--no-flash-attention).
  bool flash_attention = true;
};

// Lowers `g`, whose every graph-input dim is bound, to a bucket (bindings left empty for
// the caller). `input_names` are the plan's graph inputs in order (input buffers bind by
// name); outputs bind by position in g.outputs(). Every step it emits satisfies its kernel
// contract (checked; a violation is an Internal error). On cuda a node no device kernel
// takes is Unimplemented naming the node.
absl::StatusOr<PlanBucket> LowerBucket(const Graph& g, const std::vector<std::string>& input_names,
                                       const LowerOptions& options, WeightTable& weights);

// ---- lower_kernels.cc ----

// An optimized kernel for a node: its id and parameters, and whether output 0 may take
// over input 0's storage (docs/plan-kernels.md, in-place hints).
struct KernelChoice {
  std::string kernel;
  std::vector<PlanParam> params;
  bool inplace_ok = false;
  int num_inputs = 0;  // the contract's operand count; omitted trailing ones become -1
  // The node inputs that become the step's inputs, in order (empty: all of them). E.g.
  // Slice keeps its data and drops the constant starts/ends the params now carry.
  std::vector<int> operands;
};

// The target's kernel for `n` (every operand static), or nullopt when none applies (on
// cpu the node then goes to "ref"); `why_not` (optional) receives the reason.
std::optional<KernelChoice> ChooseKernel(const Node& n, PlanTarget target = PlanTarget::kCpu,
                                         std::string* why_not = nullptr);

// lower_kernels_standard.cc: the standard ONNX ops (eltwise, movement, gathers, cumsum,
// reduce, matmul), each where `target`'s contract table has the kernel.
std::optional<KernelChoice> ChooseStandardKernel(const Node& n, PlanTarget target,
                                                 std::string* why_not);

// True for the catalogue's views (OpInfo::view: Identity, Reshape, Squeeze, Unsqueeze,
// Flatten): they lower to no step, their output shares the input's storage.
bool IsAliasOp(const Node& n);

// The "ref" step's `node` parameter: IR text of a graph with one static Input per
// present operand (in order), `n` itself and `return` of its outputs. Checked to parse.
absl::StatusOr<std::string> RefNodeText(const Node& n);

}  // namespace kiln::compiler
