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
  // From bench/gemm_backends.py on a 2-core Zen 5 (AVX-512 VNNI/BF16; AVX2 path under
  // KILN_CPU_ISA=avx2), 1 and 2 threads, the MiniLM/BERT-base Linear shapes
  // (docs/benchmarks.md "GEMM backends"). kiln's tile reads X in place without M/K blocking,
  // so it wins while a few rows of X stay cached against each panel and loses once X streams
  // from memory per panel (M in the thousands).
  static constexpr GemmRule kRules[] = {
      {Isa::kAvx2, 1, 512, GemmBackend::kKiln,
       "M 1-128: kiln 1.0-2.0x oneDNN gemm:jit (2 threads), up to 1.9x on the GELU FFN-up"},
      {Isa::kAvx2, 513, INT64_MAX, GemmBackend::kOneDnn,
       "M 1024-8192: oneDNN gemm:jit 1.0-2.5x kiln at 2 threads (kiln has no M/K blocking)"},
      {Isa::kAvx512, 1, 1024, GemmBackend::kKiln,
       "M 1-1024: kiln 1.0-1.5x oneDNN brg:avx512_core at 1 thread, level to 1.3x at 2"},
      {Isa::kAvx512, 1025, INT64_MAX, GemmBackend::kOneDnn,
       "M 8192: oneDNN brg:avx512_core 1.0-1.4x kiln (kiln has no M/K blocking)"},
  };
  return kRules;
}

GemmBackend ChooseGemmBackend(std::span<const GemmRule> rules, Isa isa, int64_t m) {
  for (const GemmRule& r : rules)
    if (r.isa == isa && m >= r.min_m && m <= r.max_m) return r.backend;
  return GemmBackend::kOneDnn;
}

absl::StatusOr<GemmBackend> GemmBackendFromEnv() {
  const char* e = std::getenv("KILN_GEMM");
  if (e == nullptr || *e == '\0') return GemmBackend::kAuto;
  const std::string_view s(e);
  if (s == "auto") return GemmBackend::kAuto;
  if (s == "onednn") return GemmBackend::kOneDnn;
  if (s == "kiln") return GemmBackend::kKiln;
  return absl::InvalidArgumentError(
      absl::StrCat("KILN_GEMM=", std::string(s), " is not a GEMM backend; use auto, onednn or kiln"));
}

GemmBackend ResolveGemmBackend(GemmBackend requested, Isa isa, int64_t m) {
  if (requested != GemmBackend::kAuto) return requested;
  static const absl::StatusOr<GemmBackend> env = GemmBackendFromEnv();  // read once
  if (env.ok() && *env != GemmBackend::kAuto) return *env;
  return ChooseGemmBackend(MeasuredGemmRules(), isa, m);
}

}  // namespace kiln::cpu
