// Packed programs through the C++ API (docs/packing.md): kiln::Compile with a `tokens`
// profile, then Executor::Run on padded inputs packs them (RunStats::packed) and gives the
// padded buckets' outputs on the real positions (pack = false), zeros at the padding; the
// packed program run directly (RunOptions::program = kPacked) on the same real tokens;
// batches whose total tokens exceed the largest packed bucket run in several packed calls;
// masks that are not prefixes of ones and empty rows take the padded buckets; a model the
// proof refuses compiles without a packed program.
// Tolerance: 1e-5 absolute (fp32, the same kernels on the same rows; summation order over
// the attention's keys and GEMM blocking differ), as tests/e2e/test_packing.py.
#include <algorithm>
#include <cmath>
#include <random>

#include "gmock/gmock.h"
#include "kiln/kiln.h"
#include "runtime_test_util.h"

namespace kiln::runtime_test {
namespace {

constexpr int64_t kSeq = 16, kHidden = 64;

std::string Fixture(const char* name) {
  return std::string(KILN_SOURCE_DIR) + "/models/fixtures/" + name;
}

CompileOptions PackedOptions() {
  CompileOptions o;
  o.profile = {{"batch", {1, 4}}, {"sequence", {8, kSeq}}, {"tokens", {16, 32}}};
  return o;
}

struct Batch {
  Tensor ids, mask, types;
  std::vector<int64_t> lengths;
};

Batch MakeBatch(const std::vector<int64_t>& lengths, uint32_t seed) {
  const int64_t b = static_cast<int64_t>(lengths.size());
  Batch out{Tensor(DType::kI64, {b, kSeq}), Tensor(DType::kI64, {b, kSeq}),
            Tensor(DType::kI64, {b, kSeq}), lengths};
  std::mt19937 gen(seed);
  for (int64_t i = 0; i < b * kSeq; ++i) {
    out.ids.data<int64_t>()[i] = static_cast<int64_t>(gen() % 1000);
    out.types.data<int64_t>()[i] = static_cast<int64_t>(gen() % 2);
    out.mask.data<int64_t>()[i] = (i % kSeq) < lengths[i / kSeq] ? 1 : 0;
  }
  return out;
}

std::vector<TensorView> Views(const Batch& b) {
  return {{DType::kI64, b.ids.dims(), b.ids.raw()},
          {DType::kI64, b.mask.dims(), b.mask.raw()},
          {DType::kI64, b.types.dims(), b.types.raw()}};
}

float MaxDiff(const Tensor& a, const Tensor& b) {
  float m = 0;
  for (int64_t i = 0; i < a.NumElements(); ++i)
    m = std::max(m, std::fabs(a.data<float>()[i] - b.data<float>()[i]));
  return m;
}

class PackingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Plan> plan = Compile(Fixture("bert_tiny_opset14_pooler.onnx"), PackedOptions());
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_TRUE(HasProgram(*plan, PlanProgram::kPacked));
    absl::StatusOr<std::unique_ptr<Executor>> e =
        Executor::Create(std::make_shared<Plan>(*std::move(plan)));
    ASSERT_TRUE(e.ok()) << e.status();
    exec_ = *std::move(e);
  }
  // Runs `b` packed (or not) into output buffers that start as 7s (so that the padding
  // positions a packed run leaves are seen); returns them and whether it ran packed.
  std::vector<Tensor> Run(const Batch& b, bool pack, bool* packed) {
    RunStats stats;
    RunOptions o;
    o.pack = pack;
    std::vector<std::vector<int64_t>> in_dims;
    for (const TensorView& v : Views(b)) in_dims.push_back(v.dims);
    absl::StatusOr<std::vector<std::vector<int64_t>>> dims = exec_->OutputDims(in_dims);
    EXPECT_TRUE(dims.ok()) << dims.status();
    if (!dims.ok()) return {};
    std::vector<Tensor> out;
    std::vector<MutableTensorView> views;
    for (const std::vector<int64_t>& d : *dims) {
      out.emplace_back(DType::kF32, d);
      std::fill(out.back().data<float>(), out.back().data<float>() + out.back().NumElements(),
                7.0f);
    }
    for (Tensor& t : out) views.push_back({t.dtype(), t.dims(), t.raw()});
    const absl::Status s = exec_->Run(Views(b), views, &stats, o);
    EXPECT_TRUE(s.ok()) << s;
    *packed = stats.packed;
    return out;
  }
  std::unique_ptr<Executor> exec_;
};

TEST_F(PackingTest, PackedMatchesPaddedOnTheRealPositions) {
  // 3 + 16 + 1 + 9 = 29 tokens: one call in the tokens=32 bucket; then 52 tokens, which
  // take two calls (32 at most per call).
  for (const std::vector<int64_t>& lengths :
       {std::vector<int64_t>{3, 16, 1, 9}, std::vector<int64_t>{16, 16, 12, 8}}) {
    const Batch b = MakeBatch(lengths, 5);
    bool packed = false, padded_packed = true;
    const std::vector<Tensor> got = Run(b, true, &packed);
    const std::vector<Tensor> want = Run(b, false, &padded_packed);
    ASSERT_EQ(got.size(), 2u);
    EXPECT_TRUE(packed);
    EXPECT_FALSE(padded_packed);
    EXPECT_LT(MaxDiff(got[1], want[1]), 1e-5f) << "pooler_output";
    for (size_t r = 0; r < lengths.size(); ++r)
      for (int64_t s = 0; s < kSeq; ++s)
        for (int64_t h = 0; h < kHidden; ++h) {
          const int64_t at = (static_cast<int64_t>(r) * kSeq + s) * kHidden + h;
          const float g = got[0].data<float>()[at];
          if (s < lengths[r])
            ASSERT_NEAR(g, want[0].data<float>()[at], 1e-5f) << r << "," << s;
          else
            ASSERT_EQ(g, 0.0f) << "padding position " << r << "," << s;
        }
  }
}

TEST_F(PackingTest, PackedProgramRunsDirectly) {
  const Batch b = MakeBatch({5, 11}, 6);
  bool packed;
  const std::vector<Tensor> want = Run(b, false, &packed);
  Tensor ids(DType::kI64, {16}), types(DType::kI64, {16}), lengths = Tensor::FromI64({2}, {5, 11});
  int64_t t = 0;
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t s = 0; s < b.lengths[r]; ++s, ++t) {
      ids.data<int64_t>()[t] = b.ids.data<int64_t>()[r * kSeq + s];
      types.data<int64_t>()[t] = b.types.data<int64_t>()[r * kSeq + s];
    }
  const std::vector<TensorView> in = {{DType::kI64, {16}, ids.raw()},
                                      {DType::kI64, {2}, lengths.raw()},
                                      {DType::kI64, {16}, types.raw()}};
  RunOptions o;
  o.program = PlanProgram::kPacked;
  absl::StatusOr<std::vector<std::vector<int64_t>>> dims =
      exec_->OutputDims(std::vector<std::vector<int64_t>>{{16}, {2}, {16}}, PlanProgram::kPacked);
  ASSERT_TRUE(dims.ok()) << dims.status();
  EXPECT_EQ(*dims, (std::vector<std::vector<int64_t>>{{16, kHidden}, {2, kHidden}}));
  absl::StatusOr<std::vector<Tensor>> got = exec_->Run(in, nullptr, o);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_LT(MaxDiff((*got)[1], want[1]), 1e-5f);
  EXPECT_NEAR((*got)[0].data<float>()[(5 + 3) * kHidden + 7],
              want[0].data<float>()[(1 * kSeq + 3) * kHidden + 7], 1e-5f);
  // Lengths that do not add up to the tokens given are refused with the numbers.
  lengths.data<int64_t>()[1] = 10;
  absl::StatusOr<std::vector<Tensor>> bad = exec_->Run(in, nullptr, o);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(),
              ::testing::HasSubstr("sequence_lengths add up to 15 tokens but input 'input_ids' "
                                   "holds 16"));
}

TEST_F(PackingTest, MasksThatAreNotPrefixesRunPadded) {
  for (int c = 0; c < 3; ++c) {
    Batch b = MakeBatch({7, 9, 4}, 7);
    int64_t* m = b.mask.data<int64_t>();
    if (c == 0) std::fill(m + kSeq, m + 2 * kSeq, 0);  // an empty row
    if (c == 1) m[2] = 0;                              // a hole
    if (c == 2) {                                      // left padding in row 0
      std::fill(m, m + kSeq, 0);
      std::fill(m + kSeq - 7, m + kSeq, 1);
    }
    bool packed = true, never = true;
    const std::vector<Tensor> got = Run(b, true, &packed);
    const std::vector<Tensor> want = Run(b, false, &never);
    EXPECT_FALSE(packed) << c;
    ASSERT_EQ(got.size(), want.size());
    for (size_t o = 0; o < got.size(); ++o) EXPECT_TRUE(got[o].BitwiseEqual(want[o])) << c;
  }
}

// RoBERTa counts its position ids from the token ids (cumsum(ids != pad) + pad) and takes
// its token types from a zero buffer: the packed program sums within each sequence
// (kiln.PackedCumSum) and gives each token the buffer's value, so it equals the padded
// program on the real positions — also where a real token is the pad id (1), which the
// padded model skips in the count as well.
TEST(Packing, RobertaPositionsFromTheIdsPackExactly) {
  absl::StatusOr<Plan> plan =
      Compile(Fixture("variants/roberta_tiny_opset17.onnx"), PackedOptions());
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE(HasProgram(*plan, PlanProgram::kPacked));
  int cumsums = 0;
  for (const PlanBucket& b : plan->buckets)
    for (const PlanStep& s : b.steps) cumsums += s.kernel == "packed_cumsum";
  EXPECT_GT(cumsums, 0);
  auto exec = Executor::Create(std::make_shared<Plan>(*std::move(plan)));
  ASSERT_TRUE(exec.ok()) << exec.status();
  const std::vector<int64_t> lengths = {16, 3, 9, 1};
  Batch b = MakeBatch(lengths, 12);
  b.ids.data<int64_t>()[2] = 1;             // a pad id inside row 0's tokens
  b.ids.data<int64_t>()[2 * kSeq + 4] = 1;  // and row 2's
  const std::vector<TensorView> in = {{DType::kI64, b.ids.dims(), b.ids.raw()},
                                      {DType::kI64, b.mask.dims(), b.mask.raw()}};
  RunStats packed_stats, padded_stats;
  RunOptions no_pack;
  no_pack.pack = false;
  auto packed = (*exec)->Run(in, &packed_stats);
  auto padded = (*exec)->Run(in, &padded_stats, no_pack);
  ASSERT_TRUE(packed.ok() && padded.ok()) << packed.status() << padded.status();
  EXPECT_TRUE(packed_stats.packed);
  ASSERT_EQ(packed->size(), padded->size());
  for (size_t o = 0; o < packed->size(); ++o) {
    const Tensor &g = (*packed)[o], &w = (*padded)[o];
    ASSERT_EQ(g.dims(), w.dims());
    const int64_t row = g.NumElements() / (g.dims()[0] * kSeq);
    float worst = 0;
    for (int64_t r = 0; r < g.dims()[0]; ++r)
      for (int64_t s = 0; s < lengths[r]; ++s)
        for (int64_t c = 0; c < row; ++c) {
          const int64_t i = (r * kSeq + s) * row + c;
          worst = std::max(worst, std::fabs(g.data<float>()[i] - w.data<float>()[i]));
        }
    EXPECT_LT(worst, 1e-5f) << "output " << o;
  }
}

TEST(Packing, RefusedModelsCompileWithoutAPackedProgram) {
  CompileOptions o = PackedOptions();
  std::vector<std::string> lines;
  o.progress = [&](std::string_view l) { lines.emplace_back(l); };
  absl::StatusOr<Plan> plan = Compile(Fixture("torch/gpt2_torchscript_sdpa.onnx"), o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(HasProgram(*plan, PlanProgram::kPacked));
  EXPECT_TRUE(plan->signatures.empty());
  EXPECT_THAT(lines, ::testing::Contains(::testing::HasSubstr(
                         "warning: not packed (padded execution only): packing:")));
}

TEST(Packing, GenerationPlansRefuseATokensProfile) {
  CompileOptions o = PackedOptions();
  o.decode_context = {64};
  EXPECT_EQ(Compile(Fixture("bert_tiny_opset14_pooler.onnx"), o).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln::runtime_test
