// PanelGemm (panel_gemm.h): weight packing and the parallel tile loop over gemm_impl.inc.
#include "kernels/cpu/panel_gemm.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "kernels/cpu/isa_kernels.h"

namespace kiln::cpu {
namespace {

// X rows per row block: 384 KiB, well inside the 1 MiB L2 of Zen 4/5 and leaving room for a
// weight panel (K·NR floats, 72-576 KiB for K = 768-3072) to stream through L2.
constexpr int64_t kXBlockBytes = 384 * 1024;

const internal::IsaKernels& TableFor(Isa isa) {
  switch (isa) {
    case Isa::kAvx512:
      return internal::Avx512Kernels();
    case Isa::kAvx2:
      return internal::Avx2Kernels();
    default:
      return internal::ScalarKernels();
  }
}

float* AllocFloats(int64_t n) {
  const size_t bytes = (static_cast<size_t>(n) * sizeof(float) + 63) / 64 * 64;
  return static_cast<float*>(std::aligned_alloc(64, std::max<size_t>(bytes, 64)));
}

}  // namespace

void PanelGemm::Free::operator()(float* p) const { std::free(p); }
PanelGemm::~PanelGemm() = default;

int PanelGemm::tile_m() const { return kernels_->gemm_mr; }
int PanelGemm::tile_n() const { return kernels_->gemm_nr; }
int64_t PanelGemm::packed_bytes() const {
  return panels_ * kernels_->gemm_nr * (k_ + (bias_ ? 1 : 0)) * int64_t{sizeof(float)};
}

absl::StatusOr<std::unique_ptr<PanelGemm>> PanelGemm::Pack(Isa isa, int64_t k, int64_t n,
                                                           bool trans_w, const float* w,
                                                           const float* bias) {
  if (k <= 0 || n <= 0)
    return absl::InvalidArgumentError(
        absl::StrCat("PanelGemm needs K > 0 and N > 0, got K=", k, " N=", n));
  if (w == nullptr) return absl::InvalidArgumentError("PanelGemm weights pointer is null");
  CpuContext probe;
  probe.isa = isa;
  std::unique_ptr<PanelGemm> g(new PanelGemm);
  g->isa_ = probe.ResolvedIsa();
  g->kernels_ = &TableFor(g->isa_);
  g->k_ = k;
  g->n_ = n;
  const int64_t nr = g->kernels_->gemm_nr;
  g->panels_ = (n + nr - 1) / nr;
  g->packed_.reset(AllocFloats(g->panels_ * k * nr));
  if (!g->packed_) return absl::ResourceExhaustedError("PanelGemm: out of memory packing weights");
  float* dst = g->packed_.get();
  for (int64_t pn = 0; pn < g->panels_; ++pn) {
    const int64_t j0 = pn * nr, cols = std::min(nr, n - j0);
    for (int64_t p = 0; p < k; ++p, dst += nr) {
      if (trans_w) {
        for (int64_t j = 0; j < cols; ++j) dst[j] = w[(j0 + j) * k + p];
      } else {
        std::memcpy(dst, w + p * n + j0, static_cast<size_t>(cols) * sizeof(float));
      }
      for (int64_t j = cols; j < nr; ++j) dst[j] = 0.0f;
    }
  }
  if (bias != nullptr) {
    g->bias_.reset(AllocFloats(g->panels_ * nr));
    if (!g->bias_) return absl::ResourceExhaustedError("PanelGemm: out of memory packing bias");
    std::fill_n(g->bias_.get(), g->panels_ * nr, 0.0f);
    std::memcpy(g->bias_.get(), bias, static_cast<size_t>(n) * sizeof(float));
  }
  return g;
}

absl::Status PanelGemm::Run(const CpuContext& ctx, const float* x, int64_t m, float* y,
                            int activation, const float* residual) const {
  if (m < 0) return absl::InvalidArgumentError(absl::StrCat("PanelGemm got M=", m));
  if (m == 0) return absl::OkStatus();
  if (x == nullptr || y == nullptr)
    return absl::InvalidArgumentError("PanelGemm input or output pointer is null");
  if (activation < 0 || activation > 4)
    return absl::InvalidArgumentError(absl::StrCat("PanelGemm activation ", activation));
  const internal::IsaKernels& kt = *kernels_;
  const int mr = kt.gemm_mr, nr = kt.gemm_nr;
  // Row blocks whose rows of X fit in L2 (kXBlockBytes) next to the panel being read: a
  // block is multiplied by every panel before the next block is touched, so X comes from
  // memory once and the weights from L3 once per block. Without blocking (every panel over
  // all of M) X streamed from memory once per panel and M = 8192 ran at half speed.
  // With fewer panels than threads, blocks also shrink so that M splits over the threads.
  const int64_t fit_rows = std::max<int64_t>(mr, kXBlockBytes / (k_ * int64_t{sizeof(float)}));
  int64_t block_rows = std::max<int64_t>(mr, fit_rows / mr * mr);
  if (panels_ < ctx.threads()) {
    const int64_t per_thread = (m + ctx.threads() - 1) / ctx.threads();
    block_rows = std::min(block_rows, std::max<int64_t>(mr, (per_thread + mr - 1) / mr * mr));
  }
  const int64_t blocks = (m + block_rows - 1) / block_rows;
  const int64_t items = blocks * panels_;  // block-major: item = block · panels + panel
  // A fork/join costs a few µs: only split when each thread gets ≥ ~1 MFLOP.
  const double item_flops = 2.0 * static_cast<double>(std::min(m, block_rows)) * nr * k_;
  const int64_t min_chunk = std::max<int64_t>(1, static_cast<int64_t>(1e6 / item_flops));
  ParallelFor(ctx, items, min_chunk, [&](int64_t begin, int64_t end) {
    internal::GemmTile t;
    t.lda = k_;
    t.ldc = n_;
    t.ldr = n_;
    t.k = k_;
    t.activation = activation;
    for (int64_t it = begin; it < end; ++it) {
      const int64_t blk = it / panels_, pn = it % panels_;
      const int64_t j0 = pn * nr;
      t.b = packed_.get() + pn * k_ * nr;
      t.bias = bias_ ? bias_.get() + j0 : nullptr;
      t.nr = static_cast<int>(std::min<int64_t>(nr, n_ - j0));
      const int64_t r_end = std::min(m, (blk + 1) * block_rows);
      // The first row tile over a panel reads it from L3 or memory, the later ones from
      // L1/L2; that tile also pulls the panel of this thread's next item into L2, so the
      // next first tile does not wait on it either.
      const float* next = it + 1 < end ? packed_.get() + ((it + 1) % panels_) * k_ * nr : nullptr;
      for (int64_t r = blk * block_rows; r < r_end; r += mr) {
        t.mr = static_cast<int>(std::min<int64_t>(mr, r_end - r));
        t.a = x + r * k_;
        t.c = y + r * n_ + j0;
        t.residual = residual ? residual + r * n_ + j0 : nullptr;
        t.prefetch = r == blk * block_rows ? next : nullptr;
        kt.gemm_tile(t);
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace kiln::cpu
