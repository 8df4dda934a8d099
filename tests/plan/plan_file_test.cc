// Round trip, determinism, mmap loading, ReadPlanInfo, and corruption robustness of
// `.kiln` files: truncation at every byte and a flip of every bit of a small plan file
// must give an error (never a crash, never an accepted file). The streaming writer: a file
// written from one blob or from weight pieces is byte-identical to the independently
// assembled image, loads with a correct CRC, and bad pieces are refused with no file left.
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "kiln/plan/plan.h"
#include "plan/plan_format.h"
#include "sample_plan.h"

namespace kiln {
namespace {

using plan_test::SamplePlan;

using plan_test::AssembleUnchecked;

std::string TmpPath(const std::string& name) {
  std::filesystem::create_directories(KILN_TEST_TMPDIR);
  return std::string(KILN_TEST_TMPDIR) + "/" + name;
}

void WriteBytes(const std::string& path, std::string_view bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string ReadBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// SamplePlan with a weights section of 3 MiB + 100 bytes: three non-zero pieces (one past
// the writer's 1 MiB chunk) separated by zero gaps, both as a blob and as those pieces.
struct PiecedPlan {
  Plan with_blob;
  std::string blob;
  std::vector<PlanWeightPiece> pieces;
};
PiecedPlan MakePiecedPlan() {
  PiecedPlan p;
  p.blob.assign((size_t{3} << 20) + 100, '\0');
  const std::pair<size_t, size_t> ranges[] = {{0, 10240}, {10304, 2600000}, {3000000, 145828}};
  for (const auto& [at, n] : ranges)
    for (size_t i = at; i < at + n; ++i) p.blob[i] = static_cast<char>((i * 37 + 1) | 1);
  for (const auto& [at, n] : ranges)
    p.pieces.push_back({at, std::string_view(p.blob).substr(at, n)});
  p.with_blob = SamplePlan();
  p.with_blob.weights = PlanWeights::Copy(p.blob);
  return p;
}

TEST(PlanFile, WritePlanFileStreamsTheSameBytesAsTheImage) {
  const Plan plan = SamplePlan();
  const std::string path = TmpPath("streamed.kiln");
  ASSERT_TRUE(WritePlanFile(plan, path).ok());
  EXPECT_EQ(ReadBytes(path), SerializePlan(plan).value());
  EXPECT_EQ(ReadBytes(path), AssembleUnchecked(plan));
}

TEST(PlanFile, WeightPiecesGiveTheFileOfTheirBlob) {
  const PiecedPlan p = MakePiecedPlan();
  Plan bare = p.with_blob;
  bare.weights = PlanWeights();
  const std::string path = TmpPath("pieces.kiln");
  ASSERT_TRUE(WritePlanFile(bare, p.blob.size(), p.pieces, path).ok());
  const std::string file = ReadBytes(path);
  EXPECT_EQ(file, AssembleUnchecked(p.with_blob));
  EXPECT_EQ(file, SerializePlan(p.with_blob).value());
  absl::StatusOr<Plan> loaded = LoadPlanFile(path);  // checks both CRCs
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(*loaded == p.with_blob);
  // The stored CRC covers the streamed bytes: one changed weight byte is caught.
  std::string bad = file;
  bad[bad.size() - 2000] ^= 0x10;
  WriteBytes(path, bad);
  ASSERT_FALSE(LoadPlanFile(path).ok());
  EXPECT_NE(LoadPlanFile(path).status().message().find("section 'weights'"), std::string::npos);
}

TEST(PlanFile, BadWeightPiecesAreRefusedAndLeaveNoFile) {
  const PiecedPlan p = MakePiecedPlan();
  Plan bare = p.with_blob;
  bare.weights = PlanWeights();
  const std::string path = TmpPath("bad-pieces.kiln");
  std::filesystem::remove(path);
  auto refused = [&](const Plan& plan, uint64_t size, std::vector<PlanWeightPiece> pieces,
                     const std::string& why) {
    absl::Status s = WritePlanFile(plan, size, pieces, path);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find(why), std::string::npos) << s;
    EXPECT_FALSE(std::filesystem::exists(path));
  };
  std::vector<PlanWeightPiece> overlap = p.pieces;
  overlap[1].offset = 10000;  // starts inside piece 0
  refused(bare, p.blob.size(), overlap, "weights piece 1 [10000, +2600000) overlaps");
  refused(bare, 3000000, p.pieces, "runs past the 3000000-byte weights section");
  refused(bare, 1000, {}, "beyond the 1000-byte weights section");  // a buffer needs 10240
  refused(p.with_blob, p.blob.size(), p.pieces, "the plan's own weights must be empty");
  for (const auto& e : std::filesystem::directory_iterator(KILN_TEST_TMPDIR))
    EXPECT_EQ(e.path().filename().string().find("bad-pieces.kiln.tmp"), std::string::npos);
}

TEST(PlanFile, RoundTripIsIdenticalPlanAndBytes) {
  const Plan plan = SamplePlan();
  absl::StatusOr<std::string> bytes = SerializePlan(plan);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<Plan> back = ParsePlan(*bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == plan);
  EXPECT_EQ(back->buckets.size(), 2u);
  EXPECT_EQ(back->buckets[1].bindings.at("sequence"), 128);
  EXPECT_EQ(std::get<double>(back->buckets[0].steps[1].params[0].value), 1.5);
  EXPECT_EQ(back->weights.size(), 10240u);
  EXPECT_FALSE(back->weights.is_view());
  absl::StatusOr<std::string> again = SerializePlan(*back);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *bytes);
}

// Names, provenance and string parameters come from ONNX files, which do not guarantee
// UTF-8; a plan that serializes must parse back (the metadata's text fields are `bytes`).
TEST(PlanFile, NonUtf8TextRoundTrips) {
  Plan plan = SamplePlan();
  const std::string odd = std::string("node\xff\xfe", 6) + std::string(1, '\0') + "x";
  plan.buckets[0].steps[0].provenance.push_back(odd);
  plan.buckets[0].steps[0].params.push_back({"text", odd});
  plan.outputs[0].name = std::string("out\xc3", 4);
  plan.compile_options += "\x80";
  absl::StatusOr<std::string> bytes = SerializePlan(plan);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<Plan> back = ParsePlan(*bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == plan);
  EXPECT_EQ(std::get<std::string>(back->buckets[0].steps[0].params.back().value), odd);
}

TEST(PlanFile, DifferentPlansDifferAndEqualityIsNotTrivial) {
  Plan a = SamplePlan();
  Plan b = SamplePlan();
  b.buckets[0].steps[0].provenance.push_back("/extra");
  EXPECT_FALSE(a == b);
  EXPECT_NE(SerializePlan(a).value(), SerializePlan(b).value());
}

TEST(PlanFile, SerializationIsDeterministicAndLaidOut) {
  const std::string a = SerializePlan(SamplePlan()).value();
  const std::string b = SerializePlan(SamplePlan()).value();
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.substr(0, 8), "KILNPLAN");
  const uint64_t weights_offset = plan_internal::LoadU64(a, 32 + 32 + 8);
  EXPECT_EQ(weights_offset % 4096, 0u);
  EXPECT_EQ(a.size(), weights_offset + 10240);
}

TEST(PlanFile, LoadPlanFileMapsWeightsAndOutlivesThePlan) {
  const Plan plan = SamplePlan();
  const std::string path = TmpPath("roundtrip.kiln");
  ASSERT_TRUE(WritePlanFile(plan, path).ok());
  PlanWeights kept;
  {
    absl::StatusOr<Plan> loaded = LoadPlanFile(path);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    EXPECT_TRUE(*loaded == plan);
    EXPECT_TRUE(loaded->weights.is_view());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(loaded->weights.data()) % 4096, 0u);
    kept = loaded->weights;
  }
  EXPECT_EQ(kept.bytes(), plan.weights.bytes());  // mapping still alive via `kept`
}

TEST(PlanFile, ReadPlanInfoDoesNotReadTheWeights) {
  const Plan plan = SamplePlan();
  std::string bytes = SerializePlan(plan).value();
  bytes[bytes.size() - 1] ^= 0x01;  // corrupt the weights only
  const std::string path = TmpPath("info.kiln");
  WriteBytes(path, bytes);
  absl::StatusOr<PlanInfo> info = ReadPlanInfo(path);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->format_version, 1u);
  EXPECT_EQ(info->file_bytes, bytes.size());
  EXPECT_EQ(info->weights_bytes, 10240u);
  EXPECT_EQ(info->weights_offset % 4096, 0u);
  EXPECT_EQ(info->plan.weights.size(), 0u);
  Plan expected = plan;
  expected.weights = PlanWeights();
  EXPECT_TRUE(info->plan == expected);
  // The full load does read them, and rejects the corruption.
  absl::StatusOr<Plan> loaded = LoadPlanFile(path);
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find("section 'weights'"), std::string::npos)
      << loaded.status();
}

TEST(PlanFile, MissingAndEmptyFiles) {
  EXPECT_EQ(LoadPlanFile(TmpPath("does-not-exist.kiln")).status().code(),
            absl::StatusCode::kNotFound);
  const std::string empty = TmpPath("empty.kiln");
  WriteBytes(empty, "");
  absl::Status s = LoadPlanFile(empty).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("truncated"), std::string::npos) << s;
  EXPECT_EQ(ReadPlanInfo(empty).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PlanFile, EveryTruncationIsAnError) {
  const std::string bytes = SerializePlan(SamplePlan()).value();
  for (size_t n = 0; n < bytes.size(); ++n) {
    absl::StatusOr<Plan> p = ParsePlan(std::string_view(bytes).substr(0, n));
    ASSERT_FALSE(p.ok()) << "truncated to " << n << " bytes was accepted";
    ASSERT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << n << ": " << p.status();
  }
}

TEST(PlanFile, TruncatedFilesOnDiskAreErrorsForBothReaders) {
  const std::string bytes = SerializePlan(SamplePlan()).value();
  const std::string path = TmpPath("truncated.kiln");
  // Every length inside the header and metadata, then a stride through the rest.
  for (size_t n = 0; n < bytes.size(); n += (n < 1024 ? 1 : 97)) {
    WriteBytes(path, std::string_view(bytes).substr(0, n));
    ASSERT_FALSE(LoadPlanFile(path).ok()) << n;
    ASSERT_FALSE(ReadPlanInfo(path).ok()) << n;
  }
}

// No byte of a plan file may change without an error: the header and section table
// are CRC-covered and range-checked, the metadata and weights have per-section CRCs,
// and the padding before the weights must be zero.
TEST(PlanFile, EveryBitFlipIsAnError) {
  const std::string bytes = SerializePlan(SamplePlan()).value();
  std::string copy = bytes;
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      copy[i] = static_cast<char>(bytes[i] ^ (1 << bit));
      absl::StatusOr<Plan> p = ParsePlan(copy);
      ASSERT_FALSE(p.ok()) << "flip of byte " << i << " bit " << bit << " was accepted";
      ASSERT_TRUE(p.status().code() == absl::StatusCode::kInvalidArgument ||
                  p.status().code() == absl::StatusCode::kFailedPrecondition)
          << p.status();
    }
    copy[i] = bytes[i];
  }
}

TEST(PlanFile, EveryHeaderBitFlipIsAnErrorFromDisk) {
  const std::string bytes = SerializePlan(SamplePlan()).value();
  const std::string path = TmpPath("flipped.kiln");
  std::string copy = bytes;
  for (size_t i = 0; i < plan_internal::kHeaderBytes; ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      copy[i] = static_cast<char>(bytes[i] ^ (1 << bit));
      WriteBytes(path, copy);
      ASSERT_FALSE(LoadPlanFile(path).ok()) << i << ":" << bit;
      ASSERT_FALSE(ReadPlanInfo(path).ok()) << i << ":" << bit;
    }
    copy[i] = bytes[i];
  }
}

}  // namespace
}  // namespace kiln
