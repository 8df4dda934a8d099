// The CPU eltwise kernel (kernels/cpu/eltwise.h) against the reference executor, op by op:
// every float op on f32 (broadcast [3,1,5] × [4,5]), integer ops on i64 and i32 (wrapping,
// truncating division, Python Mod), the logic ops on bool, Where, Clip, and Cast between
// float, half, integer and bool types (saturation, NaN to 0); an integer division by zero
// fails. Also the shared broadcast layout (kernels/eltwise_common.h).
// Tolerance: integers and bools exact; floats 2e-6 relative + 1e-7 absolute — the kernel
// uses the C library's float functions where the reference may evaluate in double, which
// differs by at most an ulp or two of the f32 result (1.2e-7 relative each); + - * / and
// the comparisons are correctly rounded on both sides and come out exact.
#include <cmath>
#include <cstdio>
#include <limits>

#include "absl/strings/str_cat.h"
#include "kernel_test_util.h"
#include "kernels/cpu/eltwise.h"

namespace kiln::cpu {
namespace {

using testing::RandomVec;
using testing::RunReferenceOp;

Tensor Filled(DType t, std::vector<int64_t> dims, uint32_t seed, double lo, double hi) {
  Tensor x = *Tensor::Create(t, dims);
  const int64_t n = x.NumElements();
  const std::vector<float> v = RandomVec(n, seed, static_cast<float>(lo), static_cast<float>(hi));
  for (int64_t i = 0; i < n; ++i) {
    switch (t) {
      case DType::kF32:
        x.data<float>()[i] = v[i];
        break;
      case DType::kF16:
        x.data<uint16_t>()[i] = FloatToHalf(v[i]);
        break;
      case DType::kI64:
        x.data<int64_t>()[i] = static_cast<int64_t>(std::lround(v[i]));
        break;
      case DType::kI32:
        x.data<int32_t>()[i] = static_cast<int32_t>(std::lround(v[i]));
        break;
      case DType::kBool:
        x.data<uint8_t>()[i] = v[i] > 0 ? 1 : 0;
        break;
      default:
        ADD_FAILURE() << "no filler for " << DTypeName(t);
    }
  }
  return x;
}

// The domain the typing rule (src/plan/eltwise_ops.h) gives an operand dtype.
kernels::EltDomainKind DomainOf(DType t) {
  switch (t) {
    case DType::kF64:
      return kernels::EltDomainKind::kF64;
    case DType::kI8:
    case DType::kI16:
    case DType::kI32:
    case DType::kI64:
      return kernels::EltDomainKind::kI64;
    case DType::kU8:
    case DType::kU16:
    case DType::kU32:
    case DType::kU64:
      return kernels::EltDomainKind::kU64;
    case DType::kBool:
      return kernels::EltDomainKind::kBool;
    default:
      return kernels::EltDomainKind::kF32;
  }
}

// Runs `kernel_op` on the CPU kernel over `in` into a tensor like `want`.
absl::StatusOr<Tensor> RunKernel(const std::string& kernel_op, const std::vector<const Tensor*>& in,
                                 const Tensor& want, Isa isa = Isa::kAuto) {
  EltwiseArgs a;
  if (!kernels::EltOpFromName(kernel_op, &a.op))
    return absl::InvalidArgumentError("no op " + kernel_op);
  std::vector<std::vector<int64_t>> dims;
  for (const Tensor* t : in) dims.push_back(t->dims());
  a.domain = DomainOf(in[kernel_op == "Where" ? 1 : 0]->dtype());
  if (!kernels::ComputeBroadcastLayout(want.dims(), dims, &a.layout))
    return absl::InvalidArgumentError("layout");
  for (size_t i = 0; i < in.size(); ++i) {
    a.in[i] = in[i]->raw();
    a.in_type[i] = in[i]->dtype();
  }
  Tensor y = *Tensor::Create(want.dtype(), want.dims());
  a.y = y.raw();
  a.out_type = want.dtype();
  CpuContext ctx;
  ctx.num_threads = 2;
  ctx.isa = isa;
  if (absl::Status s = Eltwise(ctx, a); !s.ok()) return s;
  return y;
}

void ExpectMatches(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  ASSERT_EQ(got.dims(), want.dims()) << what;
  const int64_t n = want.NumElements();
  int64_t bad = 0;
  std::string first;
  for (int64_t i = 0; i < n; ++i) {
    const double g = got.GetAsDouble(i), w = want.GetAsDouble(i);
    const bool ok = IsFloat(want.dtype()) ? ((std::isnan(g) && std::isnan(w)) ||
                                             std::fabs(g - w) <= 2e-6 * std::fabs(w) + 1e-7)
                                          : g == w;
    if (!ok && bad++ == 0) first = absl::StrCat("[", i, "] got ", g, " want ", w);
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << n << " differ, first " << first;
}

struct Case {
  std::string onnx_op;    // the reference node
  std::string kernel_op;  // the eltwise op name
  DType dtype;
  int arity;
  double lo = -4, hi = 4;  // input range (Sqrt/Log/Pow bases positive, divisors nonzero)
  std::map<std::string, Attribute> attrs = {};
};

class EltwiseTest : public ::testing::TestWithParam<Case> {};

TEST_P(EltwiseTest, MatchesReference) {
  const Case& c = GetParam();
  // Broadcasting: [3,1,5] against [4,5] -> [3,4,5] (the last operand of a binary op).
  Tensor a = Filled(c.dtype, {3, 1, 5}, 1, c.lo, c.hi);
  Tensor b = Filled(c.dtype, {4, 5}, 2, c.lo, c.hi);
  if (c.kernel_op == "Div" || c.kernel_op == "Mod" || c.kernel_op == "FMod")
    b = Filled(c.dtype, {4, 5}, 2, 1, c.hi);  // nonzero divisors (positive; a is signed)
  std::vector<const Tensor*> in = {&a};
  if (c.arity == 2) in.push_back(&b);
  auto want = RunReferenceOp("", c.onnx_op, c.attrs, in);
  ASSERT_EQ(want.size(), 1u);
  auto got = RunKernel(c.kernel_op, in, want[0]);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectMatches(*got, want[0], c.onnx_op);
}

std::vector<Case> Cases() {
  std::vector<Case> v;
  for (const char* op : {"Neg", "Abs", "Sign", "Relu", "Reciprocal", "Exp", "Erf", "Tanh",
                         "Sigmoid", "Sin", "Cos", "Floor", "Ceil", "Round"})
    v.push_back({op, op, DType::kF32, 1});
  v.push_back({"Sqrt", "Sqrt", DType::kF32, 1, 0.01, 9});
  v.push_back({"Log", "Log", DType::kF32, 1, 0.01, 9});
  v.push_back({"IsNaN", "IsNaN", DType::kF32, 1});
  v.push_back({"Gelu", "Gelu", DType::kF32, 1});
  v.push_back({"Gelu", "GeluTanh", DType::kF32, 1, -4, 4, {{"approximate", std::string("tanh")}}});
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min", "Equal", "Less", "LessOrEqual",
                         "Greater", "GreaterOrEqual"})
    v.push_back({op, op, DType::kF32, 2});
  v.push_back({"Pow", "Pow", DType::kF32, 2, 0.1, 3});
  v.push_back({"Mod", "FMod", DType::kF32, 2, -4, 4, {{"fmod", int64_t{1}}}});
  v.push_back({"Add", "Add", DType::kF16, 2});
  v.push_back({"Mul", "Mul", DType::kF16, 2});
  for (DType t : {DType::kI64, DType::kI32}) {
    for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min", "Equal", "Less", "Greater"})
      v.push_back({op, op, t, 2, -40, 40});
    v.push_back({"Mod", "Mod", t, 2, -40, 40});
    v.push_back({"Mod", "FMod", t, 2, -40, 40, {{"fmod", int64_t{1}}}});
    v.push_back({"Neg", "Neg", t, 1, -40, 40});
    v.push_back({"Abs", "Abs", t, 1, -40, 40});
    v.push_back({"Sign", "Sign", t, 1, -40, 40});
  }
  for (const char* op : {"And", "Or", "Xor", "Equal"}) v.push_back({op, op, DType::kBool, 2});
  v.push_back({"Not", "Not", DType::kBool, 1});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Ops, EltwiseTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return absl::StrCat(info.param.kernel_op, "_",
                                               std::string(DTypeName(info.param.dtype)));
                         });

// The f32 fast paths (contiguous or per-span broadcast operands; Exp and Sigmoid on the
// ISA's vector exp) on every ISA path, against the reference: rows long enough to split
// into several spans, a broadcast row, a broadcast column and a scalar, with values at and
// past exp's range, infinities, NaN and signed zeros (the spans that hold a NaN or an
// out-of-range value take the element walk). Equal results (inf, -0) or both NaN pass;
// else the file's 2e-6 + 1e-7 tolerance (the vector exp's ~2e-7 relative error fits).
TEST(Eltwise, FastPathsOnEveryIsa) {
  const float inf = std::numeric_limits<float>::infinity();
  const float specials[] = {0.f,   -0.f,  1.f,   -1.f,  30.f,   -30.f,  87.f, -87.f,
                            88.2f, 88.5f, -88.f, 100.f, -100.f, -104.f, inf,  -inf};
  auto fill = [&](std::vector<int64_t> dims, uint32_t seed, bool with_nan) {
    Tensor t = Filled(DType::kF32, dims, seed, -6, 6);
    float* p = t.data<float>();
    const int64_t n = t.NumElements();
    for (int64_t i = 0; i < n; i += 97) p[i] = specials[(i / 97) % std::size(specials)];
    if (with_nan && n > 40000) p[40000] = std::numeric_limits<float>::quiet_NaN();
    return t;
  };
  auto matches = [](const Tensor& got, const Tensor& want, const std::string& what) {
    int64_t bad = 0;
    std::string first;
    for (int64_t i = 0; i < want.NumElements(); ++i) {
      const double g = got.GetAsDouble(i), w = want.GetAsDouble(i);
      const bool ok = g == w || (std::isnan(g) && std::isnan(w)) ||
                      std::fabs(g - w) <= 2e-6 * std::fabs(w) + 1e-7;
      if (!ok && bad++ == 0) first = absl::StrCat("[", i, "] got ", g, " want ", w);
    }
    EXPECT_EQ(bad, 0) << what << ": " << bad << " differ, first " << first;
  };
  for (Isa isa : testing::AllIsas()) {
    if (!IsaSupported(isa)) {
      std::printf("[ SKIPPED  ] the %s path: this CPU cannot run it\n",
                  std::string(IsaName(isa)).c_str());
      continue;
    }
    const std::string name(IsaName(isa));
    for (bool with_nan : {false, true}) {
      // One collapsed row of 50000 elements: 4 spans.
      Tensor big = fill({2, 25000}, 3, with_nan);
      for (const char* op : {"Exp", "Sigmoid", "Neg", "Relu", "Identity"}) {
        auto want = RunReferenceOp("", op, {}, {&big});
        auto got = RunKernel(op, {&big}, want[0], isa);
        ASSERT_TRUE(got.ok()) << got.status();
        matches(*got, want[0], absl::StrCat(name, " ", op, " nan=", with_nan));
      }
    }
    Tensor x = fill({64, 300}, 4, false), row = fill({300}, 5, false),
           col = fill({64, 1}, 6, false), scalar = Filled(DType::kF32, {}, 7, 0.5, 2);
    for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min"}) {
      for (const Tensor* other : {&x, &row, &col, &scalar}) {
        for (bool swap : {false, true}) {
          std::vector<const Tensor*> in = {&x, other};
          if (swap) std::swap(in[0], in[1]);
          auto want = RunReferenceOp("", op, {}, in);
          auto got = RunKernel(op, in, want[0], isa);
          ASSERT_TRUE(got.ok()) << got.status();
          matches(*got, want[0],
                  absl::StrCat(name, " ", op, " other ", other->dims().size(), "-d swap=", swap));
        }
      }
    }
  }
}

TEST(Eltwise, WhereAndClipBroadcast) {
  Tensor cond = Filled(DType::kBool, {2, 1, 3}, 3, -1, 1);
  Tensor x = Filled(DType::kF32, {4, 3}, 4, -2, 2), y = Filled(DType::kF32, {1}, 5, -2, 2);
  auto want = RunReferenceOp("", "Where", {}, {&cond, &x, &y});
  auto got = RunKernel("Where", {&cond, &x, &y}, want[0]);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectMatches(*got, want[0], "Where");

  Tensor lo = Tensor::ScalarF32(-0.5f), hi = Tensor::ScalarF32(0.75f);
  Tensor v = Filled(DType::kF32, {5, 7}, 6, -2, 2);
  v.data<float>()[3] = std::numeric_limits<float>::quiet_NaN();  // passes through
  auto want_clip = RunReferenceOp("", "Clip", {}, {&v, &lo, &hi});
  auto got_clip = RunKernel("Clip", {&v, &lo, &hi}, want_clip[0]);
  ASSERT_TRUE(got_clip.ok()) << got_clip.status();
  ExpectMatches(*got_clip, want_clip[0], "Clip");
}

TEST(Eltwise, CastsSaturateRoundAndMapNanToZero) {
  Tensor f = Tensor::FromF32({6}, {1.5f, -2.7f, 3e10f, -3e10f, std::nanf(""), 65519.f});
  Tensor i64 = Tensor::FromI64({3}, {-3, 0, int64_t{1} << 40});
  Tensor b = Filled(DType::kBool, {4}, 7, -1, 1);
  Tensor h = Filled(DType::kF16, {5}, 8, -3, 3);
  const struct {
    const Tensor* x;
    DType to;
  } casts[] = {{&f, DType::kI32},  {&f, DType::kI8},    {&f, DType::kF16},   {&f, DType::kBF16},
               {&f, DType::kBool}, {&i64, DType::kF32}, {&i64, DType::kI32}, {&b, DType::kF32},
               {&h, DType::kF32},  {&h, DType::kI64}};
  for (const auto& c : casts) {
    const std::string what = absl::StrCat("Cast ", std::string(DTypeName(c.x->dtype())), "->",
                                          std::string(DTypeName(c.to)));
    auto want = RunReferenceOp("", "Cast", {{"to", int64_t{DTypeToOnnx(c.to)}}}, {c.x});
    ASSERT_EQ(want.size(), 1u) << what;
    auto got = RunKernel("Identity", {c.x}, want[0]);
    ASSERT_TRUE(got.ok()) << what << ": " << got.status();
    EXPECT_TRUE(got->BitwiseEqual(want[0])) << what;
  }
}

TEST(Eltwise, IntegerDivisionByZeroFails) {
  Tensor a = Tensor::FromI64({3}, {4, 5, 6}), z = Tensor::FromI64({3}, {1, 0, 2});
  Tensor like = Tensor::FromI64({3}, {0, 0, 0});
  auto got = RunKernel("Div", {&a, &z}, like);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(got.status().message()).find("division by zero"), std::string::npos);
}

// The collapsed layout: size-1 dims dropped, mergeable dims merged, broadcast strides 0.
TEST(BroadcastLayout, CollapsesAndBroadcasts) {
  kernels::BroadcastLayout l;
  ASSERT_TRUE(kernels::ComputeBroadcastLayout({2, 3, 4}, {{2, 3, 4}, {4}}, &l));
  EXPECT_EQ(l.n, 24);
  EXPECT_FALSE(l.contiguous);
  ASSERT_EQ(l.rank, 2);  // [6, 4]: the [4] input repeats over the merged 2·3 rows
  EXPECT_EQ(l.dims[0], 6);
  EXPECT_EQ(l.dims[1], 4);
  EXPECT_EQ(l.strides[0][0], 4);
  EXPECT_EQ(l.strides[1][0], 0);
  EXPECT_EQ(l.strides[1][1], 1);
  ASSERT_TRUE(kernels::ComputeBroadcastLayout({2, 1, 3}, {{2, 1, 3}, {2, 1, 3}}, &l));
  EXPECT_TRUE(l.contiguous);
  EXPECT_EQ(l.rank, 1);
  EXPECT_FALSE(kernels::ComputeBroadcastLayout({2, 3}, {{3, 3}}, &l));
  EXPECT_FALSE(kernels::ComputeBroadcastLayout({3}, {{3}, {3}, {3}, {3}}, &l));
}

}  // namespace
}  // namespace kiln::cpu
