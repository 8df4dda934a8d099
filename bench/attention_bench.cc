// MultiHeadAttention at encoder sizes (N = 12 heads): the hand-written fused kernel vs the
// same computation as oneDNN matmuls (Q·Kᵀ into a [N,S,S] buffer, kiln Softmax, P·V).
// FLOPs 4·B·N·S²·D (the two products); bytes = qkv in + y out. Args: B, S, D.
#include "bench_util.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/softmax.h"

namespace kiln::cpu::bench {
namespace {

constexpr int64_t kHeads = 12;

void BM_Attention(benchmark::State& state) {
  const int64_t nb = state.range(0), s = state.range(1), d = state.range(2), h = kHeads * d;
  const CpuContext ctx = BenchContext();
  const auto qkv = Random(nb * s * 3 * h, 4);
  std::vector<float> y(nb * s * h);
  MultiHeadAttentionArgs a;
  a.qkv = qkv.data();
  a.batch = nb;
  a.seq = s;
  a.num_heads = kHeads;
  a.head_size = d;
  a.scale = 0.125f;
  a.y = y.data();
  for (auto _ : state) {
    if (!MultiHeadAttention(ctx, a).ok()) state.SkipWithError("failed");
    benchmark::DoNotOptimize(y.data());
  }
  SetFlops(state, 4.0 * nb * kHeads * s * s * d, 4.0 * (nb * s * 4 * h));
}

void BM_AttentionOneDnn(benchmark::State& state) {
  const int64_t nb = state.range(0), s = state.range(1), d = state.range(2), h = kHeads * d;
  const CpuContext ctx = BenchContext();
  const auto qkv = Random(nb * s * 3 * h, 4);
  std::vector<float> y(nb * s * h), scores(kHeads * s * s);
  BatchedMatMulDesc qk;  // per batch item, heads as the oneDNN batch
  qk.batch = kHeads;
  qk.m = s;
  qk.n = s;
  qk.k = d;
  qk.trans_b = true;
  qk.alpha = 0.125f;
  qk.lda = qk.ldb = 3 * h;
  qk.sa = qk.sb = d;
  qk.ldc = s;
  qk.sc = s * s;
  BatchedMatMulDesc pv;
  pv.batch = kHeads;
  pv.m = s;
  pv.n = d;
  pv.k = s;
  pv.lda = s;
  pv.sa = s * s;
  pv.ldb = 3 * h;
  pv.sb = d;
  pv.ldc = h;
  pv.sc = d;
  for (auto _ : state) {
    for (int64_t b = 0; b < nb; ++b) {
      const float* base = qkv.data() + b * s * 3 * h;
      bool ok = BatchedMatMul(ctx, qk, base, base + h, scores.data()).ok() &&
                Softmax(ctx, scores.data(), kHeads * s, s, scores.data()).ok() &&
                BatchedMatMul(ctx, pv, scores.data(), base + 2 * h, y.data() + b * s * h).ok();
      if (!ok) state.SkipWithError("failed");
    }
    benchmark::DoNotOptimize(y.data());
  }
  SetFlops(state, 4.0 * nb * kHeads * s * s * d, 4.0 * (nb * s * 4 * h));
}

void AttnArgs(benchmark::internal::Benchmark* b) {
  for (int64_t d : {32, 64})
    for (int64_t nb : {1, 8, 32})
      for (int64_t s : {32, 128, 256}) b->Args({nb, s, d});
}
BENCHMARK(BM_Attention)->Apply(AttnArgs)->ArgNames({"B", "S", "D"})->UseRealTime();
BENCHMARK(BM_AttentionOneDnn)->Apply(AttnArgs)->ArgNames({"B", "S", "D"})->UseRealTime();

}  // namespace
}  // namespace kiln::cpu::bench
