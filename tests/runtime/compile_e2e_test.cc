// End to end: kiln::Compile every models/fixtures/*.onnx and models/fixtures/variants/*.onnx
// (BERT-family encoders), the torch/ exports and the decoder/ model, run the plan with the
// CPU executor on random ids and masks of ones, and compare with kiln::RunReference on the
// imported (unoptimized) graph. Also a profile with several buckets, run at a shape between
// them (padded: Compile must mark batch and sequence paddable), and a -O0 plan (every
// step ref).
// Tolerance 1e-4 absolute + 1e-4 relative: the plan runs fused fp32 kernels (oneDNN GEMMs,
// fp32 LayerNorm/softmax) through 2 layers of a 64-wide encoder, the reference unfused ops
// in double; errors of a few 1e-6 per op compound to ~1e-5 on O(1) outputs, while any
// wiring or fusion mistake is O(0.1).
// Skipped (saying so) while kiln::Compile is Unimplemented.
#include <algorithm>
#include <filesystem>
#include <initializer_list>
#include <random>

#include "absl/container/flat_hash_map.h"
#include "gmock/gmock.h"
#include "kiln/onnx/importer.h"
#include "kiln/plan/plan.h"
#include "runtime_test_util.h"

namespace kiln::runtime_test {
namespace {

std::vector<std::string> ModelsIn(std::initializer_list<const char*> dirs) {
  std::vector<std::string> out;
  for (const char* dir : dirs) {
    const std::filesystem::path p = std::string(KILN_SOURCE_DIR) + dir;
    for (const auto& e : std::filesystem::directory_iterator(p))
      if (e.is_regular_file() && e.path().extension() == ".onnx") out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Ids in [0, 256) (vocab: 1000 in fixtures/ and variants/, 512 in torch/, 256 in decoder/),
// token types in {0, 1}, masks of ones.
std::vector<Tensor> MakeInputs(const Plan& plan, int64_t batch, int64_t seq, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<Tensor> out;
  for (const PlanTensorSig& sig : plan.inputs) {
    std::vector<int64_t> dims;
    for (const Dim& d : sig.dims)
      dims.push_back(d.is_known() ? d.value() : d.symbol() == "batch" ? batch : seq);
    Tensor t(sig.dtype, dims);
    const bool mask = sig.name.find("mask") != std::string::npos;
    const bool types = sig.name.find("token_type") != std::string::npos;
    std::uniform_int_distribution<int64_t> dist(0, types ? 1 : 255);
    for (int64_t i = 0; i < t.NumElements(); ++i) t.SetFromDouble(i, mask ? 1.0 : dist(gen));
    out.push_back(std::move(t));
  }
  return out;
}

// Compiles `path`, runs it on (batch, seq) and compares every output with the reference.
void CheckModel(const std::string& path, CompileOptions opts, int64_t batch, int64_t seq,
                bool expect_padded = false) {
  SCOPED_TRACE(path);
  absl::StatusOr<Plan> plan = Compile(path, opts);
  if (plan.status().code() == absl::StatusCode::kUnimplemented)
    GTEST_SKIP() << "kiln::Compile is not implemented yet: " << plan.status();
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto exec = Executor::Create(std::make_shared<const Plan>(*std::move(plan)));
  ASSERT_TRUE(exec.ok()) << exec.status();
  const std::vector<Tensor> inputs = MakeInputs((*exec)->plan(), batch, seq, 7);
  std::vector<TensorView> views;
  for (const Tensor& t : inputs) views.push_back(View(t));
  RunStats stats;
  auto got = (*exec)->Run(views, &stats);
  ASSERT_TRUE(got.ok()) << got.status();
  if (expect_padded) {
    // A mask input and batch-major I/O make both symbols paddable (plan-kernels.md).
    EXPECT_EQ((*exec)->plan().paddable_symbols, (std::vector<std::string>{"batch", "sequence"}));
    EXPECT_TRUE(stats.padded);
  }

  auto g = ImportOnnxFile(path);
  ASSERT_TRUE(g.ok()) << g.status();
  absl::flat_hash_map<std::string, Tensor> feeds;
  for (size_t i = 0; i < inputs.size(); ++i) feeds[(*exec)->plan().inputs[i].name] = inputs[i];
  auto want = RunReference(**g, feeds);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_EQ(got->size(), want->size());
  for (size_t o = 0; o < want->size(); ++o) {
    Tensor w = (*want)[o];
    if (w.dtype() != DType::kF32) {
      EXPECT_TRUE((*got)[o].BitwiseEqual(w)) << "output " << o;
      continue;
    }
    ExpectClose((*got)[o], w, 1e-4, 1e-4,
                absl::StrCat((*exec)->plan().outputs[o].name, " at ", batch, "x", seq));
  }
}

TEST(CompileE2E, EveryFixtureStaticShape) {
  for (const std::string& path : ModelsIn({"/models/fixtures", "/models/fixtures/variants"})) {
    CompileOptions opts;
    opts.symbols = {{"batch", 2}, {"sequence", 7}};
    CheckModel(path, opts, 2, 7);
    if (::testing::Test::IsSkipped()) return;
  }
}

// The real torch.onnx exports (TorchScript and dynamo, eager and SDPA attention) and the
// LLaMA-style decoder.
TEST(CompileE2E, TorchExportsAndDecoder) {
  for (const std::string& path : ModelsIn({"/models/fixtures/torch", "/models/fixtures/decoder"})) {
    CompileOptions opts;
    opts.symbols = {{"batch", 2}, {"sequence", 7}};
    CheckModel(path, opts, 2, 7);
    if (::testing::Test::IsSkipped()) return;
  }
}

TEST(CompileE2E, ProfileBucketsWithPadding) {
  for (const char* name :
       {"/models/fixtures/default.onnx", "/models/fixtures/variants/st_mean_tiny_opset14.onnx"}) {
    CompileOptions opts;
    opts.profile = {{"batch", {1, 4}}, {"sequence", {8, 16}}};
    const std::string path = std::string(KILN_SOURCE_DIR) + name;
    CheckModel(path, opts, 2, 11, /*expect_padded=*/true);
    if (::testing::Test::IsSkipped()) return;
    CheckModel(path, opts, 4, 16);  // an exact bucket
  }
}

TEST(CompileE2E, O0PlanRunsEveryStepOnReferenceKernels) {
  CompileOptions opts;
  opts.opt_level = 0;
  opts.symbols = {{"batch", 1}, {"sequence", 5}};
  CheckModel(std::string(KILN_SOURCE_DIR) + "/models/fixtures/default.onnx", opts, 1, 5);
}

// A plan loaded from its file runs from the read-only mapping, and the executor drops the
// resident pages of Linear weights once they are packed (MADV_DONTNEED, cpu_executor.cc).
// Results must be bitwise those of the same plan held in memory, in every bucket, and a
// second executor on the same mapping (after the first released pages) must agree too.
TEST(CompileE2E, FileMappedPlanMatchesInMemoryPlanBitwise) {
  CompileOptions opts;
  opts.profile = {{"batch", {1, 3}}, {"sequence", {8, 16}}};
  absl::StatusOr<Plan> plan =
      Compile(std::string(KILN_SOURCE_DIR) + "/models/fixtures/default.onnx", opts);
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::filesystem::create_directories(KILN_TEST_TMPDIR);
  const std::string file = std::string(KILN_TEST_TMPDIR) + "/file_mapped.kiln";
  ASSERT_TRUE(WritePlanFile(*plan, file).ok());
  absl::StatusOr<Plan> loaded = LoadPlanFile(file);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(loaded->weights.file_mapped());
  EXPECT_FALSE(plan->weights.file_mapped());
  auto in_memory = Executor::Create(std::make_shared<const Plan>(*std::move(plan)));
  ASSERT_TRUE(in_memory.ok()) << in_memory.status();
  auto mapped_plan = std::make_shared<const Plan>(*std::move(loaded));
  auto mapped = Executor::Create(mapped_plan);
  ASSERT_TRUE(mapped.ok()) << mapped.status();
  auto mapped2 = Executor::Create(mapped_plan, {.num_threads = 1});
  ASSERT_TRUE(mapped2.ok()) << mapped2.status();
  for (auto [batch, seq] : {std::pair{1, 8}, {3, 16}, {2, 11}}) {
    const std::vector<Tensor> inputs = MakeInputs(*mapped_plan, batch, seq, 11);
    std::vector<TensorView> views;
    for (const Tensor& t : inputs) views.push_back(View(t));
    auto want = (*in_memory)->Run(views);
    auto got = (*mapped)->Run(views);
    auto got2 = (*mapped2)->Run(views);
    ASSERT_TRUE(want.ok() && got.ok() && got2.ok());
    for (size_t o = 0; o < want->size(); ++o) {
      EXPECT_TRUE((*got)[o].BitwiseEqual((*want)[o])) << batch << "x" << seq << " output " << o;
      ExpectClose((*got2)[o], (*want)[o], 1e-5, 1e-5, "single-threaded executor");
    }
  }
}

}  // namespace
}  // namespace kiln::runtime_test
