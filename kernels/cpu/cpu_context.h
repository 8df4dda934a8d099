// The execution context every CPU kernel takes: how many threads to use and which
// instruction set to run. Kernels know nothing of the IR; this is their only state.
// Threads: oneDNN's Debian build uses the OpenMP runtime (DNNL_CPU_RUNTIME_OMP), so kiln's
// own kernels parallelize with OpenMP too — one thread pool, no oversubscription.
// Limits: ParallelFor splits statically into contiguous ranges (the kernels' work items are
// uniform); nested calls from inside a parallel region run serially.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

#include "absl/status/statusor.h"

namespace kiln::cpu {

// Instruction-set paths of the hand-written kernels. kAuto picks the best the CPU has.
enum class Isa { kAuto, kScalar, kAvx2, kAvx512 };

std::string_view IsaName(Isa isa);

// The best path this CPU supports (AVX-512 F/BW/VL/DQ, else AVX2+FMA, else scalar),
// capped by KILN_CPU_ISA when it is set: KILN_CPU_ISA=avx2 on an AVX-512 machine runs
// every kernel — kiln's own, and oneDNN's (matmul.cc caps its ISA to match) — as an
// AVX2-only machine would, for developing and testing that path.
Isa DetectIsa();

// KILN_CPU_ISA parsed: kAuto when unset, empty or "auto"; InvalidArgument for a value that
// is not auto, avx512, avx2 or scalar (DetectIsa then ignores it; Executor::Create fails).
absl::StatusOr<Isa> IsaCapFromEnv();

// True when this CPU can run `isa` (kAuto and kScalar always can).
bool IsaSupported(Isa isa);

// AVX-512 extensions of the int8 and bf16 GEMMs (qgemm.h, matmul.h): true when this CPU has
// them and `isa` (a resolved path) is AVX-512, so KILN_CPU_ISA=avx2 turns them off too.
bool HasAvx512Vnni(Isa isa);
bool HasAvx512Bf16(Isa isa);

// Number of hardware threads available to this process (at least 1).
int DefaultNumThreads();

// The most threads an executor accepts: far above any core count kiln targets, and low
// enough that per-worker scratch and OpenMP team sizes stay sane (libgomp crashes creating
// teams of ~1e5 threads).
inline constexpr int kMaxThreads = 1024;

struct CpuContext {
  int num_threads = DefaultNumThreads();  // the executor's --threads N
  Isa isa = Isa::kAuto;                   // tests force a path; kAuto resolves at call time

  // `isa` with kAuto replaced by DetectIsa(), and a path this CPU cannot run downgraded
  // to the best one it can (so a forced path never executes an illegal instruction).
  Isa ResolvedIsa() const;
  int threads() const { return num_threads < 1 ? 1 : num_threads; }
};

// Runs fn(begin, end) over [0, n) split into at most ctx.threads() contiguous ranges of
// at least `min_chunk` items, on the OpenMP pool. Serial when one range suffices.
void ParallelFor(const CpuContext& ctx, int64_t n, int64_t min_chunk,
                 const std::function<void(int64_t, int64_t)>& fn);

// Rows of M for a GEMM's (row block, panel) work items, split block-major by ParallelFor:
// blocks of at most about `fit_rows` rows (what stays in L2 beside a panel), as many as a
// multiple of the threads once there are several (at least the threads when there are
// fewer panels than threads), of equal size in multiples of the tile's `mr` rows. Equal
// blocks matter: the items split contiguously, so each thread gets whole blocks and the
// same rows (blocks of 336 + 336 + 336 + 16 rows at M = 1024 gave one thread 672 rows and
// the other 352). Returns the block's rows; the count is ceil(m / rows).
int64_t GemmBlockRows(int64_t m, int64_t fit_rows, int64_t mr, int64_t panels, int threads);

// As ParallelFor, and tells fn which worker (0 .. ctx.threads()-1) runs the range, for
// per-worker scratch buffers owned by the caller.
void ParallelForWorkers(const CpuContext& ctx, int64_t n, int64_t min_chunk,
                        const std::function<void(int64_t, int64_t, int)>& fn);

// Sets OpenMP's thread count for the calling thread for its lifetime and restores it after;
// oneDNN (OMP runtime) reads it when it creates and executes primitives.
class ScopedOmpThreads {
 public:
  explicit ScopedOmpThreads(int n);
  ~ScopedOmpThreads();
  ScopedOmpThreads(const ScopedOmpThreads&) = delete;
  ScopedOmpThreads& operator=(const ScopedOmpThreads&) = delete;

 private:
  int saved_;
};

}  // namespace kiln::cpu
