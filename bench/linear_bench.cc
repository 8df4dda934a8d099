// PackedLinear (fp32, the GEMM backend kiln picks; KILN_GEMM forces one) at MiniLM /
// BERT-base projection shapes (bench/gemm_backends.cc compares the candidates):
// Y[M,N] = X[M,K]·W + b, 2·M·N·K FLOPs; bytes = X + W + Y once. Args: M, K, N, activation
// (0 none, 1 gelu). The implementation (PackedLinear::ImplName) is printed as the label.
// BM_LinearBf16: the same with bf16 weights (bf16 plans); BM_QuantLinear: kiln's int8 GEMM
// (int8 plans: X quantized per row inside the call, W s8, bytes counted at their width);
// BM_BlockQuantLinear: kiln's int4/int8 weight-only GEMM (MatMulNBits files, block 32) at
// Qwen2-0.5B's decode and prefill shapes, weight bytes counted at half a byte (4 bits) or a
// byte (8 bits) plus the f32 block scales. Args: M, K, N, bits.
#include "bench_util.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/blockq_gemm.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/qgemm.h"

namespace kiln::cpu::bench {
namespace {

void BM_Linear(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const Activation act = state.range(3) ? Activation::kGeluErf : Activation::kNone;
  const CpuContext ctx = BenchContext();
  const auto x = Random(m * k, 1), w = Random(k * n, 2), b = Random(n, 3);
  std::vector<float> y(m * n);
  auto pl = PackedLinear::Create({k, n, false, act}, w.data(), b.data(), ctx, m);
  if (!pl.ok()) {
    state.SkipWithError(std::string(pl.status().message()).c_str());
    return;
  }
  for (auto _ : state) {
    if (!(*pl)->Run(ctx, x.data(), m, y.data()).ok()) state.SkipWithError("Run failed");
    benchmark::DoNotOptimize(y.data());
  }
  SetFlops(state, 2.0 * m * n * k, 4.0 * (m * k + k * n + m * n));
  auto impl = (*pl)->ImplName(ctx, m);
  if (impl.ok()) state.SetLabel(*impl);
}

void LinearArgs(benchmark::internal::Benchmark* b) {
  // (K, N): MiniLM qkv-ish / FFN up / FFN down, BERT-base qkv-ish / FFN up / FFN down.
  const int64_t kn[][2] = {{384, 384}, {384, 1536}, {1536, 384},
                           {768, 768}, {768, 3072}, {3072, 768}};
  for (int64_t m : {1, 32, 128, 1024, 4096})
    for (const auto& p : kn) b->Args({m, p[0], p[1], 0});
  b->Args({128, 384, 1536, 1});
  b->Args({1024, 768, 3072, 1});
}
BENCHMARK(BM_Linear)->Apply(LinearArgs)->ArgNames({"M", "K", "N", "gelu"})->UseRealTime();

void BM_LinearBf16(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const Activation act = state.range(3) ? Activation::kGeluErf : Activation::kNone;
  const CpuContext ctx = BenchContext();
  const auto x = Random(m * k, 1), w = Random(k * n, 2), b = Random(n, 3);
  std::vector<uint16_t> wb(w.size());
  ConvertToBf16(w.data(), static_cast<int64_t>(w.size()), wb.data(), Isa::kScalar);
  std::vector<float> y(m * n);
  LinearDesc desc{k, n, false, act};
  desc.bf16_weights = true;
  auto pl = PackedLinear::Create(desc, wb.data(), b.data(), ctx, m);
  if (!pl.ok()) {
    state.SkipWithError(std::string(pl.status().message()).c_str());
    return;
  }
  for (auto _ : state) {
    if (!(*pl)->Run(ctx, x.data(), m, y.data()).ok()) state.SkipWithError("Run failed");
    benchmark::DoNotOptimize(y.data());
  }
  SetFlops(state, 2.0 * m * n * k, 4.0 * (m * k + m * n) + 2.0 * k * n);
  auto impl = (*pl)->ImplName(ctx, m);
  if (impl.ok()) state.SetLabel(*impl);
}
BENCHMARK(BM_LinearBf16)->Apply(LinearArgs)->ArgNames({"M", "K", "N", "gelu"})->UseRealTime();

void BM_QuantLinear(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const CpuContext ctx = BenchContext();
  const auto x = Random(m * k, 1), ws = Random(n, 4), b = Random(n, 3);
  std::vector<int8_t> w(k * n);
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = static_cast<int8_t>(static_cast<int>(i * 7919 % 255) - 127);
  std::vector<float> y(m * n);
  auto g = QuantGemm::Pack(ctx.isa, k, n, w.data(), ws.data(), b.data());
  if (!g.ok()) {
    state.SkipWithError(std::string(g.status().message()).c_str());
    return;
  }
  const int act = state.range(3) ? 1 : 0;
  for (auto _ : state) {
    if (!(*g)->Run(ctx, x.data(), m, y.data(), act).ok()) state.SkipWithError("Run failed");
    benchmark::DoNotOptimize(y.data());
  }
  SetFlops(state, 2.0 * m * n * k, 4.0 * (m * k + m * n) + 1.0 * k * n);
  state.SetLabel((*g)->ImplName());
}
BENCHMARK(BM_QuantLinear)->Apply(LinearArgs)->ArgNames({"M", "K", "N", "gelu"})->UseRealTime();

void BM_BlockQuantLinear(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2), bs = 32;
  const int64_t bits = state.range(3), kb = (k + bs - 1) / bs;
  const CpuContext ctx = BenchContext();
  const auto x = Random(m * k, 1), scales = Random(n * kb, 4);
  std::vector<uint8_t> codes(k * n);
  for (size_t i = 0; i < codes.size(); ++i)
    codes[i] = static_cast<uint8_t>(i * 7919 % (int64_t{1} << bits));
  std::vector<float> y(m * n);
  auto g = BlockQuantGemm::Pack(ctx.isa, k, n, bs, codes.data(), scales.data(), nullptr, nullptr,
                                bits == 8 ? CodeLayout::kEightBit : CodeLayout::kOnePerByte);
  if (!g.ok()) {
    state.SkipWithError(std::string(g.status().message()).c_str());
    return;
  }
  for (auto _ : state) {
    if (!(*g)->Run(ctx, x.data(), m, y.data()).ok()) state.SkipWithError("Run failed");
    benchmark::DoNotOptimize(y.data());
  }
  SetFlops(state, 2.0 * m * n * k, 4.0 * (m * k + m * n) + bits / 8.0 * k * n + 4.0 * kb * n);
  state.SetLabel((*g)->ImplName());
}
void BlockQuantArgs(benchmark::internal::Benchmark* b) {
  // (K, N): Qwen2-0.5B qkv, o_proj, gate/up, down, LM head.
  const int64_t kn[][2] = {{896, 1152}, {896, 896}, {896, 4864}, {4864, 896}, {896, 151936}};
  for (int64_t bits : {4, 8})
    for (int64_t m : {1, 128})
      for (const auto& p : kn) b->Args({m, p[0], p[1], bits});
}
BENCHMARK(BM_BlockQuantLinear)
    ->Apply(BlockQuantArgs)
    ->ArgNames({"M", "K", "N", "bits"})
    ->UseRealTime();

}  // namespace
}  // namespace kiln::cpu::bench
