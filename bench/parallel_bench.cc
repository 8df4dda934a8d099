// What one step's parallel region costs: ParallelFor (cpu_context.h, OpenMP underneath)
// with no work (the fork/join alone) and with a tiny body, at KILN_BENCH_THREADS threads,
// called back to back as a plan's steps call it. Multiplied by the parallel steps of a
// bucket it bounds what a persistent thread team could save (docs/benchmarks.md "Per-step
// overhead").
#include <atomic>

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

}  // namespace
}  // namespace kiln::cpu::bench
