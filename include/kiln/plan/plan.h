// kiln::Plan — the compiled form of a model — and its `.kiln` file container.
//
// A Plan is what lowering produces and executors run: the target, a compatibility
// manifest, the source model's SHA-256, the compile options, the graph I/O signature,
// one memory plan + kernel-call list per shape bucket, and the weights blob. The file
// layout (header, section table, CRC32C per section, protobuf metadata, 4 KiB-aligned
// weights) is described in docs/plan-format.md.
//
// Loading validates everything (header, section bounds, CRCs, metadata references)
// before returning a Plan: corrupt input gives InvalidArgument, a newer format version
// FailedPrecondition; never a crash. Same Plan -> byte-identical file.
// Limits: a Plan has no kernel semantics here; kernel ids and parameters are opaque
// strings/numbers checked only for shape (indices in range, dtypes known).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kiln/ir/graph.h"
#include "kiln/ir/tensor.h"
#include "kiln/target.h"

namespace kiln {

// The kiln + toolkit versions the plan was compiled with.
struct PlanManifest {
  std::string kiln_version;
  std::string cuda_toolkit_version;  // empty for cpu
  std::string cublas_version;        // empty for cpu
  bool operator==(const PlanManifest&) const = default;
};

// One graph input or output: dims are known (>= 0) or symbols; never unknown.
struct PlanTensorSig {
  std::string name;
  DType dtype = DType::kUndefined;
  std::vector<Dim> dims;
  bool operator==(const PlanTensorSig&) const = default;
};

enum class PlanBufferKind : uint32_t { kArena = 1, kWeight = 2, kInput = 3, kOutput = 4 };

// A tensor's storage in one bucket. kArena: [offset, offset+bytes) in the bucket's
// activation arena. kWeight: [offset, offset+bytes) in the weights blob. kInput/kOutput:
// bound to graph input/output number `binding`; offset must be 0.
// bytes >= product(dims) * DTypeSize(dtype) (buffers may be padded).
struct PlanBuffer {
  PlanBufferKind kind = PlanBufferKind::kArena;
  int64_t offset = 0;
  int64_t bytes = 0;
  DType dtype = DType::kUndefined;
  std::vector<int64_t> dims;
  int32_t binding = 0;  // graph input/output index for kInput/kOutput; else 0
  bool operator==(const PlanBuffer&) const = default;
};

// A named scalar, int-list or string kernel parameter.
struct PlanParam {
  using Value = std::variant<int64_t, double, std::vector<int64_t>, std::string>;
  std::string name;
  Value value;
  bool operator==(const PlanParam&) const = default;
};

// One kernel call. inputs/outputs index the bucket's buffers (-1 in inputs: an omitted
// optional input); provenance names the ONNX nodes the call covers. Kernel ids and their
// parameters: docs/plan-kernels.md.
struct PlanStep {
  std::string kernel;
  std::vector<int32_t> inputs;
  std::vector<int32_t> outputs;
  std::vector<PlanParam> params;
  std::vector<std::string> provenance;
  bool operator==(const PlanStep&) const = default;
};

// Which computation a bucket runs. kModel: the model as exported. kDecode: one new token
// per sequence of a KV-cache decoder over a paged cache of `past_sequence` slots per
// sequence (docs/generation.md), with a signature of its own: each past K/V input is a
// pool of blocks [blocks, kv_heads, block_size, head] and its present output the same pool
// with this step's rows written at the slots `position_ids` names through `block_table`
// [batch, kv_blocks] (kiln.CacheWrite), so a caller may pass one buffer as both
// (PlanBucket::in_place). Plans written before the paged cache have no decode signature
// (their caches were [batch, kv_heads, slots, head]); they still load, and
// GenerationSession asks for a recompile. kPacked: an encoder over the real
// tokens of a batch laid end to end (docs/packing.md), with a signature of its own
// (Plan::signatures): per-token inputs [tokens], `sequence_lengths` [sequences] in place of
// the attention mask, outputs [tokens, ...] or [sequences, ...]. Executor::Run picks among
// the buckets of the program RunOptions::program names (docs/generation.md).
enum class PlanProgram : uint32_t { kModel = 0, kDecode = 1, kPacked = 2 };

// The graph I/O of a program whose inputs and outputs are not the model's (kDecode,
// kPacked): its
// buckets' kInput/kOutput buffers bind these, and its paddable symbols are these.
struct PlanSignature {
  PlanProgram program = PlanProgram::kModel;
  std::vector<PlanTensorSig> inputs;
  std::vector<PlanTensorSig> outputs;
  std::vector<std::string> paddable_symbols;
  bool operator==(const PlanSignature&) const = default;
};

// What the precision pass decided for one compute op of a plan below fp32 (docs/precision.md):
// the precision it runs at and, for an op kept higher, why. Diagnostics only: no executor
// reads them.
struct PlanPrecisionNote {
  std::string op;                  // "kiln.QuantLinear", "kiln.SkipLayerNorm"
  std::string precision;           // "int8", "bf16", "fp32"
  std::string reason;              // empty when the op runs at the plan's precision
  std::vector<std::string> nodes;  // ONNX node names (provenance)
  double x_absmax = 0;             // static int8 activations: the calibrated |x| range; else 0
  bool operator==(const PlanPrecisionNote&) const = default;
};

// Graph output `output` of a bucket may be the same memory as graph input `input`: its
// steps read that input only through the step that writes the output.
struct PlanInPlace {
  int32_t input = 0;
  int32_t output = 0;
  bool operator==(const PlanInPlace&) const = default;
};

// One static shape: symbol bindings (sorted by name) -> memory plan and kernel calls.
struct PlanBucket {
  std::map<std::string, int64_t> bindings;
  PlanProgram program = PlanProgram::kModel;
  std::vector<PlanInPlace> in_place;  // sorted by output, unique outputs and inputs
  int64_t arena_bytes = 0;
  int64_t no_reuse_bytes = 0;   // sum of the arena buffers' aligned sizes (no reuse)
  int64_t peak_live_bytes = 0;  // most bytes live at once (a lower bound for arena_bytes)
  std::vector<PlanBuffer> buffers;
  std::vector<PlanStep> steps;
  bool operator==(const PlanBucket&) const = default;
};

// The weights blob: owned (64-byte aligned copy) or a view into a read-only file
// mapping kept alive by a shared owner. Copies share the storage. Compares by content.
class PlanWeights {
 public:
  PlanWeights() = default;
  static PlanWeights Copy(std::string_view bytes);
  // A view of [data, data+size) kept alive by `owner` (e.g. a file mapping).
  // `file_mapped`: the bytes are a read-only private mapping of a file (LoadPlanFile), so
  // an executor may drop resident pages it no longer reads (they fault back from the file).
  static PlanWeights View(const uint8_t* data, size_t size, std::shared_ptr<const void> owner,
                          bool file_mapped = false);

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  std::string_view bytes() const {
    return std::string_view(reinterpret_cast<const char*>(data_), size_);
  }
  bool is_view() const { return view_; }
  bool file_mapped() const { return file_mapped_; }
  bool operator==(const PlanWeights& o) const { return bytes() == o.bytes(); }

 private:
  std::shared_ptr<const void> owner_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool view_ = false;
  bool file_mapped_ = false;
};

struct Plan {
  PlanTarget target = PlanTarget::kCpu;
  std::vector<int32_t> cuda_sms;  // e.g. {80, 90}; empty for cpu
  PlanManifest manifest;
  std::array<uint8_t, 32> model_sha256{};  // SHA-256 of the source model bytes
  std::string compile_options;
  std::vector<PlanTensorSig> inputs;
  std::vector<PlanTensorSig> outputs;
  std::vector<PlanBucket> buckets;
  // Symbols whose run-time value may be smaller than a bucket's: the executor pads those
  // dims of the inputs (zeros) and slices the outputs (docs/plan-kernels.md, Padding).
  std::vector<std::string> paddable_symbols;
  // The programs with I/O of their own (sorted by program, unique, never kModel); the other
  // programs' buckets bind `inputs` and `outputs` above.
  std::vector<PlanSignature> signatures;
  // A plan compiled below fp32: each compute op's precision and why one is kept higher.
  std::vector<PlanPrecisionNote> precision_notes;
  PlanWeights weights;
  bool operator==(const Plan&) const = default;
};

// The I/O a program's buckets bind: its entry of Plan::signatures, else the plan's own.
struct PlanIo {
  const std::vector<PlanTensorSig>& inputs;
  const std::vector<PlanTensorSig>& outputs;
  const std::vector<std::string>& paddable_symbols;
};
PlanIo IoOf(const Plan& plan, PlanProgram program);
// True when the plan has a bucket of `program`.
bool HasProgram(const Plan& plan, PlanProgram program);

// SHA-256 of `bytes` (FIPS 180-4), for Plan::model_sha256.
std::array<uint8_t, 32> Sha256(std::string_view bytes);

// The current (and only known) plan format version.
inline constexpr uint32_t kPlanFormatVersion = 1;

// Serializes a Plan to the `.kiln` byte layout. Validates the Plan first (the same
// checks the loader makes), so a file that is written can always be read back.
absl::StatusOr<std::string> SerializePlan(const Plan& plan);
// Writes the same bytes as SerializePlan to `path` (through a temporary file renamed over
// it), streaming the weights from plan.weights instead of building the image in memory.
absl::Status WritePlanFile(const Plan& plan, const std::string& path);

// A weights section given in pieces instead of one blob: each piece's bytes go at its
// offset; offsets increase, pieces do not overlap, and the bytes between them are zero.
struct PlanWeightPiece {
  uint64_t offset = 0;
  std::string_view bytes;
};
// As WritePlanFile, with a weights section of `weights_bytes` bytes assembled from
// `pieces` as it is written (the CRC computed on the way); plan.weights must be empty.
// The file is byte-identical to SerializePlan of the plan whose weights are that blob.
// kiln::CompileToFile writes its plans this way, so the weights are never copied into
// memory a second time.
absl::Status WritePlanFile(const Plan& plan, uint64_t weights_bytes,
                           std::span<const PlanWeightPiece> pieces, const std::string& path);

// Parses and validates a `.kiln` image; the weights are copied out of `bytes`.
absl::StatusOr<Plan> ParsePlan(std::string_view bytes);
// Maps `path` read-only and validates it; the returned weights view the mapping,
// which lives as long as any copy of the Plan's weights.
absl::StatusOr<Plan> LoadPlanFile(const std::string& path);

// A plan's header and metadata, read without reading (or checksumming) the weights.
struct PlanInfo {
  uint32_t format_version = 0;
  uint64_t file_bytes = 0;
  uint64_t metadata_bytes = 0;
  uint64_t weights_offset = 0;
  uint64_t weights_bytes = 0;
  Plan plan;  // everything but the weights (plan.weights is empty)
};
absl::StatusOr<PlanInfo> ReadPlanInfo(const std::string& path);

std::string_view PlanTargetName(PlanTarget t);          // "cpu", "cuda"
std::string_view PlanProgramName(PlanProgram p);        // "model", "decode", "packed"
std::string_view PlanBufferKindName(PlanBufferKind k);  // "arena", "weight", ...

}  // namespace kiln
