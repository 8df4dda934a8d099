// Executor::Run / OutputDims on a small symbolic plan: bucket selection (exact, fewest
// padded elements), padding equivalence against an exact bucket, output slicing, the
// messages for bad inputs and shapes outside every bucket, and concurrent Run calls.
// The model: hidden = Linear(x) written straight into graph output 0, pooled =
// Pool(mean, hidden, attention_mask) into output 1; x [batch, seq, 4] f32, mask
// [batch, seq] i64. Zero padding cannot change the unpadded part (masked mean, rows
// independent), so both symbols are paddable.
// Tolerance (padded vs exact): 2e-5 absolute + 1e-5 relative, as kernel_steps_test.cc — a
// different m may pick a different oneDNN kernel (another summation order, K = 4).
#include <thread>

#include "gmock/gmock.h"
#include "runtime_test_util.h"

namespace kiln::runtime_test {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kK = 4, kN = 6;

struct Model {
  std::vector<float> w = RandomVec(kK * kN, 31), b = RandomVec(kN, 32);
};

// Buckets at each (batch, seq) in `shapes`; `paddable` lists the paddable symbols.
std::shared_ptr<const Plan> BuildPlan(const std::vector<std::pair<int64_t, int64_t>>& shapes,
                                      std::vector<std::string> paddable = {"batch", "seq"}) {
  Model m;
  PlanBuilder pb;
  const Dim batch = Dim::Symbol("batch"), seq = Dim::Symbol("seq");
  pb.Input("x", DType::kF32, {batch, seq, Dim::Known(kK)});
  pb.Input("attention_mask", DType::kI64, {batch, seq});
  pb.Output("hidden", DType::kF32, {batch, seq, Dim::Known(kN)});
  pb.Output("pooled", DType::kF32, {batch, Dim::Known(kN)});
  pb.plan().paddable_symbols = std::move(paddable);
  const int64_t woff = pb.AddWeight(m.w), boff = pb.AddWeight(m.b);
  for (const auto& [nb, s] : shapes) {
    pb.Bucket({{"batch", nb}, {"seq", s}});
    const int xi = pb.In(0, {nb, s, kK}), mi = pb.In(1, {nb, s}, DType::kI64);
    const int hid = pb.Out(0, {nb, s, kN});
    pb.Step("linear", {xi, pb.Weight(woff, {kK, kN}), pb.Weight(boff, {kN})}, {hid},
            {P("m", nb * s), P("k", kK), P("n", kN), P("trans_w", int64_t{0}),
             P("activation", "gelu")});
    pb.Step("pool", {hid, mi}, {pb.Out(1, {nb, kN})},
            {P("batch", nb), P("seq", s), P("hidden", kN), P("mode", "mean"),
             P("normalize", int64_t{0})});
  }
  return pb.Finish();
}

struct Inputs {
  Tensor x, mask;
  std::vector<TensorView> views() const { return {View(x), View(mask)}; }
};
Inputs MakeInputs(int64_t nb, int64_t s, uint32_t seed) {
  Inputs in{RandomF32({nb, s, kK}, seed), Tensor(DType::kI64, {nb, s})};
  for (int64_t i = 0; i < nb * s; ++i) in.mask.data<int64_t>()[i] = (i * 7 + seed) % 4 != 0;
  return in;
}

std::unique_ptr<Executor> Make(std::shared_ptr<const Plan> plan, int threads = 2) {
  auto e = Executor::Create(std::move(plan), {.num_threads = threads});
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? *std::move(e) : nullptr;
}

TEST(Executor, ExactBucketIsChosenWhenPresent) {
  auto exec = Make(BuildPlan({{1, 8}, {2, 6}, {4, 5}}));
  ASSERT_NE(exec, nullptr);
  Inputs in = MakeInputs(2, 6, 1);
  RunStats stats;
  auto out = exec->Run(in.views(), &stats);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(stats.bucket, 1);
  EXPECT_FALSE(stats.padded);
  EXPECT_EQ((*out)[0].dims(), (std::vector<int64_t>{2, 6, kN}));
  EXPECT_EQ((*out)[1].dims(), (std::vector<int64_t>{2, kN}));
}

TEST(Executor, PaddedBucketWithFewestPaddedElementsMatchesExact) {
  // (2,5) fits (2,6) [10 padded elements: 8 of x, 2 of the mask] and (4,5) [50]; not (1,8).
  auto padded = Make(BuildPlan({{1, 8}, {2, 6}, {4, 5}}));
  auto exact = Make(BuildPlan({{2, 5}}));
  ASSERT_NE(padded, nullptr);
  ASSERT_NE(exact, nullptr);
  for (auto [nb, s, want_bucket] :
       {std::tuple{2, 5, 1}, std::tuple{1, 3, 0}, std::tuple{3, 5, 2}}) {
    Inputs in = MakeInputs(nb, s, 2);
    RunStats stats;
    auto got = padded->Run(in.views(), &stats);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(stats.bucket, want_bucket) << nb << "x" << s;
    EXPECT_TRUE(stats.padded);
    auto dims = padded->OutputDims(std::vector<std::vector<int64_t>>{{nb, s, kK}, {nb, s}});
    ASSERT_TRUE(dims.ok()) << dims.status();
    EXPECT_EQ((*dims)[0], (std::vector<int64_t>{nb, s, kN}));
    EXPECT_EQ((*dims)[1], (std::vector<int64_t>{nb, kN}));
    auto ref_exec = Make(BuildPlan({{nb, s}}));
    auto want = ref_exec->Run(in.views());
    ASSERT_TRUE(want.ok()) << want.status();
    ExpectClose((*got)[0], (*want)[0], 2e-5, 1e-5, absl::StrCat("hidden ", nb, "x", s));
    ExpectClose((*got)[1], (*want)[1], 2e-5, 1e-5, absl::StrCat("pooled ", nb, "x", s));
  }
}

TEST(Executor, CallerBuffersAreWrittenInPlace) {
  auto exec = Make(BuildPlan({{2, 6}}));
  ASSERT_NE(exec, nullptr);
  Inputs in = MakeInputs(2, 6, 3);
  Tensor hidden(DType::kF32, {2, 6, kN}), pooled(DType::kF32, {2, kN});
  std::vector<MutableTensorView> outs = {MView(hidden), MView(pooled)};
  ASSERT_TRUE(exec->Run(in.views(), outs).ok());
  auto want = exec->Run(in.views());
  ASSERT_TRUE(want.ok());
  EXPECT_TRUE(hidden.BitwiseEqual((*want)[0]));
  EXPECT_TRUE(pooled.BitwiseEqual((*want)[1]));
}

TEST(Executor, ConcurrentRunsMatchSingleThreaded) {
  // Same executor, same kernels and thread count per call: results are bitwise identical.
  auto exec = Make(BuildPlan({{1, 8}, {2, 6}, {4, 5}}));
  ASSERT_NE(exec, nullptr);
  const std::tuple<int, int, uint32_t> shapes[4] = {{2, 6, 1}, {1, 5, 2}, {4, 5, 3}, {2, 3, 4}};
  std::vector<Inputs> inputs;
  std::vector<std::vector<Tensor>> want;
  for (auto [nb, s, seed] : shapes) {
    inputs.push_back(MakeInputs(nb, s, seed));
    auto out = exec->Run(inputs.back().views());
    ASSERT_TRUE(out.ok()) << out.status();
    want.push_back(*out);
  }
  std::vector<int> mismatches(4, 0), failures(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int iter = 0; iter < 25; ++iter) {
        const int i = (t + iter) % 4;
        auto out = exec->Run(inputs[i].views());
        if (!out.ok()) {
          ++failures[t];
          continue;
        }
        for (int o = 0; o < 2; ++o) mismatches[t] += !(*out)[o].BitwiseEqual(want[i][o]);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) {
    EXPECT_EQ(failures[t], 0) << "thread " << t;
    EXPECT_EQ(mismatches[t], 0) << "thread " << t;
  }
}

absl::Status RunStatus(const Executor& e, std::vector<TensorView> in) { return e.Run(in).status(); }

TEST(Executor, RejectsBadInputsNamingThem) {
  auto exec = Make(BuildPlan({{1, 8}, {2, 6}}));
  ASSERT_NE(exec, nullptr);
  Inputs in = MakeInputs(2, 6, 5);
  auto expect = [&](std::vector<TensorView> views, const std::string& msg) {
    absl::Status st = RunStatus(*exec, views);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_THAT(std::string(st.message()), HasSubstr(msg));
  };
  expect({View(in.x)}, "expected 2 inputs (x, attention_mask), got 1");
  Tensor mask32(DType::kI32, {2, 6});
  expect({View(in.x), View(mask32)},
         "input 'attention_mask' has dtype i32; the plan expects i64[batch,seq]");
  Tensor x2(DType::kF32, {12, kK});
  expect({View(x2), View(in.mask)}, "input 'x' has rank 2 [12,4]; the plan expects rank 3");
  Tensor x5(DType::kF32, {2, 6, 5});
  expect({View(x5), View(in.mask)}, "input 'x' dim 2 is 5; the plan requires 4");
  Tensor mask7(DType::kI64, {2, 7});
  expect({View(in.x), View(mask7)},
         "input 'attention_mask' dim 1 (seq) is 7 but input 'x' dim 1 sets seq = 6");
  Inputs long_seq = MakeInputs(1, 9, 6);
  expect(long_seq.views(), "input 'x' dim 1 (seq) is 9; the plan allows seq <= 8");
  Inputs big_batch = MakeInputs(3, 2, 7);
  expect(big_batch.views(), "input 'x' dim 0 (batch) is 3; the plan allows batch <= 2");
  // Each symbol fits some bucket, but no bucket fits both.
  Inputs combo = MakeInputs(2, 7, 8);
  expect(combo.views(), "no bucket fits the inputs {batch=2, seq=7}");
  TensorView null_x = View(in.x);
  null_x.data = nullptr;
  expect({null_x, View(in.mask)}, "input 'x' has no data");
}

TEST(Executor, NonPaddableSymbolsNeedAnExactBucket) {
  auto exec = Make(BuildPlan({{1, 4}, {1, 8}}, /*paddable=*/{}));
  ASSERT_NE(exec, nullptr);
  Inputs in = MakeInputs(1, 5, 9);
  absl::Status st = RunStatus(*exec, in.views());
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(st.message()),
              HasSubstr("input 'x' dim 1 (seq) is 5; the plan allows seq in {4, 8}"));
  auto dims = exec->OutputDims(std::vector<std::vector<int64_t>>{{1, 5, kK}, {1, 5}});
  EXPECT_EQ(dims.status().code(), absl::StatusCode::kInvalidArgument);
  Inputs ok = MakeInputs(1, 8, 9);
  EXPECT_TRUE(RunStatus(*exec, ok.views()).ok());
}

TEST(Executor, RejectsBadOutputs) {
  auto exec = Make(BuildPlan({{2, 6}}));
  ASSERT_NE(exec, nullptr);
  Inputs in = MakeInputs(2, 6, 10);
  Tensor hidden(DType::kF32, {2, 6, kN}), pooled(DType::kF32, {2, kN});
  Tensor wrong(DType::kF32, {2, 5, kN}), wrong_type(DType::kF64, {2, kN});
  auto run = [&](std::vector<MutableTensorView> outs) { return exec->Run(in.views(), outs); };
  EXPECT_THAT(std::string(run({MView(hidden)}).message()), HasSubstr("expected 2 outputs, got 1"));
  EXPECT_THAT(std::string(run({MView(wrong), MView(pooled)}).message()),
              HasSubstr("output 'hidden' has dims [2,5,6]; these inputs produce [2,6,6]"));
  EXPECT_THAT(std::string(run({MView(hidden), MView(wrong_type)}).message()),
              HasSubstr("output 'pooled' has dtype f64; the plan writes f32"));
}

TEST(Executor, RunTimeKernelErrorsNameTheStep) {
  // Ids out of the embedding table are found at run time and reported with the step.
  const int64_t h = 4;
  PlanBuilder pb;
  pb.Input("ids", DType::kI64, {Dim::Known(1), Dim::Known(2)});
  pb.Output("y", DType::kF32, {Dim::Known(1), Dim::Known(2), Dim::Known(h)});
  const int64_t wo = pb.AddWeight(RandomVec(3 * h, 1)), po = pb.AddWeight(RandomVec(2 * h, 2)),
                go = pb.AddWeight(RandomVec(h, 3)), bo = pb.AddWeight(RandomVec(h, 4));
  pb.Bucket({});
  pb.Step("embed_layer_norm",
          {pb.In(0, {1, 2}, DType::kI64), -1, -1, pb.Weight(wo, {3, h}), pb.Weight(po, {2, h}), -1,
           pb.Weight(go, {h}), pb.Weight(bo, {h})},
          {pb.Out(0, {1, 2, h})},
          {P("batch", int64_t{1}), P("seq", int64_t{2}), P("hidden", h), P("epsilon", 1e-12)},
          {"/embeddings/Gather"});
  auto exec = Make(pb.Finish());
  ASSERT_NE(exec, nullptr);
  Tensor ids = Tensor::FromI64({1, 2}, {0, 3});
  absl::Status st = RunStatus(*exec, {View(ids)});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(st.message()),
              HasSubstr("bucket 0 step 0 (embed_layer_norm, /embeddings/Gather): EmbedLayerNorm: "
                        "input_ids contains 3"));
}

// AllocateCudaBuffer (the Python package's device outputs): without a GPU (or without the
// CUDA backend) a clean FailedPrecondition, never a crash; with one, a buffer that is
// freed by its last owner.
TEST(Executor, AllocateCudaBufferFailsCleanlyWithoutAGpu) {
  const CudaDeviceInfo dev = QueryCudaDevice(0);
  absl::StatusOr<std::shared_ptr<void>> buf = AllocateCudaBuffer(0, 4096);
  if (!dev.available) {
    std::printf("no usable GPU (%s): checking the refusal only\n", dev.reason.c_str());
    ASSERT_FALSE(buf.ok());
    EXPECT_EQ(buf.status().code(), absl::StatusCode::kFailedPrecondition) << buf.status();
    return;
  }
  ASSERT_TRUE(buf.ok()) << buf.status();
  EXPECT_NE(buf->get(), nullptr);
  EXPECT_FALSE(AllocateCudaBuffer(0, size_t{1} << 62).ok());
}

}  // namespace
}  // namespace kiln::runtime_test
