// QuantGemm (qgemm.h): weight packing, the row quantization pass and the parallel tile loop
// over the per-ISA inner loops (qgemm_internal.h).
#include "kernels/cpu/qgemm.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/isa_kernels.h"
#include "kernels/cpu/qgemm_internal.h"
#include "kiln/ir/ops.h"

namespace kiln::cpu {
namespace {

// Quantized rows of X per row block: 256 KiB, so a block stays in L2 (1 MiB on Zen 4/5)
// beside the weight panel streaming through it (k4 · nr bytes: 144 KiB for K = 3072 on
// AVX-512), as PanelGemm's 384 KiB of fp32 rows.
constexpr int64_t kXBlockBytes = 256 * 1024;

template <typename T>
T* Alloc(int64_t n) {
  const size_t bytes = (static_cast<size_t>(n) * sizeof(T) + 63) / 64 * 64;
  return static_cast<T*>(std::aligned_alloc(64, std::max<size_t>(bytes, 64)));
}

const internal::QuantKernels& TableFor(Isa isa) {
  if (HasAvx512Vnni(isa)) return internal::QuantKernelsAvx512Vnni();
  if (isa == Isa::kAvx512 || isa == Isa::kAvx2) return internal::QuantKernelsAvx2();
  return internal::QuantKernelsScalar();
}

// The calling thread's scratch for one call's quantized rows and their scales (a caller runs
// one GEMM at a time; the workers of its parallel regions read it).
struct Scratch {
  std::vector<uint8_t> rows;
  std::vector<float> scales;
};

}  // namespace

void QuantGemm::Free::operator()(void* p) const { std::free(p); }
QuantGemm::~QuantGemm() = default;

absl::StatusOr<std::unique_ptr<QuantGemm>> QuantGemm::Pack(Isa isa, int64_t k, int64_t n,
                                                           const int8_t* w, const float* w_scale,
                                                           const float* bias, const float* x_mul,
                                                           float x_absmax) {
  if (k <= 0 || n <= 0)
    return absl::InvalidArgumentError(
        absl::StrCat("QuantGemm needs K > 0 and N > 0, got K=", k, " N=", n));
  if (w == nullptr || w_scale == nullptr)
    return absl::InvalidArgumentError("QuantGemm weights or scales pointer is null");
  if (k > kQuantLinearMaxK)
    return absl::InvalidArgumentError(
        absl::StrCat("QuantGemm K=", k, " is above ", kQuantLinearMaxK, " (its int32 sums)"));
  // -128 has no negation in s8: the AVX2 tile's sign trick (vpsignb) would get it wrong.
  for (int64_t i = 0; i < n * k; ++i)
    if (w[i] == -128)
      return absl::InvalidArgumentError(
          absl::StrCat("QuantGemm weight [", i / k, ", ", i % k,
                       "] is -128: int8 weights are symmetric, in [-127, 127]"));
  if (!(x_absmax >= 0.0f) || !std::isfinite(x_absmax))
    return absl::InvalidArgumentError(
        absl::StrCat("QuantGemm static range ", x_absmax, " is not a finite value >= 0"));
  CpuContext probe;
  probe.isa = isa;
  std::unique_ptr<QuantGemm> g(new QuantGemm);
  g->isa_ = probe.ResolvedIsa();
  g->kernels_ = &TableFor(g->isa_);
  const internal::QuantKernels& kt = *g->kernels_;
  const int64_t nr = kt.nr;
  g->k_ = k;
  g->k4_ = (k + 3) / 4 * 4;
  g->n_ = n;
  g->x_absmax_ = x_absmax;
  g->panels_ = (n + nr - 1) / nr;
  const int64_t cols = g->panels_ * nr;
  g->packed_.reset(Alloc<int8_t>(cols * g->k4_));
  g->w_scale_.reset(Alloc<float>(cols));
  if (!g->packed_ || !g->w_scale_)
    return absl::ResourceExhaustedError("QuantGemm: out of memory packing weights");
  int8_t* dst = g->packed_.get();
  std::memset(dst, 0, static_cast<size_t>(cols * g->k4_));
  for (int64_t j = 0; j < n; ++j) {
    const int64_t pn = j / nr, jj = j % nr;
    int8_t* panel = dst + pn * g->k4_ * nr;
    for (int64_t i = 0; i < k; ++i) panel[(i / 4) * nr * 4 + jj * 4 + i % 4] = w[j * k + i];
  }
  std::fill_n(g->w_scale_.get(), cols, 0.0f);
  std::memcpy(g->w_scale_.get(), w_scale, static_cast<size_t>(n) * sizeof(float));
  if (kt.u8_rows) {
    g->comp_.reset(Alloc<int32_t>(cols));
    if (!g->comp_) return absl::ResourceExhaustedError("QuantGemm: out of memory packing weights");
    std::fill_n(g->comp_.get(), cols, 0);
    for (int64_t j = 0; j < n; ++j) {
      int32_t s = 0;
      for (int64_t i = 0; i < k; ++i) s += w[j * k + i];
      g->comp_.get()[j] = 128 * s;
    }
  }
  if (x_mul != nullptr) {
    g->x_mul_.reset(Alloc<float>(k));
    if (!g->x_mul_) return absl::ResourceExhaustedError("QuantGemm: out of memory packing x_mul");
    std::memcpy(g->x_mul_.get(), x_mul, static_cast<size_t>(k) * sizeof(float));
  }
  if (bias != nullptr) {
    g->bias_.reset(Alloc<float>(cols));
    if (!g->bias_) return absl::ResourceExhaustedError("QuantGemm: out of memory packing bias");
    std::fill_n(g->bias_.get(), cols, 0.0f);
    std::memcpy(g->bias_.get(), bias, static_cast<size_t>(n) * sizeof(float));
  }
  return g;
}

std::string QuantGemm::ImplName() const {
  return absl::StrCat("kiln:", kernels_->name, ":", kernels_->mr, "x", kernels_->nr);
}

int64_t QuantGemm::packed_bytes() const {
  const int64_t cols = panels_ * kernels_->nr;
  return cols * k4_ + cols * int64_t{sizeof(float)} * (bias_ ? 2 : 1) +
         (comp_ ? cols * int64_t{sizeof(int32_t)} : 0);
}

absl::Status QuantGemm::Run(const CpuContext& ctx, const float* x, int64_t m, float* y,
                            int activation) const {
  if (m < 0) return absl::InvalidArgumentError(absl::StrCat("QuantGemm got M=", m));
  if (m == 0) return absl::OkStatus();
  if (x == nullptr || y == nullptr)
    return absl::InvalidArgumentError("QuantGemm input or output pointer is null");
  if (activation < 0 || activation > 4)
    return absl::InvalidArgumentError(absl::StrCat("QuantGemm activation ", activation));
  const internal::QuantKernels& kt = *kernels_;
  // The activation runs on each finished tile while it is in L1, on the fp32 path's
  // vector code for the ISA this table belongs to.
  CpuContext act_ctx = ctx;
  act_ctx.isa = isa_;
  const internal::IsaKernels& fk = internal::KernelsFor(act_ctx);
  thread_local Scratch scratch;
  if (scratch.rows.size() < static_cast<size_t>(m * k4_)) scratch.rows.resize(m * k4_);
  if (scratch.scales.size() < static_cast<size_t>(m)) scratch.scales.resize(m);
  uint8_t* q = scratch.rows.data();
  float* sx = scratch.scales.data();
  ParallelFor(ctx, m, std::max<int64_t>(1, 16384 / k_), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      sx[r] = kt.quantize_row(x + r * k_, x_mul_.get(), k_, k4_, x_absmax_, q + r * k4_);
  });

  const int mr = kt.mr, nr = kt.nr;
  // Equal row blocks that fit kXBlockBytes (with unequal ones, M = 1024, K = 768 ran 2
  // threads at 1.5x one).
  const int64_t block_rows = GemmBlockRows(m, kXBlockBytes / k4_, mr, panels_, ctx.threads());
  const int64_t blocks = (m + block_rows - 1) / block_rows;
  const int64_t items = blocks * panels_;  // block-major, as PanelGemm
  // Split only when each thread gets ≥ ~0.5 M multiply-adds (a fork/join costs ~1 µs; 4 M
  // kept batch-1 GEMMs on one thread: 172-200 GOP/s at M = 1 on 1 or 2 threads).
  const double item_macs = static_cast<double>(std::min(m, block_rows)) * nr * k4_;
  const int64_t min_chunk = std::max<int64_t>(1, static_cast<int64_t>(5e5 / item_macs));
  ParallelFor(ctx, items, min_chunk, [&](int64_t begin, int64_t end) {
    internal::QuantTile t;
    t.lda = k4_;
    t.ldc = n_;
    t.k4 = k4_;
    for (int64_t it = begin; it < end; ++it) {
      const int64_t blk = it / panels_, pn = it % panels_;
      const int64_t j0 = pn * nr;
      t.b = packed_.get() + pn * k4_ * nr;
      t.comp = comp_ ? comp_.get() + j0 : nullptr;
      t.w_scale = w_scale_.get() + j0;
      t.bias = bias_ ? bias_.get() + j0 : nullptr;
      t.nr = static_cast<int>(std::min<int64_t>(nr, n_ - j0));
      const int64_t r_end = std::min(m, (blk + 1) * block_rows);
      for (int64_t r = blk * block_rows; r < r_end; r += mr) {
        t.mr = static_cast<int>(std::min<int64_t>(mr, r_end - r));
        t.a = q + r * k4_;
        t.a_scale = sx + r;
        t.c = y + r * n_ + j0;
        kt.tile(t);
        if (activation != 0)
          for (int i = 0; i < t.mr; ++i) fk.activate_row(t.c + i * n_, t.nr, activation);
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace kiln::cpu
