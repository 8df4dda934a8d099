// The CUDA executor's Create on any machine: the kernel table against the cuda contracts
// (each id in both), every fixture's cuda plan (fp32, fp16 or int8 in turn; and the packable
// ones' packed plans) refused cleanly where no GPU answers (and accepted where one does), and one
// malformed hand-made cuda plan per host-side rule, each InvalidArgument naming the step before any
// device is looked for.
#include <filesystem>

#include "gmock/gmock.h"
#include "plan/kernel_contract.h"
#include "runtime/cuda/cuda_steps.h"
#include "tests/runtime/runtime_test_util.h"

namespace kiln::runtime_test {
namespace {

using ::testing::HasSubstr;

TEST(CudaPlanChecks, KernelTableMatchesContracts) {
  for (const KernelContract& c : KernelContracts(PlanTarget::kCuda))
    EXPECT_NE(runtime::FindCudaKernel(c.name), nullptr) << "no CUDA kernel for " << c.name;
  for (std::string_view id : runtime::CudaKernelIds())
    EXPECT_NE(FindKernelContract(PlanTarget::kCuda, id), nullptr) << "no cuda contract for " << id;
}

TEST(CudaPlanChecks, FixturesAreRefusedCleanlyWithoutAGpu) {
  const CudaDeviceInfo dev = QueryCudaDevice(0);
  if (!dev.available)
    std::printf("no GPU here (%s): expecting FailedPrecondition\n", dev.reason.c_str());
  int n = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(std::string(KILN_SOURCE_DIR) +
                                                                     "/models/fixtures")) {
    if (e.path().extension() != ".onnx") continue;
    CompileOptions o;
    o.target = PlanTarget::kCuda;
    const char* precisions[] = {"fp32", "fp16", "int8"};
    o.precision = precisions[n++ % 3];
    o.profile = {{"batch", {1, 2}}, {"sequence", {8, 16}}};
    // The KV-cache decoders (models/fixtures/kv/): 5 cached positions; the mask covers
    // past + sequence, a symbol of its own in the export.
    if (e.path().parent_path().filename() == "kv")
      o.profile = {
          {"batch", {2}}, {"sequence", {3}}, {"past_sequence", {5}}, {"total_sequence", {8}}};
    // The image towers (models/fixtures/vision/): the cuda target has no conv kernel yet,
    // so their compile is refused naming the Conv (CompileCuda checks the message).
    if (e.path().parent_path().filename() == "vision") continue;
    // The onnxruntime-genai files name their dims otherwise.
    if (e.path().parent_path().parent_path().filename() == "genai") {
      o.profile = {{"batch_size", {2}},
                   {"sequence_length", {3}},
                   {"past_sequence_length", {5}},
                   {"total_sequence_length", {8}}};
      o.symbols = {{"kv_cache_dim", 16}};
    }
    absl::StatusOr<Plan> plan = Compile(e.path().string(), o);
    ASSERT_TRUE(plan.ok()) << e.path() << ": " << plan.status();
    auto exec = Executor::Create(std::make_shared<const Plan>(*std::move(plan)));
    if (dev.available) {
      EXPECT_TRUE(exec.ok()) << e.path() << ": " << exec.status();
    } else {
      ASSERT_FALSE(exec.ok());
      EXPECT_EQ(exec.status().code(), absl::StatusCode::kFailedPrecondition) << exec.status();
      EXPECT_THAT(std::string(exec.status().message()), HasSubstr("cannot run a cuda plan here"));
    }
  }
  EXPECT_GE(n, 31);
}

// Packed programs (docs/packing.md) prepare on the host like every other cuda plan: each
// packable fixture's cuda plan with a tokens profile, fp32 and fp16, is refused only for the
// missing GPU (accepted where one answers).
TEST(CudaPlanChecks, PackedPlansPrepareOnTheHost) {
  const CudaDeviceInfo dev = QueryCudaDevice(0);
  for (const char* fixture :
       {"variants/st_mean_tiny_opset14.onnx", "bert_tiny_opset14_pooler.onnx",
        "torch/distilbert_dynamo_sdpa.onnx", "variants/roberta_tiny_opset17.onnx"})
    for (const char* precision : {"fp32", "fp16"}) {
      SCOPED_TRACE(std::string(fixture) + " at " + precision);
      CompileOptions o;
      o.target = PlanTarget::kCuda;
      o.precision = precision;
      o.profile = {{"batch", {1, 4}}, {"sequence", {8, 16}}, {"tokens", {16, 32}}};
      absl::StatusOr<Plan> plan =
          Compile(std::string(KILN_SOURCE_DIR) + "/models/fixtures/" + fixture, o);
      ASSERT_TRUE(plan.ok()) << plan.status();
      ASSERT_TRUE(HasProgram(*plan, PlanProgram::kPacked));
      auto exec = Executor::Create(std::make_shared<const Plan>(*std::move(plan)));
      if (dev.available) {
        EXPECT_TRUE(exec.ok()) << exec.status();
      } else {
        ASSERT_FALSE(exec.ok());
        EXPECT_EQ(exec.status().code(), absl::StatusCode::kFailedPrecondition) << exec.status();
      }
    }
}

// A cuda plan around one step with input x, output y (and more inputs where the case
// adds them), for a malformed-plan case.
struct OneStep {
  PlanBuilder pb;
  OneStep() { pb.plan().target = PlanTarget::kCuda, pb.plan().cuda_sms = {80, 90}; }
  absl::Status Create() { return Executor::Create(pb.Finish()).status(); }
};

void ExpectInvalid(const absl::Status& st, const std::string& msg) {
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr(msg));
}

// x f32[dims_x] -> kernel -> y f32[dims_y]
absl::Status Unary(const std::string& kernel, std::vector<int64_t> dx, std::vector<int64_t> dy,
                   std::vector<PlanParam> params, DType tx = DType::kF32, DType ty = DType::kF32) {
  OneStep s;
  std::vector<Dim> sx, sy;
  for (int64_t d : dx) sx.push_back(Dim::Known(d));
  for (int64_t d : dy) sy.push_back(Dim::Known(d));
  s.pb.Input("x", tx, sx);
  s.pb.Output("y", ty, sy);
  s.pb.Bucket({});
  s.pb.Step(kernel, {s.pb.In(0, dx, tx)}, {s.pb.Out(0, dy, ty)}, std::move(params));
  return s.Create();
}

TEST(CudaPlanChecks, StridedCopiesStayInsideTheirBuffers) {
  using V = std::vector<int64_t>;
  // Slice: start past the dim, then a step that walks off the end.
  ExpectInvalid(Unary("slice", {4, 6}, {2, 3}, {P("starts", V{0, 6}), P("steps", V{1, 1})}),
                "start 6 of dim 1 is past its 6 elements");
  ExpectInvalid(Unary("slice", {4, 6}, {2, 3}, {P("starts", V{0, 1}), P("steps", V{3, 3})}),
                "reads outside x [4,6]");
  ExpectInvalid(Unary("slice", {4, 6}, {2, 3}, {P("starts", V{3, 5}), P("steps", V{-4, -1})}),
                "reads outside x [4,6]");
  ExpectInvalid(Unary("slice", {4, 6}, {2, 3}, {P("starts", V{0}), P("steps", V{1})}),
                "starts, steps and y need x's rank 2");
  // Transpose: not a permutation, dims that disagree.
  ExpectInvalid(Unary("transpose", {2, 3}, {3, 2}, {P("perm", V{0, 0})}), "not a permutation");
  ExpectInvalid(Unary("transpose", {2, 3}, {2, 3}, {P("perm", V{1, 0})}),
                "is not x [2,3] permuted");
  // Expand that does not broadcast.
  ExpectInvalid(Unary("expand", {3}, {2, 4}, {}), "does not broadcast to y [2,4]");
  // The valid forms of each are accepted as far as the host goes.
  for (absl::Status st :
       {Unary("slice", {4, 6}, {2, 3}, {P("starts", V{3, 5}), P("steps", V{-2, -2})}),
        Unary("transpose", {2, 3}, {3, 2}, {P("perm", V{1, 0})}), Unary("expand", {3}, {2, 3}, {})})
    EXPECT_NE(st.code(), absl::StatusCode::kInvalidArgument) << st;
}

TEST(CudaPlanChecks, EltwiseTypingAndBroadcast) {
  ExpectInvalid(Unary("eltwise", {4}, {4}, {P("op", "Neg")}, DType::kU8, DType::kU8),
                "Neg is not defined on u8");
  ExpectInvalid(Unary("eltwise", {4}, {4}, {P("op", "Equal")}), "Equal takes 2 inputs, got 1");
  ExpectInvalid(Unary("eltwise", {4}, {4}, {P("op", "Sqrt")}, DType::kF32, DType::kF16),
                "Sqrt returns f32, not f16");
  ExpectInvalid(Unary("eltwise", {3}, {2, 4}, {P("op", "Identity")}),
                "do not broadcast to y [2,4]");
  EXPECT_NE(Unary("eltwise", {4}, {4}, {P("op", "Identity")}, DType::kI64, DType::kF32).code(),
            absl::StatusCode::kInvalidArgument);  // a Cast
  {
    // In place over a broadcast input of the same bytes (i64[1] -> f32[2]): thread 0's write
    // would land in the element thread 1 reads.
    OneStep s;
    s.pb.Input("x", DType::kI64, {Dim::Known(1)});
    s.pb.Output("y", DType::kF32, {Dim::Known(2)});
    s.pb.Bucket({});
    const int a = s.pb.Arena({1}, DType::kI64);
    const int v = s.pb.Alias(a, {2});
    s.pb.cur().buffers[v].dtype = DType::kF32;
    s.pb.Step("copy", {s.pb.In(0, {1}, DType::kI64)}, {a}, {});
    s.pb.Step("eltwise", {a}, {v}, {P("op", "Identity")});
    s.pb.Step("copy", {v}, {s.pb.Out(0, {2})}, {});
    ExpectInvalid(s.Create(), "y [2] in place over input 0 [1] needs its element count and size");
  }
}

TEST(CudaPlanChecks, GathersAndReductions) {
  {
    OneStep s;  // gather whose output dims are not data[:axis] + indices + data[axis+1:]
    s.pb.Input("x", DType::kF32, {Dim::Known(5), Dim::Known(3)});
    s.pb.Input("i", DType::kI64, {Dim::Known(2)});
    s.pb.Output("y", DType::kF32, {Dim::Known(3), Dim::Known(3)});
    s.pb.Bucket({});
    s.pb.Step("gather", {s.pb.In(0, {5, 3}), s.pb.In(1, {2}, DType::kI64)}, {s.pb.Out(0, {3, 3})},
              {P("axis", int64_t{0})});
    ExpectInvalid(s.Create(), "y [3,3] should be [2,3]");
  }
  ExpectInvalid(
      Unary("reduce", {2, 3, 4}, {2, 4}, {P("op", "mean"), P("axes", std::vector<int64_t>{2, 1})}),
      "axes must be ascending dims of x");
  ExpectInvalid(
      Unary("reduce", {2, 3, 4}, {2, 3}, {P("op", "mean"), P("axes", std::vector<int64_t>{1})}),
      "y [2,3] does not hold x [2,3,4] reduced over [1]");
  ExpectInvalid(Unary("reduce", std::vector<int64_t>(9, 1), std::vector<int64_t>(9, 1),
                      {P("op", "sum"), P("axes", std::vector<int64_t>{})}),
                "x [1,1,1,1,1,1,1,1,1] has rank above 8");
  ExpectInvalid(
      Unary("cumsum", {2, 3}, {2, 3},
            {P("axis", int64_t{2}), P("exclusive", int64_t{0}), P("reverse", int64_t{0})}),
      "axis 2 is past x's rank");
}

TEST(CudaPlanChecks, ComputeKernelLimits) {
  // LayerNorm rows past the kernel's 16384 elements.
  {
    OneStep s;
    const int64_t h = 20000;
    s.pb.Input("x", DType::kF32, {Dim::Known(2), Dim::Known(h)});
    s.pb.Output("y", DType::kF32, {Dim::Known(2), Dim::Known(h)});
    const int64_t g = s.pb.AddWeight(RandomVec(h, 1));
    s.pb.Bucket({});
    s.pb.Step("layer_norm", {s.pb.In(0, {2, h}), s.pb.Weight(g, {h}), -1}, {s.pb.Out(0, {2, h})},
              {P("rows", int64_t{2}), P("h", h), P("epsilon", 1e-5)});
    ExpectInvalid(s.Create(), "h 20000 is beyond the CUDA norm kernel's 16384 elements");
  }
  // Attention head size past 256.
  {
    OneStep s;
    s.pb.Input("qkv", DType::kF32, {Dim::Known(1), Dim::Known(2), Dim::Known(900)});
    s.pb.Output("y", DType::kF32, {Dim::Known(1), Dim::Known(2), Dim::Known(300)});
    s.pb.Bucket({});
    s.pb.Step("attention", {s.pb.In(0, {1, 2, 900}), -1}, {s.pb.Out(0, {1, 2, 300})},
              {P("batch", int64_t{1}), P("seq", int64_t{2}), P("num_heads", int64_t{1}),
               P("head_size", int64_t{300}), P("scale", 0.1), P("causal", int64_t{0})});
    ExpectInvalid(s.Create(), "head_size 300 is beyond the CUDA attention kernel's 256");
  }
  // The flash kernel: head sizes it is not instantiated for, and fp32 (its contract).
  {
    OneStep s;
    s.pb.Input("qkv", DType::kF16, {Dim::Known(1), Dim::Known(2), Dim::Known(288)});
    s.pb.Output("y", DType::kF16, {Dim::Known(1), Dim::Known(2), Dim::Known(96)});
    s.pb.Bucket({});
    s.pb.Step("flash_attention", {s.pb.In(0, {1, 2, 288}, DType::kF16), -1},
              {s.pb.Out(0, {1, 2, 96}, DType::kF16)},
              {P("batch", int64_t{1}), P("seq", int64_t{2}), P("num_heads", int64_t{1}),
               P("head_size", int64_t{96}), P("scale", 0.1), P("causal", int64_t{0})});
    ExpectInvalid(s.Create(), "head_size 96: the flash kernel takes 8, 16, 32, 64 or 128");
  }
  {
    OneStep s;
    s.pb.Input("qkv", DType::kF32, {Dim::Known(1), Dim::Known(2), Dim::Known(192)});
    s.pb.Output("y", DType::kF32, {Dim::Known(1), Dim::Known(2), Dim::Known(64)});
    s.pb.Bucket({});
    s.pb.Step("flash_attention", {s.pb.In(0, {1, 2, 192}), -1}, {s.pb.Out(0, {1, 2, 64})},
              {P("batch", int64_t{1}), P("seq", int64_t{2}), P("num_heads", int64_t{1}),
               P("head_size", int64_t{64}), P("scale", 0.1), P("causal", int64_t{0})});
    const absl::Status st = s.Create();
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_THAT(std::string(st.message()), HasSubstr("flash_attention")) << st;
  }
  // The packed attention kernels (qkv [1, T, 3·N·D], lengths [N]): the flash kernel's head
  // sizes, the simple kernel's grid.
  auto packed = [](const char* kernel, DType t, int64_t seqs, int64_t d) {
    OneStep s;
    const int64_t tokens = 2;
    s.pb.Input("qkv", t, {Dim::Known(1), Dim::Known(tokens), Dim::Known(3 * d)});
    s.pb.Input("lengths", DType::kI64, {Dim::Known(seqs)});
    s.pb.Output("y", t, {Dim::Known(1), Dim::Known(tokens), Dim::Known(d)});
    s.pb.Bucket({});
    s.pb.Step(kernel, {s.pb.In(0, {1, tokens, 3 * d}, t), s.pb.In(1, {seqs}, DType::kI64)},
              {s.pb.Out(0, {1, tokens, d}, t)},
              {P("tokens", tokens), P("sequences", seqs), P("num_heads", int64_t{1}),
               P("head_size", d), P("scale", 0.1)});
    return s.Create();
  };
  ExpectInvalid(packed("packed_flash_attention", DType::kF16, 1, 96),
                "head_size 96: the flash kernel takes 8, 16, 32, 64 or 128");
  ExpectInvalid(packed("packed_attention", DType::kF32, 70000, 64),
                "sequences 70000 or num_heads 1 exceeds the kernel's grid (65535)");
  ExpectInvalid(packed("packed_attention", DType::kF32, 1, 300),
                "head_size 300 is beyond the CUDA attention kernel's 256");
  for (absl::Status st : {packed("packed_flash_attention", DType::kBF16, 2, 64),
                          packed("packed_attention", DType::kF16, 2, 96)})
    EXPECT_NE(st.code(), absl::StatusCode::kInvalidArgument) << st;
  // MatMul whose operands are smaller than batch x m x k says.
  {
    OneStep s;
    s.pb.Input("a", DType::kF16, {Dim::Known(2), Dim::Known(4), Dim::Known(8)});
    s.pb.Input("b", DType::kF16, {Dim::Known(8), Dim::Known(3)});
    s.pb.Output("y", DType::kF16, {Dim::Known(2), Dim::Known(4), Dim::Known(3)});
    s.pb.Bucket({});
    s.pb.Step("matmul", {s.pb.In(0, {2, 4, 8}, DType::kF16), s.pb.In(1, {8, 3}, DType::kF16)},
              {s.pb.Out(0, {2, 4, 3}, DType::kF16)},
              {P("batch", int64_t{2}), P("m", int64_t{4}), P("k", int64_t{8}), P("n", int64_t{3}),
               P("broadcast_a", int64_t{0}), P("broadcast_b", int64_t{0})});
    ExpectInvalid(s.Create(), "b [8,3] has 24 elements; the parameters need 48");
  }
  // Linear operands of mixed precision (the contract: one dtype per step).
  {
    OneStep s;
    s.pb.Input("x", DType::kF16, {Dim::Known(2), Dim::Known(4)});
    s.pb.Output("y", DType::kF16, {Dim::Known(2), Dim::Known(3)});
    const int64_t w = s.pb.AddWeight(RandomVec(12, 2));
    s.pb.Bucket({});
    s.pb.Step("linear", {s.pb.In(0, {2, 4}, DType::kF16), s.pb.Weight(w, {4, 3}), -1, -1},
              {s.pb.Out(0, {2, 3}, DType::kF16)},
              {P("m", int64_t{2}), P("k", int64_t{4}), P("n", int64_t{3}), P("trans_w", int64_t{0}),
               P("activation", "none")});
    ExpectInvalid(s.Create(), "w is f32 but x is f16");
  }
}

// quant_linear (int8 plans): x [2, k] of `t`, w s8 [n, k] with `w0` as its first weight,
// w_scale [n]; the host-side rules run before any device is looked for.
absl::Status QuantLinear(DType t, int64_t k, int64_t n, int8_t w0, int64_t w_shift = 0) {
  OneStep s;
  s.pb.Input("x", t, {Dim::Known(2), Dim::Known(k)});
  s.pb.Output("y", t, {Dim::Known(2), Dim::Known(n)});
  std::vector<int8_t> codes(static_cast<size_t>(n * k + w_shift), 3);
  codes[w_shift] = w0;
  const int64_t w = s.pb.AddWeightBytes(codes.data(), codes.size()) + w_shift;
  const int64_t sc = s.pb.AddWeight(RandomVec(n, 3, 0.01f, 0.02f));
  s.pb.Bucket({});
  s.pb.Step(
      "quant_linear",
      {s.pb.In(0, {2, k}, t), s.pb.Weight(w, {n, k}, DType::kI8), s.pb.Weight(sc, {n}), -1, -1},
      {s.pb.Out(0, {2, n}, t)},
      {P("m", int64_t{2}), P("k", k), P("n", n), P("activation", "none")});
  return s.Create();
}

TEST(CudaPlanChecks, QuantLinearRules) {
  // cuBLASLt's int8 GEMMs take k and n multiples of 4 (the compiler never emits others).
  ExpectInvalid(QuantLinear(DType::kF16, 6, 8, 1), "k 6 and n 8 must be multiples of 4");
  ExpectInvalid(QuantLinear(DType::kF16, 8, 6, 1), "k 8 and n 6 must be multiples of 4");
  // K beyond the int8 GEMM's s32 sums (as the cpu refuses it), and weights that cuBLASLt's
  // int8 kernels cannot read (not 4-byte aligned).
  ExpectInvalid(QuantLinear(DType::kF16, 65540, 4, 1), "k 65540 is above the int8 GEMM's 65536");
  ExpectInvalid(QuantLinear(DType::kF16, 8, 8, 1, /*w_shift=*/2),
                "is not 4-byte aligned (cuBLASLt's int8 GEMMs)");
  // Symmetric weights only, as on the cpu.
  ExpectInvalid(QuantLinear(DType::kF32, 8, 8, -128),
                "weight 0 is -128: int8 weights are symmetric, in [-127, 127]");
  // f32, f16 and bf16 activations pass the host checks (then the device decides).
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16})
    EXPECT_NE(QuantLinear(t, 8, 12, -127).code(), absl::StatusCode::kInvalidArgument)
        << DTypeName(t);
}

}  // namespace
}  // namespace kiln::runtime_test
