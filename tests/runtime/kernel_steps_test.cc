// Every cpu kernel id of docs/plan-kernels.md run through the executor from a hand-built
// one-bucket plan, against the reference kernel of the equivalent kiln/ONNX node
// (EvaluateNode, double accumulation). Also ref and copy steps, alias buffers, in-place
// steps and a graph output that a later step reads.
// Tolerance 2e-5 absolute + 1e-5 relative for every float comparison: the kernels' own
// accuracy is established in tests/kernels (same or tighter bounds at larger sizes); here
// dots have K <= 32 terms of O(1) values (fp32 error ~K·u·Σ|x·w| ≈ 1e-6 typical), and what
// is tested is the wiring — a wrong offset, operand order or parameter gives O(0.1) errors.
#include <cstring>

#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "runtime_test_util.h"

namespace kiln::runtime_test {
namespace {

constexpr double kAtol = 2e-5, kRtol = 1e-5;

// Static dims as the IR's Dims.
std::vector<Dim> KnownDims(const std::vector<int64_t>& d) {
  std::vector<Dim> r;
  for (int64_t v : d) r.push_back(Dim::Known(v));
  return r;
}

std::vector<Tensor> RunPlan(std::shared_ptr<const Plan> plan, const std::vector<Tensor>& inputs,
                            RunStats* stats = nullptr) {
  auto exec = Executor::Create(std::move(plan), {.num_threads = 2});
  EXPECT_TRUE(exec.ok()) << exec.status();
  if (!exec.ok()) return {};
  std::vector<TensorView> views;
  for (const Tensor& t : inputs) views.push_back(View(t));
  auto out = (*exec)->Run(views, stats);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : std::vector<Tensor>{};
}

TEST(KernelSteps, Linear) {
  const int64_t b = 2, s = 3, k = 32, n = 5;
  for (int trans = 0; trans <= 1; ++trans) {
    for (const char* act : {"none", "gelu", "gelu_tanh", "relu", "tanh"}) {
      for (bool with_bias : {true, false}) {
        Tensor x = RandomF32({b, s, k}, 1);
        Tensor w = RandomF32(trans ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}, 2);
        Tensor bias = RandomF32({n}, 3);
        PlanBuilder pb;
        pb.Input("x", DType::kF32, {Dim::Known(b), Dim::Known(s), Dim::Known(k)});
        pb.Output("y", DType::kF32, {Dim::Known(b), Dim::Known(s), Dim::Known(n)});
        const int64_t woff = pb.AddWeight(w), boff = pb.AddWeight(bias);
        pb.Bucket({});
        const int xi = pb.In(0, {b, s, k}), wi = pb.Weight(woff, w.dims());
        const int bi = with_bias ? pb.Weight(boff, {n}) : -1;
        const int yi = pb.Out(0, {b, s, n});
        pb.Step("linear", {xi, wi, bi}, {yi},
                {P("m", b * s), P("k", k), P("n", n), P("trans_w", int64_t{trans}),
                 P("activation", act)});
        auto got = RunPlan(pb.Finish(), {x});
        ASSERT_EQ(got.size(), 1u);
        auto want = RunRefOp("kiln", "Linear",
                             {{"trans_w", int64_t{trans}}, {"activation", std::string(act)}},
                             {&x, &w, with_bias ? &bias : nullptr});
        ExpectClose(got[0], want.outputs[0], kAtol, kRtol,
                    absl::StrCat("trans=", trans, " act=", act, " bias=", with_bias));
      }
    }
  }
}

// block_quant_linear: 4-bit codes (u8 two per byte, as plans store them, or u4 one per byte,
// as older plans did) and 8-bit codes (u8 one per byte, param bits = 8), scales and zero
// points as plan weights (K = 40: a partial third block of 16), with and without bias (gelu
// epilogue with it); a 4-bit code above 15 in the plan is refused at Create, naming the
// step, and so are zero points of the other width and a bits value other than 4 or 8.
// Codes (u4 or u8, one per byte) of `dims`: a ramp modulo `mod`, every value occurring.
Tensor RampCodes(DType dt, std::vector<int64_t> dims, int mod) {
  Tensor t(dt, dims);
  for (int64_t i = 0; i < t.NumElements(); ++i)
    t.data<uint8_t>()[i] = static_cast<uint8_t>((i * 7 + 3) % mod);
  return t;
}

// block_quant_gather (kiln.BlockQuantGather): 4-bit codes packed two per byte and one per
// byte, 8-bit codes; zero points absent, of the codes' width, f32; i32 and i64 indices with a
// negative one — each bit for bit the reference op's (the same f32 arithmetic per element).
// An index outside the table fails the run naming it.
TEST(KernelSteps, BlockQuantGather) {
  const int64_t rows = 7, k = 40, bs = 16, kb = 3;
  enum Layout { kTwoPerByte, kOnePerByte, kEightBit };
  enum Zero { kNone, kCodes, kFloat };
  for (Layout layout : {kTwoPerByte, kOnePerByte, kEightBit})
    for (Zero zero : {kNone, kCodes, kFloat})
      for (DType it : {DType::kI32, DType::kI64}) {
        const bool wide = layout == kEightBit, with_zp = zero != kNone;
        const DType dt = wide ? DType::kU8 : DType::kU4;
        Tensor w = RampCodes(dt, {rows, k}, wide ? 256 : 16),
               zp = RampCodes(dt, {rows, kb}, wide ? 251 : 13);
        if (zero == kFloat) {
          Tensor f(DType::kF32, {rows, kb});
          for (int64_t i = 0; i < rows * kb; ++i)
            f.data<float>()[i] = static_cast<float>(zp.data<uint8_t>()[i]) + 0.375f;
          zp = std::move(f);
        }
        Tensor scales = RandomF32({rows, kb}, 2);
        Tensor packed(DType::kU8, {rows, k / 2});
        for (int64_t i = 0; i < rows * k / 2; ++i)
          packed.data<uint8_t>()[i] =
              static_cast<uint8_t>(w.data<uint8_t>()[2 * i] | (w.data<uint8_t>()[2 * i + 1] << 4));
        const Tensor& stored = layout == kTwoPerByte ? packed : w;
        Tensor ids(it, {2, 2});
        const int64_t id_values[] = {3, -1, 0, 6};
        for (int64_t i = 0; i < 4; ++i) ids.SetFromDouble(i, static_cast<double>(id_values[i]));
        PlanBuilder pb;
        pb.Input("ids", it, KnownDims({2, 2}));
        pb.Output("y", DType::kF32, KnownDims({2, 2, k}));
        const int64_t woff = pb.AddWeight(stored), soff = pb.AddWeight(scales),
                      zoff = pb.AddWeight(zp);
        pb.Bucket({});
        const int wi = pb.Weight(woff, stored.dims(), stored.dtype());
        const int ii = pb.In(0, {2, 2}, it);
        const int si = pb.Weight(soff, {rows, kb});
        const int zi = with_zp ? pb.Weight(zoff, {rows, kb}, zp.dtype()) : -1;
        std::vector<PlanParam> params = {P("rows", int64_t{4}), P("k", k), P("n", rows),
                                         P("block_size", bs)};
        if (wide) params.push_back(P("bits", int64_t{8}));
        pb.Step("block_quant_gather", {wi, ii, si, zi}, {pb.Out(0, {2, 2, k})}, params);
        auto got = RunPlan(pb.Finish(), {ids});
        ASSERT_EQ(got.size(), 1u);
        auto want = RunRefOp("kiln", "BlockQuantGather", {{"block_size", bs}},
                             {&w, &ids, &scales, with_zp ? &zp : nullptr});
        ExpectClose(
            got[0], want.outputs[0], 0, 0,
            absl::StrCat("layout=", layout, " zp=", zero, " ids=", std::string(DTypeName(it))));
      }
  // Index 7 of a 7-row table.
  Tensor w = RampCodes(DType::kU8, {rows, k}, 256), scales = RandomF32({rows, kb}, 2);
  Tensor ids(DType::kI64, {1});
  ids.data<int64_t>()[0] = 7;
  PlanBuilder pb;
  pb.Input("ids", DType::kI64, KnownDims({1}));
  pb.Output("y", DType::kF32, KnownDims({1, k}));
  const int64_t woff = pb.AddWeight(w), soff = pb.AddWeight(scales);
  pb.Bucket({});
  const int wi = pb.Weight(woff, {rows, k}, DType::kU8), ii = pb.In(0, {1}, DType::kI64);
  const int si = pb.Weight(soff, {rows, kb});
  pb.Step(
      "block_quant_gather", {wi, ii, si, -1}, {pb.Out(0, {1, k})},
      {P("rows", int64_t{1}), P("k", k), P("n", rows), P("block_size", bs), P("bits", int64_t{8})});
  auto exec = Executor::Create(pb.Finish());
  ASSERT_TRUE(exec.ok()) << exec.status();
  const TensorView view{ids.dtype(), ids.dims(), ids.raw()};
  auto run = (*exec)->Run({&view, 1});
  ASSERT_FALSE(run.ok());
  EXPECT_THAT(std::string(run.status().message()),
              ::testing::HasSubstr("BlockQuantGather index 7 at position 0 is outside [-7, 7)"))
      << run.status();
}

TEST(KernelSteps, BlockQuantLinear) {
  const int64_t b = 2, s = 3, k = 40, n = 5, bs = 16, kb = 3;
  enum Layout { kTwoPerByte, kOnePerByte, kEightBit };
  enum Zero { kNone, kCodes, kFloat };  // zero points: absent, the codes' dtype, f32
  for (Layout layout : {kTwoPerByte, kOnePerByte, kEightBit})
    for (Zero zero : {kCodes, kNone, kFloat}) {
      for (bool with_bias : {true, false}) {
        const bool wide = layout == kEightBit, with_zp = zero != kNone;
        const DType dt = wide ? DType::kU8 : DType::kU4;
        Tensor x = RandomF32({b, s, k}, 1);
        Tensor w = RampCodes(dt, {n, k}, wide ? 256 : 16),
               zp = RampCodes(dt, {n, kb}, wide ? 251 : 13);
        if (zero == kFloat) {  // fractional, as HQQ writes them
          Tensor f(DType::kF32, {n, kb});
          for (int64_t i = 0; i < n * kb; ++i)
            f.data<float>()[i] = static_cast<float>(zp.data<uint8_t>()[i]) + 0.375f;
          zp = std::move(f);
        }
        Tensor scales = RandomF32({n, kb}, 2), bias = RandomF32({n}, 3);
        // 8-bit scales are 16x smaller for the same weight range (range / 255, not / 15),
        // which keeps the outputs, and the kernel's rounding, at the 4-bit cases' scale.
        for (int64_t i = 0; wide && i < n * kb; ++i) scales.data<float>()[i] /= 16;
        Tensor packed(DType::kU8, {n, k / 2});
        for (int64_t i = 0; i < n * k / 2; ++i)
          packed.data<uint8_t>()[i] =
              static_cast<uint8_t>(w.data<uint8_t>()[2 * i] | (w.data<uint8_t>()[2 * i + 1] << 4));
        const Tensor& stored = layout == kTwoPerByte ? packed : w;
        PlanBuilder pb;
        pb.Input("x", DType::kF32, KnownDims({b, s, k}));
        pb.Output("y", DType::kF32, KnownDims({b, s, n}));
        const int64_t woff = pb.AddWeight(stored), soff = pb.AddWeight(scales),
                      zoff = pb.AddWeight(zp), boff = pb.AddWeight(bias);
        pb.Bucket({});
        const int xi = pb.In(0, {b, s, k});
        const int wi = pb.Weight(woff, stored.dims(), stored.dtype());
        const int si = pb.Weight(soff, {n, kb});
        const int zi = with_zp ? pb.Weight(zoff, {n, kb}, zp.dtype()) : -1;
        const int bi = with_bias ? pb.Weight(boff, {n}) : -1;
        const int yi = pb.Out(0, {b, s, n});
        const char* act = with_bias ? "gelu" : "none";
        std::vector<PlanParam> params = {P("m", b * s), P("k", k), P("n", n), P("block_size", bs),
                                         P("activation", act)};
        if (wide) params.push_back(P("bits", int64_t{8}));
        pb.Step("block_quant_linear", {xi, wi, si, zi, bi}, {yi}, params);
        auto got = RunPlan(pb.Finish(), {x});
        ASSERT_EQ(got.size(), 1u);
        auto want = RunRefOp(
            "kiln", "BlockQuantLinear", {{"block_size", bs}, {"activation", std::string(act)}},
            {&x, &w, &scales, with_zp ? &zp : nullptr, with_bias ? &bias : nullptr});
        ExpectClose(got[0], want.outputs[0], kAtol, kRtol,
                    absl::StrCat("layout=", layout, " zp=", zero, " bias=", with_bias));
      }
    }
  // 8-bit codes with 4-bit zero points, and bits = 3.
  for (const int64_t bits : {8, 3}) {
    Tensor w = RampCodes(DType::kU8, {n, k}, 256), zp = RampCodes(DType::kU4, {n, kb}, 16);
    Tensor scales = RandomF32({n, kb}, 2);
    PlanBuilder pb;
    pb.Input("x", DType::kF32, KnownDims({1, k}));
    pb.Output("y", DType::kF32, KnownDims({1, n}));
    const int64_t woff = pb.AddWeight(w), soff = pb.AddWeight(scales), zoff = pb.AddWeight(zp);
    pb.Bucket({});
    const int xi = pb.In(0, {1, k}), wi = pb.Weight(woff, w.dims(), DType::kU8);
    const int si = pb.Weight(soff, {n, kb}), zi = pb.Weight(zoff, {n, kb}, DType::kU4);
    pb.Step("block_quant_linear", {xi, wi, si, zi, -1}, {pb.Out(0, {1, n})},
            {P("m", int64_t{1}), P("k", k), P("n", n), P("block_size", bs), P("activation", "none"),
             P("bits", bits)});
    const absl::Status st = Executor::Create(pb.Finish()).status();
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_THAT(std::string(st.message()),
                ::testing::HasSubstr(bits == 8 ? "zero points of 8-bit codes must be u8 or f32"
                                               : "bits 3 is not 4 or 8"));
  }
  Tensor bad = RampCodes(DType::kU4, {n, k}, 16);
  bad.data<uint8_t>()[7] = 16;
  Tensor scales = RandomF32({n, kb}, 2);
  PlanBuilder pb;
  pb.Input("x", DType::kF32, KnownDims({1, k}));
  pb.Output("y", DType::kF32, KnownDims({1, n}));
  const int64_t woff = pb.AddWeight(bad), soff = pb.AddWeight(scales);
  pb.Bucket({});
  const int xi = pb.In(0, {1, k}), wi = pb.Weight(woff, bad.dims(), DType::kU4);
  const int si = pb.Weight(soff, {n, kb});
  pb.Step("block_quant_linear", {xi, wi, si, -1, -1}, {pb.Out(0, {1, n})},
          {P("m", int64_t{1}), P("k", k), P("n", n), P("block_size", bs), P("activation", "none")});
  const absl::Status st = Executor::Create(pb.Finish()).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_THAT(std::string(st.message()),
              ::testing::AllOf(::testing::HasSubstr("step 0"), ::testing::HasSubstr("is 16")));
}

TEST(KernelSteps, LayerNormInPlaceOverArena) {
  const int64_t rows = 6, h = 24;
  Tensor x = RandomF32({2, 3, h}, 4), g = RandomF32({h}, 5), be = RandomF32({h}, 6);
  for (bool with_beta : {true, false}) {
    PlanBuilder pb;
    pb.Input("x", DType::kF32, {Dim::Known(2), Dim::Known(3), Dim::Known(h)});
    pb.Output("y", DType::kF32, {Dim::Known(2), Dim::Known(3), Dim::Known(h)});
    const int64_t goff = pb.AddWeight(g), boff = pb.AddWeight(be);
    pb.Bucket({});
    const int xi = pb.In(0, {2, 3, h}), a = pb.Arena({rows, h});
    const int yi = pb.Out(0, {2, 3, h});
    pb.Step("copy", {xi}, {a}, {});
    // In place: output 0 is input 0's arena buffer.
    pb.Step("layer_norm", {a, pb.Weight(goff, {h}), with_beta ? pb.Weight(boff, {h}) : -1}, {a},
            {P("rows", rows), P("h", h), P("epsilon", 1e-5)});
    pb.Step("copy", {a}, {yi}, {});
    auto got = RunPlan(pb.Finish(), {x});
    ASSERT_EQ(got.size(), 1u);
    auto want = RunRefOp("", "LayerNormalization", {{"axis", int64_t{-1}}, {"epsilon", 1e-5f}},
                         {&x, &g, with_beta ? &be : nullptr});
    ExpectClose(got[0], want.outputs[0], kAtol, kRtol, absl::StrCat("beta=", with_beta));
  }
}

TEST(KernelSteps, SkipLayerNormWithSumAndBroadcastSkip) {
  const int64_t nb = 2, s = 3, h = 16;
  Tensor x = RandomF32({nb, s, h}, 7), skip = RandomF32({s, h}, 8), g = RandomF32({h}, 9),
         be = RandomF32({h}, 10), bias = RandomF32({h}, 11);
  PlanBuilder pb;
  pb.Input("x", DType::kF32, {Dim::Known(nb), Dim::Known(s), Dim::Known(h)});
  pb.Input("skip", DType::kF32, {Dim::Known(s), Dim::Known(h)});
  pb.Output("y", DType::kF32, {Dim::Known(nb), Dim::Known(s), Dim::Known(h)});
  pb.Output("sum", DType::kF32, {Dim::Known(nb), Dim::Known(s), Dim::Known(h)});
  const int64_t goff = pb.AddWeight(g), beoff = pb.AddWeight(be), bioff = pb.AddWeight(bias);
  pb.Bucket({});
  pb.Step("skip_layer_norm",
          {pb.In(0, {nb, s, h}), pb.In(1, {s, h}), pb.Weight(goff, {h}), pb.Weight(beoff, {h}),
           pb.Weight(bioff, {h})},
          {pb.Out(0, {nb, s, h}), pb.Out(1, {nb, s, h})},
          {P("rows", nb * s), P("h", h), P("skip_rows", s), P("epsilon", 1e-6)});
  auto got = RunPlan(pb.Finish(), {x, skip});
  ASSERT_EQ(got.size(), 2u);
  auto want =
      RunRefOp("kiln", "SkipLayerNorm", {{"epsilon", 1e-6f}}, {&x, &skip, &g, &be, &bias}, 2);
  ExpectClose(got[0], want.outputs[0], kAtol, kRtol, "y");
  ExpectClose(got[1], want.outputs[1], kAtol, kRtol, "sum");
}

TEST(KernelSteps, RmsNormInPlaceOverArena) {
  const int64_t rows = 6, h = 24;
  Tensor x = RandomF32({2, 3, h}, 12), g = RandomF32({h}, 13);
  PlanBuilder pb;
  pb.Input("x", DType::kF32, {Dim::Known(2), Dim::Known(3), Dim::Known(h)});
  pb.Output("y", DType::kF32, {Dim::Known(2), Dim::Known(3), Dim::Known(h)});
  const int64_t goff = pb.AddWeight(g);
  pb.Bucket({});
  const int xi = pb.In(0, {2, 3, h}), a = pb.Arena({rows, h});
  const int yi = pb.Out(0, {2, 3, h});
  pb.Step("copy", {xi}, {a}, {});
  pb.Step("rms_norm", {a, pb.Weight(goff, {h})}, {a},
          {P("rows", rows), P("h", h), P("epsilon", 1e-6)});
  pb.Step("copy", {a}, {yi}, {});
  auto got = RunPlan(pb.Finish(), {x});
  ASSERT_EQ(got.size(), 1u);
  auto want = RunRefOp("kiln", "RMSNorm", {{"epsilon", 1e-6f}}, {&x, &g});
  ExpectClose(got[0], want.outputs[0], kAtol, kRtol, "rms_norm");
}

// matmul of two activations in the three batch forms lowering emits (docs/plan-kernels.md):
// equal batches, a broadcast `a` (one [m,k] matrix), and a broadcast `b` (a's batch folded
// into m, batch 1), each against ONNX MatMul.
TEST(KernelSteps, MatMulBatchForms) {
  using V = std::vector<int64_t>;
  const int64_t nb = 3, m = 5, k = 7, n = 4;
  struct Form {
    V a, b;
    int64_t batch, mm;
    bool ba, bb;
  };
  const Form forms[] = {{{nb, m, k}, {nb, k, n}, nb, m, false, false},
                        {{m, k}, {nb, k, n}, nb, m, true, false},
                        {{nb, m, k}, {k, n}, 1, nb * m, false, true}};
  for (const Form& f : forms) {
    Tensor a = RandomF32(f.a, 14), b = RandomF32(f.b, 15);
    auto want = RunRefOp("", "MatMul", {}, {&a, &b});
    const V y = want.outputs[0].dims();
    PlanBuilder pb;
    pb.Input("a", DType::kF32, KnownDims(f.a));
    pb.Input("b", DType::kF32, KnownDims(f.b));
    pb.Output("y", DType::kF32, KnownDims(y));
    pb.Bucket({});
    pb.Step("matmul", {pb.In(0, f.a), pb.In(1, f.b)}, {pb.Out(0, y)},
            {P("batch", f.batch), P("m", f.mm), P("k", k), P("n", n),
             P("broadcast_a", int64_t{f.ba}), P("broadcast_b", int64_t{f.bb})});
    auto plan = pb.Finish();
    auto got = RunPlan(plan, {a, b});
    ASSERT_EQ(got.size(), 1u);
    ExpectClose(got[0], want.outputs[0], kAtol, kRtol,
                absl::StrCat("broadcast_a=", f.ba, " broadcast_b=", f.bb));
    if (!f.ba) continue;
    // The broadcast flag cleared: a [m,k] is too small for batch items, refused at Create.
    auto bad = std::make_shared<Plan>(*plan);
    for (PlanParam& p : bad->buckets[0].steps[0].params)
      if (p.name == "broadcast_a") p.value = int64_t{0};
    auto st = Executor::Create(bad).status();
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_THAT(std::string(st.message()),
                ::testing::HasSubstr("step 0 (matmul, /matmul): a [5,7] has 35 elements; the "
                                     "parameters need 105"));
  }
}

// conv: 2-D with padding, strides, dilations and groups, and 1-D (run as in_h = 1),
// against the reference Conv with the same attributes.
TEST(KernelSteps, Conv) {
  using V = std::vector<int64_t>;
  struct Case {
    V x, w;
    int64_t group;
    V strides, dilations, pads;  // ONNX attributes (pads begin..., end...)
    V y;
    bool bias;
  };
  const Case cases[] = {
      {{2, 4, 7, 6}, {6, 2, 3, 2}, 2, {2, 1}, {1, 2}, {1, 0, 2, 1}, {2, 6, 4, 5}, true},
      {{1, 3, 8, 8}, {5, 3, 4, 4}, 1, {4, 4}, {1, 1}, {0, 0, 0, 0}, {1, 5, 2, 2}, false},
      {{2, 3, 9}, {4, 3, 3}, 1, {2}, {1}, {1, 1}, {2, 4, 5}, true}};
  for (const Case& c : cases) {
    const bool one_d = c.x.size() == 3;
    const std::string label = absl::StrCat("x=", absl::StrJoin(c.x, ","), " group=", c.group);
    Tensor x = RandomF32(c.x, 21), w = RandomF32(c.w, 22), b = RandomF32({c.w[0]}, 23);
    auto want = RunRefOp(
        "", "Conv",
        {{"group", c.group}, {"strides", c.strides}, {"dilations", c.dilations}, {"pads", c.pads}},
        {&x, &w, c.bias ? &b : nullptr});
    ASSERT_EQ(want.outputs[0].dims(), c.y) << label;
    PlanBuilder pb;
    pb.Input("x", DType::kF32, KnownDims(c.x));
    pb.Output("y", DType::kF32, KnownDims(c.y));
    const int64_t woff = pb.AddWeight(w), boff = pb.AddWeight(b);
    pb.Bucket({});
    const int xi = pb.In(0, c.x), wi = pb.Weight(woff, c.w);
    const int bi = c.bias ? pb.Weight(boff, {c.w[0]}) : -1;
    const int n = static_cast<int>(c.strides.size());
    auto hw = [&](const V& v, int64_t unit, int i) {
      return one_d ? (i == 0 ? unit : v[0]) : v[i];
    };
    pb.Step("conv", {xi, wi, bi}, {pb.Out(0, c.y)},
            {P("batch", c.x[0]), P("in_ch", c.x[1]), P("in_h", one_d ? 1 : c.x[2]),
             P("in_w", c.x.back()), P("out_ch", c.w[0]), P("out_h", one_d ? 1 : c.y[2]),
             P("out_w", c.y.back()), P("k_h", one_d ? 1 : c.w[2]), P("k_w", c.w.back()),
             P("group", c.group), P("stride_h", hw(c.strides, 1, 0)),
             P("stride_w", hw(c.strides, 1, 1)), P("dil_h", hw(c.dilations, 1, 0)),
             P("dil_w", hw(c.dilations, 1, 1)), P("pad_top", one_d ? 0 : c.pads[0]),
             P("pad_left", c.pads[n - 1]), P("pad_bottom", one_d ? 0 : c.pads[n]),
             P("pad_right", c.pads[2 * n - 1])});
    auto got = RunPlan(pb.Finish(), {x});
    ASSERT_EQ(got.size(), 1u) << label;
    ExpectClose(got[0], want.outputs[0], kAtol, kRtol, label);
  }
}

TEST(KernelSteps, SkipRmsNormWithSumAndBias) {
  const int64_t nb = 2, s = 3, h = 16;
  Tensor x = RandomF32({nb, s, h}, 16), skip = RandomF32({nb, s, h}, 17), g = RandomF32({h}, 18),
         bias = RandomF32({h}, 19);
  for (bool with_sum : {true, false}) {
    PlanBuilder pb;
    pb.Input("x", DType::kF32, {Dim::Known(nb), Dim::Known(s), Dim::Known(h)});
    pb.Input("skip", DType::kF32, {Dim::Known(nb), Dim::Known(s), Dim::Known(h)});
    pb.Output("y", DType::kF32, {Dim::Known(nb), Dim::Known(s), Dim::Known(h)});
    if (with_sum) pb.Output("sum", DType::kF32, {Dim::Known(nb), Dim::Known(s), Dim::Known(h)});
    const int64_t goff = pb.AddWeight(g), bioff = pb.AddWeight(bias);
    pb.Bucket({});
    std::vector<int32_t> outs = {pb.Out(0, {nb, s, h})};
    if (with_sum) outs.push_back(pb.Out(1, {nb, s, h}));
    pb.Step(
        "skip_rms_norm",
        {pb.In(0, {nb, s, h}), pb.In(1, {nb, s, h}), pb.Weight(goff, {h}), pb.Weight(bioff, {h})},
        outs, {P("rows", nb * s), P("h", h), P("skip_rows", nb * s), P("epsilon", 1e-6)});
    auto got = RunPlan(pb.Finish(), {x, skip});
    ASSERT_EQ(got.size(), with_sum ? 2u : 1u);
    auto want = RunRefOp("kiln", "SkipRMSNorm", {{"epsilon", 1e-6f}}, {&x, &skip, &g, &bias}, 2);
    ExpectClose(got[0], want.outputs[0], kAtol, kRtol, "y");
    if (with_sum) ExpectClose(got[1], want.outputs[1], kAtol, kRtol, "sum");
  }
}

TEST(KernelSteps, AttentionMasks) {
  const int64_t nb = 2, s = 5, nh = 2, d = 4;
  Tensor qkv = RandomF32({nb, s, 3 * nh * d}, 12);
  // f32 additive [B,1,1,S] with a large negative entry, bool [B,1,S,S], none + causal.
  std::vector<float> madd(nb * s, 0.f);
  madd[3] = -10000.f;
  madd[s + 1] = -10000.f;
  Tensor mask_f = Tensor::FromF32({nb, 1, 1, s}, madd);
  Tensor mask_b(DType::kBool, {nb, 1, s, s});
  for (int64_t i = 0; i < mask_b.NumElements(); ++i) mask_b.data<uint8_t>()[i] = (i * 7) % 3 != 0;
  struct Case {
    const Tensor* mask;
    bool causal;
  };
  for (const Case& c : {Case{&mask_f, false}, Case{&mask_b, false}, Case{nullptr, true}}) {
    PlanBuilder pb;
    pb.Input("qkv", DType::kF32, {Dim::Known(nb), Dim::Known(s), Dim::Known(3 * nh * d)});
    if (c.mask) {
      std::vector<Dim> md;
      for (int64_t v : c.mask->dims()) md.push_back(Dim::Known(v));
      pb.Input("mask", c.mask->dtype(), md);
    }
    pb.Output("y", DType::kF32, {Dim::Known(nb), Dim::Known(s), Dim::Known(nh * d)});
    pb.Bucket({});
    const int qi = pb.In(0, {nb, s, 3 * nh * d});
    const int mi = c.mask ? pb.In(1, c.mask->dims(), c.mask->dtype()) : -1;
    const double scale = 0.5;
    pb.Step("attention", {qi, mi}, {pb.Out(0, {nb, s, nh * d})},
            {P("batch", nb), P("seq", s), P("num_heads", nh), P("head_size", d), P("scale", scale),
             P("causal", int64_t{c.causal})});
    std::vector<Tensor> ins = {qkv};
    if (c.mask) ins.push_back(*c.mask);
    auto got = RunPlan(pb.Finish(), ins);
    ASSERT_EQ(got.size(), 1u);
    auto want = RunRefOp("kiln", "MultiHeadAttention",
                         {{"num_heads", nh}, {"scale", 0.5f}, {"causal", int64_t{c.causal}}},
                         {&qkv, c.mask});
    ExpectClose(got[0], want.outputs[0], kAtol, kRtol,
                absl::StrCat("mask=", c.mask ? std::string(DTypeName(c.mask->dtype())) : "none"));
  }
}

TEST(KernelSteps, EmbedLayerNorm) {
  const int64_t nb = 2, s = 4, h = 8, vocab = 11, max_pos = 6, types = 2;
  Tensor word = RandomF32({vocab, h}, 13), pos = RandomF32({max_pos, h}, 14),
         seg = RandomF32({types, h}, 15), g = RandomF32({h}, 16), be = RandomF32({h}, 17);
  std::vector<int64_t> ids(nb * s), segs(nb * s);
  for (int64_t i = 0; i < nb * s; ++i) {
    ids[i] = (i * 5 + 1) % vocab;
    segs[i] = i % types;
  }
  Tensor ids_t = Tensor::FromI64({nb, s}, ids), seg_t = Tensor::FromI64({nb, s}, segs);
  Tensor pos_t = Tensor::FromI64({s}, {3, 0, 5, 1});
  for (int variant = 0; variant < 2; ++variant) {  // 0: segment + [S] positions, 1: neither
    PlanBuilder pb;
    pb.Input("input_ids", DType::kI64, {Dim::Known(nb), Dim::Known(s)});
    pb.Input("token_type_ids", DType::kI64, {Dim::Known(nb), Dim::Known(s)});
    pb.Input("position_ids", DType::kI64, {Dim::Known(s)});
    pb.Output("y", DType::kF32, {Dim::Known(nb), Dim::Known(s), Dim::Known(h)});
    const int64_t wo = pb.AddWeight(word), po = pb.AddWeight(pos), so = pb.AddWeight(seg),
                  go = pb.AddWeight(g), bo = pb.AddWeight(be);
    pb.Bucket({});
    const int ii = pb.In(0, {nb, s}, DType::kI64), si = pb.In(1, {nb, s}, DType::kI64),
              pi = pb.In(2, {s}, DType::kI64);
    const bool full = variant == 0;
    pb.Step(
        "embed_layer_norm",
        {ii, full ? si : -1, full ? pi : -1, pb.Weight(wo, {vocab, h}), pb.Weight(po, {max_pos, h}),
         full ? pb.Weight(so, {types, h}) : -1, pb.Weight(go, {h}), pb.Weight(bo, {h})},
        {pb.Out(0, {nb, s, h})},
        {P("batch", nb), P("seq", s), P("hidden", h), P("epsilon", 1e-12)});
    auto got = RunPlan(pb.Finish(), {ids_t, seg_t, pos_t});
    ASSERT_EQ(got.size(), 1u);
    auto want = RunRefOp("kiln", "EmbedLayerNorm", {{"epsilon", 1e-12f}},
                         {&ids_t, full ? &seg_t : nullptr, full ? &pos_t : nullptr, &word, &pos,
                          full ? &seg : nullptr, &g, &be});
    ExpectClose(got[0], want.outputs[0], kAtol, kRtol, absl::StrCat("variant ", variant));
  }
}

TEST(KernelSteps, PoolMeanAndCls) {
  const int64_t nb = 2, s = 5, h = 6;
  Tensor hid = RandomF32({nb, s, h}, 18);
  Tensor mask_i = Tensor::FromI64({nb, s}, {1, 1, 1, 0, 0, 1, 1, 1, 1, 1});
  Tensor mask_f = Tensor::FromF32({nb, s}, {1, 0, 1, 0, 1, 1, 1, 0, 0, 0});
  struct Case {
    const char* mode;
    int64_t normalize;
    const Tensor* mask;
  };
  for (const Case& c : {Case{"mean", 0, &mask_i}, Case{"mean", 1, &mask_f},
                        Case{"mean", 0, nullptr}, Case{"cls", 1, nullptr}}) {
    PlanBuilder pb;
    pb.Input("hidden", DType::kF32, {Dim::Known(nb), Dim::Known(s), Dim::Known(h)});
    if (c.mask) pb.Input("mask", c.mask->dtype(), {Dim::Known(nb), Dim::Known(s)});
    pb.Output("y", DType::kF32, {Dim::Known(nb), Dim::Known(h)});
    pb.Bucket({});
    const int hi = pb.In(0, {nb, s, h});
    const int mi = c.mask ? pb.In(1, {nb, s}, c.mask->dtype()) : -1;
    pb.Step("pool", {hi, mi}, {pb.Out(0, {nb, h})},
            {P("batch", nb), P("seq", s), P("hidden", h), P("mode", c.mode),
             P("normalize", c.normalize)});
    std::vector<Tensor> ins = {hid};
    if (c.mask) ins.push_back(*c.mask);
    auto got = RunPlan(pb.Finish(), ins);
    ASSERT_EQ(got.size(), 1u);
    auto want =
        RunRefOp("kiln", "Pool", {{"mode", std::string(c.mode)}, {"normalize", c.normalize}},
                 {&hid, c.mask});
    ExpectClose(got[0], want.outputs[0], kAtol, kRtol,
                absl::StrCat(c.mode, " normalize=", c.normalize, " mask=", c.mask != nullptr));
  }
}

TEST(KernelSteps, GeluAndSoftmax) {
  const int64_t rows = 3, n = 37;
  Tensor x = RandomF32({rows, n}, 19);
  for (int tanh = 0; tanh <= 1; ++tanh) {
    PlanBuilder pb;
    pb.Input("x", DType::kF32, {Dim::Known(rows), Dim::Known(n)});
    pb.Output("g", DType::kF32, {Dim::Known(rows), Dim::Known(n)});
    pb.Output("s", DType::kF32, {Dim::Known(rows), Dim::Known(n)});
    pb.Bucket({});
    const int xi = pb.In(0, {rows, n});
    pb.Step("gelu", {xi}, {pb.Out(0, {rows, n})}, {P("n", rows * n), P("tanh", int64_t{tanh})});
    pb.Step("softmax", {xi}, {pb.Out(1, {rows, n})}, {P("rows", rows), P("n", n)});
    auto got = RunPlan(pb.Finish(), {x});
    ASSERT_EQ(got.size(), 2u);
    auto gelu = RunRefOp("", "Gelu", {{"approximate", std::string(tanh ? "tanh" : "none")}}, {&x});
    auto soft = RunRefOp("", "Softmax", {{"axis", int64_t{-1}}}, {&x});
    ExpectClose(got[0], gelu.outputs[0], kAtol, kRtol, absl::StrCat("gelu tanh=", tanh));
    ExpectClose(got[1], soft.outputs[0], kAtol, kRtol, "softmax");
  }
}

// gather from a weight table on axis 0 (i64 ids, one negative) and from an input on axis 1
// (i32 ids), bit-exact against the reference Gather; an id out of range fails the run with
// the step and the index, and nothing past the table is read.
TEST(KernelSteps, GatherRowsAndColumns) {
  const int64_t rows = 7, h = 5;
  Tensor table = RandomF32({rows, h}, 23);
  Tensor ids = Tensor::FromI64({2, 3}, {6, 0, -1, 3, 3, 2});
  Tensor x = RandomF32({2, 4, 3}, 24);
  Tensor cols = *Tensor::Create(DType::kI32, {2});
  cols.data<int32_t>()[0] = 3;
  cols.data<int32_t>()[1] = -4;
  auto want0 = RunRefOp("", "Gather", {{"axis", int64_t{0}}}, {&table, &ids});
  auto want1 = RunRefOp("", "Gather", {{"axis", int64_t{1}}}, {&x, &cols});
  auto build = [&] {
    PlanBuilder pb;
    pb.Input("ids", DType::kI64, {Dim::Known(2), Dim::Known(3)});
    pb.Input("x", DType::kF32, {Dim::Known(2), Dim::Known(4), Dim::Known(3)});
    pb.Input("cols", DType::kI32, {Dim::Known(2)});
    pb.Output("rows", DType::kF32, {Dim::Known(2), Dim::Known(3), Dim::Known(h)});
    pb.Output("picked", DType::kF32, {Dim::Known(2), Dim::Known(2), Dim::Known(3)});
    const int64_t toff = pb.AddWeight(table);
    pb.Bucket({});
    pb.Step("gather", {pb.Weight(toff, {rows, h}), pb.In(0, {2, 3}, DType::kI64)},
            {pb.Out(0, {2, 3, h})}, {P("axis", int64_t{0})}, {"/wte/Gather"});
    pb.Step("gather", {pb.In(1, {2, 4, 3}), pb.In(2, {2}, DType::kI32)}, {pb.Out(1, {2, 2, 3})},
            {P("axis", int64_t{1})});
    return pb.Finish();
  };
  auto got = RunPlan(build(), {ids, x, cols});
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(got[0].BitwiseEqual(want0.outputs[0]));
  EXPECT_TRUE(got[1].BitwiseEqual(want1.outputs[0]));

  auto exec = Executor::Create(build(), {.num_threads = 2});
  ASSERT_TRUE(exec.ok()) << exec.status();
  Tensor bad = Tensor::FromI64({2, 3}, {6, 0, 7, 3, 3, 2});
  const std::vector<TensorView> views = {View(bad), View(x), View(cols)};
  auto out = (*exec)->Run(views);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(out.status().message()),
              ::testing::AllOf(::testing::HasSubstr("gather"), ::testing::HasSubstr("/wte/Gather"),
                               ::testing::HasSubstr("index 7 at position 2")));
}

// The four strided-copy kernels (one shared rule, runtime/kernel_rules.h): a transpose, a
// slice with negative steps, an expand and a concat of three inputs, each bit-exact
// against the ONNX node.
TEST(KernelSteps, TransposeSliceExpandConcat) {
  using V = std::vector<int64_t>;
  Tensor x = RandomF32({2, 3, 5, 7}, 31);
  Tensor ints = Tensor::FromI64({6, 10}, [] {
    V v(60);
    for (int i = 0; i < 60; ++i) v[i] = i * 7 - 100;
    return v;
  }());
  Tensor e = RandomF32({3, 1}, 32);
  std::vector<Tensor> parts;
  for (int64_t len : {1, 3, 2}) {
    Tensor t = *Tensor::Create(DType::kI32, {2, len, 4});
    for (int64_t i = 0; i < t.NumElements(); ++i)
      t.data<int32_t>()[i] = static_cast<int32_t>(len * 1000 + i);
    parts.push_back(std::move(t));
  }
  const Tensor starts = Tensor::FromI64({2}, {-1, 8}), ends = Tensor::FromI64({2}, {-100, 1}),
               axes = Tensor::FromI64({2}, {0, 1}), steps = Tensor::FromI64({2}, {-2, -3}),
               shape = Tensor::FromI64({3}, {2, 3, 4});
  auto want_t = RunRefOp("", "Transpose", {{"perm", V{0, 2, 1, 3}}}, {&x});
  auto want_s = RunRefOp("", "Slice", {}, {&ints, &starts, &ends, &axes, &steps});
  auto want_e = RunRefOp("", "Expand", {}, {&e, &shape});
  auto want_c = RunRefOp("", "Concat", {{"axis", int64_t{1}}}, {&parts[0], &parts[1], &parts[2]});
  ASSERT_EQ(want_s.outputs[0].dims(), (V{3, 3}));

  PlanBuilder pb;
  pb.Input("x", DType::kF32, KnownDims(x.dims()));
  pb.Input("ints", DType::kI64, KnownDims(ints.dims()));
  pb.Input("e", DType::kF32, KnownDims(e.dims()));
  for (int i = 0; i < 3; ++i)
    pb.Input("c" + std::to_string(i), DType::kI32, KnownDims(parts[i].dims()));
  pb.Output("t", DType::kF32, KnownDims({2, 5, 3, 7}));
  pb.Output("s", DType::kI64, KnownDims({3, 3}));
  pb.Output("e", DType::kF32, KnownDims({2, 3, 4}));
  pb.Output("c", DType::kI32, KnownDims({2, 6, 4}));
  pb.Bucket({});
  pb.Step("transpose", {pb.In(0, x.dims())}, {pb.Out(0, {2, 5, 3, 7})}, {P("perm", V{0, 2, 1, 3})});
  pb.Step("slice", {pb.In(1, ints.dims(), DType::kI64)}, {pb.Out(1, {3, 3}, DType::kI64)},
          {P("starts", V{5, 8}), P("steps", V{-2, -3})});
  pb.Step("expand", {pb.In(2, e.dims())}, {pb.Out(2, {2, 3, 4})}, {});
  pb.Step("concat",
          {pb.In(3, parts[0].dims(), DType::kI32), pb.In(4, parts[1].dims(), DType::kI32),
           pb.In(5, parts[2].dims(), DType::kI32)},
          {pb.Out(3, {2, 6, 4}, DType::kI32)}, {P("axis", int64_t{1})});
  auto got = RunPlan(pb.Finish(), {x, ints, e, parts[0], parts[1], parts[2]});
  ASSERT_EQ(got.size(), 4u);
  EXPECT_TRUE(got[0].BitwiseEqual(want_t.outputs[0]));
  EXPECT_TRUE(got[1].BitwiseEqual(want_s.outputs[0]));
  EXPECT_TRUE(got[2].BitwiseEqual(want_e.outputs[0]));
  EXPECT_TRUE(got[3].BitwiseEqual(want_c.outputs[0]));
}

// gather_nd (BERT dynamo's token pick: [B,S,H] by [B,1] tuples, batch_dims 1),
// gather_elements and cumsum (RoBERTa's position ids), bit-exact against the ONNX nodes.
TEST(KernelSteps, GatherNDGatherElementsCumSum) {
  using V = std::vector<int64_t>;
  Tensor data = RandomF32({2, 5, 3}, 33);
  Tensor nd_idx = Tensor::FromI64({2, 1}, {4, -5});
  Tensor ge_idx = Tensor::FromI64({2, 2, 3}, {0, 4, -1, 2, 3, 1, -5, 0, 0, 1, 2, 3});
  Tensor ids = Tensor::FromI64({2, 6}, {1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 1});
  Tensor axis1 = Tensor::FromI64({}, {1});
  auto want_nd = RunRefOp("", "GatherND", {{"batch_dims", int64_t{1}}}, {&data, &nd_idx});
  auto want_ge = RunRefOp("", "GatherElements", {{"axis", int64_t{1}}}, {&data, &ge_idx});
  auto want_cs = RunRefOp("", "CumSum", {}, {&ids, &axis1});
  PlanBuilder pb;
  pb.Input("data", DType::kF32, KnownDims({2, 5, 3}));
  pb.Input("nd_idx", DType::kI64, KnownDims({2, 1}));
  pb.Input("ge_idx", DType::kI64, KnownDims({2, 2, 3}));
  pb.Input("ids", DType::kI64, KnownDims({2, 6}));
  pb.Output("nd", DType::kF32, KnownDims({2, 3}));
  pb.Output("ge", DType::kF32, KnownDims({2, 2, 3}));
  pb.Output("cs", DType::kI64, KnownDims({2, 6}));
  pb.Bucket({});
  pb.Step("gather_nd", {pb.In(0, {2, 5, 3}), pb.In(1, {2, 1}, DType::kI64)}, {pb.Out(0, {2, 3})},
          {P("batch_dims", int64_t{1})});
  pb.Step("gather_elements", {pb.In(0, {2, 5, 3}), pb.In(2, {2, 2, 3}, DType::kI64)},
          {pb.Out(1, {2, 2, 3})}, {P("axis", int64_t{1})});
  pb.Step("cumsum", {pb.In(3, {2, 6}, DType::kI64)}, {pb.Out(2, {2, 6}, DType::kI64)},
          {P("axis", int64_t{1}), P("exclusive", int64_t{0}), P("reverse", int64_t{0})});
  auto got = RunPlan(pb.Finish(), {data, nd_idx, ge_idx, ids});
  ASSERT_EQ(got.size(), 3u);
  EXPECT_TRUE(got[0].BitwiseEqual(want_nd.outputs[0]));
  EXPECT_TRUE(got[1].BitwiseEqual(want_ge.outputs[0]));
  EXPECT_TRUE(got[2].BitwiseEqual(want_cs.outputs[0]));

  // An index out of range fails the run naming the step.
  Tensor bad = Tensor::FromI64({2, 1}, {5, 0});
  PlanBuilder pb2;
  pb2.Input("data", DType::kF32, KnownDims({2, 5, 3}));
  pb2.Input("nd_idx", DType::kI64, KnownDims({2, 1}));
  pb2.Output("nd", DType::kF32, KnownDims({2, 3}));
  pb2.Bucket({});
  pb2.Step("gather_nd", {pb2.In(0, {2, 5, 3}), pb2.In(1, {2, 1}, DType::kI64)},
           {pb2.Out(0, {2, 3})}, {P("batch_dims", int64_t{1})});
  auto exec = Executor::Create(pb2.Finish(), {.num_threads = 2});
  ASSERT_TRUE(exec.ok()) << exec.status();
  const std::vector<TensorView> views = {View(data), View(bad)};
  auto run = (*exec)->Run(views);
  ASSERT_FALSE(run.ok());
  EXPECT_THAT(std::string(run.status().message()),
              ::testing::AllOf(::testing::HasSubstr("step 0"),
                               ::testing::HasSubstr("GatherND index 5 (entry 0 of tuple 0)")));
}

// rotary: x [B, N, S, D] with tables [1, 1, S, D] against kiln.Rotary; a table that does
// not broadcast to x's rows is refused at Create naming the step.
TEST(KernelSteps, RotaryAndItsRule) {
  using V = std::vector<int64_t>;
  const V xd = {2, 3, 5, 8}, td = {1, 1, 5, 8};
  Tensor x = RandomF32(xd, 34), cs = RandomF32(td, 35), sn = RandomF32(td, 36);
  auto want = RunRefOp("kiln", "Rotary", {}, {&x, &cs, &sn});
  auto build = [&](const V& table) {
    PlanBuilder pb;
    pb.Input("x", DType::kF32, KnownDims(xd));
    pb.Input("cos", DType::kF32, KnownDims(table));
    pb.Input("sin", DType::kF32, KnownDims(table));
    pb.Output("y", DType::kF32, KnownDims(xd));
    pb.Bucket({});
    pb.Step("rotary", {pb.In(0, xd), pb.In(1, table), pb.In(2, table)}, {pb.Out(0, xd)}, {});
    return pb.Finish();
  };
  auto got = RunPlan(build(td), {x, cs, sn});
  ASSERT_EQ(got.size(), 1u);
  ExpectClose(got[0], want.outputs[0], kAtol, kRtol, "rotary");
  auto st = Executor::Create(build({1, 1, 4, 8})).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_THAT(std::string(st.message()),
              ::testing::AllOf(::testing::HasSubstr("step 0 (rotary"),
                               ::testing::HasSubstr("does not broadcast to the rows of x")));
}

// The shared strided-copy rule refuses, at Create, every box that would touch memory
// outside its buffers, naming the step.
TEST(KernelSteps, StridedCopiesAreCheckedAtCreate) {
  using V = std::vector<int64_t>;
  auto create = [](const std::string& kernel, std::vector<V> xs, V y, std::vector<PlanParam> params,
                   DType ty = DType::kF32) {
    PlanBuilder pb;
    std::vector<int32_t> ins;
    for (size_t i = 0; i < xs.size(); ++i) {
      std::vector<Dim> d;
      for (int64_t v : xs[i]) d.push_back(Dim::Known(v));
      pb.Input("x" + std::to_string(i), DType::kF32, d);
    }
    std::vector<Dim> dy;
    for (int64_t v : y) dy.push_back(Dim::Known(v));
    pb.Output("y", ty, dy);
    pb.Bucket({});
    for (size_t i = 0; i < xs.size(); ++i) ins.push_back(pb.In(static_cast<int>(i), xs[i]));
    pb.Step(kernel, ins, {pb.Out(0, y, ty)}, std::move(params));
    return Executor::Create(pb.Finish()).status();
  };
  auto expect = [](const absl::Status& st, const std::string& msg) {
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_THAT(std::string(st.message()),
                ::testing::AllOf(::testing::HasSubstr("step 0"), ::testing::HasSubstr(msg)));
  };
  expect(create("slice", {{4, 6}}, {2, 3}, {P("starts", V{0, 1}), P("steps", V{3, 3})}),
         "reads outside x [4,6]");
  expect(create("slice", {{4, 6}}, {2, 3}, {P("starts", V{3, 5}), P("steps", V{-4, -1})}),
         "reads outside x [4,6]");
  expect(create("transpose", {{2, 3}}, {2, 3}, {P("perm", V{1, 0})}), "is not x [2,3] permuted");
  expect(create("expand", {{3}}, {2, 4}, {}), "does not broadcast to y [2,4]");
  expect(create("concat", {{2, 1}, {2, 2}}, {2, 4}, {P("axis", int64_t{1})}),
         "the inputs give 3 along the axis, y has 4");
  expect(create("concat", {{2, 3}, {2, 2}}, {2, 4}, {P("axis", int64_t{1})}), "writes outside y");
  expect(create("concat", {{2, 1}, {3, 3}}, {2, 4}, {P("axis", int64_t{1})}),
         "input 1 [3,3] differs from y [2,4] off the axis");
  expect(create("concat", {{2, 1}}, {2, 1}, {P("axis", int64_t{1})}, DType::kI32),
         "input 0 is f32, y is i32");
  EXPECT_TRUE(create("concat", {{2, 1}, {2, 3}}, {2, 4}, {P("axis", int64_t{1})}).ok());
}

// A chain over aliases: linear -> arena [6,5], alias [2,3,5] -> gelu in place -> ref Mul
// with a weight -> graph output 0, which softmax then reads into output 1; output 2 is a
// copy of the input (a graph output that is a graph input).
TEST(KernelSteps, RefCopyAliasAndOutputReadBack) {
  const int64_t b = 2, s = 3, k = 8, n = 5;
  Tensor x = RandomF32({b, s, k}, 20), w = RandomF32({k, n}, 21), c = RandomF32({n}, 22);
  // Reference composition.
  auto lin = RunRefOp("kiln", "Linear", {}, {&x, &w, nullptr});
  auto gel = RunRefOp("", "Gelu", {}, {&lin.outputs[0]});
  auto mul = RunRefOp("", "Mul", {}, {&gel.outputs[0], &c});
  auto soft = RunRefOp("", "Softmax", {{"axis", int64_t{-1}}}, {&mul.outputs[0]});

  PlanBuilder pb;
  pb.Input("x", DType::kF32, {Dim::Known(b), Dim::Known(s), Dim::Known(k)});
  pb.Output("prod", DType::kF32, {Dim::Known(b), Dim::Known(s), Dim::Known(n)});
  pb.Output("probs", DType::kF32, {Dim::Known(b), Dim::Known(s), Dim::Known(n)});
  pb.Output("x_copy", DType::kF32, {Dim::Known(b), Dim::Known(s), Dim::Known(k)});
  const int64_t woff = pb.AddWeight(w), coff = pb.AddWeight(c);
  pb.Bucket({});
  const int xi = pb.In(0, {b, s, k});
  const int flat = pb.Arena({b * s, n});
  const int view = pb.Alias(flat, {b, s, n});
  const int o0 = pb.Out(0, {b, s, n}), o1 = pb.Out(1, {b, s, n}), o2 = pb.Out(2, {b, s, k});
  pb.Step("linear", {xi, pb.Weight(woff, {k, n}), -1}, {flat},
          {P("m", b * s), P("k", k), P("n", n), P("trans_w", int64_t{0}), P("activation", "none")});
  pb.Step("gelu", {view}, {view}, {P("n", b * s * n), P("tanh", int64_t{0})});
  pb.Step("ref", {view, pb.Weight(coff, {n})}, {o0}, {P("node", mul.text)}, {"/Mul"});
  pb.Step("softmax", {o0}, {o1}, {P("rows", b * s), P("n", n)});
  pb.Step("copy", {xi}, {o2}, {});
  auto got = RunPlan(pb.Finish(), {x});
  ASSERT_EQ(got.size(), 3u);
  ExpectClose(got[0], mul.outputs[0], kAtol, kRtol, "prod");
  ExpectClose(got[1], soft.outputs[0], kAtol, kRtol, "probs");
  EXPECT_TRUE(got[2].BitwiseEqual(x));
}

// A ref step on a non-float op with an omitted optional operand (Clip on i64 without min).
TEST(KernelSteps, RefWithOmittedOperandAndIntegerData) {
  Tensor x = Tensor::FromI64({2, 3}, {-5, 4, 9, 0, 12, -1});
  Tensor hi = Tensor::ScalarI64(7);
  auto want = RunRefOp("", "Clip", {}, {&x, nullptr, &hi});
  ASSERT_EQ(want.outputs.size(), 1u);
  PlanBuilder pb;
  pb.Input("x", DType::kI64, {Dim::Known(2), Dim::Known(3)});
  pb.Output("y", DType::kI64, {Dim::Known(2), Dim::Known(3)});
  const int64_t hoff = pb.AddWeight(hi);
  pb.Bucket({});
  pb.Step("ref", {pb.In(0, {2, 3}, DType::kI64), -1, pb.Weight(hoff, {}, DType::kI64)},
          {pb.Out(0, {2, 3}, DType::kI64)}, {P("node", want.text)});
  auto got = RunPlan(pb.Finish(), {x});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(got[0].BitwiseEqual(want.outputs[0]));
}

TEST(KernelSteps, TraceHasOneEventPerStep) {
  const int64_t n = 16;
  PlanBuilder pb;
  pb.Input("x", DType::kF32, {Dim::Known(n)});
  pb.Output("y", DType::kF32, {Dim::Known(n)});
  pb.Bucket({});
  const int a = pb.Arena({n});
  pb.Step("gelu", {pb.In(0, {n})}, {a}, {P("n", n), P("tanh", int64_t{0})}, {"/act/Gelu"});
  pb.Step("softmax", {a}, {pb.Out(0, {n})}, {P("rows", int64_t{1}), P("n", n)},
          {"/Softmax", "/Div"});
  RunStats stats;
  stats.collect_trace = true;
  auto got = RunPlan(pb.Finish(), {RandomF32({n}, 23)}, &stats);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(stats.bucket, 0);
  EXPECT_FALSE(stats.padded);
  ASSERT_EQ(stats.trace.size(), 2u);
  EXPECT_EQ(stats.trace[0].kernel, "gelu");
  EXPECT_EQ(stats.trace[0].provenance, std::vector<std::string>{"/act/Gelu"});
  EXPECT_EQ(stats.trace[1].kernel, "softmax");
  EXPECT_EQ(stats.trace[1].provenance, (std::vector<std::string>{"/Softmax", "/Div"}));
  EXPECT_GE(stats.trace[0].start_ns, 0);
  EXPECT_GE(stats.trace[1].start_ns, stats.trace[0].start_ns + stats.trace[0].duration_ns);
}

}  // namespace
}  // namespace kiln::runtime_test
