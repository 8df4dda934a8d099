// MultiHeadAttention at encoder sizes (N = 12 heads): the kernel as the executor calls it
// (BM_Attention, path chosen by shape), each of its internal paths forced
// (BM_AttentionRows / GemmHeads / GemmBatch, attention_internal.h), and the same computation
// as the bench-side oneDNN formulation (Q·Kᵀ into a [N,S,S] buffer, kiln Softmax, P·V).
// No mask except BM_AttentionPadMask (the executor's path with a BERT padding mask).
// FLOPs 4·B·N·S²·D (the two products); bytes = qkv in + y out. Args: B, S, D.
// BM_CacheAttention*: kiln.Attention over a KV cache (S query rows per head, L cached
// keys, grouped K/V heads), each path forced; FLOPs 4·B·N·S·L·D, bytes = the K and V
// cache read (the floor: decode attention is bound by it) + q + y. Args: B, S, L, N, Nkv, D.
#include <string>
#include <tuple>
#include <vector>

#include "bench_util.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/attention_internal.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/softmax.h"

namespace kiln::cpu::bench {
namespace {

constexpr int64_t kHeads = 12;

using internal::AttentionPath;

// kPadMask: an additive [B,1,1,S] padding mask (BERT's), the last quarter of keys at -10000.
template <AttentionPath kPath, bool kPadMask = false>
void BM_AttentionPath(benchmark::State& state) {
  const int64_t nb = state.range(0), s = state.range(1), d = state.range(2), h = kHeads * d;
  const CpuContext ctx = BenchContext();
  const auto qkv = Random(nb * s * 3 * h, 4);
  std::vector<float> y(nb * s * h), mask(nb * s, 0.0f);
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t j = s - s / 4; j < s; ++j) mask[b * s + j] = -10000.0f;
  MultiHeadAttentionArgs a;
  if (kPadMask) {
    a.mask.additive = mask.data();
    a.mask.dims = {nb, 1, 1, s};
  }
  a.qkv = qkv.data();
  a.batch = nb;
  a.seq = s;
  a.num_heads = kHeads;
  a.head_size = d;
  a.scale = 0.125f;
  a.y = y.data();
  for (auto _ : state) {
    if (!internal::MultiHeadAttentionWithPath(ctx, a, kPath).ok()) state.SkipWithError("failed");
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
// Where the path choice changes: tiny problems (oneDNN's per-call cost outweighs the work)
// and the row kernel / GEMM crossover between S = 32 and S = 128.
void AttnChoiceArgs(benchmark::internal::Benchmark* b) {
  for (int64_t s : {1, 4, 8, 16}) b->Args({1, s, 64});
  for (int64_t d : {32, 64})
    for (int64_t s : {48, 64, 96}) b->Args({8, s, d});
}

void BM_Attention(benchmark::State& state) { BM_AttentionPath<AttentionPath::kAuto>(state); }
void BM_AttentionPadMask(benchmark::State& state) {
  BM_AttentionPath<AttentionPath::kAuto, true>(state);
}
void BM_AttentionRows(benchmark::State& state) { BM_AttentionPath<AttentionPath::kRows>(state); }
void BM_AttentionGemmHeads(benchmark::State& state) {
  BM_AttentionPath<AttentionPath::kGemmHeads>(state);
}
void BM_AttentionGemmBatch(benchmark::State& state) {
  BM_AttentionPath<AttentionPath::kGemmBatch>(state);
}

BENCHMARK(BM_Attention)->Apply(AttnArgs)->ArgNames({"B", "S", "D"})->UseRealTime();
BENCHMARK(BM_AttentionRows)->Apply(AttnArgs)->ArgNames({"B", "S", "D"})->UseRealTime();
BENCHMARK(BM_AttentionGemmHeads)->Apply(AttnArgs)->ArgNames({"B", "S", "D"})->UseRealTime();
BENCHMARK(BM_AttentionGemmBatch)->Apply(AttnArgs)->ArgNames({"B", "S", "D"})->UseRealTime();
BENCHMARK(BM_Attention)->Apply(AttnChoiceArgs)->ArgNames({"B", "S", "D"})->UseRealTime();
BENCHMARK(BM_AttentionRows)->Apply(AttnChoiceArgs)->ArgNames({"B", "S", "D"})->UseRealTime();
BENCHMARK(BM_AttentionGemmHeads)->Apply(AttnChoiceArgs)->ArgNames({"B", "S", "D"})->UseRealTime();
BENCHMARK(BM_AttentionOneDnn)->Apply(AttnChoiceArgs)->ArgNames({"B", "S", "D"})->UseRealTime();
BENCHMARK(BM_AttentionOneDnn)->Apply(AttnArgs)->ArgNames({"B", "S", "D"})->UseRealTime();
BENCHMARK(BM_AttentionPadMask)
    ->ArgsProduct({{8}, {32, 128, 256}, {64}})
    ->ArgNames({"B", "S", "D"})
    ->UseRealTime();

// A decode step's attention over the cache; block > 0: the cache paged in blocks of that
// many slots, the blocks of each sequence interleaved with the others' over the pool (as a
// session's pool looks after sequences grew in turns), read through the block table.
void CacheAttention(benchmark::State& state, AttentionPath path, int64_t block) {
  const int64_t nb = state.range(0), s = state.range(1), l = state.range(2);
  const int64_t nh = state.range(3), nkv = state.range(4), d = state.range(5);
  const int64_t width = block > 0 ? l / block : 0;
  const int64_t kv = block > 0 ? (nb * width + 1) * nkv * block * d : nb * nkv * l * d;
  const CpuContext ctx = BenchContext();
  const auto q = Random(nb * nh * s * d, 5), k = Random(kv, 6), v = Random(kv, 7);
  std::vector<int64_t> table(nb * width);
  for (int64_t i = 0; i < nb * width; ++i) table[i] = 1 + (i % width) * nb + i / width;
  std::vector<float> y(nb * s * nh * d);
  AttentionArgs a;
  a.q = q.data();
  a.k = k.data();
  a.v = v.data();
  a.batch = nb;
  a.seq = s;
  a.kv_seq = l;
  a.num_heads = nh;
  a.num_kv_heads = nkv;
  a.head_size = d;
  a.scale = 0.125f;
  a.causal = true;
  a.y = y.data();
  if (block > 0) a.paged = {table.data(), width, block, nb * width + 1};
  for (auto _ : state) {
    if (!internal::AttentionWithPath(ctx, a, path).ok()) state.SkipWithError("failed");
    benchmark::DoNotOptimize(y.data());
  }
  SetFlops(state, 4.0 * nb * nh * s * l * d, 4.0 * (2 * nb * nkv * l * d + 2 * nb * nh * s * d));
}

template <AttentionPath kPath>
void BM_CacheAttentionPath(benchmark::State& state) {
  CacheAttention(state, kPath, 0);
}

// Qwen2-0.5B's attention (14 heads over 2 K/V heads of 64) and Llama-3-8B's (32 over 8 of
// 128): a decode step (S = 1) and a short chunk (S = 4) over 128 … 4096 cached keys.
void CacheArgs(benchmark::internal::Benchmark* b) {
  for (const auto& [nh, nkv, d] : {std::tuple{14, 2, 64}, std::tuple{32, 8, 128}})
    for (int64_t nb : {1, 4})
      for (int64_t s : {1, 4})
        for (int64_t l : {128, 512, 4096}) b->Args({nb, s, l, nh, nkv, d});
}

void BM_CacheAttention(benchmark::State& state) {
  BM_CacheAttentionPath<AttentionPath::kAuto>(state);
}
void BM_CacheAttentionRows(benchmark::State& state) {
  BM_CacheAttentionPath<AttentionPath::kRows>(state);
}
void BM_CacheAttentionGemmHeads(benchmark::State& state) {
  BM_CacheAttentionPath<AttentionPath::kGemmHeads>(state);
}
void BM_CacheAttentionCache(benchmark::State& state) {
  BM_CacheAttentionPath<AttentionPath::kCache>(state);
}

// The cache path over a paged cache (docs/generation.md) in blocks of `bs` slots (16, 64,
// 128); against BM_CacheAttentionCache on the same shapes: the cost of paging.
void BM_CacheAttentionPaged(benchmark::State& state) {
  CacheAttention(state, AttentionPath::kCache, state.range(6));
}

void PagedArgs(benchmark::internal::Benchmark* b) {
  for (const auto& [nh, nkv, d] : {std::tuple{14, 2, 64}, std::tuple{32, 8, 128}})
    for (int64_t nb : {1, 4})
      for (int64_t s : {1, 4})
        for (int64_t l : {128, 512, 4096})
          for (int64_t bs : {16, 64, 128}) b->Args({nb, s, l, nh, nkv, d, bs});
}

const std::vector<std::string> kCacheArgNames = {"B", "S", "L", "N", "Nkv", "D"};
BENCHMARK(BM_CacheAttentionPaged)
    ->Apply(PagedArgs)
    ->ArgNames({"B", "S", "L", "N", "Nkv", "D", "bs"})
    ->UseRealTime();
BENCHMARK(BM_CacheAttention)->Apply(CacheArgs)->ArgNames(kCacheArgNames)->UseRealTime();
BENCHMARK(BM_CacheAttentionRows)->Apply(CacheArgs)->ArgNames(kCacheArgNames)->UseRealTime();
BENCHMARK(BM_CacheAttentionGemmHeads)->Apply(CacheArgs)->ArgNames(kCacheArgNames)->UseRealTime();
BENCHMARK(BM_CacheAttentionCache)->Apply(CacheArgs)->ArgNames(kCacheArgNames)->UseRealTime();

}  // namespace
}  // namespace kiln::cpu::bench
