// Shared bench helpers: the thread count (KILN_BENCH_THREADS, default all cores), random
// inputs, and the GFLOP/s counter (FLOPs per iteration / 1e9 as a rate, so the console
// column reads GFLOP/s directly).
#pragma once

#include <cstdlib>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "kernels/cpu/cpu_context.h"

namespace kiln::cpu::bench {

inline CpuContext BenchContext() {
  CpuContext ctx;
  if (const char* t = std::getenv("KILN_BENCH_THREADS")) ctx.num_threads = std::atoi(t);
  if (const char* isa = std::getenv("KILN_BENCH_ISA")) {
    const std::string s(isa);
    ctx.isa = s == "scalar"   ? Isa::kScalar
              : s == "avx2"   ? Isa::kAvx2
              : s == "avx512" ? Isa::kAvx512
                              : Isa::kAuto;
  }
  return ctx;
}

inline std::vector<float> Random(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(gen);
  return v;
}

inline void SetFlops(benchmark::State& state, double flops_per_iter, double bytes_per_iter) {
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops_per_iter / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetBytesProcessed(static_cast<int64_t>(bytes_per_iter * state.iterations()));
  state.counters["threads"] = BenchContext().threads();
}

}  // namespace kiln::cpu::bench
