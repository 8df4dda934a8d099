// kiln::CompileToFile: the weights streamed from the imported constants give the file that
// WritePlanFile(Compile(...)) would, for an inline-weight model and for the same model with
// its weights moved to external data (mapped at import); the external copy compiles to the
// same buckets and weight bytes as the inline one; errors leave no file.
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "kiln/kiln.h"
#include "kiln/plan/plan.h"
#include "onnx/onnx_pb.h"

namespace kiln {
namespace {

const std::string kDefault = std::string(KILN_SOURCE_DIR) + "/models/fixtures/default.onnx";

std::string ReadBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

void WriteBytes(const std::string& path, std::string_view bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string FreshDir(const std::string& name) {
  const std::string dir = std::string(KILN_TEST_TMPDIR) + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// default.onnx with every initializer of 1 KiB or more moved to `dir`/weights.bin at
// 64-byte aligned offsets (junk bytes in between), as onnx.save_model(...,
// save_as_external_data=True) would store it. Returns the model path; `*mapped` counts the
// tensors large enough (>= 64 KiB) for the importer to map.
std::string ExternalCopy(const std::string& dir, int* mapped) {
  onnx::ModelProto m;
  const std::string bytes = ReadBytes(kDefault);
  EXPECT_TRUE(m.ParseFromString(bytes));
  std::string data;
  *mapped = 0;
  for (onnx::TensorProto& t : *m.mutable_graph()->mutable_initializer()) {
    if (t.raw_data().size() < 1024) continue;
    data.resize((data.size() + 63) / 64 * 64, '\x55');
    const size_t offset = data.size();
    data += t.raw_data();
    *mapped += t.raw_data().size() >= (64 << 10);
    const std::string length = std::to_string(t.raw_data().size());
    t.clear_raw_data();
    t.set_data_location(onnx::TensorProto::EXTERNAL);
    for (const auto& [k, v] : {std::pair<std::string, std::string>{"location", "weights.bin"},
                               {"offset", std::to_string(offset)},
                               {"length", length}}) {
      auto* e = t.add_external_data();
      e->set_key(k);
      e->set_value(v);
    }
  }
  WriteBytes(dir + "/weights.bin", data);
  const std::string path = dir + "/model.onnx";
  WriteBytes(path, m.SerializeAsString());
  return path;
}

CompileOptions TwoBuckets() {
  CompileOptions o;
  o.profile = {{"batch", {1, 2}}, {"sequence", {16}}};
  return o;
}

// CompileToFile(model) wrote the bytes of WritePlanFile(Compile(model)), and its PlanInfo
// describes them. Returns the in-memory plan.
Plan ExpectStreamedFileMatches(const std::string& model, const std::string& dir) {
  absl::StatusOr<Plan> plan = Compile(model, TwoBuckets());
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok()) return Plan{};
  const std::string streamed = dir + "/streamed.kiln";
  absl::StatusOr<PlanInfo> info = CompileToFile(model, streamed, TwoBuckets());
  EXPECT_TRUE(info.ok()) << info.status();
  if (!info.ok()) return *plan;
  const std::string file = ReadBytes(streamed);
  EXPECT_EQ(file, SerializePlan(*plan).value());
  EXPECT_EQ(info->file_bytes, file.size());
  EXPECT_EQ(info->weights_bytes, plan->weights.size());
  Plan bare = *plan;
  bare.weights = PlanWeights();
  EXPECT_TRUE(info->plan == bare);
  absl::StatusOr<Plan> loaded = LoadPlanFile(streamed);  // header, CRCs, metadata
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  if (loaded.ok()) EXPECT_TRUE(*loaded == *plan);
  return *plan;
}

TEST(CompileToFile, InlineWeightsStreamTheSameFile) {
  const std::string dir = FreshDir("compile_to_file_inline");
  const Plan plan = ExpectStreamedFileMatches(kDefault, dir);
  EXPECT_EQ(plan.buckets.size(), 2u);
  EXPECT_GT(plan.weights.size(), 100'000u);
}

TEST(CompileToFile, ExternalWeightsStreamTheSameFileAndPlanAsInline) {
  const std::string dir = FreshDir("compile_to_file_external");
  int mapped = 0;
  const std::string model = ExternalCopy(dir, &mapped);
  ASSERT_GE(mapped, 1) << "the fixture has no initializer large enough to be mapped";
  const Plan external = ExpectStreamedFileMatches(model, dir);
  absl::StatusOr<Plan> inline_plan = Compile(kDefault, TwoBuckets());
  ASSERT_TRUE(inline_plan.ok()) << inline_plan.status();
  EXPECT_TRUE(external.weights == inline_plan->weights);
  EXPECT_TRUE(external.buckets == inline_plan->buckets);
  EXPECT_NE(external.model_sha256, inline_plan->model_sha256);  // different .onnx bytes
}

TEST(CompileToFile, ErrorsLeaveNoFile) {
  const std::string dir = FreshDir("compile_to_file_errors");
  const std::string out = dir + "/out.kiln";
  CompileOptions unbound;  // batch and sequence stay symbolic
  absl::StatusOr<PlanInfo> info = CompileToFile(kDefault, out, unbound);
  EXPECT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument) << info.status();
  info = CompileToFile(kDefault, dir + "/no/such/folder/out.kiln", TwoBuckets());
  EXPECT_EQ(info.status().code(), absl::StatusCode::kNotFound) << info.status();
  info = CompileToFile(dir + "/missing.onnx", out, TwoBuckets());
  EXPECT_EQ(info.status().code(), absl::StatusCode::kNotFound) << info.status();
  EXPECT_TRUE(std::filesystem::is_empty(dir));
}

}  // namespace
}  // namespace kiln
