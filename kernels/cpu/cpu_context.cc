// CPU feature detection and the OpenMP-backed ParallelFor (see cpu_context.h).
#include "kernels/cpu/cpu_context.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"

namespace kiln::cpu {

std::string_view IsaName(Isa isa) {
  switch (isa) {
    case Isa::kAuto:
      return "auto";
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
  }
  return "?";
}

namespace {

bool HardwareSupports(Isa isa) {
  switch (isa) {
    case Isa::kAuto:
    case Isa::kScalar:
      return true;
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case Isa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  }
  return false;
}

}  // namespace

// Under KILN_CPU_ISA=avx2 the AVX-512 path counts as unsupported, so that tests forcing it
// skip exactly as they do on an AVX2-only machine.
bool IsaSupported(Isa isa) {
  if (!HardwareSupports(isa)) return false;
  static const Isa cap = [] {
    const absl::StatusOr<Isa> c = IsaCapFromEnv();
    return c.ok() ? *c : Isa::kAuto;
  }();
  // The enum is ordered scalar < avx2 < avx512 after kAuto.
  return cap == Isa::kAuto || isa <= cap;
}

absl::StatusOr<Isa> IsaCapFromEnv() {
  const char* e = std::getenv("KILN_CPU_ISA");
  if (e == nullptr) return Isa::kAuto;
  const std::string_view s(e);
  if (s.empty() || s == "auto") return Isa::kAuto;
  if (s == "avx512") return Isa::kAvx512;
  if (s == "avx2") return Isa::kAvx2;
  if (s == "scalar") return Isa::kScalar;
  return absl::InvalidArgumentError(
      absl::StrCat("KILN_CPU_ISA=", std::string(s),
                   " is not an instruction set; use auto, avx512, avx2 or scalar"));
}

Isa DetectIsa() {
  static const Isa best = IsaSupported(Isa::kAvx512) ? Isa::kAvx512
                          : IsaSupported(Isa::kAvx2) ? Isa::kAvx2
                                                     : Isa::kScalar;
  return best;
}

bool HasAvx512Vnni(Isa isa) {
  return isa == Isa::kAvx512 && IsaSupported(Isa::kAvx512) && __builtin_cpu_supports("avx512vnni");
}

bool HasAvx512Bf16(Isa isa) {
  return isa == Isa::kAvx512 && IsaSupported(Isa::kAvx512) && __builtin_cpu_supports("avx512bf16");
}

int DefaultNumThreads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

Isa CpuContext::ResolvedIsa() const {
  if (isa == Isa::kAuto) return DetectIsa();
  if (IsaSupported(isa)) return isa;
  return IsaSupported(Isa::kAvx2) && isa == Isa::kAvx512 ? Isa::kAvx2 : Isa::kScalar;
}

void ParallelForWorkers(const CpuContext& ctx, int64_t n, int64_t min_chunk,
                        const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  min_chunk = std::max<int64_t>(min_chunk, 1);
  const int64_t parts = std::min<int64_t>(ctx.threads(), (n + min_chunk - 1) / min_chunk);
  if (parts <= 1 || omp_in_parallel()) {
    fn(0, n, 0);
    return;
  }
#pragma omp parallel num_threads(static_cast <int>(parts))
  {
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t begin = n * t / nt, end = n * (t + 1) / nt;
    if (begin < end) fn(begin, end, static_cast<int>(t));
  }
}

int64_t GemmBlockRows(int64_t m, int64_t fit_rows, int64_t mr, int64_t panels, int threads) {
  fit_rows = std::max(mr, fit_rows);
  int64_t blocks = (m + fit_rows - 1) / fit_rows;
  if (blocks > 1) blocks = (blocks + threads - 1) / threads * threads;
  if (panels < threads) blocks = std::max<int64_t>(blocks, threads);
  const int64_t rows = (m + blocks - 1) / blocks;
  return std::max(mr, (rows + mr - 1) / mr * mr);
}

void ParallelFor(const CpuContext& ctx, int64_t n, int64_t min_chunk,
                 const std::function<void(int64_t, int64_t)>& fn) {
  ParallelForWorkers(ctx, n, min_chunk, [&](int64_t b, int64_t e, int) { fn(b, e); });
}

ScopedOmpThreads::ScopedOmpThreads(int n) : saved_(omp_get_max_threads()) {
  omp_set_num_threads(std::max(n, 1));
}
ScopedOmpThreads::~ScopedOmpThreads() { omp_set_num_threads(saved_); }

}  // namespace kiln::cpu
