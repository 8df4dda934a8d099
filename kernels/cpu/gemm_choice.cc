// The measured GEMM backend table and its lookup (gemm_choice.h).
#include "kernels/cpu/gemm_choice.h"

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"

namespace kiln::cpu {

std::string_view GemmBackendName(GemmBackend b) {
  switch (b) {
    case GemmBackend::kAuto:
      return "auto";
    case GemmBackend::kOneDnn:
      return "onednn";
    case GemmBackend::kKiln:
      return "kiln";
  }
  return "?";
}

std::span<const GemmRule> MeasuredGemmRules() {
  // From bench/gemm_backends.py, 1 and 2 threads, on the MiniLM/BERT-base Linear shapes
  // (docs/benchmarks.md "GEMM backends"). AVX2: measured under KILN_CPU_ISA=avx2 on a
  // 2-core Zen 4 EPYC, whose AVX2 FMA roof (115 GFLOP/s per core) equals its AVX-512 one.
  // kiln's tile reads X in place without M/K blocking, so it wins while X stays cached
  // against each panel and loses once X streams from memory per panel (M in the thousands).
  // Weights of 4 Mi elements and more (16 MiB: a decoder's FFN and vocabulary head, none
  // of BERT-base's) measured on Zen 5 with the Qwen2-0.5B shapes (K 896 / 4864, N 4864 /
  // 896 / 8192, 2 threads, both ISA paths): oneDNN 1.5-2.0x kiln at M 128, level within the
  // noise at M 1 (memory-bound) — so oneDNN for every M: one packing of the largest weights
  // where a plan runs both (a generation plan's prefill and decode), not one per backend.
  static constexpr int64_t kLargeWeight = int64_t{1} << 22;
  static constexpr GemmRule kRules[] = {
      {Isa::kAvx2, 1, INT64_MAX, GemmBackend::kOneDnn,
       "weights >= 4 Mi elements: oneDNN 1.5-1.7x kiln at M 128, level at M 1", kLargeWeight},
      {Isa::kAvx512, 1, INT64_MAX, GemmBackend::kOneDnn,
       "weights >= 4 Mi elements: oneDNN 1.4-2.0x kiln at M 128, level at M 1", kLargeWeight},
      {Isa::kAvx2, 1, 512, GemmBackend::kKiln,
       "M 1-128: kiln 1.0-2.0x oneDNN gemm:jit at 2 threads, up to 1.9x on the GELU FFN-up"},
      {Isa::kAvx2, 513, INT64_MAX, GemmBackend::kOneDnn,
       "M 1024-8192: oneDNN gemm:jit 1.0-2.5x kiln at 2 threads (kiln has no M/K blocking)"},
      // Zen 5 (full-width AVX-512, 200-227 GFLOP/s per core), two runs: kiln's 8x48 tile
      // 1.0-2.4x brg:avx512_core at M 1 and 1.0-1.3x at M 32 on both thread counts (one
      // cell 0.79), level at M 128 (0.93-1.13x) and M 1024-8192 (0.94-1.10x). Zen 4 agreed
      // at M 1 (1.1-1.5x). End to end (MiniLM/BERT-base b1) the switch measured level within
      // the noise, so oneDNN keeps every M where kiln is not clearly ahead.
      {Isa::kAvx512, 1, 64, GemmBackend::kKiln,
       "M 1-32: kiln 1.0-2.4x oneDNN brg:avx512_core on Zen 5 at 1 and 2 threads"},
      {Isa::kAvx512, 65, INT64_MAX, GemmBackend::kOneDnn,
       "M 128-8192: level on Zen 5 (0.93-1.13x); brgemm keeps them"},
  };
  return kRules;
}

GemmBackend ChooseGemmBackend(std::span<const GemmRule> rules, Isa isa, int64_t m, int64_t weight) {
  for (const GemmRule& r : rules)
    if (r.isa == isa && m >= r.min_m && m <= r.max_m && weight >= r.min_weight) return r.backend;
  return GemmBackend::kOneDnn;
}

absl::StatusOr<GemmBackend> GemmBackendFromEnv() {
  const char* e = std::getenv("KILN_GEMM");
  if (e == nullptr || *e == '\0') return GemmBackend::kAuto;
  const std::string_view s(e);
  if (s == "auto") return GemmBackend::kAuto;
  if (s == "onednn") return GemmBackend::kOneDnn;
  if (s == "kiln") return GemmBackend::kKiln;
  return absl::InvalidArgumentError(absl::StrCat(
      "KILN_GEMM=", std::string(s), " is not a GEMM backend; use auto, onednn or kiln"));
}

GemmBackend ResolveGemmBackend(GemmBackend requested, Isa isa, int64_t m, int64_t weight) {
  if (requested != GemmBackend::kAuto) return requested;
  static const absl::StatusOr<GemmBackend> env = GemmBackendFromEnv();  // read once
  if (env.ok() && *env != GemmBackend::kAuto) return *env;
  return ChooseGemmBackend(MeasuredGemmRules(), isa, m, weight);
}

}  // namespace kiln::cpu
