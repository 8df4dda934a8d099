// Memory-bound kernels: LayerNorm, SkipLayerNorm (with the residual output), Softmax over
// attention rows, Gelu, EmbedLayerNorm, mean Pool. Bytes = what must be read and written
// once (the roofline for these is bandwidth); FLOPs are nominal (LN ≈ 8/elt).
#include "bench_util.h"
#include "kernels/cpu/activation.h"
#include "kernels/cpu/embed_layer_norm.h"
#include "kernels/cpu/layer_norm.h"
#include "kernels/cpu/pool.h"
#include "kernels/cpu/softmax.h"

namespace kiln::cpu::bench {
namespace {

void BM_LayerNorm(benchmark::State& state) {
  const int64_t rows = state.range(0), h = state.range(1);
  const CpuContext ctx = BenchContext();
  const auto x = Random(rows * h, 1), g = Random(h, 2), b = Random(h, 3);
  std::vector<float> y(rows * h);
  for (auto _ : state) {
    (void)LayerNorm(ctx, x.data(), g.data(), b.data(), rows, h, 1e-5f, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  SetFlops(state, 8.0 * rows * h, 8.0 * rows * h);
}
BENCHMARK(BM_LayerNorm)
    ->ArgsProduct({{128, 4096}, {384, 768}})
    ->ArgNames({"rows", "H"})
    ->UseRealTime();

void BM_SkipLayerNorm(benchmark::State& state) {
  const int64_t rows = state.range(0), h = state.range(1);
  const CpuContext ctx = BenchContext();
  const auto x = Random(rows * h, 1), skip = Random(rows * h, 4), g = Random(h, 2),
             b = Random(h, 3);
  std::vector<float> y(rows * h), sum(rows * h);
  SkipLayerNormArgs a;
  a.x = x.data();
  a.skip = skip.data();
  a.skip_rows = rows;
  a.gamma = g.data();
  a.beta = b.data();
  a.bias = b.data();
  a.rows = rows;
  a.h = h;
  a.y = y.data();
  a.sum = sum.data();
  for (auto _ : state) {
    (void)SkipLayerNorm(ctx, a);
    benchmark::DoNotOptimize(y.data());
  }
  SetFlops(state, 10.0 * rows * h, 16.0 * rows * h);
}
BENCHMARK(BM_SkipLayerNorm)
    ->ArgsProduct({{128, 4096}, {384, 768}})
    ->ArgNames({"rows", "H"})
    ->UseRealTime();

void BM_Softmax(benchmark::State& state) {
  const int64_t rows = state.range(0), n = state.range(1);
  const CpuContext ctx = BenchContext();
  const auto x = Random(rows * n, 5);
  std::vector<float> y(rows * n);
  for (auto _ : state) {
    (void)Softmax(ctx, x.data(), rows, n, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  SetFlops(state, 5.0 * rows * n, 8.0 * rows * n);
}
// rows = B·N·S for N = 12 heads: (1, 128), (8, 128).
BENCHMARK(BM_Softmax)
    ->Args({1536, 128})
    ->Args({12288, 128})
    ->Args({3072, 256})
    ->ArgNames({"rows", "n"})
    ->UseRealTime();

void BM_Gelu(benchmark::State& state) {
  const int64_t n = state.range(0);
  const CpuContext ctx = BenchContext();
  const auto x = Random(n, 6);
  std::vector<float> y(n);
  for (auto _ : state) {
    (void)Gelu(ctx, x.data(), n, state.range(1) != 0, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  SetFlops(state, 20.0 * n, 8.0 * n);
}
BENCHMARK(BM_Gelu)
    ->ArgsProduct({{128 * 1536, 1024 * 3072}, {0, 1}})
    ->ArgNames({"n", "tanh"})
    ->UseRealTime();

void BM_EmbedLayerNorm(benchmark::State& state) {
  const int64_t nb = state.range(0), s = 128, h = state.range(1), vocab = 30522;
  const CpuContext ctx = BenchContext();
  const auto word = Random(vocab * h, 7), pos = Random(512 * h, 8), seg = Random(2 * h, 9),
             g = Random(h, 2), b = Random(h, 3);
  std::vector<int64_t> ids(nb * s), segs(nb * s, 0);
  for (int64_t i = 0; i < nb * s; ++i) ids[i] = (i * 7919) % vocab;
  std::vector<float> y(nb * s * h);
  EmbedLayerNormArgs a;
  a.input_ids = ids.data();
  a.segment_ids = segs.data();
  a.segment = seg.data();
  a.segment_rows = 2;
  a.batch = nb;
  a.seq = s;
  a.hidden = h;
  a.word = word.data();
  a.word_rows = vocab;
  a.pos = pos.data();
  a.pos_rows = 512;
  a.gamma = g.data();
  a.beta = b.data();
  a.y = y.data();
  for (auto _ : state) {
    (void)EmbedLayerNorm(ctx, a);
    benchmark::DoNotOptimize(y.data());
  }
  SetFlops(state, 10.0 * nb * s * h, 16.0 * nb * s * h);
}
BENCHMARK(BM_EmbedLayerNorm)
    ->ArgsProduct({{1, 32}, {384, 768}})
    ->ArgNames({"B", "H"})
    ->UseRealTime();

void BM_MeanPool(benchmark::State& state) {
  const int64_t nb = state.range(0), s = 128, h = 384;
  const CpuContext ctx = BenchContext();
  const auto hid = Random(nb * s * h, 10);
  std::vector<int64_t> mask(nb * s, 1);
  std::vector<float> y(nb * h);
  PoolArgs a;
  a.hidden = hid.data();
  a.mask_i64 = mask.data();
  a.batch = nb;
  a.seq = s;
  a.hidden_size = h;
  a.normalize = true;
  a.y = y.data();
  for (auto _ : state) {
    (void)Pool(ctx, a);
    benchmark::DoNotOptimize(y.data());
  }
  SetFlops(state, 2.0 * nb * s * h, 4.0 * nb * s * h);
}
BENCHMARK(BM_MeanPool)->Arg(1)->Arg(32)->ArgNames({"B"})->UseRealTime();

}  // namespace
}  // namespace kiln::cpu::bench
