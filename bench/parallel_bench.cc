// What one step's parallel region costs: ParallelFor (cpu_context.h, OpenMP underneath)
// with no work (the fork/join alone) and with a tiny body, at KILN_BENCH_THREADS threads,
// called back to back as a plan's steps call it. Multiplied by the parallel steps of a
// bucket it bounds what a persistent thread team could save (docs/benchmarks.md "Per-step
// overhead"). And the memory roof beside it: DRAM read bandwidth over ParallelFor's
// threads, which bounds a batch-1 Linear whose weights do not fit in L3.
#include <atomic>
#include <cstdlib>
#include <memory>

#include "bench_util.h"

namespace kiln::cpu::bench {
namespace {

// items = the range split over the threads (min_chunk 1: every thread gets a share).
void BM_ParallelForEmpty(benchmark::State& state) {
  const CpuContext ctx = BenchContext();
  const int64_t items = state.range(0);
  std::atomic<int64_t> sink{0};
  for (auto _ : state) {
    ParallelFor(ctx, items, 1,
                [&](int64_t b, int64_t e) { sink.fetch_add(e - b, std::memory_order_relaxed); });
  }
  benchmark::DoNotOptimize(sink.load());
  state.counters["threads"] = ctx.threads();
}
BENCHMARK(BM_ParallelForEmpty)->Arg(2)->Arg(64)->ArgNames({"items"})->UseRealTime();

// The same region with ≈ 1 µs of work per thread, so the cost of waking workers that went
// idle between steps shows too.
void BM_ParallelForTiny(benchmark::State& state) {
  const CpuContext ctx = BenchContext();
  const int64_t items = ctx.threads();
  std::vector<float> buf(static_cast<size_t>(1024 * items), 1.0f);
  for (auto _ : state) {
    ParallelFor(ctx, items, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        float* p = buf.data() + i * 1024;
        for (int r = 0; r < 8; ++r)
          for (int j = 0; j < 1024; ++j) p[j] = p[j] * 0.999f + 1e-3f;
      }
    });
    benchmark::DoNotOptimize(buf.data());
  }
  state.counters["threads"] = ctx.threads();
}
BENCHMARK(BM_ParallelForTiny)->UseRealTime();

// Sums a 256 MiB buffer (well past any L3 here) in per-thread contiguous ranges: bytes/s
// is the read bandwidth a weight stream can get.
void BM_DramRead(benchmark::State& state) {
  const CpuContext ctx = BenchContext();
  const int64_t n = int64_t{64} << 20;  // floats
  std::unique_ptr<float, decltype(&std::free)> buf(
      static_cast<float*>(std::aligned_alloc(64, static_cast<size_t>(n) * sizeof(float))),
      &std::free);
  ParallelFor(ctx, n, 1 << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) buf.get()[i] = 1.0f;
  });
  const int threads = ctx.threads();
  std::vector<float> partial(static_cast<size_t>(threads) * 16, 0.0f);
  for (auto _ : state) {
    ParallelForWorkers(ctx, n / 16, 1 << 12, [&](int64_t b, int64_t e, int w) {
      float acc[16] = {};
      const float* p = buf.get();
      for (int64_t i = b; i < e; ++i)
        for (int j = 0; j < 16; ++j) acc[j] += p[i * 16 + j];
      for (int j = 0; j < 16; ++j) partial[static_cast<size_t>(w) * 16 + j] += acc[j];
    });
    benchmark::DoNotOptimize(partial.data());
  }
  state.SetBytesProcessed(state.iterations() * n * static_cast<int64_t>(sizeof(float)));
  state.counters["threads"] = threads;
}
BENCHMARK(BM_DramRead)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kiln::cpu::bench
