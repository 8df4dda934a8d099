// One test per diagnosable defect of a `.kiln` file or Plan: each asserts the status
// code and the message, so users get a precise reason (docs/plan-format.md lists the
// checks). Header edits recompute the header CRC so the targeted check is reached.
#include <cstdint>
#include <limits>
#include <string>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "kiln/plan/plan.h"
#include "plan/plan_format.h"
#include "sample_plan.h"

namespace kiln {
namespace {

using plan_internal::kOffSections;
using plan_internal::kSectionEntryBytes;
using plan_internal::LoadU64;
using plan_internal::StoreU32;
using plan_internal::StoreU64;
using plan_test::AssembleUnchecked;
using plan_test::FixHeaderCrc;
using plan_test::SamplePlan;

constexpr size_t kMeta = kOffSections;                          // metadata entry
constexpr size_t kWeights = kOffSections + kSectionEntryBytes;  // weights entry

std::string Good() { return SerializePlan(SamplePlan()).value(); }

void ExpectError(std::string_view bytes, absl::StatusCode code, const std::string& needle) {
  absl::StatusOr<Plan> p = ParsePlan(bytes);
  ASSERT_FALSE(p.ok()) << "expected an error containing: " << needle;
  EXPECT_EQ(p.status().code(), code) << p.status();
  EXPECT_NE(p.status().message().find(needle), std::string::npos)
      << "message: " << p.status().message() << "\nexpected to contain: " << needle;
}

void ExpectInvalid(std::string_view bytes, const std::string& needle) {
  ExpectError(bytes, absl::StatusCode::kInvalidArgument, needle);
}

// --- header ---

TEST(PlanValidation, WrongMagic) {
  std::string f = Good();
  f[0] = 'X';
  ExpectInvalid(f, "not a kiln plan file (bad magic");
  ExpectInvalid(
      "PK\x03\x04 not a plan at all, but long enough to hold a header.........."
      "...............................................",
      "bad magic");
}

TEST(PlanValidation, NewerFormatVersion) {
  std::string f = Good();
  StoreU32(&f, plan_internal::kOffVersion, 7);
  ExpectError(f, absl::StatusCode::kFailedPrecondition,
              "plan format version 7 is newer than this kiln (knows 1)");
}

TEST(PlanValidation, VersionZero) {
  std::string f = Good();
  StoreU32(&f, plan_internal::kOffVersion, 0);
  ExpectInvalid(f, "plan format version 0 is invalid");
}

TEST(PlanValidation, Truncated) {
  ExpectInvalid(Good().substr(0, 50), "plan file is truncated: 50 bytes");
}

TEST(PlanValidation, HeaderSize) {
  std::string f = Good();
  StoreU32(&f, plan_internal::kOffHeaderSize, 128);
  FixHeaderCrc(&f);
  ExpectInvalid(f, "plan header size 128 is invalid");
}

TEST(PlanValidation, HeaderCrcMismatch) {
  std::string f = Good();
  StoreU32(&f, plan_internal::kOffFlags, 1);  // CRC not fixed
  ExpectInvalid(f, "plan header CRC32C mismatch");
}

TEST(PlanValidation, UnknownFlags) {
  std::string f = Good();
  StoreU32(&f, plan_internal::kOffFlags, 4);
  FixHeaderCrc(&f);
  ExpectInvalid(f, "unknown flags 0x00000004");
}

TEST(PlanValidation, UnknownHeaderTarget) {
  std::string f = Good();
  StoreU32(&f, plan_internal::kOffTarget, 9);
  FixHeaderCrc(&f);
  ExpectInvalid(f, "unknown target 9");
}

TEST(PlanValidation, HeaderTargetDisagreesWithMetadata) {
  std::string f = Good();
  StoreU32(&f, plan_internal::kOffTarget, 2);
  FixHeaderCrc(&f);
  ExpectInvalid(f, "plan header target 2 disagrees with the metadata target 1");
}

TEST(PlanValidation, SectionCount) {
  std::string f = Good();
  StoreU32(&f, plan_internal::kOffSectionCount, 3);
  FixHeaderCrc(&f);
  ExpectInvalid(f, "plan section table has 3 entries");
}

TEST(PlanValidation, SectionKind) {
  std::string f = Good();
  StoreU32(&f, kMeta + plan_internal::kEntKind, 2);
  FixHeaderCrc(&f);
  ExpectInvalid(f, "entry 0 has kind 2; expected 1 (metadata)");
}

TEST(PlanValidation, ReservedNonZero) {
  std::string f = Good();
  StoreU32(&f, kWeights + plan_internal::kEntReserved1, 1);
  FixHeaderCrc(&f);
  ExpectInvalid(f, "entry 1 (weights) has non-zero reserved fields");
}

TEST(PlanValidation, SectionOffsetPlusSizeOverflows) {
  std::string f = Good();
  StoreU64(&f, kWeights + plan_internal::kEntSize, std::numeric_limits<uint64_t>::max());
  FixHeaderCrc(&f);
  ExpectInvalid(f, "plan section 'weights' offset 4096 + size 18446744073709551615 overflows");
}

TEST(PlanValidation, SectionOutsideFile) {
  std::string f = Good();
  StoreU64(&f, kWeights + plan_internal::kEntSize, 10241);
  FixHeaderCrc(&f);
  ExpectInvalid(f, "plan section 'weights' [4096, 14337) is outside the file (14336 bytes)");
}

TEST(PlanValidation, SectionOverlapsHeader) {
  std::string f = Good();
  StoreU64(&f, kMeta + plan_internal::kEntOffset, 40);
  FixHeaderCrc(&f);
  ExpectInvalid(f, "plan section 'metadata' at offset 40 overlaps the 96-byte header");
}

TEST(PlanValidation, SectionsOverlap) {
  std::string f = Good();
  const uint64_t meta_size = LoadU64(f, kMeta + plan_internal::kEntSize);
  StoreU64(&f, kWeights + plan_internal::kEntOffset, 100);
  StoreU64(&f, kWeights + plan_internal::kEntSize, 50);
  FixHeaderCrc(&f);
  ExpectInvalid(f, absl::StrFormat("plan sections 'metadata' [96, %d) and 'weights' [100, 150) "
                                   "overlap",
                                   96 + meta_size));
}

TEST(PlanValidation, WeightsNotAligned) {
  std::string f = Good();
  const uint64_t meta_size = LoadU64(f, kMeta + plan_internal::kEntSize);
  StoreU64(&f, kWeights + plan_internal::kEntOffset, 96 + meta_size);
  FixHeaderCrc(&f);
  ExpectInvalid(f, absl::StrFormat("plan section 'weights' starts at %d; it must start at the "
                                   "first 4096-byte boundary",
                                   96 + meta_size));
}

TEST(PlanValidation, TrailingBytes) {
  std::string f = Good() + "x";
  ExpectInvalid(f, "plan file has 1 bytes after its last section");
}

TEST(PlanValidation, NonZeroPadding) {
  std::string f = Good();
  f[4000] = 1;
  ExpectInvalid(f, "non-zero byte in the padding before the weights (offset 4000)");
}

TEST(PlanValidation, MetadataCrcMismatchNamesSection) {
  std::string f = Good();
  f[100] ^= 0x20;
  ExpectInvalid(f, "CRC32C mismatch in plan section 'metadata'");
}

TEST(PlanValidation, WeightsCrcMismatchNamesSection) {
  std::string f = Good();
  f[5000] ^= 0x01;
  ExpectInvalid(f, "CRC32C mismatch in plan section 'weights'");
}

TEST(PlanValidation, MetadataDoesNotParse) {
  // A length-delimited field claiming 127 bytes in a 2-byte message, with valid CRCs.
  using namespace plan_internal;
  const std::string meta = "\x0a\x7f";
  Header h;
  h.version = 1;
  h.target = 1;
  h.metadata = {kSectionMetadata, kHeaderBytes, meta.size(), Crc32c(meta)};
  h.weights = {kSectionWeights, 4096, 0, Crc32c("")};
  std::string f = EncodeHeader(h) + meta;
  f.resize(4096, '\0');
  ExpectInvalid(f, "plan metadata: the protobuf message does not parse");
}

TEST(PlanValidation, MetadataWeightsSizeDisagreesWithSection) {
  Plan p = SamplePlan();
  std::string f = AssembleUnchecked(p);
  // Drop the last 4096 weight bytes from the section (and the file), keep the metadata.
  f.resize(f.size() - 4096);
  StoreU64(&f, kWeights + plan_internal::kEntSize, 10240 - 4096);
  StoreU32(&f, kWeights + plan_internal::kEntCrc,
           plan_internal::Crc32c(std::string_view(f).substr(4096)));
  FixHeaderCrc(&f);
  ExpectInvalid(f, "plan metadata records 10240 weight bytes but the weights section has 6144");
}

// --- metadata references: each defect is rejected by the loader and by the writer ---

void ExpectBadPlan(const Plan& p, const std::string& needle) {
  ExpectInvalid(AssembleUnchecked(p), needle);
  absl::StatusOr<std::string> s = SerializePlan(p);
  ASSERT_FALSE(s.ok()) << "writer accepted a plan the loader rejects: " << needle;
  EXPECT_NE(s.status().message().find(needle), std::string::npos) << s.status();
}

TEST(PlanValidation, ArenaBufferBeyondArena) {
  Plan p = SamplePlan();
  p.buckets[0].buffers[5].offset += 4;
  ExpectBadPlan(p, "plan metadata: bucket 0 buffer 5 [2052, 4100) is beyond the 4096-byte arena");
}

TEST(PlanValidation, WeightBufferBeyondWeights) {
  Plan p = SamplePlan();
  p.buckets[1].buffers[3].offset = 10200;
  ExpectBadPlan(p, "bucket 1 buffer 3 [10200, 10328) is beyond the 10240-byte weights section");
}

TEST(PlanValidation, BufferOffsetOverflows) {
  Plan p = SamplePlan();
  p.buckets[0].buffers[4].offset = std::numeric_limits<int64_t>::max();
  ExpectBadPlan(p, "bucket 0 buffer 4 offset + size overflows");
}

TEST(PlanValidation, NegativeBufferOffset) {
  Plan p = SamplePlan();
  p.buckets[0].buffers[4].offset = -8;
  ExpectBadPlan(p, "bucket 0 buffer 4 has negative offset -8");
}

TEST(PlanValidation, BufferTooSmallForItsTensor) {
  Plan p = SamplePlan();
  p.buckets[0].buffers[2].bytes = 8188;
  ExpectBadPlan(p, "bucket 0 buffer 2 is 8188 bytes but its f32 tensor needs 8192");
}

TEST(PlanValidation, UnknownProgram) {
  Plan p = SamplePlan();
  p.buckets[1].program = static_cast<PlanProgram>(5);
  ExpectBadPlan(p, "bucket 1 has unknown program 5");
}

TEST(PlanValidation, InPlacePairOutOfRange) {
  Plan p = SamplePlan();
  p.buckets[0].in_place = {{0, 3}};
  ExpectBadPlan(p, "bucket 0 in-place pair 0 (input 0, output 3) is out of range");
}

TEST(PlanValidation, InPlacePairOfDifferentDtypes) {
  Plan p = SamplePlan();
  p.buckets[0].in_place = {{0, 0}};  // i64 input_ids, f32 embeddings
  ExpectBadPlan(p, "bucket 0 pairs input 0 and output 0 of different dtypes");
}

TEST(PlanValidation, ProgramAndInPlaceRoundTrip) {
  Plan p = SamplePlan();
  p.outputs.push_back({"ids_again", DType::kI64, p.inputs[0].dims});
  p.buckets[1].program = PlanProgram::kDecode;
  p.buckets[1].in_place = {{0, 1}};
  // The output must be written for the plan to run, not to load: the loader checks shape.
  absl::StatusOr<std::string> bytes = SerializePlan(p);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<Plan> back = ParsePlan(*bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->buckets[1].program, PlanProgram::kDecode);
  EXPECT_EQ(back->buckets[1].in_place, (std::vector<PlanInPlace>{{0, 1}}));
  EXPECT_EQ(back->buckets[0].program, PlanProgram::kModel);
  EXPECT_TRUE(back->buckets[0].in_place.empty());
}

// A packed program: its own signature (one token input [tokens], the lengths); bucket 1's
// input bindings index it, not the model's.
Plan WithPackedProgram() {
  Plan p = SamplePlan();
  PlanSignature sig;
  sig.program = PlanProgram::kPacked;
  sig.inputs = {{"input_ids", DType::kI64, {Dim::Symbol("tokens")}},
                {"sequence_lengths", DType::kI64, {Dim::Symbol("sequences")}}};
  sig.outputs = {{"embeddings", DType::kF32, {Dim::Symbol("sequences"), Dim::Known(32)}}};
  sig.paddable_symbols = {"sequences", "tokens"};
  p.signatures = {sig};
  PlanBucket& b = p.buckets[1];
  b.program = PlanProgram::kPacked;
  b.bindings = {{"sequences", 8}, {"tokens", 128}};
  b.buffers[0].dims = {128};
  b.buffers[1].dims = {8};
  return p;
}

TEST(PlanValidation, ProgramSignaturesRoundTrip) {
  const Plan p = WithPackedProgram();
  absl::StatusOr<std::string> bytes = SerializePlan(p);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<Plan> back = ParsePlan(*bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->signatures, p.signatures);
  EXPECT_EQ(back->buckets[1].program, PlanProgram::kPacked);
  EXPECT_EQ(IoOf(*back, PlanProgram::kPacked).inputs[1].name, "sequence_lengths");
  EXPECT_EQ(IoOf(*back, PlanProgram::kModel).inputs[1].name, "attention_mask");
  EXPECT_EQ(IoOf(*back, PlanProgram::kDecode).inputs[1].name, "attention_mask");
  EXPECT_TRUE(HasProgram(*back, PlanProgram::kPacked));
  EXPECT_FALSE(HasProgram(*back, PlanProgram::kDecode));
  EXPECT_EQ(*back, p);
}

TEST(PlanValidation, BadProgramSignatures) {
  Plan p = WithPackedProgram();
  p.signatures[0].program = PlanProgram::kModel;
  ExpectBadPlan(p, "signature 0 is for program 0, which has no I/O of its own");
  p = WithPackedProgram();
  p.signatures.push_back(p.signatures[0]);
  ExpectBadPlan(p, "the program signatures are not sorted by program and unique");
  p = WithPackedProgram();
  p.signatures[0].inputs[0].dims = {Dim::Known(-2)};
  ExpectBadPlan(p, "packed input 0 'input_ids' dim 0 is negative (-2)");
  // A packed bucket's bindings are checked against the packed signature.
  p = WithPackedProgram();
  p.buckets[1].buffers[6].binding = 1;
  ExpectBadPlan(p, "bucket 1 buffer 6 binds output 1 but the graph has 1");
  p = WithPackedProgram();
  p.signatures[0].inputs.pop_back();
  ExpectBadPlan(p, "bucket 1 buffer 1 binds input 1 but the graph has 1");
}

TEST(PlanValidation, NegativeBufferDim) {
  Plan p = SamplePlan();
  p.buckets[1].buffers[4].dims[1] = -1;
  ExpectBadPlan(p, "bucket 1 buffer 4 has negative dim -1");
}

TEST(PlanValidation, NegativeSignatureDim) {
  Plan p = SamplePlan();
  p.outputs[0].dims[1] = Dim::Known(-3);
  ExpectBadPlan(p, "output 0 'embeddings' dim 1 is negative (-3)");
}

TEST(PlanValidation, UnknownDType) {
  Plan p = SamplePlan();
  p.buckets[0].buffers[4].dtype = DType::kUndefined;  // written as ONNX code 0
  ExpectInvalid(AssembleUnchecked(p), "bucket 0 buffer 4 has unknown dtype code 0");
  EXPECT_FALSE(SerializePlan(p).ok());
  p = SamplePlan();
  p.inputs[1].dtype = DType::kString;  // ONNX code 8: a real code kiln cannot run
  ExpectInvalid(AssembleUnchecked(p), "input 1 'attention_mask' has unknown dtype code 8");
  EXPECT_FALSE(SerializePlan(p).ok());
}

TEST(PlanValidation, StepBufferIndexOutOfRange) {
  Plan p = SamplePlan();
  p.buckets[1].steps[1].inputs[2] = 7;
  ExpectBadPlan(p, "bucket 1 step 1 (cpu.linear) refers to buffer 7; the bucket has 7");
  p = SamplePlan();
  p.buckets[0].steps[2].outputs[0] = -1;
  ExpectBadPlan(p, "bucket 0 step 2 (cpu.masked_mean) refers to buffer -1");
}

TEST(PlanValidation, EmptyKernelId) {
  Plan p = SamplePlan();
  p.buckets[0].steps[0].kernel.clear();
  ExpectBadPlan(p, "bucket 0 step 0 has an empty kernel id");
}

TEST(PlanValidation, IoBindingOutOfRange) {
  Plan p = SamplePlan();
  p.buckets[0].buffers[1].binding = 2;
  ExpectBadPlan(p, "bucket 0 buffer 1 binds input 2 but the graph has 2");
}

TEST(PlanValidation, IoBindingWithOffset) {
  Plan p = SamplePlan();
  p.buckets[0].buffers[6].offset = 16;
  ExpectBadPlan(p, "bucket 0 buffer 6 is an I/O binding with non-zero offset 16");
}

TEST(PlanValidation, BindingOnNonIoBuffer) {
  Plan p = SamplePlan();
  p.buckets[0].buffers[4].binding = 1;
  ExpectBadPlan(p, "bucket 0 buffer 4 is not an I/O binding but has binding 1");
}

TEST(PlanValidation, NegativeArenaAndBinding) {
  Plan p = SamplePlan();
  p.buckets[1].bindings["batch"] = -8;
  ExpectBadPlan(p, "bucket 1 binds batch to negative -8");
  p = SamplePlan();
  p.buckets[0].arena_bytes = -1;
  ExpectBadPlan(p, "bucket 0 has a negative arena size -1");
}

TEST(PlanValidation, TargetArchitectures) {
  Plan p = SamplePlan();
  p.cuda_sms = {90};
  ExpectBadPlan(p, "a cpu plan lists CUDA SM architectures");
  p = SamplePlan();
  p.target = PlanTarget::kCuda;
  ExpectBadPlan(p, "a cuda plan lists no SM architectures");
}

TEST(PlanValidation, CudaPlanRoundTrips) {
  Plan p = SamplePlan();
  p.target = PlanTarget::kCuda;
  p.cuda_sms = {80, 90};
  p.manifest.cuda_toolkit_version = "13.0";
  p.manifest.cublas_version = "13.0.0";
  absl::StatusOr<Plan> back = ParsePlan(SerializePlan(p).value());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == p);
}

}  // namespace
}  // namespace kiln
