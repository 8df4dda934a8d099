// Every CUDA kernel family against the reference executor, through the whole path: a
// one-node graph (IR text) is exported to ONNX, compiled for target cuda (this part runs on
// every machine and checks that each op, dtype and size lowers to device kernels), then —
// where a GPU answers — run on the CUDA executor and compared with RunReference on the
// same seeded inputs (floats uniform in [-1, 1] away from 0, never zeros; integers in
// [0, int_high)). Without a GPU each test compiles its cases and skips, printing why.
// Sizes are the awkward ones: H not a multiple of 8, S = 1 and 7, batch 1 and 33.
// Tolerances (|got - want| <= atol + rtol·|want|): the reference computes each op in double
// and rounds once to the output dtype; the kernels compute in fp32 (GEMMs accumulate in
// fp32, TF32 off) and round once. f32: 1e-4 (reduction reordering over ≤ 1000 terms is
// ~1e-6; exp/erf/tanh device libm ~1e-7); f16: 4e-3 (≈ 4 ulps near 1); bf16: 3e-2 (≈ 4 ulps).
// Integer and bool outputs must match exactly.
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "kiln/ir/text.h"
#include "kiln/kiln.h"
#include "kiln/onnx/exporter.h"
#include "kiln/reference/executor.h"
#include "tests/passes/pass_test_util.h"

namespace kiln {
namespace {

struct Tol {
  double atol, rtol;
};
Tol TolFor(DType t) {
  switch (t) {
    case DType::kF16:
      return {4e-3, 4e-3};
    case DType::kBF16:
      return {3e-2, 3e-2};
    default:
      return {1e-4, 1e-4};
  }
}

bool HaveGpu(std::string* why) {
  const CudaDeviceInfo d = QueryCudaDevice(0);
  if (!d.available) *why = d.reason;
  return d.available;
}

// `ir` with every "$T" replaced by `dtype`'s name.
std::string WithType(const std::string& ir, const std::string& dtype) {
  return absl::StrReplaceAll(ir, {{"$T", dtype}});
}

struct CaseResult {
  bool compiled = false;
  bool ran = false;
};

// Rewrites chosen inputs of a case (mask values the random draw cannot make).
using FeedEdit = std::function<void(absl::flat_hash_map<std::string, Tensor>&)>;

// Compiles `ir` for cuda (must succeed; with `want_kernel`, some step runs that kernel);
// with a GPU, runs it and compares every output with the reference executor. `int_high`:
// integer inputs are drawn from [0, int_high); `edit` rewrites feeds after the draw.
CaseResult RunCase(const std::string& label, const std::string& ir, int64_t int_high = 4,
                   const FeedEdit& edit = nullptr, const std::string& want_kernel = "") {
  SCOPED_TRACE(label);
  CaseResult r;
  auto g = ParseGraph(ir);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return r;
  const std::string dir = std::string(KILN_TEST_TMPDIR) + "/ops";
  std::filesystem::create_directories(dir);
  std::string file = label;
  for (char& ch : file)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  const std::string path = dir + "/" + file + ".onnx";
  EXPECT_TRUE(ExportOnnxFile(**g, path).ok());
  CompileOptions o;
  o.target = PlanTarget::kCuda;
  absl::StatusOr<Plan> plan = Compile(path, o);
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok()) return r;
  bool has_kernel = want_kernel.empty();
  for (const PlanStep& s : plan->buckets[0].steps) {
    EXPECT_NE(s.kernel, "ref");
    has_kernel |= s.kernel == want_kernel;
  }
  EXPECT_TRUE(has_kernel) << "no " << want_kernel << " step";
  r.compiled = true;
  std::string why;
  if (!HaveGpu(&why)) return r;
  auto exec = Executor::Create(std::make_shared<const Plan>(*std::move(plan)));
  EXPECT_TRUE(exec.ok()) << exec.status();
  if (!exec.ok()) return r;
  auto feeds = testing::RandomInputs(**g, /*seed=*/11, {}, int_high);
  // Floats away from zero: a relative comparison near 0 says nothing.
  for (auto& [name, t] : feeds)
    if (IsFloat(t.dtype()))
      for (int64_t i = 0; i < t.NumElements(); ++i) {
        const double v = t.GetAsDouble(i);
        if (std::fabs(v) < 0.05) t.SetFromDouble(i, v < 0 ? -0.05 - v : 0.05 + v);
      }
  if (edit) edit(feeds);
  std::vector<Tensor> in;
  std::vector<TensorView> views;
  for (const Node* n : (*g)->inputs()) in.push_back(feeds.at(n->output_info(0).name));
  for (const Tensor& t : in) views.push_back({t.dtype(), t.dims(), t.raw()});
  absl::StatusOr<std::vector<Tensor>> got = (*exec)->Run(views);
  EXPECT_TRUE(got.ok()) << got.status();
  absl::StatusOr<std::vector<Tensor>> want = RunReference(**g, feeds);
  EXPECT_TRUE(want.ok()) << want.status();
  if (!got.ok() || !want.ok()) return r;
  r.ran = true;
  for (size_t o = 0; o < want->size(); ++o) {
    const Tensor &x = (*got)[o], &y = (*want)[o];
    EXPECT_EQ(x.dtype(), y.dtype()) << "output " << o;
    EXPECT_EQ(x.dims(), y.dims()) << "output " << o;
    if (x.dtype() != y.dtype() || x.dims() != y.dims()) continue;
    const Tol tol = TolFor(x.dtype());
    int64_t bad = 0, worst = -1;
    double worst_err = 0;
    for (int64_t i = 0; i < y.NumElements(); ++i) {
      const double a = x.GetAsDouble(i), b = y.GetAsDouble(i);
      const bool ok = IsFloat(y.dtype())
                          ? (std::fabs(a - b) <= tol.atol + tol.rtol * std::fabs(b) ||
                             (std::isnan(a) && std::isnan(b)) || a == b)
                          : a == b;
      if (!ok) {
        ++bad;
        if (std::fabs(a - b) >= worst_err) worst_err = std::fabs(a - b), worst = i;
      }
    }
    EXPECT_EQ(bad, 0) << "output " << o << ": " << bad << " of " << y.NumElements()
                      << " out of tolerance; worst #" << worst << " got "
                      << (worst >= 0 ? x.GetAsDouble(worst) : 0) << " want "
                      << (worst >= 0 ? y.GetAsDouble(worst) : 0);
  }
  return r;
}

// Runs every (label, ir) case; skips the test (after compiling them all) without a GPU.
void RunCases(const std::vector<std::pair<std::string, std::string>>& cases, int64_t int_high = 4,
              const FeedEdit& edit = nullptr, const std::string& want_kernel = "") {
  int compiled = 0;
  for (const auto& [label, ir] : cases)
    compiled += RunCase(label, ir, int_high, edit, want_kernel).compiled;
  EXPECT_EQ(compiled, static_cast<int>(cases.size()));
  std::string why;
  if (!HaveGpu(&why))
    GTEST_SKIP() << cases.size() << " cases compiled for cuda; not run: no GPU (" << why << ")";
}

const char* const kFloatTypes[] = {"f32", "f16", "bf16"};

// A constant of `dims` and dtype $T filled with a ramp in [-0.9, 0.9] (never zero-heavy).
std::string Ramp(const std::string& dims_text, int64_t n) {
  std::vector<std::string> v;
  for (int64_t i = 0; i < n; ++i) {
    const double x = -0.9 + 1.8 * static_cast<double>((i * 7919) % 1000) / 999.0;
    v.push_back(absl::StrCat(std::fabs(x) < 0.05 ? 0.3 : x));
  }
  return absl::StrCat("tensor<$T[", dims_text, "]>[", absl::StrJoin(v, ","), "]");
}

TEST(CudaOps, Linear) {
  std::vector<std::pair<std::string, std::string>> cases;
  for (const char* t : kFloatTypes)
    for (const auto& [b, s] : {std::pair{1, 1}, std::pair{33, 7}})
      for (const char* act : {"none", "relu", "gelu", "gelu_tanh", "tanh"})
        for (int trans : {0, 1}) {
          const int k = 37, n = 19;
          const std::string wd = trans ? absl::StrCat(n, ",", k) : absl::StrCat(k, ",", n);
          cases.push_back({absl::StrCat("linear ", t, " b", b, " s", s, " ", act, " trans", trans),
                           WithType(absl::StrCat("graph g opset=21 {\n"
                                                 " %0 = Input() : $T[",
                                                 b, ",", s, ",", k,
                                                 "] \"x\"\n"
                                                 " %1 = Constant() {value=",
                                                 Ramp(wd, k * n), "} : $T[", wd,
                                                 "] \"w\"\n"
                                                 " %2 = Constant() {value=",
                                                 Ramp(absl::StrCat(n), n), "} : $T[", n,
                                                 "] \"b\"\n"
                                                 " %3 = kiln.Linear(%0, %1, %2) {activation=\"",
                                                 act, "\", trans_w=", trans, "} : $T[", b, ",", s,
                                                 ",", n, "] \"y\"\n return \"y\": %3\n}"),
                                    t)});
        }
  // Linear + residual Add: one step, the residual through cuBLASLt's C operand.
  for (const char* t : kFloatTypes)
    cases.push_back(
        {absl::StrCat("linear residual ", t),
         WithType(absl::StrCat("graph g opset=21 {\n"
                               " %0 = Input() : $T[33,7,37] \"x\"\n"
                               " %1 = Input() : $T[33,7,19] \"r\"\n"
                               " %2 = Constant() {value=",
                               Ramp("37,19", 37 * 19),
                               "} : $T[37,19] \"w\"\n"
                               " %3 = Constant() {value=",
                               Ramp("19", 19),
                               "} : $T[19] \"b\"\n"
                               " %4 = kiln.Linear(%0, %2, %3) : $T[33,7,19] \"y\"\n"
                               " %5 = Add(%4, %1) : $T[33,7,19] \"z\"\n return \"z\": %5\n}"),
                  t)});
  RunCases(cases);
}

TEST(CudaOps, MatMulBatches) {
  std::vector<std::pair<std::string, std::string>> cases;
  const std::pair<std::string, std::string> shapes[][3] = {
      {{"2,3,7,5", ""}, {"2,3,5,9", ""}, {"2,3,7,9", ""}},
      {{"3,7,5", ""}, {"5,9", ""}, {"3,7,9", ""}},
      {{"7,5", ""}, {"4,5,9", ""}, {"4,7,9", ""}},
  };
  for (const char* t : kFloatTypes)
    for (const auto& s : shapes)
      cases.push_back({absl::StrCat("matmul ", t, " ", s[0].first, " x ", s[1].first),
                       WithType(absl::StrCat("graph g opset=21 {\n %0 = Input() : $T[", s[0].first,
                                             "] \"a\"\n %1 = Input() : $T[", s[1].first,
                                             "] \"b\"\n %2 = MatMul(%0, %1) : $T[", s[2].first,
                                             "] \"y\"\n return \"y\": %2\n}"),
                                t)});
  RunCases(cases);
}

TEST(CudaOps, Norms) {
  std::vector<std::pair<std::string, std::string>> cases;
  for (const char* t : kFloatTypes)
    for (int h : {7, 64, 768, 1000})
      for (int rows : {1, 33}) {
        const std::string d = absl::StrCat(rows, ",", h), v = absl::StrCat(h);
        const std::string gamma = absl::StrCat("{value=", Ramp(v, h), "} : $T[", v, "]");
        cases.push_back({absl::StrCat("layernorm ", t, " ", d),
                         WithType(absl::StrCat("graph g opset=21 {\n %0 = Input() : $T[", d,
                                               "] \"x\"\n %1 = Constant() ", gamma,
                                               " \"g\"\n %2 = Constant() ", gamma,
                                               " \"b\"\n %3 = LayerNormalization(%0, %1, %2) "
                                               "{epsilon=1e-05} : $T[",
                                               d, "] \"y\"\n return \"y\": %3\n}"),
                                  t)});
        cases.push_back(
            {absl::StrCat("skiplayernorm ", t, " ", d),
             WithType(absl::StrCat("graph g opset=21 {\n %0 = Input() : $T[", d,
                                   "] \"x\"\n %1 = Input() : $T[", d, "] \"s\"\n %2 = Constant() ",
                                   gamma, " \"g\"\n %3 = Constant() ", gamma,
                                   " \"b\"\n %4 = Constant() ", gamma,
                                   " \"bias\"\n"
                                   " %5, %6 = kiln.SkipLayerNorm(%0, %1, %2, %3, %4) "
                                   "{epsilon=1e-05} : $T[",
                                   d, "] \"y\", $T[", d,
                                   "] \"sum\"\n"
                                   " return \"y\": %5, \"sum\": %6\n}"),
                      t)});
        cases.push_back(
            {absl::StrCat("rmsnorm ", t, " ", d),
             WithType(absl::StrCat("graph g opset=21 {\n %0 = Input() : $T[", d,
                                   "] \"x\"\n %1 = Constant() ", gamma,
                                   " \"g\"\n %2 = kiln.RMSNorm(%0, %1) {epsilon=1e-06} : $T[", d,
                                   "] \"y\"\n return \"y\": %2\n}"),
                      t)});
        cases.push_back(
            {absl::StrCat("skiprmsnorm ", t, " ", d),
             WithType(absl::StrCat("graph g opset=21 {\n %0 = Input() : $T[", d,
                                   "] \"x\"\n %1 = Input() : $T[", d, "] \"s\"\n %2 = Constant() ",
                                   gamma, " \"g\"\n %3 = Constant() ", gamma,
                                   " \"bias\"\n"
                                   " %4, %5 = kiln.SkipRMSNorm(%0, %1, %2, %3) "
                                   "{epsilon=1e-06} : $T[",
                                   d, "] \"y\", $T[", d,
                                   "] \"sum\"\n"
                                   " return \"y\": %4, \"sum\": %5\n}"),
                      t)});
      }
  RunCases(cases);
}

TEST(CudaOps, Rotary) {
  std::vector<std::pair<std::string, std::string>> cases;
  for (const char* t : kFloatTypes)
    for (const auto& [x, table] : {std::pair<std::string, std::string>{"2,3,7,16", "1,1,7,16"},
                                   {"2,3,7,16", "2,1,7,8"},
                                   {"5,64", "64"}})
      for (const char* attrs : {"", " {interleaved=1}"})
        cases.push_back({absl::StrCat("rotary ", t, " ", x, " ", table, attrs),
                         WithType(absl::StrCat("graph g opset=21 {\n %0 = Input() : $T[", x,
                                               "] \"x\"\n %1 = Input() : $T[", table,
                                               "] \"c\"\n %2 = Input() : $T[", table,
                                               "] \"s\"\n %3 = kiln.Rotary(%0, %1, %2)", attrs,
                                               " : $T[", x, "] \"y\"\n return \"y\": %3\n}"),
                                  t)});
  RunCases(cases);
}

// kiln.Glu on every float type and activation (one thread per output element; fp32 math).
TEST(CudaOps, Glu) {
  std::vector<std::pair<std::string, std::string>> cases;
  for (const char* t : kFloatTypes)
    for (const char* act : {"silu", "gelu", "gelu_tanh"})
      for (const auto& [rows, f] : {std::pair{1, 1}, std::pair{6, 37}, std::pair{4, 256}})
        cases.push_back(
            {absl::StrCat("glu ", t, " ", act, " ", rows, "x", f),
             WithType(absl::StrCat("graph g opset=21 {\n %0 = Input() : $T[", rows, ",", 2 * f,
                                   "] \"x\"\n %1 = kiln.Glu(%0) {activation=\"", act, "\"} : $T[",
                                   rows, ",", f, "] \"y\"\n return \"y\": %1\n}"),
                      t)});
  RunCases(cases);
}

TEST(CudaOps, Attention) {
  std::vector<std::pair<std::string, std::string>> cases;
  for (const char* t : kFloatTypes)
    for (const auto& [b, s, n, d] : {std::tuple{1, 1, 2, 32}, std::tuple{3, 7, 2, 64},
                                     std::tuple{2, 130, 4, 32}, std::tuple{1, 33, 1, 128}})
      for (const char* mask : {"none", "additive", "bool", "causal"}) {
        const std::string qkv = absl::StrCat(b, ",", s, ",", 3 * n * d);
        const std::string y = absl::StrCat(b, ",", s, ",", n * d);
        std::string ir =
            absl::StrCat("graph g opset=21 {\n %0 = Input() : $T[", qkv, "] \"qkv\"\n");
        std::string args = "%0", attrs = absl::StrCat("num_heads=", n, ", scale=0.125");
        if (std::string(mask) == "additive") {
          absl::StrAppend(&ir, " %1 = Input() : f32[", b, ",1,1,", s, "] \"mask\"\n");
          args = "%0, %1";
        } else if (std::string(mask) == "bool") {
          absl::StrAppend(&ir, " %1 = Input() : bool[", b, ",1,", s, ",", s, "] \"mask\"\n");
          args = "%0, %1";
        } else if (std::string(mask) == "causal") {
          absl::StrAppend(&attrs, ", causal=1");
        }
        absl::StrAppend(&ir, " %9 = kiln.MultiHeadAttention(", args, ") {", attrs, "} : $T[", y,
                        "] \"y\"\n return \"y\": %9\n}");
        cases.push_back({absl::StrCat("attention ", t, " ", qkv, " ", mask), WithType(ir, t)});
      }
  RunCases(cases, /*int_high=*/2);
}

// Decoder attention on the simple kernel: grouped K/V heads (N = 4 over Nkv = 2 or 1) and
// rotate-half tables over the whole head or half of it, shared ([1, S, R]) or per batch
// item ([B, S, R]), causal, every float type; and grouped heads on the flash kernel (16-bit,
// no tables). Same reference and tolerances as the cases above.
TEST(CudaOps, DecoderAttention) {
  std::vector<std::pair<std::string, std::string>> cases;
  for (const char* t : kFloatTypes)
    for (const auto& [b, s, d, kv, r, tb] :
         {std::tuple{2, 7, 16, 2, 16, 1}, std::tuple{2, 33, 64, 1, 32, 2},
          std::tuple{1, 130, 32, 2, 32, 1}})
      for (bool rotary : {false, true}) {
        const int n = 4;
        const std::string qkv = absl::StrCat(b, ",", s, ",", (n + 2 * kv) * d);
        const std::string y = absl::StrCat(b, ",", s, ",", n * d);
        const std::string table = absl::StrCat(tb, ",", s, ",", r);
        std::string ir =
            absl::StrCat("graph g opset=21 {\n %0 = Input() : $T[", qkv, "] \"qkv\"\n");
        std::string args = "%0";
        if (rotary) {
          absl::StrAppend(&ir, " %1 = Input() : $T[", table, "] \"cos\"\n %2 = Input() : $T[",
                          table, "] \"sin\"\n");
          args = "%0, _, %1, %2";
        }
        absl::StrAppend(&ir, " %9 = kiln.MultiHeadAttention(", args, ") {causal=1, num_heads=", n,
                        ", num_kv_heads=", kv, ", scale=0.25} : $T[", y,
                        "] \"y\"\n return \"y\": %9\n}");
        cases.push_back({absl::StrCat("decoder attention ", t, " ", qkv, rotary ? " rotary" : ""),
                         WithType(ir, t)});
      }
  RunCases(cases, /*int_high=*/2);
}

// kiln.Attention (the heads form, S queries over L cached keys) on the simple kernel's
// head-layout strides: a decode step (S = 1), a prefill chunk over a past, no past, grouped
// K/V heads, causal bottom-right and a key mask over L, every float type.
TEST(CudaOps, HeadAttention) {
  std::vector<std::pair<std::string, std::string>> cases;
  for (const char* t : kFloatTypes)
    for (const auto& [b, s, l, d, kv] : {std::tuple{2, 1, 9, 16, 2}, std::tuple{2, 3, 12, 64, 4},
                                         std::tuple{1, 7, 7, 32, 1}, std::tuple{2, 1, 130, 128, 2}})
      for (bool masked : {false, true}) {
        const int n = 4;
        const std::string q = absl::StrCat(b, ",", n, ",", s, ",", d);
        const std::string k = absl::StrCat(b, ",", kv, ",", l, ",", d);
        const std::string y = absl::StrCat(b, ",", s, ",", n * d);
        std::string ir = absl::StrCat("graph g opset=21 {\n %0 = Input() : $T[", q,
                                      "] \"q\"\n %1 = Input() : $T[", k,
                                      "] \"k\"\n %2 = Input() : $T[", k, "] \"v\"\n");
        std::string args = "%0, %1, %2";
        if (masked) {
          absl::StrAppend(&ir, " %3 = Input() : f32[", b, ",1,1,", l, "] \"mask\"\n");
          args = "%0, %1, %2, %3";
        }
        absl::StrAppend(&ir, " %9 = kiln.Attention(", args, ") {causal=1, scale=0.25} : $T[", y,
                        "] \"y\"\n return \"y\": %9\n}");
        cases.push_back(
            {absl::StrCat("head attention ", t, " q", q, " kv", k, masked ? " masked" : ""),
             WithType(ir, t)});
      }
  RunCases(cases, /*int_high=*/2);
}

// Decode programs' KV-cache kernels (kernels/cuda/kv_cache.h). Paged attention: q [B, N,
// S, D] over pools [P, Nkv, bs, D] through a block table that names the blocks in reverse
// order (so a kernel that ignores the table reads the wrong keys), GQA, S = 1 and causal S =
// 3, head sizes 16 to 256, additive masks (0 kept, -10000 on a tail of row-dependent length,
// every row keeps a key) and bool masks, and enough keys (144 and 256 keys, 8 to 12 rows)
// for split-KV launches whose partials are merged; "pad": HF's float32-min fill on all but
// the first keys (row 0 keeps 40, row 1 one, row 2 none: a softmax over all of them, the
// decomposed graph's answer), so whole chunks are skipped unread; "keepfew": bool, only the
// first 10 + row keys, so most chunks' partials are empty (-inf) when merged. The plan
// lowers it to head_attention. Cache write: new
// rows into a pool through a table, and into a dense cache, at distinct slots per sequence;
// y is its own buffer here, so the copy of the cache and the row writes are both checked.
TEST(CudaOps, PagedAttentionAndCacheWrite) {
  // Rewrites the table (reverse order of blocks 1 .. P-1), the positions (distinct slots
  // per sequence) and the masks (a tail masked per row) after the random draw.
  const FeedEdit edit = [](absl::flat_hash_map<std::string, Tensor>& feeds) {
    if (auto it = feeds.find("table"); it != feeds.end()) {
      Tensor& t = it->second;
      const int64_t n = t.NumElements();
      for (int64_t i = 0; i < n; ++i) t.data<int64_t>()[i] = n - i;  // blocks n .. 1
    }
    if (auto it = feeds.find("positions"); it != feeds.end()) {
      Tensor& t = it->second;
      const int64_t b = t.dims()[0], s = t.dims()[1];
      const int64_t slots = feeds.count("table") ? feeds.at("table").dims()[1] * 8 : 12;
      for (int64_t i = 0; i < b; ++i)
        for (int64_t j = 0; j < s; ++j)
          t.data<int64_t>()[i * s + j] = (slots - 1 - 2 * j - i) % slots;
    }
    if (auto it = feeds.find("pad"); it != feeds.end()) {
      Tensor& t = it->second;
      const int64_t b = t.dims()[0], l = t.dims().back();
      const int64_t keep[] = {40, 1, 0};
      for (int64_t i = 0; i < b; ++i)
        for (int64_t j = 0; j < l; ++j)
          t.data<float>()[i * l + j] = j < keep[i % 3] ? 0.f : -3.4028234663852886e38f;
    }
    if (auto it = feeds.find("keepfew"); it != feeds.end()) {
      Tensor& t = it->second;
      const int64_t b = t.dims()[0], l = t.dims().back();
      for (int64_t i = 0; i < b; ++i)
        for (int64_t j = 0; j < l; ++j) t.data<uint8_t>()[i * l + j] = j < 10 + i ? 1 : 0;
    }
    for (const char* name : {"mask", "keep"})
      if (auto it = feeds.find(name); it != feeds.end()) {
        Tensor& t = it->second;
        const int64_t b = t.dims()[0], l = t.dims().back();
        for (int64_t i = 0; i < b; ++i)
          for (int64_t j = 0; j < l; ++j) {
            const bool kept = j < l - 1 - (5 * i) % std::max<int64_t>(l - 1, 1);
            if (t.dtype() == DType::kBool)
              t.data<uint8_t>()[i * l + j] = kept ? 1 : 0;
            else
              t.data<float>()[i * l + j] = kept ? 0.f : -10000.f;
          }
      }
  };
  std::vector<std::pair<std::string, std::string>> cases;
  struct Shape {
    int b, s, width, bs, d, n, kv;
    bool causal;
    const char* mask;  // "", "mask" (additive f32), "keep" (bool)
  };
  const Shape shapes[] = {
      {2, 1, 3, 16, 64, 4, 2, false, "mask"},  {1, 3, 2, 8, 16, 2, 1, true, "keep"},
      {2, 1, 9, 16, 128, 4, 4, false, "mask"}, {1, 1, 4, 8, 256, 1, 1, false, ""},
      {3, 1, 16, 16, 64, 4, 2, false, "pad"},  {2, 1, 16, 16, 32, 4, 2, false, "keepfew"}};
  for (const char* t : kFloatTypes)
    for (const Shape& sh : shapes) {
      const int pool_blocks = sh.b * sh.width + 1, l = sh.width * sh.bs;
      const std::string q = absl::StrCat(sh.b, ",", sh.n, ",", sh.s, ",", sh.d);
      const std::string pool = absl::StrCat(pool_blocks, ",", sh.kv, ",", sh.bs, ",", sh.d);
      std::string ir =
          absl::StrCat("graph g opset=21 {\n %0 = Input() : $T[", q, "] \"q\"\n %1 = Input() : $T[",
                       pool, "] \"k\"\n %2 = Input() : $T[", pool, "] \"v\"\n");
      if (std::string(sh.mask) == "mask")
        absl::StrAppend(&ir, " %3 = Input() : f32[", sh.b, ",1,1,", l, "] \"mask\"\n");
      if (std::string(sh.mask) == "pad")
        absl::StrAppend(&ir, " %3 = Input() : f32[", sh.b, ",1,1,", l, "] \"pad\"\n");
      if (std::string(sh.mask) == "keep" || std::string(sh.mask) == "keepfew")
        absl::StrAppend(&ir, " %3 = Input() : bool[", sh.b, ",1,1,", l, "] \"", sh.mask, "\"\n");
      const std::string mask = *sh.mask ? "%3" : "_";
      absl::StrAppend(&ir, " %4 = Input() : i64[", sh.b, ",", sh.width, "] \"table\"\n",
                      " %9 = kiln.Attention(%0, %1, %2, ", mask,
                      ", %4) {causal=", sh.causal ? 1 : 0, ", scale=", 1.0 / std::sqrt(sh.d),
                      "} : $T[", sh.b, ",", sh.s, ",", sh.n * sh.d,
                      "] \"y\"\n return \"y\": %9\n}");
      cases.push_back({absl::StrCat("paged attention ", t, " q", q, " pool", pool, " width ",
                                    sh.width, sh.causal ? " causal " : " ", sh.mask),
                       WithType(ir, t)});
    }
  RunCases(cases, /*int_high=*/2, edit, "head_attention");
  cases.clear();
  // Pools of 7 blocks of 8 slots (tables [2, 3]) and a dense cache of 12 slots.
  cases.push_back({"cache write paged", R"(graph g opset=21 {
 %0 = Input() : f32[7,2,8,20] "cache"
 %1 = Input() : f32[2,2,3,20] "new"
 %2 = Input() : i64[2,3] "positions"
 %3 = Input() : i64[2,3] "table"
 %9 = kiln.CacheWrite(%0, %1, %2, %3) : f32[7,2,8,20] "y"
 return "y": %9
})"});
  cases.push_back({"cache write dense", R"(graph g opset=21 {
 %0 = Input() : f32[2,3,12,16] "cache"
 %1 = Input() : f32[2,3,2,16] "new"
 %2 = Input() : i64[2,2] "positions"
 %9 = kiln.CacheWrite(%0, %1, %2) : f32[2,3,12,16] "y"
 return "y": %9
})"});
  RunCases(cases, /*int_high=*/2, edit, "cache_write");
}

// The flash kernel (fp16/bf16 plans) against the reference on every head size it has, the
// mask kinds the fused op takes and the lengths the issue names: S = 1, 7, 64, 128, 129
// (batch 1 and 33, 2 heads), 512 and 1024 (batch 1, 1 head). Key-padding masks are HF's: 0 on
// kept keys, finfo.min on the padded tail, lengths varying per row (row b keeps S - 7b mod
// S keys) and row 1 fully padded — whose decomposed softmax is uniform over all keys; the
// bool form has row 1 all false (zeros). Tolerance TolFor: the output is a P-weighted mean
// of V with |V| <= 1, P rounded once to 16 bits (2^-11 fp16, 2^-8 bf16 relative) and the
// sum in fp32, so the error is below 2 rounding units of the output's scale — within
// 4e-3 (fp16) and 3e-2 (bf16).
TEST(CudaOps, FlashAttention) {
  std::vector<std::pair<std::string, std::string>> cases;
  auto add = [&](const char* t, int d, int s, int b, const std::string& m) {
    const int n = s <= 129 ? 2 : 1;
    const std::string qkv = absl::StrCat(b, ",", s, ",", 3 * n * d);
    const std::string y = absl::StrCat(b, ",", s, ",", n * d);
    std::string ir = absl::StrCat("graph g opset=21 {\n %0 = Input() : $T[", qkv, "] \"qkv\"\n");
    std::string args = "%0", attrs = absl::StrCat("num_heads=", n, ", scale=", 1.0 / std::sqrt(d));
    if (m == "keypad") {
      absl::StrAppend(&ir, " %1 = Input() : f32[", b, ",1,1,", s, "] \"keypad\"\n");
      args = "%0, %1";
    } else if (m == "keypad_bool") {
      absl::StrAppend(&ir, " %1 = Input() : bool[", b, ",1,1,", s, "] \"keypad_bool\"\n");
      args = "%0, %1";
    } else if (m == "additive") {
      absl::StrAppend(&ir, " %1 = Input() : f32[", b, ",", n, ",", s, ",", s, "] \"mask\"\n");
      args = "%0, %1";
    } else if (m == "causal") {
      absl::StrAppend(&attrs, ", causal=1");
    }
    absl::StrAppend(&ir, " %9 = kiln.MultiHeadAttention(", args, ") {", attrs, "} : $T[", y,
                    "] \"y\"\n return \"y\": %9\n}");
    cases.push_back({absl::StrCat("flash ", t, " ", qkv, " d", d, " ", m), WithType(ir, t)});
  };
  for (const char* t : {"f16", "bf16"})
    for (int d : {8, 16, 32, 64, 128})
      for (int s : {1, 7, 64, 128, 129, 512, 1024})
        for (int b : {1, 33})
          for (const std::string m : {"none", "keypad", "keypad_bool", "additive", "causal"}) {
            // Long rows: batch 1, no general mask, not the tiny models' head sizes.
            if (s > 129 && (d < 32 || b > 1 || m == "additive")) continue;
            add(t, d, s, b, m);
          }
  const FeedEdit keypad = [](absl::flat_hash_map<std::string, Tensor>& feeds) {
    for (const char* name : {"keypad", "keypad_bool"}) {
      auto it = feeds.find(name);
      if (it == feeds.end()) continue;
      Tensor& m = it->second;
      const int64_t b = m.dims()[0], s = m.dims()[3];
      const bool is_bool = m.dtype() == DType::kBool;
      for (int64_t r = 0; r < b; ++r) {
        const int64_t kept = r == 1 ? 0 : s - (7 * r) % s;
        for (int64_t j = 0; j < s; ++j)
          m.SetFromDouble(r * s + j, is_bool
                                         ? (j < kept ? 1 : 0)
                                         : (j < kept ? 0.0 : std::numeric_limits<float>::lowest()));
      }
    }
  };
  RunCases(cases, /*int_high=*/2, keypad, "flash_attention");
}

TEST(CudaOps, EmbeddingsPoolingSoftmaxGelu) {
  std::vector<std::pair<std::string, std::string>> cases;
  for (const char* t : kFloatTypes) {
    for (const char* ids : {"i64", "i32"})
      for (bool two_outputs : {false, true}) {
        const int b = 3, s = 7, h = 36, vocab = 4;
        cases.push_back(
            {absl::StrCat("embed ", t, " ", ids, two_outputs ? " sum" : ""),
             WithType(
                 absl::StrCat(
                     "graph g opset=21 {\n %0 = Input() : ", ids, "[", b, ",", s,
                     "] \"ids\"\n %1 = Input() : ", ids, "[", b, ",", s, "] \"seg\"\n",
                     " %2 = Constant() {value=", Ramp(absl::StrCat(vocab, ",", h), vocab * h),
                     "} : $T[", vocab, ",", h, "] \"word\"\n", " %3 = Constant() {value=",
                     Ramp(absl::StrCat(s, ",", h), s * h), "} : $T[", s, ",", h, "] \"pos\"\n",
                     " %4 = Constant() {value=", Ramp(absl::StrCat(4, ",", h), 4 * h), "} : $T[4,",
                     h, "] \"segtab\"\n", " %5 = Constant() {value=", Ramp(absl::StrCat(h), h),
                     "} : $T[", h, "] \"g\"\n %6 = Constant() {value=", Ramp(absl::StrCat(h), h),
                     "} : $T[", h, "] \"b\"\n", two_outputs ? " %7, %8 = " : " %7 = ",
                     "kiln.EmbedLayerNorm(%0, %1, _, %2, %3, %4, %5, %6) {epsilon=1e-12} : $T[", b,
                     ",", s, ",", h, "] \"y\"",
                     two_outputs ? absl::StrCat(", $T[", b, ",", s, ",", h, "] \"sum\"") : "",
                     "\n return \"y\": %7", two_outputs ? ", \"sum\": %8" : "", "\n}"),
                 t)});
      }
    for (const char* mode : {"mean", "cls"})
      for (int norm : {0, 1})
        cases.push_back(
            {absl::StrCat("pool ", t, " ", mode, norm ? " normalize" : ""),
             WithType(absl::StrCat("graph g opset=21 {\n %0 = Input() : $T[33,7,36] \"h\"\n"
                                   " %1 = Input() : i64[33,7] \"mask\"\n"
                                   " %2 = kiln.Pool(%0, %1) {mode=\"",
                                   mode, "\", normalize=", norm,
                                   "} : $T[33,36] \"y\"\n return \"y\": %2\n}"),
                      t)});
    for (int n : {1, 7, 5000})
      cases.push_back({absl::StrCat("softmax ", t, " ", n),
                       WithType(absl::StrCat("graph g opset=21 {\n %0 = Input() : $T[5,", n,
                                             "] \"x\"\n %1 = Softmax(%0) {axis=-1} : $T[5,", n,
                                             "] \"y\"\n return \"y\": %1\n}"),
                                t)});
    for (const char* approx : {"none", "tanh"})
      cases.push_back(
          {absl::StrCat("gelu ", t, " ", approx),
           WithType(absl::StrCat("graph g opset=21 {\n %0 = Input() : $T[3,1001] \"x\"\n"
                                 " %1 = Gelu(%0) {approximate=\"",
                                 approx, "\"} : $T[3,1001] \"y\"\n return \"y\": %1\n}"),
                    t)});
  }
  RunCases(cases, /*int_high=*/2);
}

TEST(CudaOps, EltwiseFamily) {
  std::vector<std::pair<std::string, std::string>> cases = {
      {"add broadcast f16", R"(graph g opset=21 {
 %0 = Input() : f16[2,3,5] "a"
 %1 = Input() : f16[3,1] "b"
 %2 = Add(%0, %1) : f16[2,3,5] "y"
 return "y": %2
})"},
      {"mask chain", R"(graph g opset=21 {
 %0 = Input() : i64[2,1,1,9] "m"
 %1 = Cast(%0) {to=1} : f32[2,1,1,9] "f"
 %2 = Constant() {value=tensor<f32[]>[1]} : f32[] "one"
 %3 = Sub(%2, %1) : f32[2,1,1,9] "inv"
 %4 = Constant() {value=tensor<f32[]>[-3.4e+38]} : f32[] "big"
 %5 = Mul(%3, %4) : f32[2,1,1,9] "y"
 return "y": %5
})"},
      {"where equal not", R"(graph g opset=21 {
 %0 = Input() : i64[4,6] "a"
 %1 = Input() : i64[6] "b"
 %2 = Equal(%0, %1) : bool[4,6] "eq"
 %3 = Not(%2) : bool[4,6] "ne"
 %4 = Input() : f32[4,6] "x"
 %5 = Input() : f32[1,6] "z"
 %6 = Where(%3, %4, %5) : f32[4,6] "y"
 return "y": %6, "ne": %3
})"},
      {"clip f32 and i32", R"(graph g opset=21 {
 %0 = Input() : f32[3,5] "x"
 %1 = Constant() {value=tensor<f32[]>[-0.5]} : f32[] "lo"
 %2 = Constant() {value=tensor<f32[]>[0.75]} : f32[] "hi"
 %3 = Clip(%0, %1, %2) : f32[3,5] "y"
 %4 = Input() : i32[2,3] "k"
 %5 = Constant() {value=tensor<i32[]>[0]} : i32[] "klo"
 %6 = Constant() {value=tensor<i32[]>[1]} : i32[] "khi"
 %7 = Clip(%4, %5, %6) : i32[2,3] "z"
 return "y": %3, "z": %7
})"},
      {"int arithmetic", R"(graph g opset=21 {
 %0 = Input() : i32[5,7] "a"
 %1 = Constant() {value=tensor<i32[7]>[3,-2,5,-7,1,4,-3]} : i32[7] "b"
 %2 = Div(%0, %1) : i32[5,7] "q"
 %3 = Mod(%0, %1) : i32[5,7] "r"
 %4 = Mod(%0, %1) {fmod=1} : i32[5,7] "f"
 return "q": %2, "r": %3, "f": %4
})"},
      {"unary floats bf16", R"(graph g opset=21 {
 %0 = Input() : bf16[3,17] "x"
 %1 = Sigmoid(%0) : bf16[3,17] "s"
 %2 = Tanh(%1) : bf16[3,17] "t"
 %3 = Neg(%2) : bf16[3,17] "y"
 return "y": %3
})"},
      {"casts and saturation", R"(graph g opset=21 {
 %0 = Input() : f32[8] "x"
 %1 = Constant() {value=tensor<f32[]>[1000]} : f32[] "k"
 %2 = Mul(%0, %1) : f32[8] "big"
 %3 = Cast(%2) {to=3} : i8[8] "i8"
 %4 = Cast(%0) {to=10} : f16[8] "h"
 %5 = Cast(%0) {to=9} : bool[8] "b"
 return "i8": %3, "h": %4, "b": %5
})"},
  };
  RunCases(cases, /*int_high=*/9);
}

// What onnxruntime-genai's GroupQueryAttention expands to around its cache: Pad (constant
// mode: a background value, x copied into its box; an empty past padded to the cache's
// length; an int64 value), TensorScatter (opset 24: linear with per-row write indices 1 and
// 6 of 8, the last that fit, and circular from 4 of 5, which wraps), and integer reductions
// (the mask's ReduceSum into sequence lengths, an int32 ReduceMax over two axes). Exact: they
// move or add integers.
TEST(CudaOps, PadTensorScatterIntegerReduce) {
  const FeedEdit edit = [](absl::flat_hash_map<std::string, Tensor>& feeds) {
    if (auto it = feeds.find("write_indices"); it != feeds.end()) {
      Tensor& t = it->second;
      const bool circular = feeds.at("cache").dims()[2] == 5;
      t.data<int64_t>()[0] = circular ? 4 : 1;
      t.data<int64_t>()[1] = circular ? 0 : 6;
    }
  };
  RunCases({{"pad f32 value 0.5", R"(graph g opset=21 {
 %0 = Input() : f32[2,3,5] "x"
 %1 = Constant() {value=tensor<i64[6]>[0,1,2,1,0,3]} : i64[6] "pads"
 %2 = Constant() {value=tensor<f32[]>[0.5]} : f32[] "value"
 %3 = Pad(%0, %1, %2) : f32[3,4,10] "y"
 return "y": %3
})"},
            {"pad an empty past to the cache length f16", R"(graph g opset=21 {
 %0 = Input() : f16[1,2,0,4] "x"
 %1 = Constant() {value=tensor<i64[8]>[0,0,0,0,0,0,6,0]} : i64[8] "pads"
 %2 = Pad(%0, %1) : f16[1,2,6,4] "y"
 return "y": %2
})"},
            {"pad i64 value 7 on axes", R"(graph g opset=21 {
 %0 = Input() : i64[3,4] "x"
 %1 = Constant() {value=tensor<i64[2]>[2,1]} : i64[2] "pads"
 %2 = Constant() {value=tensor<i64[]>[7]} : i64[] "value"
 %3 = Constant() {value=tensor<i64[1]>[-1]} : i64[1] "axes"
 %4 = Pad(%0, %1, %2, %3) : i64[3,7] "y"
 return "y": %4
})"}},
           /*int_high=*/50, nullptr, "pad");
  RunCases({{"tensor_scatter linear", R"(graph g opset=24 {
 %0 = Input() : f32[2,3,8,4] "cache"
 %1 = Input() : f32[2,3,2,4] "update"
 %2 = Input() : i64[2] "write_indices"
 %3 = TensorScatter(%0, %1, %2) : f32[2,3,8,4] "y"
 return "y": %3
})"},
            {"tensor_scatter circular bf16", R"(graph g opset=24 {
 %0 = Input() : bf16[2,2,5,3] "cache"
 %1 = Input() : bf16[2,2,3,3] "update"
 %2 = Input() : i64[2] "write_indices"
 %3 = TensorScatter(%0, %1, %2) {mode="circular"} : bf16[2,2,5,3] "y"
 return "y": %3
})"}},
           /*int_high=*/2, edit, "tensor_scatter");
  RunCases({{"reduce sum i64 (mask lengths)", R"(graph g opset=21 {
 %0 = Input() : i64[2,7] "mask"
 %1 = Constant() {value=tensor<i64[1]>[1]} : i64[1] "axes"
 %2 = ReduceSum(%0, %1) {keepdims=0} : i64[2] "y"
 return "y": %2
})"},
            {"reduce max i32 two axes", R"(graph g opset=21 {
 %0 = Input() : i32[3,4,5] "x"
 %1 = Constant() {value=tensor<i64[2]>[0,2]} : i64[2] "axes"
 %2 = ReduceMax(%0, %1) : i32[1,4,1] "y"
 return "y": %2
})"}},
           /*int_high=*/100, nullptr, "reduce");
}

// int4 weight-only Linear (kiln.BlockQuantLinear, MatMulNBits): K = 40 (blocks of 16, the
// last one partial; 20 code bytes per row), N = 6, M = 1
// (decode), 3 and 11 (a second group of 8 rows), with and without zero points, with a bias
// and a GELU. Codes, zero points and scales are fixed ramps (every nibble value occurs).
// Tolerance f32 (1e-4): the weights dequantize exactly ((code - zp) · scale, one rounding)
// and the sums are over 40 terms in fp32.
TEST(CudaOps, BlockQuantLinear) {
  auto list = [](int64_t count, auto value) {
    std::vector<std::string> v;
    for (int64_t i = 0; i < count; ++i) v.push_back(absl::StrCat(value(i)));
    return absl::StrJoin(v, ",");
  };
  const int64_t k = 40, n = 6, blocks = 3;
  std::vector<std::pair<std::string, std::string>> cases;
  for (int bits : {4, 8}) {
    const int64_t range = int64_t{1} << bits;
    const std::string dt = bits == 8 ? "u8" : "u4";
    const std::string codes = list(n * k, [&](int64_t i) { return (i * 7 + i / 40) % range; });
    // 8-bit scales are 16x smaller for the same weight range (range / 255, not / 15).
    const double unit = bits == 8 ? 1.0 / 16 : 1.0;
    const std::string scales = list(
        n * blocks, [&](int64_t i) { return unit * (0.01 + 0.005 * static_cast<double>(i % 7)); });
    const std::string zps = list(n * blocks, [&](int64_t i) { return (i * 5 + 3) % range; });
    const std::string bias = list(n, [](int64_t i) { return 0.1 * static_cast<double>(i) - 0.2; });
    // Fractional zero points (HQQ's), f32.
    const std::string float_zps = list(
        n * blocks, [&](int64_t i) { return static_cast<double>((i * 5 + 3) % range) + 0.375; });
    for (int64_t m : {1, 3, 11})
      for (int zp_kind : {0, 1, 2}) {  // none, the codes' dtype, f32
        const bool zp = zp_kind != 0;
        const std::string zdt = zp_kind == 2 ? "f32" : dt;
        std::string ir = absl::StrCat(
            "graph g opset=21 {\n %0 = Input() : f32[", m, ",", k, "] \"x\"\n",
            " %1 = Constant() {value=tensor<", dt, "[", n, ",", k, "]>[", codes, "]} : ", dt, "[",
            n, ",", k, "] \"w\"\n", " %2 = Constant() {value=tensor<f32[", n, ",", blocks, "]>[",
            scales, "]} : f32[", n, ",", blocks, "] \"s\"\n");
        if (zp)
          absl::StrAppend(&ir, " %3 = Constant() {value=tensor<", zdt, "[", n, ",", blocks, "]>[",
                          zp_kind == 2 ? float_zps : zps, "]} : ", zdt, "[", n, ",", blocks,
                          "] \"zp\"\n");
        absl::StrAppend(&ir, " %4 = Constant() {value=tensor<f32[", n, "]>[", bias, "]} : f32[", n,
                        "] \"b\"\n", " %9 = kiln.BlockQuantLinear(%0, %1, %2, ", zp ? "%3" : "_",
                        ", %4) {block_size=16, activation=\"gelu\"} : f32[", m, ",", n,
                        "] \"y\"\n return \"y\": %9\n}");
        cases.push_back({absl::StrCat("int", bits, " linear m", m,
                                      zp_kind == 1   ? " zero points"
                                      : zp_kind == 2 ? " float zero points"
                                                     : ""),
                         ir});
      }
  }
  // A 16-bit model's own activations (a q4f16 file on cuda): x, bias and y f16.
  cases.push_back(
      {"int4 linear f16 activations",
       absl::StrCat(
           "graph g opset=21 {\n %0 = Input() : f16[3,", k, "] \"x\"\n",
           " %1 = Constant() {value=tensor<u4[", n, ",", k, "]>[",
           list(n * k, [](int64_t i) { return (i * 7 + i / 40) % 16; }), "]} : u4[", n, ",", k,
           "] \"w\"\n %2 = Constant() {value=tensor<f32[", n, ",", blocks, "]>[",
           list(n * blocks, [](int64_t i) { return 0.01 + 0.005 * static_cast<double>(i % 7); }),
           "]} : f32[", n, ",", blocks, "] \"s\"\n %4 = Constant() {value=tensor<f16[", n, "]>[",
           list(n, [](int64_t i) { return 0.1 * static_cast<double>(i) - 0.2; }), "]} : f16[", n,
           "] \"b\"\n %9 = kiln.BlockQuantLinear(%0, %1, %2, _, %4) {block_size=16} : f16[3,", n,
           "] \"y\"\n return \"y\": %9\n}")});
  RunCases(cases, /*int_high=*/4, nullptr, "block_quant_linear");
}

// int8 Linear (kiln.QuantLinear, an int8 plan's GEMM): K = 40, N = 12, M = 1, 5 and 33;
// x f32, f16 and bf16; dynamic rows and a static range (0.5: most inputs clamp), with and
// without x_mul, bias and a GELU. Weights are a fixed ramp over [-127, 127]. The reference
// executor computes the cpu kernel's arithmetic; the quantized rows and the integer sums
// are the same on the GPU, so the outputs differ only by the f32 epilogue's rounding (f32
// tolerance), or by one rounding to 16 bits.
TEST(CudaOps, QuantLinear) {
  auto list = [](int64_t count, auto value) {
    std::vector<std::string> v;
    for (int64_t i = 0; i < count; ++i) v.push_back(absl::StrCat(value(i)));
    return absl::StrJoin(v, ",");
  };
  const int64_t k = 40, n = 12;
  const std::string w = list(n * k, [](int64_t i) { return (i * 37) % 255 - 127; });
  const std::string ws = list(n, [](int64_t i) { return 0.002 + 0.0005 * static_cast<double>(i); });
  const std::string mul = list(k, [](int64_t i) { return 0.5 + 0.05 * static_cast<double>(i); });
  const std::string bias = list(n, [](int64_t i) { return 0.1 * static_cast<double>(i) - 0.5; });
  std::vector<std::pair<std::string, std::string>> cases;
  for (const char* t : kFloatTypes)
    for (int64_t m : {1, 5, 33})
      for (int variant : {0, 1, 2}) {  // plain, x_mul + GELU, static range + x_mul
        const bool with_mul = variant != 0;
        std::string attrs = variant == 0 ? "activation=\"none\"" : "activation=\"gelu\"";
        if (variant == 2) attrs += ", x_quant=\"static\", x_absmax=0.5";
        cases.push_back(
            {absl::StrCat("quant_linear ", t, " m", m, " variant", variant),
             WithType(
                 absl::StrCat("graph g opset=21 {\n %0 = Input() : $T[", m, ",", k, "] \"x\"\n",
                              " %1 = Constant() {value=tensor<i8[", n, ",", k, "]>[", w, "]} : i8[",
                              n, ",", k, "] \"w\"\n", " %2 = Constant() {value=tensor<f32[", n,
                              "]>[", ws, "]} : f32[", n, "] \"s\"\n",
                              " %3 = Constant() {value=tensor<f32[", n, "]>[", bias, "]} : f32[", n,
                              "] \"b\"\n", " %4 = Constant() {value=tensor<f32[", k, "]>[", mul,
                              "]} : f32[", k, "] \"mul\"\n",
                              " %9 = kiln.QuantLinear(%0, %1, %2, %3", with_mul ? ", %4" : "",
                              ") {", attrs, "} : $T[", m, ",", n, "] \"y\"\n return \"y\": %9\n}"),
                 t)});
      }
  RunCases(cases, /*int_high=*/4, nullptr, "quant_linear");
}

// Rows of an int4/int8 table (kiln.BlockQuantGather, a tied model's embeddings): 7 rows of
// K = 40 (blocks of 16, the last partial), ids drawn from [0, 7), zero points absent, of the
// codes' width and f32. Exact arithmetic per element as the reference's (f32 tolerance).
TEST(CudaOps, BlockQuantGather) {
  auto list = [](int64_t count, auto value) {
    std::vector<std::string> v;
    for (int64_t i = 0; i < count; ++i) v.push_back(absl::StrCat(value(i)));
    return absl::StrJoin(v, ",");
  };
  const int64_t rows = 7, k = 40, blocks = 3;
  std::vector<std::pair<std::string, std::string>> cases;
  for (int bits : {4, 8})
    for (int zp_kind : {0, 1, 2}) {
      const int64_t range = int64_t{1} << bits;
      const std::string dt = bits == 8 ? "u8" : "u4", zdt = zp_kind == 2 ? "f32" : dt;
      std::string ir = absl::StrCat(
          "graph g opset=21 {\n %0 = Input() : i64[2,3] \"ids\"\n",
          " %1 = Constant() {value=tensor<", dt, "[", rows, ",", k, "]>[",
          list(rows * k, [&](int64_t i) { return (i * 7 + i / 40) % range; }), "]} : ", dt, "[",
          rows, ",", k, "] \"w\"\n %2 = Constant() {value=tensor<f32[", rows, ",", blocks, "]>[",
          list(rows * blocks, [](int64_t i) { return 0.01 + 0.005 * static_cast<double>(i % 7); }),
          "]} : f32[", rows, ",", blocks, "] \"s\"\n");
      if (zp_kind != 0)
        absl::StrAppend(&ir, " %3 = Constant() {value=tensor<", zdt, "[", rows, ",", blocks, "]>[",
                        list(rows * blocks,
                             [&](int64_t i) {
                               return static_cast<double>((i * 5 + 3) % range) +
                                      (zp_kind == 2 ? 0.375 : 0.0);
                             }),
                        "]} : ", zdt, "[", rows, ",", blocks, "] \"zp\"\n");
      absl::StrAppend(&ir, " %9 = kiln.BlockQuantGather(%1, %0, %2", zp_kind ? ", %3" : "",
                      ") {block_size=16} : f32[2,3,", k, "] \"y\"\n return \"y\": %9\n}");
      cases.push_back({absl::StrCat("block_quant_gather int", bits, " zp", zp_kind), ir});
    }
  RunCases(cases, /*int_high=*/rows, nullptr, "block_quant_gather");
}

TEST(CudaOps, DataMovement) {
  std::vector<std::pair<std::string, std::string>> cases = {
      {"transpose", R"(graph g opset=21 {
 %0 = Input() : f16[2,3,5,7] "x"
 %1 = Transpose(%0) {perm=[0,2,1,3]} : f16[2,5,3,7] "y"
 return "y": %1
})"},
      {"slice negative steps", R"(graph g opset=21 {
 %0 = Input() : i64[6,10] "x"
 %1 = Constant() {value=tensor<i64[2]>[-1,8]} : i64[2] "s"
 %2 = Constant() {value=tensor<i64[2]>[-100,1]} : i64[2] "e"
 %3 = Constant() {value=tensor<i64[2]>[0,1]} : i64[2] "a"
 %4 = Constant() {value=tensor<i64[2]>[-2,-3]} : i64[2] "st"
 %5 = Slice(%0, %1, %2, %3, %4) : i64[3,3] "y"
 return "y": %5
})"},
      {"expand", R"(graph g opset=21 {
 %0 = Input() : f32[3,1] "x"
 %1 = Constant() {value=tensor<i64[3]>[2,3,4]} : i64[3] "shape"
 %2 = Expand(%0, %1) : f32[2,3,4] "y"
 return "y": %2
})"},
      {"concat", R"(graph g opset=21 {
 %0 = Input() : bf16[2,1,4] "a"
 %1 = Input() : bf16[2,3,4] "b"
 %2 = Input() : bf16[2,2,4] "c"
 %3 = Concat(%0, %1, %2) {axis=1} : bf16[2,6,4] "y"
 return "y": %3
})"},
      {"gather axis 1", R"(graph g opset=21 {
 %0 = Input() : f32[3,5,4] "x"
 %1 = Constant() {value=tensor<i64[2,2]>[4,-1,0,2]} : i64[2,2] "i"
 %2 = Gather(%0, %1) {axis=1} : f32[3,2,2,4] "y"
 return "y": %2
})"},
      {"gather_nd batch_dims 1", R"(graph g opset=21 {
 %0 = Input() : f32[2,5,3] "x"
 %1 = Constant() {value=tensor<i64[2,4,1]>[0,4,2,-1,1,1,3,0]} : i64[2,4,1] "i"
 %2 = GatherND(%0, %1) {batch_dims=1} : f32[2,4,3] "y"
 return "y": %2
})"},
      {"gather_elements", R"(graph g opset=21 {
 %0 = Input() : i32[3,4] "x"
 %1 = Constant() {value=tensor<i64[3,2]>[0,3,1,-1,2,0]} : i64[3,2] "i"
 %2 = GatherElements(%0, %1) {axis=1} : i32[3,2] "y"
 return "y": %2
})"},
      {"cumsum exclusive reverse", R"(graph g opset=21 {
 %0 = Input() : i64[3,9] "x"
 %1 = Constant() {value=tensor<i64[]>[1]} : i64[] "axis"
 %2 = CumSum(%0, %1) {exclusive=1, reverse=1} : i64[3,9] "y"
 %3 = Input() : f32[3,9] "f"
 %4 = CumSum(%3, %1) : f32[3,9] "fy"
 return "y": %2, "fy": %4
})"},
      {"reductions", R"(graph g opset=21 {
 %0 = Input() : f16[4,6,10] "x"
 %1 = Constant() {value=tensor<i64[1]>[-1]} : i64[1] "last"
 %2 = ReduceMean(%0, %1) : f16[4,6,1] "mean"
 %3 = Constant() {value=tensor<i64[2]>[0,2]} : i64[2] "outer"
 %4 = ReduceMax(%0, %3) {keepdims=0} : f16[6] "max"
 %5 = ReduceSum(%0) : f16[1,1,1] "sum"
 return "mean": %2, "max": %4, "sum": %5
})"},
  };
  RunCases(cases);
}

}  // namespace
}  // namespace kiln
