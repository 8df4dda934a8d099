// PackedLinear (fp32, the GEMM backend kiln picks; KILN_GEMM forces one) at MiniLM /
// BERT-base projection shapes (bench/gemm_backends.cc compares the candidates):
// Y[M,N] = X[M,K]·W + b, 2·M·N·K FLOPs; bytes = X + W + Y once. Args: M, K, N, activation
// (0 none, 1 gelu). The implementation (PackedLinear::ImplName) is printed as the label.
#include "bench_util.h"
#include "kernels/cpu/matmul.h"

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
  for (int64_t m : {128, 1024, 4096})
    for (const auto& p : kn) b->Args({m, p[0], p[1], 0});
  b->Args({128, 384, 1536, 1});
  b->Args({1024, 768, 3072, 1});
}
BENCHMARK(BM_Linear)->Apply(LinearArgs)->ArgNames({"M", "K", "N", "gelu"})->UseRealTime();

}  // namespace
}  // namespace kiln::cpu::bench
