// Reference kernels of kiln's fused ops (src/reference/fused.cc) checked against the ONNX
// subgraphs they replace, run on the same reference executor with the same seeded random
// inputs (floats uniform in [-1, 1] with no exact zeros; ids in range). Tolerance in f32:
// max abs error <= 1e-5 — both sides accumulate in double, but the decomposed graph rounds
// every intermediate to f32 (relative 6e-8 each) through a handful of ops on O(1) values,
// so 1e-5 is far above the expected ~1e-6 and far below any semantic error (a wrong
// epsilon, mask, transpose or head split moves outputs by > 1e-3). f16/bf16/f64 are
// checked against the f64 result of the same op: the kernel rounds once, so each element
// must lie within one ulp of the output dtype. Error cases check the status code and the
// message substring that names the problem.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "kiln/ir/text.h"
#include "kiln/ir/verifier.h"
#include "kiln/reference/executor.h"

namespace kiln {
namespace {

using Feeds = absl::flat_hash_map<std::string, Tensor>;

// Uniform in [-1, 1] (scaled by `amp`), never exactly zero.
Tensor Rand(DType dt, std::vector<int64_t> dims, uint64_t seed, double amp = 1.0) {
  std::mt19937_64 rng(seed);
  Tensor t(dt, std::move(dims));
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    double u = 2 * (static_cast<double>(rng() >> 11) * 0x1.0p-53) - 1;
    if (u == 0) u = 0.5;
    t.SetFromDouble(i, amp * u);
  }
  return t;
}

Tensor RandIds(DType dt, std::vector<int64_t> dims, int64_t hi, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Tensor t(dt, std::move(dims));
  for (int64_t i = 0; i < t.NumElements(); ++i)
    t.SetFromDouble(i, static_cast<double>(rng() % static_cast<uint64_t>(hi)));
  return t;
}

Tensor Values(DType dt, std::vector<int64_t> dims, std::vector<double> v) {
  Tensor t(dt, std::move(dims));
  EXPECT_EQ(t.NumElements(), static_cast<int64_t>(v.size()));
  for (size_t i = 0; i < v.size() && static_cast<int64_t>(i) < t.NumElements(); ++i)
    t.SetFromDouble(static_cast<int64_t>(i), v[i]);
  return t;
}

absl::StatusOr<std::vector<Tensor>> RunText(const std::string& text, const Feeds& feeds) {
  auto g = ParseGraph(text);
  if (!g.ok()) return g.status();
  absl::Status v = VerifyGraph(**g);
  if (!v.ok()) return v;
  return RunReference(**g, feeds);
}

std::vector<Tensor> MustRun(const std::string& text, const Feeds& feeds) {
  auto r = RunText(text, feeds);
  EXPECT_TRUE(r.ok()) << r.status() << "\n" << text;
  return r.ok() ? *r : std::vector<Tensor>();
}

// Max abs difference over all outputs; infinity when shapes/dtypes/counts differ. NaN in
// either side counts as infinitely wrong.
double MaxAbsDiff(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size() || a.empty()) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].dims(), b[i].dims()) << "output " << i;
    EXPECT_EQ(a[i].dtype(), b[i].dtype()) << "output " << i;
    if (a[i].dims() != b[i].dims() || a[i].dtype() != b[i].dtype()) return INFINITY;
    for (int64_t j = 0; j < a[i].NumElements(); ++j) {
      const double d = std::abs(a[i].GetAsDouble(j) - b[i].GetAsDouble(j));
      if (std::isnan(d)) return INFINITY;
      worst = std::max(worst, d);
    }
  }
  return worst;
}

void ExpectSame(const std::string& fused, const std::string& decomposed, const Feeds& feeds,
                double tol = 1e-5) {
  std::vector<Tensor> a = MustRun(fused, feeds);
  std::vector<Tensor> b = MustRun(decomposed, feeds);
  EXPECT_LE(MaxAbsDiff(a, b), tol);
}

// Runs a one-fused-node graph text with `dt` substituted for the placeholder DT.
std::string WithDType(const std::string& text, DType dt) {
  return absl::StrReplaceAll(text, {{"DT", std::string(DTypeName(dt))}});
}

// Converts every float tensor in `feeds` to `dt`, and returns the f64 version of it too
// (holding exactly the same values), so a low-precision run can be compared with f64.
void ConvertFeeds(const Feeds& in, DType dt, Feeds& low, Feeds& f64) {
  for (const auto& [name, t] : in) {
    if (!IsFloat(t.dtype())) {
      low[name] = t;
      f64[name] = t;
      continue;
    }
    Tensor l(dt, t.dims()), h(DType::kF64, t.dims());
    for (int64_t i = 0; i < t.NumElements(); ++i) {
      l.SetFromDouble(i, t.GetAsDouble(i));
      h.SetFromDouble(i, l.GetAsDouble(i));
    }
    low[name] = l;
    f64[name] = h;
  }
}

// The op computes in double and rounds once: every element of the `dt` run is within one
// ulp of the `dt` format (relative 2^-10 for f16, 2^-7 for bf16; plus the smallest
// subnormal step) of the f64 run on identical values.
void ExpectRoundedOnce(const std::string& text_with_dt, const Feeds& feeds, DType dt) {
  Feeds low, f64;
  ConvertFeeds(feeds, dt, low, f64);
  std::vector<Tensor> a = MustRun(WithDType(text_with_dt, dt), low);
  std::vector<Tensor> b = MustRun(WithDType(text_with_dt, DType::kF64), f64);
  ASSERT_EQ(a.size(), b.size());
  const double rel = dt == DType::kF16 ? 0x1.0p-10 : dt == DType::kBF16 ? 0x1.0p-7 : 0x1.0p-52;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].dtype(), dt);
    ASSERT_EQ(a[i].dims(), b[i].dims());
    for (int64_t j = 0; j < a[i].NumElements(); ++j) {
      const double want = b[i].GetAsDouble(j);
      EXPECT_LE(std::abs(a[i].GetAsDouble(j) - want), std::abs(want) * rel + 0x1.0p-24)
          << DTypeName(dt) << " output " << i << " element " << j;
    }
  }
}

void ExpectError(const std::string& text, const Feeds& feeds, absl::StatusCode code,
                 const std::string& substring) {
  auto r = RunText(text, feeds);
  ASSERT_FALSE(r.ok()) << "expected an error containing '" << substring << "'";
  EXPECT_EQ(r.status().code(), code) << r.status();
  EXPECT_NE(r.status().message().find(substring), std::string::npos) << r.status();
}

// ---------------------------------------------------------------------------------------
// kiln.Linear

constexpr char kLinearFused[] = R"(graph g opset=21 {
  %0 = Input() : f32[2,3,4] "x"
  %1 = Input() : f32[4,5] "w"
  %2 = Input() : f32[5] "b"
  %3 = kiln.Linear(%0, %1, %2) {activation="ACT"} : f32[2,3,5]
  return "y": %3
})";

Feeds LinearFeeds(std::vector<int64_t> wdims = {4, 5}) {
  return {{"x", Rand(DType::kF32, {2, 3, 4}, 1)},
          {"w", Rand(DType::kF32, wdims, 2)},
          {"b", Rand(DType::kF32, {5}, 3)}};
}

std::string LinearDecomposed(const std::string& epilogue) {
  return absl::StrCat(R"(graph g opset=21 {
  %0 = Input() : f32[2,3,4] "x"
  %1 = Input() : f32[4,5] "w"
  %2 = Input() : f32[5] "b"
  %3 = MatMul(%0, %1)
  %4 = Add(%2, %3)
  )",
                      epilogue, R"(
  return "y": %5
})");
}

TEST(LinearTest, MatchesMatMulAddAndEachActivation) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"none", "%5 = Identity(%4)"},
      {"gelu", "%5 = Gelu(%4)"},
      {"gelu_tanh", R"(%5 = Gelu(%4) {approximate="tanh"})"},
      {"relu", "%5 = Relu(%4)"},
      {"tanh", "%5 = Tanh(%4)"},
  };
  for (const auto& [act, epilogue] : cases) {
    SCOPED_TRACE(act);
    ExpectSame(absl::StrReplaceAll(kLinearFused, {{"ACT", act}}), LinearDecomposed(epilogue),
               LinearFeeds());
  }
}

TEST(LinearTest, GeluMatchesTheErfDecomposition) {
  // BERT's exported GELU: 0.5 * x * (1 + Erf(x / sqrt(2))).
  ExpectSame(absl::StrReplaceAll(kLinearFused, {{"ACT", "gelu"}}), R"(graph g opset=21 {
  %0 = Input() : f32[2,3,4] "x"
  %1 = Input() : f32[4,5] "w"
  %2 = Input() : f32[5] "b"
  %3 = MatMul(%0, %1)
  %4 = Add(%3, %2)
  %5 = Constant() {value=tensor<f32[]>[1.4142135]} : f32[]
  %6 = Div(%4, %5)
  %7 = Erf(%6)
  %8 = Constant() {value=tensor<f32[]>[1.0]} : f32[]
  %9 = Add(%7, %8)
  %10 = Mul(%4, %9)
  %11 = Constant() {value=tensor<f32[]>[0.5]} : f32[]
  %12 = Mul(%10, %11)
  return "y": %12
})",
             LinearFeeds());
}

TEST(LinearTest, TransWMatchesTransposeMatMulAndNoBias) {
  ExpectSame(R"(graph g opset=21 {
  %0 = Input() : f32[2,3,4] "x"
  %1 = Input() : f32[5,4] "w"
  %2 = Input() : f32[5] "b"
  %3 = kiln.Linear(%0, %1, %2) {trans_w=1} : f32[2,3,5]
  %4 = kiln.Linear(%0, %1) {trans_w=1} : f32[2,3,5]
  return "y": %3, "z": %4
})",
             R"(graph g opset=21 {
  %0 = Input() : f32[2,3,4] "x"
  %1 = Input() : f32[5,4] "w"
  %2 = Input() : f32[5] "b"
  %3 = Transpose(%1) {perm=[1, 0]}
  %4 = MatMul(%0, %3)
  %5 = Add(%4, %2)
  return "y": %5, "z": %4
})",
             LinearFeeds({5, 4}));
}

TEST(LinearTest, MatchesGemmOnRank2) {
  Feeds f = {{"x", Rand(DType::kF32, {3, 4}, 4)},
             {"w", Rand(DType::kF32, {5, 4}, 5)},
             {"b", Rand(DType::kF32, {5}, 6)}};
  ExpectSame(R"(graph g opset=21 {
  %0 = Input() : f32[3,4] "x"
  %1 = Input() : f32[5,4] "w"
  %2 = Input() : f32[5] "b"
  %3 = kiln.Linear(%0, %1, %2) {trans_w=1} : f32[3,5]
  return "y": %3
})",
             R"(graph g opset=21 {
  %0 = Input() : f32[3,4] "x"
  %1 = Input() : f32[5,4] "w"
  %2 = Input() : f32[5] "b"
  %3 = Gemm(%0, %1, %2) {transB=1}
  return "y": %3
})",
             f);
}

TEST(LinearTest, LowPrecisionRoundsOnce) {
  const std::string text = R"(graph g opset=21 {
  %0 = Input() : DT[2,3,4] "x"
  %1 = Input() : DT[4,5] "w"
  %2 = Input() : DT[5] "b"
  %3 = kiln.Linear(%0, %1, %2) {activation="gelu"} : DT[2,3,5]
  return "y": %3
})";
  for (DType dt : {DType::kF16, DType::kBF16, DType::kF32})
    ExpectRoundedOnce(text, LinearFeeds(), dt);
}

TEST(LinearTest, Errors) {
  const Feeds f = LinearFeeds();
  ExpectError(absl::StrReplaceAll(kLinearFused, {{"ACT", "swish"}}), f,
              absl::StatusCode::kInvalidArgument, "activation must be one of");
  ExpectError(absl::StrReplaceAll(kLinearFused, {{"{activation=\"ACT\"}", "{trans_w=1}"}}), f,
              absl::StatusCode::kInvalidArgument, "disagree on K");
  ExpectError(R"(graph g opset=21 {
  %0 = Input() : f32[2,3,4] "x"
  %1 = Input() : f32[4,5] "w"
  %2 = Input() : f32[4] "b"
  %3 = kiln.Linear(%0, %1, %2)
  return "y": %3
})",
              {{"x", f.at("x")}, {"w", f.at("w")}, {"b", Rand(DType::kF32, {4}, 9)}},
              absl::StatusCode::kInvalidArgument, "B must have shape [5]");
  ExpectError(
      R"(graph g opset=21 {
  %0 = Input() : i64[2,4] "x"
  %1 = Input() : i64[4,5] "w"
  %3 = kiln.Linear(%0, %1)
  return "y": %3
})",
      {{"x", RandIds(DType::kI64, {2, 4}, 3, 1)}, {"w", RandIds(DType::kI64, {4, 5}, 3, 2)}},
      absl::StatusCode::kUnimplemented, "dtype i64");
  ExpectError(R"(graph g opset=21 {
  %0 = Input() : f32[2,3,4] "x"
  %1 = Input() : f32[4,5] "w"
  %2 = Input() : f32[5] "b"
  %3 = kiln.Linear(%0, %1, %2) {trans_w=2}
  return "y": %3
})",
              f, absl::StatusCode::kInvalidArgument, "trans_w must be 0 or 1");
}

// ---------------------------------------------------------------------------------------
// kiln.SkipLayerNorm

Feeds SkipFeeds(std::vector<int64_t> skip_dims = {2, 3, 8}) {
  return {{"x", Rand(DType::kF32, {2, 3, 8}, 11)},
          {"skip", Rand(DType::kF32, skip_dims, 12)},
          {"gamma", Rand(DType::kF32, {8}, 13)},
          {"beta", Rand(DType::kF32, {8}, 14)},
          {"bias", Rand(DType::kF32, {8}, 15)}};
}

constexpr char kSkipInputs[] = R"(graph g opset=21 {
  %0 = Input() : f32[2,3,8] "x"
  %1 = Input() : f32[SKIP] "skip"
  %2 = Input() : f32[8] "gamma"
  %3 = Input() : f32[8] "beta"
  %4 = Input() : f32[8] "bias"
)";

std::string SkipGraph(const std::string& skip_dims, const std::string& body) {
  return absl::StrCat(absl::StrReplaceAll(kSkipInputs, {{"SKIP", skip_dims}}), body, "\n}");
}

TEST(SkipLayerNormTest, MatchesAddAddLayerNormalizationWithSumOutput) {
  ExpectSame(SkipGraph("2,3,8", R"(
  %5, %6 = kiln.SkipLayerNorm(%0, %1, %2, %3, %4) {epsilon=1e-3} : f32[2,3,8], f32[2,3,8]
  return "y": %5, "sum": %6)"),
             SkipGraph("2,3,8", R"(
  %5 = Add(%0, %1)
  %6 = Add(%5, %4)
  %7 = LayerNormalization(%6, %2, %3) {axis=-1, epsilon=1e-3}
  return "y": %7, "sum": %6)"),
             SkipFeeds());
}

TEST(SkipLayerNormTest, DefaultEpsilonNoBetaNoBiasAndBroadcastSkip) {
  ExpectSame(SkipGraph("3,8", R"(
  %5 = kiln.SkipLayerNorm(%0, %1, %2) : f32[2,3,8]
  %6 = kiln.SkipLayerNorm(%0, %1, %2, _, %4) : f32[2,3,8]
  return "y": %5, "z": %6)"),
             SkipGraph("3,8", R"(
  %5 = Add(%1, %0)
  %7 = LayerNormalization(%5, %2) {epsilon=1e-5}
  %8 = Add(%5, %4)
  %9 = LayerNormalization(%8, %2)
  return "y": %7, "z": %9)"),
             SkipFeeds({3, 8}));
}

TEST(SkipLayerNormTest, LowPrecisionRoundsOnce) {
  const std::string text = R"(graph g opset=21 {
  %0 = Input() : DT[2,3,8] "x"
  %1 = Input() : DT[2,3,8] "skip"
  %2 = Input() : DT[8] "gamma"
  %3 = Input() : DT[8] "beta"
  %4 = Input() : DT[8] "bias"
  %5, %6 = kiln.SkipLayerNorm(%0, %1, %2, %3, %4) : DT[2,3,8], DT[2,3,8]
  return "y": %5, "sum": %6
})";
  for (DType dt : {DType::kF16, DType::kBF16, DType::kF32})
    ExpectRoundedOnce(text, SkipFeeds(), dt);
}

TEST(SkipLayerNormTest, Errors) {
  Feeds f = SkipFeeds();
  f["skip"] = Rand(DType::kF64, {2, 3, 8}, 12);
  ExpectError(R"(graph g opset=21 {
  %0 = Input() : f32[2,3,8] "x"
  %1 = Input() : f64[2,3,8] "skip"
  %2 = Input() : f32[8] "gamma"
  %5 = kiln.SkipLayerNorm(%0, %1, %2)
  return "y": %5
})",
              {{"x", f.at("x")}, {"skip", f.at("skip")}, {"gamma", f.at("gamma")}},
              absl::StatusCode::kInvalidArgument, "skip has dtype f64 but X has f32");
  ExpectError(SkipGraph("2,3,8", R"(
  %5 = kiln.SkipLayerNorm(%0, %1, %2) {epsilon=1}
  return "y": %5)"),
              SkipFeeds(), absl::StatusCode::kInvalidArgument,
              "attribute 'epsilon' must be a float");
  ExpectError(SkipGraph("2,3,8", R"(
  %5, %6, %7 = kiln.SkipLayerNorm(%0, %1, %2)
  return "y": %5)"),
              SkipFeeds(), absl::StatusCode::kInvalidArgument, "has 3 outputs");
}

TEST(SkipLayerNormTest, ShapeErrors) {
  Feeds f = SkipFeeds({2, 1, 5});
  ExpectError(SkipGraph("2,1,5", R"(
  %5 = kiln.SkipLayerNorm(%0, %1, %2)
  return "y": %5)"),
              f, absl::StatusCode::kInvalidArgument, "does not broadcast to X");
  ExpectError(R"(graph g opset=21 {
  %0 = Input() : f32[2,3,8] "x"
  %1 = Input() : f32[2,3,8] "skip"
  %2 = Input() : f32[7] "gamma"
  %5 = kiln.SkipLayerNorm(%0, %1, %2)
  return "y": %5
})",
              {{"x", Rand(DType::kF32, {2, 3, 8}, 1)},
               {"skip", Rand(DType::kF32, {2, 3, 8}, 2)},
               {"gamma", Rand(DType::kF32, {7}, 3)}},
              absl::StatusCode::kInvalidArgument, "gamma must have shape [8]");
}

// ---------------------------------------------------------------------------------------
// kiln.RMSNorm

TEST(RMSNormTest, MatchesPowReduceMeanAddSqrtDivMul) {
  Feeds f = {{"x", Rand(DType::kF32, {2, 3, 8}, 21)}, {"gamma", Rand(DType::kF32, {8}, 22)}};
  ExpectSame(R"(graph g opset=21 {
  %0 = Input() : f32[2,3,8] "x"
  %1 = Input() : f32[8] "gamma"
  %2 = kiln.RMSNorm(%0, %1) {epsilon=1e-3} : f32[2,3,8]
  %3 = kiln.RMSNorm(%0, %1) : f32[2,3,8]
  return "y": %2, "z": %3
})",
             R"(graph g opset=21 {
  %0 = Input() : f32[2,3,8] "x"
  %1 = Input() : f32[8] "gamma"
  %2 = Constant() {value=tensor<f32[]>[2.0]} : f32[]
  %3 = Pow(%0, %2)
  %4 = Constant() {value=tensor<i64[1]>[-1]} : i64[1]
  %5 = ReduceMean(%3, %4)
  %6 = Constant() {value=tensor<f32[]>[1e-3]} : f32[]
  %7 = Add(%5, %6)
  %8 = Sqrt(%7)
  %9 = Div(%0, %8)
  %10 = Mul(%1, %9)
  %11 = Constant() {value=tensor<f32[]>[1e-6]} : f32[]
  %12 = Add(%5, %11)
  %13 = Sqrt(%12)
  %14 = Div(%0, %13)
  %15 = Mul(%14, %1)
  return "y": %10, "z": %15
})",
             f);
}

TEST(RMSNormTest, LowPrecisionRoundsOnceAndErrors) {
  Feeds f = {{"x", Rand(DType::kF32, {2, 3, 8}, 21)}, {"gamma", Rand(DType::kF32, {8}, 22)}};
  const std::string text = R"(graph g opset=21 {
  %0 = Input() : DT[2,3,8] "x"
  %1 = Input() : DT[8] "gamma"
  %2 = kiln.RMSNorm(%0, %1) : DT[2,3,8]
  return "y": %2
})";
  for (DType dt : {DType::kF16, DType::kBF16}) ExpectRoundedOnce(text, f, dt);
  ExpectError(R"(graph g opset=21 {
  %0 = Input() : f32[2,3,8] "x"
  %1 = Input() : f32[2,8] "gamma"
  %2 = kiln.RMSNorm(%0, %1)
  return "y": %2
})",
              {{"x", f.at("x")}, {"gamma", Rand(DType::kF32, {2, 8}, 1)}},
              absl::StatusCode::kInvalidArgument, "gamma must have shape [8]");
  ExpectError(R"(graph g opset=21 {
  %0 = Input() : f32[2,3,8] "x"
  %1 = Input() : f64[8] "gamma"
  %2 = kiln.RMSNorm(%0, %1)
  return "y": %2
})",
              {{"x", f.at("x")}, {"gamma", Rand(DType::kF64, {8}, 1)}},
              absl::StatusCode::kInvalidArgument, "gamma has dtype f64");
}

// ---------------------------------------------------------------------------------------
// kiln.MultiHeadAttention: B=2, S=5, N=3, D=4, H=12; scale 1/sqrt(4) = 0.5 exactly.

// The decomposed BERT self-attention on a packed qkv, with MASK_CHAIN computing %9
// (the masked scores) from %8 (the scaled scores) and PROBS computing %10 (probs).
std::string AttentionDecomposed(const std::string& extra_inputs, const std::string& mask_chain,
                                const std::string& probs = "%10 = Softmax(%9) {axis=-1}") {
  return absl::StrCat(R"(graph g opset=21 {
  %0 = Input() : f32[2,5,36] "qkv"
  )",
                      extra_inputs, R"(
  %1, %2, %3 = Split(%0) {axis=2}
  %4 = Constant() {value=tensor<i64[4]>[2, 5, 3, 4]} : i64[4]
  %20 = Reshape(%1, %4)
  %21 = Reshape(%2, %4)
  %22 = Reshape(%3, %4)
  %5 = Transpose(%20) {perm=[0, 2, 1, 3]}
  %6 = Transpose(%21) {perm=[0, 2, 3, 1]}
  %23 = Transpose(%22) {perm=[0, 2, 1, 3]}
  %7 = MatMul(%5, %6)
  %24 = Constant() {value=tensor<f32[]>[2.0]} : f32[]
  %8 = Div(%7, %24)
  )",
                      mask_chain, "\n  ", probs, R"(
  %11 = MatMul(%10, %23)
  %12 = Transpose(%11) {perm=[0, 2, 1, 3]}
  %13 = Constant() {value=tensor<i64[3]>[2, 5, 12]} : i64[3]
  %14 = Reshape(%12, %13)
  return "y": %14
})");
}

Tensor AdditiveMask() {
  // (1 - attention_mask) * -10000 for attention_mask rows [1 1 1 0 0] and [1 1 1 1 1],
  // plus a random term so every score position gets a distinct offset.
  Tensor m = Rand(DType::kF32, {2, 1, 1, 5}, 31, 0.5);
  for (int64_t j = 3; j < 5; ++j) m.SetFromDouble(j, m.GetAsDouble(j) - 10000.0);
  return m;
}

TEST(MultiHeadAttentionTest, MatchesDecomposedBertAttentionWithAdditiveMask) {
  Feeds f = {{"qkv", Rand(DType::kF32, {2, 5, 36}, 30, 2.0)}, {"mask", AdditiveMask()}};
  ExpectSame(R"(graph g opset=21 {
  %0 = Input() : f32[2,5,36] "qkv"
  %1 = Input() : f32[2,1,1,5] "mask"
  %2 = kiln.MultiHeadAttention(%0, %1) {num_heads=3, scale=0.5} : f32[2,5,12]
  return "y": %2
})",
             AttentionDecomposed(R"(%30 = Input() : f32[2,1,1,5] "mask")", "%9 = Add(%8, %30)"), f);
}

TEST(MultiHeadAttentionTest, NoMask) {
  Feeds f = {{"qkv", Rand(DType::kF32, {2, 5, 36}, 32, 2.0)}};
  ExpectSame(R"(graph g opset=21 {
  %0 = Input() : f32[2,5,36] "qkv"
  %2 = kiln.MultiHeadAttention(%0) {num_heads=3, scale=0.5, causal=0} : f32[2,5,12]
  return "y": %2
})",
             AttentionDecomposed("", "%9 = Identity(%8)"), f);
}

TEST(MultiHeadAttentionTest, CausalMatchesTriluBuiltMask) {
  // mask[i][j] = -inf where j > i: Trilu(ones, k=1, upper) marks exactly those positions.
  const std::string chain = R"(%40 = Constant() {value=tensor<i64[2]>[5, 5]} : i64[2]
  %41 = ConstantOfShape(%40) {value=tensor<f32[1]>[1.0]}
  %42 = Constant() {value=tensor<i64[]>[1]} : i64[]
  %43 = Trilu(%41, %42) {upper=1}
  %44 = Cast(%43) {to=9}
  %45 = Constant() {value=tensor<f32[]>[-inf]} : f32[]
  %46 = Constant() {value=tensor<f32[]>[0.0]} : f32[]
  %47 = Where(%44, %45, %46)
  %48 = Add(%8, %47)
  %9 = Add(%48, %30))";
  Feeds f = {{"qkv", Rand(DType::kF32, {2, 5, 36}, 33, 2.0)}, {"mask", AdditiveMask()}};
  ExpectSame(R"(graph g opset=21 {
  %0 = Input() : f32[2,5,36] "qkv"
  %1 = Input() : f32[2,1,1,5] "mask"
  %2 = kiln.MultiHeadAttention(%0, %1) {num_heads=3, scale=0.5, causal=1} : f32[2,5,12]
  return "y": %2
})",
             AttentionDecomposed(R"(%30 = Input() : f32[2,1,1,5] "mask")", chain), f);
  // The first query position sees only itself: its output is V of position 0 exactly.
  std::vector<Tensor> y = MustRun(R"(graph g opset=21 {
  %0 = Input() : f32[2,5,36] "qkv"
  %2 = kiln.MultiHeadAttention(%0) {num_heads=3, scale=0.5, causal=1} : f32[2,5,12]
  return "y": %2
})",
                                  {{"qkv", f.at("qkv")}});
  ASSERT_EQ(y.size(), 1u);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t j = 0; j < 12; ++j)
      EXPECT_EQ(y[0].GetAsDouble(b * 5 * 12 + j), f.at("qkv").GetAsDouble(b * 5 * 36 + 24 + j));
}

TEST(MultiHeadAttentionTest, BoolMaskWithFullyMaskedRowGivesZeros) {
  // mask [2,1,5,5]; batch 0 row 2 is all false (fully masked), other entries random.
  Tensor mask(DType::kBool, {2, 1, 5, 5});
  std::mt19937_64 rng(34);
  for (int64_t i = 0; i < mask.NumElements(); ++i) mask.SetFromDouble(i, (rng() % 3) != 0);
  for (int64_t i = 0; i < 5; ++i) {
    mask.SetFromDouble(2 * 5 + i, 0);       // batch 0, query 2: fully masked
    mask.SetFromDouble(25 + 3 * 5 + 3, 1);  // batch 1, query 3: at least one visible
  }
  for (int64_t q = 0; q < 10; ++q)
    if (q != 2) mask.SetFromDouble(q * 5 + q % 5, 1);  // every other row sees its diagonal
  Feeds f = {{"qkv", Rand(DType::kF32, {2, 5, 36}, 35, 2.0)}, {"mask", mask}};
  // SDPA-style export: Where(mask, scores, -inf) -> Softmax -> IsNaN guard -> 0.
  const std::string chain = R"(%45 = Constant() {value=tensor<f32[]>[-inf]} : f32[]
  %9 = Where(%30, %8, %45))";
  const std::string probs = R"(%50 = Softmax(%9) {axis=-1}
  %51 = IsNaN(%50)
  %52 = Constant() {value=tensor<f32[]>[0.0]} : f32[]
  %10 = Where(%51, %52, %50))";
  const std::string fused = R"(graph g opset=21 {
  %0 = Input() : f32[2,5,36] "qkv"
  %1 = Input() : bool[2,1,5,5] "mask"
  %2 = kiln.MultiHeadAttention(%0, %1) {num_heads=3, scale=0.5} : f32[2,5,12]
  return "y": %2
})";
  ExpectSame(fused, AttentionDecomposed(R"(%30 = Input() : bool[2,1,5,5] "mask")", chain, probs),
             f);
  std::vector<Tensor> y = MustRun(fused, f);
  ASSERT_EQ(y.size(), 1u);
  for (int64_t j = 0; j < 12; ++j) EXPECT_EQ(y[0].GetAsDouble(2 * 12 + j), 0.0) << j;
  double other = 0;
  for (int64_t j = 0; j < 12; ++j) other += std::abs(y[0].GetAsDouble(1 * 12 + j));
  EXPECT_GT(other, 0.0);
}

TEST(MultiHeadAttentionTest, LowPrecisionRoundsOnce) {
  const std::string text = R"(graph g opset=21 {
  %0 = Input() : DT[2,5,36] "qkv"
  %1 = Input() : DT[2,1,1,5] "mask"
  %2 = kiln.MultiHeadAttention(%0, %1) {num_heads=3, scale=0.5} : DT[2,5,12]
  return "y": %2
})";
  Feeds f = {{"qkv", Rand(DType::kF32, {2, 5, 36}, 36)},
             {"mask", Rand(DType::kF32, {2, 1, 1, 5}, 37)}};
  for (DType dt : {DType::kF16, DType::kBF16}) ExpectRoundedOnce(text, f, dt);
}

TEST(MultiHeadAttentionTest, Errors) {
  const Feeds f = {{"qkv", Rand(DType::kF32, {2, 5, 36}, 30)}};
  auto graph = [](const std::string& attrs, const std::string& qkv = "f32[2,5,36]") {
    return absl::StrCat("graph g opset=21 {\n  %0 = Input() : ", qkv,
                        " \"qkv\"\n  %2 = kiln.MultiHeadAttention(%0) {", attrs,
                        "}\n  return \"y\": %2\n}");
  };
  ExpectError(graph("num_heads=5, scale=0.5"), f, absl::StatusCode::kInvalidArgument,
              "qkv last dim 36 is not divisible by num_heads + 2 * num_kv_heads = 15");
  ExpectError(graph("num_heads=3"), f, absl::StatusCode::kInvalidArgument,
              "attribute 'scale' is required");
  ExpectError(graph("scale=0.5"), f, absl::StatusCode::kInvalidArgument,
              "attribute 'num_heads' is required");
  ExpectError(graph("num_heads=0, scale=0.5"), f, absl::StatusCode::kInvalidArgument,
              "num_heads must be positive");
  ExpectError(graph("num_heads=3, scale=1"), f, absl::StatusCode::kInvalidArgument,
              "attribute 'scale' must be a float");
  ExpectError(graph("num_heads=3, scale=0.5", "f32[10,36]"),
              {{"qkv", Rand(DType::kF32, {10, 36}, 1)}}, absl::StatusCode::kInvalidArgument,
              "qkv must have shape [B, S, (N + 2·Nkv)·D]");
  ExpectError(R"(graph g opset=21 {
  %0 = Input() : f32[2,5,36] "qkv"
  %1 = Input() : f32[2,1,5,4] "mask"
  %2 = kiln.MultiHeadAttention(%0, %1) {num_heads=3, scale=0.5}
  return "y": %2
})",
              {{"qkv", f.at("qkv")}, {"mask", Rand(DType::kF32, {2, 1, 5, 4}, 1)}},
              absl::StatusCode::kInvalidArgument, "does not broadcast to [B, N, S, S]");
  ExpectError(R"(graph g opset=21 {
  %0 = Input() : f32[2,5,36] "qkv"
  %1 = Input() : i64[2,1,1,5] "mask"
  %2 = kiln.MultiHeadAttention(%0, %1) {num_heads=3, scale=0.5}
  return "y": %2
})",
              {{"qkv", f.at("qkv")}, {"mask", RandIds(DType::kI64, {2, 1, 1, 5}, 2, 1)}},
              absl::StatusCode::kInvalidArgument, "mask must be float or bool");
}

// ---------------------------------------------------------------------------------------
// kiln.EmbedLayerNorm: B=2, S=6, H=8, vocab 30, 16 positions, 2 segments.

Feeds EmbedFeeds(DType id_dt = DType::kI64) {
  return {{"ids", RandIds(id_dt, {2, 6}, 30, 41)},  {"seg", RandIds(id_dt, {2, 6}, 2, 42)},
          {"pos", RandIds(id_dt, {2, 6}, 16, 43)},  {"word", Rand(DType::kF32, {30, 8}, 44)},
          {"pemb", Rand(DType::kF32, {16, 8}, 45)}, {"semb", Rand(DType::kF32, {2, 8}, 46)},
          {"gamma", Rand(DType::kF32, {8}, 47)},    {"beta", Rand(DType::kF32, {8}, 48)}};
}

std::string EmbedGraph(const std::string& body, const std::string& id = "i64") {
  return absl::StrCat("graph g opset=21 {\n",
                      absl::StrReplaceAll(R"(
  %0 = Input() : ID[2,6] "ids"
  %1 = Input() : ID[2,6] "seg"
  %2 = Input() : ID[2,6] "pos"
  %3 = Input() : f32[30,8] "word"
  %4 = Input() : f32[16,8] "pemb"
  %5 = Input() : f32[2,8] "semb"
  %6 = Input() : f32[8] "gamma"
  %7 = Input() : f32[8] "beta"
)",
                                          {{"ID", id}}),
                      body, "\n}");
}

TEST(EmbedLayerNormTest, MatchesGathersAddsLayerNormalization) {
  for (const std::string id : {"i64", "i32"}) {
    SCOPED_TRACE(id);
    ExpectSame(EmbedGraph(R"(
  %10 = kiln.EmbedLayerNorm(%0, %1, %2, %3, %4, %5, %6, %7) {epsilon=1e-12} : f32[2,6,8]
  return "y": %10)",
                          id),
               EmbedGraph(R"(
  %10 = Gather(%3, %0)
  %11 = Gather(%4, %2)
  %12 = Gather(%5, %1)
  %13 = Add(%10, %12)
  %14 = Add(%13, %11)
  %15 = LayerNormalization(%14, %6, %7) {epsilon=1e-12}
  return "y": %15)",
                          id),
               EmbedFeeds(id == "i64" ? DType::kI64 : DType::kI32));
  }
}

TEST(EmbedLayerNormTest, ImplicitPositionsAndNoSegments) {
  // Omitted position_ids mean 0..S-1 for every row (HF's position_ids[:, :S] buffer).
  ExpectSame(EmbedGraph(R"(
  %10 = kiln.EmbedLayerNorm(%0, _, _, %3, %4, _, %6, %7) {epsilon=1e-5} : f32[2,6,8]
  %11 = kiln.EmbedLayerNorm(%0, %1, _, %3, %4, %5, %6, %7) : f32[2,6,8]
  return "y": %10, "z": %11)"),
             EmbedGraph(R"(
  %20 = Constant() {value=tensor<i64[1,6]>[0, 1, 2, 3, 4, 5]} : i64[1,6]
  %10 = Gather(%3, %0)
  %11 = Gather(%4, %20)
  %13 = Add(%10, %11)
  %15 = LayerNormalization(%13, %6, %7) {epsilon=1e-5}
  %16 = Gather(%5, %1)
  %17 = Add(%13, %16)
  %18 = LayerNormalization(%17, %6, %7) {epsilon=1e-12}
  return "y": %15, "z": %18)"),
             EmbedFeeds());
}

TEST(EmbedLayerNormTest, BroadcastPositionIdsAndNegativeIdsFollowGather) {
  Feeds f = EmbedFeeds();
  f["pos1"] = Values(DType::kI64, {1, 6}, {5, 4, 3, 2, 1, 0});
  f["ids"].SetFromDouble(0, -1);  // Gather semantics: row vocab-1
  ExpectSame(EmbedGraph(R"(
  %8 = Input() : i64[1,6] "pos1"
  %10 = kiln.EmbedLayerNorm(%0, %1, %8, %3, %4, %5, %6, %7) : f32[2,6,8]
  return "y": %10)"),
             EmbedGraph(R"(
  %8 = Input() : i64[1,6] "pos1"
  %10 = Gather(%3, %0)
  %11 = Gather(%4, %8)
  %12 = Gather(%5, %1)
  %13 = Add(%10, %11)
  %14 = Add(%13, %12)
  %15 = LayerNormalization(%14, %6, %7) {epsilon=1e-12}
  return "y": %15)"),
             f);
}

TEST(EmbedLayerNormTest, Errors) {
  const std::string all = EmbedGraph(R"(
  %10 = kiln.EmbedLayerNorm(%0, %1, %2, %3, %4, %5, %6, %7)
  return "y": %10)");
  Feeds f = EmbedFeeds();
  f["ids"].SetFromDouble(7, 30);
  ExpectError(all, f, absl::StatusCode::kInvalidArgument,
              "input_ids contains 30, out of range for a table of 30 rows");
  f = EmbedFeeds();
  f["ids"].SetFromDouble(3, -31);
  ExpectError(all, f, absl::StatusCode::kInvalidArgument, "input_ids contains -31");
  f = EmbedFeeds();
  f["seg"].SetFromDouble(11, 2);
  ExpectError(all, f, absl::StatusCode::kInvalidArgument, "segment_ids contains 2");
  f = EmbedFeeds();
  f["pos"].SetFromDouble(5, 16);
  ExpectError(all, f, absl::StatusCode::kInvalidArgument, "position_ids contains 16");
  // Implicit positions 0..S-1 need S <= rows of pos_emb.
  ExpectError(R"(graph g opset=21 {
  %0 = Input() : i64[1,6] "ids"
  %3 = Input() : f32[30,8] "word"
  %4 = Input() : f32[4,8] "pemb"
  %6 = Input() : f32[8] "gamma"
  %7 = Input() : f32[8] "beta"
  %10 = kiln.EmbedLayerNorm(%0, _, _, %3, %4, _, %6, %7)
  return "y": %10
})",
              {{"ids", RandIds(DType::kI64, {1, 6}, 30, 1)},
               {"word", f.at("word")},
               {"pemb", Rand(DType::kF32, {4, 8}, 2)},
               {"gamma", f.at("gamma")},
               {"beta", f.at("beta")}},
              absl::StatusCode::kInvalidArgument, "implicit position ids");
  ExpectError(EmbedGraph(R"(
  %10 = kiln.EmbedLayerNorm(%0, %1, %2, %3, %4, _, %6, %7)
  return "y": %10)"),
              EmbedFeeds(), absl::StatusCode::kInvalidArgument,
              "segment_ids and segment_emb must be given together");
  ExpectError(EmbedGraph(R"(
  %10 = kiln.EmbedLayerNorm(%0, %1, %2, %3, %4, %5, %7, %3)
  return "y": %10)"),
              EmbedFeeds(), absl::StatusCode::kInvalidArgument, "beta must have shape [8]");
  f = EmbedFeeds();
  f["ids"] = Rand(DType::kF32, {2, 6}, 1);
  ExpectError(
      EmbedGraph(R"(
  %10 = kiln.EmbedLayerNorm(%0, %1, %2, %3, %4, %5, %6, %7)
  return "y": %10)",
                 "f32"),
      [] {
        Feeds g = EmbedFeeds();
        for (const char* k : {"ids", "seg", "pos"}) g[k] = Rand(DType::kF32, {2, 6}, 1);
        return g;
      }(),
      absl::StatusCode::kInvalidArgument, "input_ids must be i64 or i32");
}

// ---------------------------------------------------------------------------------------
// kiln.Pool: B=3, S=4, H=6. Mask row 2 is all zeros (a padded-out row).

Feeds PoolFeeds() {
  return {{"h", Rand(DType::kF32, {3, 4, 6}, 51)},
          {"mask", Values(DType::kI64, {3, 4}, {1, 1, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0})}};
}

constexpr char kPoolInputs[] = R"(graph g opset=21 {
  %0 = Input() : f32[3,4,6] "h"
  %1 = Input() : i64[3,4] "mask"
)";

// sentence-transformers mean pooling (+ Normalize when `normalize`).
std::string MeanPoolDecomposed(bool normalize) {
  std::string s = absl::StrCat(kPoolInputs, R"(
  %2 = Constant() {value=tensor<i64[1]>[-1]} : i64[1]
  %3 = Unsqueeze(%1, %2)
  %4 = Shape(%0)
  %5 = Expand(%3, %4)
  %6 = Cast(%5) {to=1}
  %7 = Mul(%0, %6)
  %8 = Constant() {value=tensor<i64[1]>[1]} : i64[1]
  %9 = ReduceSum(%7, %8) {keepdims=0}
  %10 = ReduceSum(%6, %8) {keepdims=0}
  %11 = Constant() {value=tensor<f32[]>[1e-9]} : f32[]
  %12 = Clip(%10, %11, _)
  %13 = Div(%9, %12)
)");
  if (!normalize) return absl::StrCat(s, "  return \"y\": %13\n}");
  return absl::StrCat(s, R"(
  %14 = Constant() {value=tensor<i64[1]>[-1]} : i64[1]
  %15 = ReduceL2(%13, %14) {keepdims=1}
  %16 = Constant() {value=tensor<f32[]>[1e-12]} : f32[]
  %17 = Clip(%15, %16, _)
  %18 = Div(%13, %17)
  return "y": %18
})");
}

TEST(PoolTest, MeanMatchesSentenceTransformersDecomposition) {
  for (int normalize : {0, 1}) {
    SCOPED_TRACE(normalize);
    ExpectSame(absl::StrCat(kPoolInputs, "  %2 = kiln.Pool(%0, %1) {mode=\"mean\", normalize=",
                            normalize, "} : f32[3,6]\n  return \"y\": %2\n}"),
               MeanPoolDecomposed(normalize), PoolFeeds());
  }
  // The padded-out row pools to exactly zero (0 / max(0, 1e-9)).
  std::vector<Tensor> y = MustRun(
      absl::StrCat(kPoolInputs, "  %2 = kiln.Pool(%0, %1) {mode=\"mean\"}\n  return \"y\": %2\n}"),
      PoolFeeds());
  ASSERT_EQ(y.size(), 1u);
  for (int64_t j = 0; j < 6; ++j) EXPECT_EQ(y[0].GetAsDouble(2 * 6 + j), 0.0);
}

TEST(PoolTest, MeanWithoutMaskAndFloatMask) {
  Feeds f = PoolFeeds();
  f["fmask"] = Values(DType::kF32, {3, 4}, {1, 0.5, 0, 1, 1, 1, 1, 1, 0, 0, 1, 0});
  ExpectSame(absl::StrCat(kPoolInputs, R"(
  %5 = Input() : f32[3,4] "fmask"
  %2 = kiln.Pool(%0) {mode="mean"} : f32[3,6]
  %3 = kiln.Pool(%0, %5) {mode="mean"} : f32[3,6]
  return "y": %2, "z": %3
})"),
             absl::StrCat(kPoolInputs, R"(
  %5 = Input() : f32[3,4] "fmask"
  %8 = Constant() {value=tensor<i64[1]>[1]} : i64[1]
  %2 = ReduceMean(%0, %8) {keepdims=0}
  %9 = Constant() {value=tensor<i64[1]>[-1]} : i64[1]
  %10 = Unsqueeze(%5, %9)
  %11 = Mul(%0, %10)
  %12 = ReduceSum(%11, %8) {keepdims=0}
  %13 = ReduceSum(%10, %8) {keepdims=0}
  %14 = Div(%12, %13)
  return "y": %2, "z": %14
})"),
             f);
}

// Row `s` of every sequence (%3) and that row divided by max(its L2 norm, 1e-12) (%18),
// decomposed: what cls and last pooling with normalize=1 are.
std::string GatheredRow(int64_t s, const std::string& returns) {
  return absl::StrCat(kPoolInputs, "  %2 = Constant() {value=tensor<i64[]>[", s, R"(]} : i64[]
  %3 = Gather(%0, %2) {axis=1}
  %14 = Constant() {value=tensor<i64[1]>[-1]} : i64[1]
  %15 = ReduceL2(%3, %14) {keepdims=1}
  %16 = Constant() {value=tensor<f32[]>[1e-12]} : f32[]
  %17 = Clip(%15, %16, _)
  %18 = Div(%3, %17)
  return )",
                      returns, "\n}");
}

TEST(PoolTest, ClsMatchesGatherWithAndWithoutNormalize) {
  ExpectSame(absl::StrCat(kPoolInputs, R"(
  %2 = kiln.Pool(%0, %1) {mode="cls"} : f32[3,6]
  %3 = kiln.Pool(%0) {mode="cls", normalize=1} : f32[3,6]
  return "y": %2, "z": %3
})"),
             GatheredRow(0, "\"y\": %3, \"z\": %18"), PoolFeeds());
}

// last: the row of the last nonzero mask entry (rows 1 and 3 here; the all-zero row 2
// pools to zeros), the last row without a mask; copied exactly, then normalized if asked.
TEST(PoolTest, LastTakesTheLastUnmaskedRow) {
  Feeds f = PoolFeeds();
  f["fmask"] = Values(DType::kF32, {3, 4}, {1, 0, 1, 0, 0.5, 0, 0, 0, 0, 0, 0, 0});
  std::vector<Tensor> y = MustRun(absl::StrCat(kPoolInputs, R"(
  %5 = Input() : f32[3,4] "fmask"
  %2 = kiln.Pool(%0, %1) {mode="last"} : f32[3,6]
  %3 = kiln.Pool(%0, %5) {mode="last"} : f32[3,6]
  %4 = kiln.Pool(%0) {mode="last"} : f32[3,6]
  return "y": %2, "z": %3, "w": %4
})"),
                                  f);
  ASSERT_EQ(y.size(), 3u);
  const Tensor& h = f.at("h");
  auto row = [&](int64_t b, int64_t s, int64_t j) { return h.GetAsDouble((b * 4 + s) * 6 + j); };
  const int64_t mask_last[3] = {1, 3, -1}, fmask_last[3] = {2, 0, -1};
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t j = 0; j < 6; ++j) {
      EXPECT_EQ(y[0].GetAsDouble(b * 6 + j), mask_last[b] < 0 ? 0.0 : row(b, mask_last[b], j));
      EXPECT_EQ(y[1].GetAsDouble(b * 6 + j), fmask_last[b] < 0 ? 0.0 : row(b, fmask_last[b], j));
      EXPECT_EQ(y[2].GetAsDouble(b * 6 + j), row(b, 3, j));
    }
  // normalize=1 divides the taken row by its norm, as for cls.
  ExpectSame(absl::StrCat(kPoolInputs, R"(
  %2 = kiln.Pool(%0) {mode="last", normalize=1} : f32[3,6]
  return "y": %2
})"),
             GatheredRow(3, "\"y\": %18"), PoolFeeds());
}

TEST(PoolTest, LowPrecisionRoundsOnceAndErrors) {
  const std::string text = R"(graph g opset=21 {
  %0 = Input() : DT[3,4,6] "h"
  %1 = Input() : i64[3,4] "mask"
  %2 = kiln.Pool(%0, %1) {mode="mean", normalize=1} : DT[3,6]
  return "y": %2
})";
  for (DType dt : {DType::kF16, DType::kBF16}) ExpectRoundedOnce(text, PoolFeeds(), dt);
  auto pool = [](const std::string& attrs) {
    return absl::StrCat(kPoolInputs, "  %2 = kiln.Pool(%0, %1) {", attrs,
                        "}\n  return \"y\": %2\n}");
  };
  ExpectError(pool("mode=\"max\""), PoolFeeds(), absl::StatusCode::kInvalidArgument,
              "mode must be \"mean\", \"cls\" or \"last\", got \"max\"");
  ExpectError(pool("normalize=1"), PoolFeeds(), absl::StatusCode::kInvalidArgument,
              "attribute 'mode' is required");
  ExpectError(pool("mode=\"mean\", normalize=2"), PoolFeeds(), absl::StatusCode::kInvalidArgument,
              "normalize must be 0 or 1");
  ExpectError(R"(graph g opset=21 {
  %0 = Input() : f32[3,4,6] "h"
  %1 = Input() : i64[4,3] "mask"
  %2 = kiln.Pool(%0, %1) {mode="mean"}
  return "y": %2
})",
              {{"h", PoolFeeds().at("h")}, {"mask", RandIds(DType::kI64, {4, 3}, 2, 1)}},
              absl::StatusCode::kInvalidArgument, "mask [4,3] must have shape [B, S] = [3,4]");
  ExpectError(R"(graph g opset=21 {
  %0 = Input() : f32[3,0,6] "h"
  %2 = kiln.Pool(%0) {mode="cls"}
  return "y": %2
})",
              {{"h", Tensor(DType::kF32, {3, 0, 6})}}, absl::StatusCode::kInvalidArgument,
              "sequence length >= 1");
}

// Errors name the node (Node::Describe adds "node '...' (kiln.Op, opset N)").
// ---------------------------------------------------------------------------------------
// kiln.QuantLinear with 16-bit X (a cuda int8 plan's fp16 activations)

constexpr char kQuantLinear[] = R"(graph g opset=21 {
  %0 = Input() : DT[3,8] "x"
  %1 = Constant() {value=tensor<i8[4,8]>[1,-2,3,-4,5,-6,7,-8,127,-127,64,-64,32,-32,16,-16,9,8,7,6,5,4,3,2,-1,-1,-1,-1,100,50,25,12]} : i8[4,8] "w"
  %2 = Constant() {value=tensor<f32[4]>[0.01,0.02,0.005,0.03]} : f32[4] "s"
  %3 = Constant() {value=tensor<f32[4]>[0.5,-0.25,0,1]} : f32[4] "b"
  %4 = Constant() {value=tensor<f32[8]>[1,2,0.5,1,1.5,1,0.25,1]} : f32[8] "mul"
  %5 = kiln.QuantLinear(%0, %1, %2, %3, %4) {activation="gelu"} : DT[3,4] "y"
  return "y": %5
})";

// X̃ is the f16 X widened exactly, so the integer sums equal the f32 run's on the widened
// values, and Y is that result rounded once to f16: within half an f16 ulp of the f32
// output's double value (the f32 output itself is within 2^-24 relative of it).
TEST(QuantLinearTest, SixteenBitXGivesTheWidenedResultRoundedOnce) {
  const Tensor x16 = Rand(DType::kF16, {3, 8}, 5);
  Tensor x32(DType::kF32, {3, 8});
  for (int64_t i = 0; i < x16.NumElements(); ++i) x32.SetFromDouble(i, x16.GetAsDouble(i));
  const std::vector<Tensor> a =
      MustRun(absl::StrReplaceAll(kQuantLinear, {{"DT", "f16"}}), {{"x", x16}});
  const std::vector<Tensor> b =
      MustRun(absl::StrReplaceAll(kQuantLinear, {{"DT", "f32"}}), {{"x", x32}});
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  ASSERT_EQ(a[0].dtype(), DType::kF16);
  ASSERT_EQ(a[0].dims(), b[0].dims());
  for (int64_t j = 0; j < a[0].NumElements(); ++j) {
    const double want = b[0].GetAsDouble(j);
    EXPECT_LE(std::abs(a[0].GetAsDouble(j) - want), std::abs(want) * (0x1.0p-11 + 0x1.0p-23))
        << "element " << j;
  }
  // B and x_mul stay f32 in a 16-bit plan (their f32_inputs): a 16-bit B is an error.
  const std::string f16_bias = absl::StrReplaceAll(
      kQuantLinear,
      {{"DT", "f16"},
       {"tensor<f32[4]>[0.5,-0.25,0,1]} : f32[4]", "tensor<f16[4]>[0.5,-0.25,0,1]} : f16[4]"}});
  ExpectError(f16_bias, {{"x", x16}}, absl::StatusCode::kInvalidArgument, "B must be f32, got f16");
}

TEST(FusedKernelsTest, ErrorsNameTheNodeAndOp) {
  auto r = RunText(R"(graph g opset=21 {
  %0 = Input() : f32[2,5,36] "qkv"
  %2 = kiln.MultiHeadAttention(%0) {num_heads=5, scale=0.5} @ "attn_0"
  return "y": %2
})",
                   {{"qkv", Rand(DType::kF32, {2, 5, 36}, 1)}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("node 'attn_0' (kiln.MultiHeadAttention, opset 21)"),
            std::string::npos)
      << r.status();
  for (const char* op :
       {"Linear", "SkipLayerNorm", "RMSNorm", "MultiHeadAttention", "EmbedLayerNorm", "Pool"})
    EXPECT_TRUE(HasReferenceKernel("kiln", op)) << op;
}

// ---------------------------------------------------------------------------------------
// Outputs sized from dims of empty inputs: each kernel must refuse a buffer it cannot
// hold with the codes Tensor::Create gives (ResourceExhausted over its 2^40-byte limit,
// InvalidArgument when the element count overflows int64), before allocating anything.
// Every input here holds zero elements, so a kernel that sized its buffer first would
// abort with bad_alloc instead.

TEST(FusedOutputSizeTest, LinearOverTheLimitIsResourceExhausted) {
  ExpectError(
      R"(graph g opset=21 {
  %0 = Input() : f32[1000000000,0] "x"
  %1 = Input() : f32[0,1000000000] "w"
  %2 = kiln.Linear(%0, %1)
  return "y": %2
})",
      {{"x", Tensor(DType::kF32, {1000000000, 0})}, {"w", Tensor(DType::kF32, {0, 1000000000})}},
      absl::StatusCode::kResourceExhausted, "too large");
}

TEST(FusedOutputSizeTest, LinearOverflowingElementCountIsInvalidArgument) {
  ExpectError(
      R"(graph g opset=21 {
  %0 = Input() : f32[4611686018427387904,0] "x"
  %1 = Input() : f32[0,4] "w"
  %2 = kiln.Linear(%0, %1)
  return "y": %2
})",
      {{"x", Tensor(DType::kF32, {int64_t{1} << 62, 0})}, {"w", Tensor(DType::kF32, {0, 4})}},
      absl::StatusCode::kInvalidArgument, "overflows");
}

TEST(FusedOutputSizeTest, PoolOverTheLimitIsResourceExhausted) {
  // mean pooling over S = 0 is defined (zeros); cls needs S >= 1, so its input can't be empty.
  ExpectError(R"(graph g opset=21 {
  %0 = Input() : f32[1000000000,0,1000000000] "h"
  %1 = kiln.Pool(%0) {mode="mean"}
  return "y": %1
})",
              {{"h", Tensor(DType::kF32, {1000000000, 0, 1000000000})}},
              absl::StatusCode::kResourceExhausted, "too large");
}

TEST(FusedOutputSizeTest, MultiHeadAttentionHugeSequenceIsResourceExhausted) {
  // B = 0 makes the output empty, but the per-row score buffer still has S elements.
  ExpectError(R"(graph g opset=21 {
  %0 = Input() : f32[0,1099511627776,3] "qkv"
  %1 = kiln.MultiHeadAttention(%0) {num_heads=1, scale=0.5}
  return "y": %1
})",
              {{"qkv", Tensor(DType::kF32, {0, int64_t{1} << 40, 3})}},
              absl::StatusCode::kResourceExhausted, "too large");
}

}  // namespace
}  // namespace kiln
