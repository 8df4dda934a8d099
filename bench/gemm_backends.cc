// The GEMM backend candidates of docs/benchmarks.md "GEMM backends", side by side on the
// Linear shapes kiln's plans run: Y[M,N] = act(X[M,K]·W + b), one and two threads, with the
// per-core FMA roof of the ISA measured in the same binary. Its own binary because the
// candidates export the same BLAS symbols: OpenBLAS and BLIS are dlopen'ed (RTLD_LOCAL)
// from their Debian paths and skipped, saying so, where absent; libxsmm is linked
// statically when found at build time.
//   backend 0 oneDNN (PackedLinear, backend forced): bias and GELU fused as post-ops
//   backend 1 kiln   (PackedLinear, backend forced): bias and GELU fused in the tile
//   backend 2 OpenBLAS cblas_sgemm, 3 BLIS cblas_sgemm: bias as beta=1 onto rows prefilled
//             with it, GELU as a second pass (kiln's vector GELU) — BLAS cannot fuse them
//   backend 4 libxsmm JIT kernels (LIBXSMM_TARGET picks the ISA) over 64×32 tiles of C in
//             kiln's OpenMP loop, bias and GELU as for BLAS
// ISA: KILN_CPU_ISA=avx2 caps kiln and oneDNN; pass OPENBLAS_CORETYPE=Haswell,
// LIBXSMM_TARGET=hsw (and BLIS_ARCH_TYPE where BLIS honours it) to cap the others
// (bench/gemm_backends.sh does). Threads: KILN_BENCH_THREADS.
#include <dlfcn.h>
#include <immintrin.h>

#include <chrono>
#include <cstring>
#include <string>

#include "bench_util.h"
#include "kernels/cpu/activation.h"
#include "kernels/cpu/matmul.h"
#ifdef KILN_HAVE_LIBXSMM
#include <libxsmm.h>
#endif

namespace kiln::cpu::bench {
namespace {

// ---- the roof: independent FMA chains in registers, no memory traffic ----------------

template <int C>
__attribute__((target("avx2,fma"))) float FmaChainsAvx2(int64_t iters) {
  __m256 a[C];
  for (int i = 0; i < C; ++i) a[i] = _mm256_set1_ps(1e-3f * i);
  const __m256 b = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(1e-4f);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 32
    for (int j = 0; j < C; ++j) a[j] = _mm256_fmadd_ps(a[j], b, c);
  }
  __m256 s = a[0];
  for (int j = 1; j < C; ++j) s = _mm256_add_ps(s, a[j]);
  return _mm256_cvtss_f32(s);
}

template <int C>
__attribute__((target("avx512f"))) float FmaChainsAvx512(int64_t iters) {
  __m512 a[C];
  for (int i = 0; i < C; ++i) a[i] = _mm512_set1_ps(1e-3f * i);
  const __m512 b = _mm512_set1_ps(0.999f), c = _mm512_set1_ps(1e-4f);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 32
    for (int j = 0; j < C; ++j) a[j] = _mm512_fmadd_ps(a[j], b, c);
  }
  __m512 s = a[0];
  for (int j = 1; j < C; ++j) s = _mm512_add_ps(s, a[j]);
  return _mm512_cvtss_f32(s);
}

// Arg 0: 256 (AVX2) or 512 (AVX-512) bits. One thread: the per-core roof.
void BM_FmaRoof(benchmark::State& state) {
  const bool z = state.range(0) == 512;
  if (!IsaSupported(z ? Isa::kAvx512 : Isa::kAvx2)) {
    state.SkipWithError("this CPU (or KILN_CPU_ISA) lacks the ISA");
    return;
  }
  constexpr int64_t kIters = 1 << 20;
  constexpr int kChains = 12;  // > 2 pipes × 4-cycle latency, and ≤ 16 registers
  int64_t iters = kIters;
  for (auto _ : state) {
    benchmark::DoNotOptimize(iters);  // opaque: the chains cannot be folded at compile time
    benchmark::DoNotOptimize(z ? FmaChainsAvx512<kChains>(iters) : FmaChainsAvx2<kChains>(iters));
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * kIters * kChains * (z ? 16 : 8) / 1e9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_FmaRoof)->Arg(256)->Arg(512)->UseRealTime();

// ---- BLAS through dlopen -----------------------------------------------------------

using CblasSgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*,
                            int, float, float*, int);
using SetThreads = void (*)(int);
struct Blas {
  CblasSgemm sgemm = nullptr;
  SetThreads set_threads = nullptr;
  std::string error;
};

Blas OpenBlas(const char* path, const char* threads_fn) {
  Blas b;
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    b.error = std::string("not installed: ") + path;
    return b;
  }
  b.sgemm = reinterpret_cast<CblasSgemm>(dlsym(h, "cblas_sgemm"));
  b.set_threads = reinterpret_cast<SetThreads>(dlsym(h, threads_fn));
  if (b.sgemm == nullptr) b.error = std::string("no cblas_sgemm in ") + path;
  return b;
}

const Blas& BlasFor(int backend) {
  static const Blas openblas = OpenBlas(
      "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0", "openblas_set_num_threads");
  static const Blas blis =
      OpenBlas("/usr/lib/x86_64-linux-gnu/blis-openmp/libblis.so.4", "bli_thread_set_num_threads");
  return backend == 2 ? openblas : blis;
}

constexpr int kRowMajor = 101, kNoTrans = 111;

void PrefillBias(const float* b, int64_t m, int64_t n, float* y) {
  for (int64_t i = 0; i < m; ++i) std::memcpy(y + i * n, b, n * sizeof(float));
}

const char* kNames[] = {"onednn", "kiln", "openblas", "blis", "libxsmm"};

// Args: backend, M, K, N, gelu.
void BM_Gemm(benchmark::State& state) {
  const int backend = static_cast<int>(state.range(0));
  const int64_t m = state.range(1), k = state.range(2), n = state.range(3);
  const bool gelu = state.range(4) != 0;
  const CpuContext ctx = BenchContext();
  const auto x = Random(m * k, 1), w = Random(k * n, 2), b = Random(n, 3);
  std::vector<float> y(m * n);
  std::string label = kNames[backend];
  if (backend <= 1) {
    const LinearDesc d{k, n, false, gelu ? Activation::kGeluErf : Activation::kNone,
                       backend == 0 ? GemmBackend::kOneDnn : GemmBackend::kKiln};
    auto pl = PackedLinear::Create(d, w.data(), b.data(), ctx, m);
    if (!pl.ok()) {
      state.SkipWithError(std::string(pl.status().message()).c_str());
      return;
    }
    for (auto _ : state) {
      if (!(*pl)->Run(ctx, x.data(), m, y.data()).ok()) state.SkipWithError("Run failed");
      benchmark::DoNotOptimize(y.data());
    }
    auto impl = (*pl)->ImplName(ctx, m);
    if (impl.ok()) label = *impl;
  } else if (backend <= 3) {
    const Blas& blas = BlasFor(backend);
    if (blas.sgemm == nullptr) {
      state.SkipWithError(blas.error.c_str());
      return;
    }
    if (blas.set_threads) blas.set_threads(ctx.threads());
    for (auto _ : state) {
      PrefillBias(b.data(), m, n, y.data());
      blas.sgemm(kRowMajor, kNoTrans, kNoTrans, static_cast<int>(m), static_cast<int>(n),
                 static_cast<int>(k), 1.0f, x.data(), static_cast<int>(k), w.data(),
                 static_cast<int>(n), 1.0f, y.data(), static_cast<int>(n));
      if (gelu) (void)Gelu(ctx, y.data(), m * n, false, y.data());
      benchmark::DoNotOptimize(y.data());
    }
  } else {
#ifdef KILN_HAVE_LIBXSMM
    // Column-major view: Yᵀ[N, M] = Wᵀ[N, K] · Xᵀ[K, M], i.e. A = W (ld N), B = X (ld K).
    constexpr int64_t kTn = 64, kTm = 32;
    libxsmm_init();
    const float one = 1.0f;
    const libxsmm_blasint lda = n, ldb = k, ldc = n;
    auto kernel = [&](int64_t tn, int64_t tm) {
      return libxsmm_smmdispatch(tn, tm, k, &lda, &ldb, &ldc, &one, &one, nullptr, nullptr);
    };
    const int64_t tiles_n = (n + kTn - 1) / kTn, tiles_m = (m + kTm - 1) / kTm;
    std::vector<libxsmm_smmfunction> fns;  // [full/tail n][full/tail m]
    for (int64_t tn : {kTn, n - (tiles_n - 1) * kTn})
      for (int64_t tm : {kTm, m - (tiles_m - 1) * kTm}) fns.push_back(kernel(tn, tm));
    for (auto f : fns)
      if (f == nullptr) {
        state.SkipWithError("libxsmm could not JIT a kernel for this shape");
        return;
      }
    for (auto _ : state) {
      PrefillBias(b.data(), m, n, y.data());
      ParallelFor(ctx, tiles_n * tiles_m, 1, [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
          const int64_t tn = t / tiles_m, tm = t % tiles_m;
          const auto f = fns[(tn == tiles_n - 1 ? 2 : 0) + (tm == tiles_m - 1 ? 1 : 0)];
          f(w.data() + tn * kTn, x.data() + tm * kTm * k, y.data() + tm * kTm * n + tn * kTn);
        }
      });
      if (gelu) (void)Gelu(ctx, y.data(), m * n, false, y.data());
      benchmark::DoNotOptimize(y.data());
    }
#else
    state.SkipWithError("built without libxsmm (libxsmm-dev not found at configure time)");
    return;
#endif
  }
  SetFlops(state, 2.0 * m * n * k, 4.0 * (m * k + k * n + m * n));
  state.SetLabel(label);
}

// Every (K, N) the MiniLM-L6 / BERT-base / cross-encoder plans run, at the M of batch × seq
// from 1×32 to 32×256 (and 1: one pooled row), with GELU where the plans fuse it (FFN up);
// and the Qwen2-0.5B-shaped decoder's (bench/generate_bench.py: attention and FFN
// projections, the 8192-wide head), whose decode steps run M 1 and prefills M 128.
void GemmArgs(benchmark::internal::Benchmark* bm) {
  const int64_t kn[][3] = {{384, 384, 0},  {384, 1536, 1}, {1536, 384, 0}, {768, 768, 0},
                           {768, 3072, 1}, {3072, 768, 0}, {896, 896, 0},  {896, 4864, 0},
                           {4864, 896, 0}, {896, 8192, 0}};
  for (int backend = 0; backend < 5; ++backend)
    for (int64_t m : {1, 32, 128, 1024, 8192})
      for (const auto& p : kn) bm->Args({backend, m, p[0], p[1], p[2]});
}
BENCHMARK(BM_Gemm)->Apply(GemmArgs)->ArgNames({"be", "M", "K", "N", "gelu"})->UseRealTime();

}  // namespace
}  // namespace kiln::cpu::bench
