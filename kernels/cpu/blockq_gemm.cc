// BlockQuantGemm (blockq_gemm.h): weight packing and the parallel tile loop over the
// per-ISA register tile (blockq_impl.inc).
#include "kernels/cpu/blockq_gemm.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/isa_kernels.h"

namespace kiln::cpu {
namespace {

// Rows of X per row block: 384 KiB of f32, as PanelGemm, so a block stays in L2 while every
// panel streams past it.
constexpr int64_t kXBlockBytes = 384 * 1024;

template <typename T>
T* Alloc(int64_t n) {
  const size_t bytes = (static_cast<size_t>(n) * sizeof(T) + 63) / 64 * 64;
  return static_cast<T*>(std::aligned_alloc(64, std::max<size_t>(bytes, 64)));
}

}  // namespace

void BlockQuantGemm::Free::operator()(void* p) const { std::free(p); }
BlockQuantGemm::~BlockQuantGemm() = default;

absl::StatusOr<std::unique_ptr<BlockQuantGemm>> BlockQuantGemm::Pack(
    Isa isa, int64_t k, int64_t n, int64_t block, const uint8_t* codes, const float* scales,
    const uint8_t* zero_points, const float* bias, CodeLayout layout,
    const float* float_zero_points) {
  if (k <= 0 || n <= 0)
    return absl::InvalidArgumentError(
        absl::StrCat("BlockQuantGemm needs K > 0 and N > 0, got K=", k, " N=", n));
  if (block < 16 || (block & (block - 1)) != 0)
    return absl::InvalidArgumentError(
        absl::StrCat("BlockQuantGemm block size ", block, " is not a power of two >= 16"));
  if (codes == nullptr || scales == nullptr)
    return absl::InvalidArgumentError("BlockQuantGemm codes or scales pointer is null");
  if (zero_points != nullptr && float_zero_points != nullptr)
    return absl::InvalidArgumentError("BlockQuantGemm got both integer and float zero points");
  const bool two = layout == CodeLayout::kTwoPerByte;
  const int bits = layout == CodeLayout::kEightBit ? 8 : 4;
  const int64_t row_bytes = two ? (k + 1) / 2 : k;
  auto code = [&](int64_t j, int64_t i) -> uint8_t {
    return two ? static_cast<uint8_t>((codes[j * row_bytes + i / 2] >> (4 * (i & 1))) & 15)
               : codes[j * k + i];
  };
  // 4-bit codes and zero points held one per byte must fit their nibble (8-bit ones
  // always fit their byte).
  for (int64_t i = 0; bits == 4 && !two && i < n * k; ++i)
    if (codes[i] > 15)
      return absl::InvalidArgumentError(absl::StrCat("BlockQuantGemm code [", i / k, ", ", i % k,
                                                     "] is ", int{codes[i]}, ", not 4-bit"));
  const int64_t kb = (k + block - 1) / block;
  for (int64_t i = 0; bits == 4 && zero_points != nullptr && i < n * kb; ++i)
    if (zero_points[i] > 15)
      return absl::InvalidArgumentError(absl::StrCat("BlockQuantGemm zero point [", i / kb, ", ",
                                                     i % kb, "] is ", int{zero_points[i]},
                                                     ", not 4-bit"));
  CpuContext probe;
  probe.isa = isa;
  std::unique_ptr<BlockQuantGemm> g(new BlockQuantGemm);
  g->isa_ = probe.ResolvedIsa();
  g->kernels_ = &internal::KernelsFor(probe);
  const int64_t w = g->kernels_->vector_width, nr = 2 * w;
  g->k_ = k;
  g->n_ = n;
  g->block_ = block;
  g->blocks_ = (k + block - 1) / block;
  g->panels_ = (n + nr - 1) / nr;
  g->bits_ = bits;
  const int64_t row = g->row_bytes_ = bits == 8 ? nr : w;  // a panel row's code bytes
  const int64_t per_panel = g->blocks_ * nr;
  g->codes_.reset(Alloc<uint8_t>(g->panels_ * k * row));
  g->scale_.reset(Alloc<float>(g->panels_ * per_panel));
  if (zero_points != nullptr) g->zero_.reset(Alloc<uint8_t>(g->panels_ * g->blocks_ * row));
  if (float_zero_points != nullptr) g->fzero_.reset(Alloc<float>(g->panels_ * per_panel));
  if (bias != nullptr) g->bias_.reset(Alloc<float>(g->panels_ * nr));
  if (!g->codes_ || !g->scale_ || (zero_points != nullptr && !g->zero_) ||
      (float_zero_points != nullptr && !g->fzero_) || (bias != nullptr && !g->bias_))
    return absl::ResourceExhaustedError("BlockQuantGemm: out of memory packing weights");
  // Columns past N: code 0, zero 0, scale 0, so their weights are 0.
  std::memset(g->codes_.get(), 0, static_cast<size_t>(g->panels_ * k * row));
  std::fill_n(g->scale_.get(), g->panels_ * per_panel, 0.0f);
  if (g->fzero_) std::fill_n(g->fzero_.get(), g->panels_ * per_panel, 0.0f);
  if (g->zero_) std::memset(g->zero_.get(), 0, static_cast<size_t>(g->panels_ * g->blocks_ * row));
  for (int64_t j = 0; j < n; ++j) {
    // Column jj of a panel: 4 bits, byte jj % W of each row, low nibble for jj < W; 8 bits,
    // byte jj.
    const int64_t pn = j / nr, jj = j % nr;
    const int64_t byte = bits == 8 ? jj : jj % w, shift = bits == 8 || jj < w ? 0 : 4;
    uint8_t* panel = g->codes_.get() + pn * k * row;
    for (int64_t i = 0; i < k; ++i)
      panel[i * row + byte] |= static_cast<uint8_t>(code(j, i) << shift);
    float* sp = g->scale_.get() + pn * per_panel;
    for (int64_t b = 0; b < g->blocks_; ++b) sp[b * nr + jj] = scales[j * g->blocks_ + b];
    if (g->fzero_) {
      float* zf = g->fzero_.get() + pn * per_panel;
      for (int64_t b = 0; b < g->blocks_; ++b)
        zf[b * nr + jj] = float_zero_points[j * g->blocks_ + b];
    }
    if (g->zero_) {
      uint8_t* zp = g->zero_.get() + pn * g->blocks_ * row;
      for (int64_t b = 0; b < g->blocks_; ++b)
        zp[b * row + byte] |= static_cast<uint8_t>(zero_points[j * g->blocks_ + b] << shift);
    }
  }
  if (bias != nullptr) {
    std::fill_n(g->bias_.get(), g->panels_ * nr, 0.0f);
    std::memcpy(g->bias_.get(), bias, static_cast<size_t>(n) * sizeof(float));
  }
  return g;
}

std::string BlockQuantGemm::ImplName() const {
  return absl::StrCat("kiln:", std::string(IsaName(isa_)), ":", kernels_->blockq_mr, "x",
                      2 * kernels_->vector_width, bits_ == 8 ? ":8bit" : "");
}

int64_t BlockQuantGemm::packed_bytes() const {
  const int64_t nr = 2 * kernels_->vector_width;
  return panels_ * (k_ * row_bytes_ + blocks_ * nr * int64_t{sizeof(float)} +
                    (zero_ ? blocks_ * row_bytes_ : 0) +
                    (fzero_ ? blocks_ * nr * int64_t{sizeof(float)} : 0) +
                    (bias_ ? nr * int64_t{sizeof(float)} : 0));
}

absl::Status BlockQuantGemm::Run(const CpuContext& ctx, const float* x, int64_t m, float* y,
                                 int activation) const {
  if (m < 0) return absl::InvalidArgumentError(absl::StrCat("BlockQuantGemm got M=", m));
  if (m == 0) return absl::OkStatus();
  if (x == nullptr || y == nullptr)
    return absl::InvalidArgumentError("BlockQuantGemm input or output pointer is null");
  if (activation < 0 || activation > 4)
    return absl::InvalidArgumentError(absl::StrCat("BlockQuantGemm activation ", activation));
  const internal::IsaKernels& kt = *kernels_;
  // More than two tiles of rows: each panel dequantized once per row block into an f32
  // scratch panel; else the tile reads the codes, with each row's block sums.
  const bool dequantize = m > 2 * kt.blockq_mr;
  const int64_t w = kt.vector_width, nr = 2 * w;
  const int64_t mr = dequantize ? kt.blockq_mr : kt.blockq_codes_mr;
  const int64_t per_panel = blocks_ * nr;
  // The calling thread's block sums [m][blocks_], read by the workers through `sums` (a
  // thread_local named inside the lambda would be each worker's own, empty one).
  thread_local std::vector<float> xsum;
  if (!dequantize) {
    xsum.assign(static_cast<size_t>(m * blocks_), 0.0f);
    for (int64_t r = 0; r < m; ++r)
      for (int64_t i = 0; i < k_; ++i) xsum[r * blocks_ + i / block_] += x[r * k_ + i];
  }
  const float* sums = xsum.data();
  // Equal row blocks that fit in L2 next to the panel being read (M = 128, K = 896 as
  // blocks of 104 + 24 rows left one thread a fifth of the work).
  const int64_t block_rows =
      GemmBlockRows(m, kXBlockBytes / (k_ * int64_t{sizeof(float)}), mr, panels_, ctx.threads());
  const int64_t row_blocks = (m + block_rows - 1) / block_rows;
  const int64_t items = row_blocks * panels_;  // block-major: item = block · panels + panel
  // Split only when each thread gets >= ~0.5 M multiply-adds (a fork/join costs a few µs).
  const double item_macs = static_cast<double>(std::min(m, block_rows)) * nr * k_;
  const int64_t min_chunk = std::max<int64_t>(1, static_cast<int64_t>(5e5 / item_macs));
  ParallelFor(ctx, items, min_chunk, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> panel;
    if (dequantize && panel.size() < static_cast<size_t>(k_ * nr)) panel.resize(k_ * nr);
    internal::BlockQuantTile t;
    t.lda = k_;
    t.ldc = n_;
    t.k = k_;
    t.block = block_;
    t.ldxs = blocks_;
    t.bits = bits_;
    for (int64_t it = begin; it < end; ++it) {
      const int64_t blk = it / panels_, pn = it % panels_;
      const int64_t j0 = pn * nr;
      t.b = codes_.get() + pn * k_ * row_bytes_;
      t.scale = scale_.get() + pn * per_panel;
      t.zero = zero_ ? zero_.get() + pn * blocks_ * row_bytes_ : nullptr;
      t.fzero = fzero_ ? fzero_.get() + pn * per_panel : nullptr;
      t.bias = bias_ ? bias_.get() + j0 : nullptr;
      t.nr = static_cast<int>(std::min<int64_t>(nr, n_ - j0));
      t.dequantized = nullptr;
      if (dequantize) {
        kt.blockq_dequantize(t, panel.data());
        t.dequantized = panel.data();
      }
      const int64_t r_end = std::min(m, (blk + 1) * block_rows);
      for (int64_t r = blk * block_rows; r < r_end; r += mr) {
        t.mr = static_cast<int>(std::min<int64_t>(mr, r_end - r));
        t.a = x + r * k_;
        t.xsum = dequantize ? nullptr : sums + r * blocks_;
        t.c = y + r * n_ + j0;
        kt.blockq_tile(t);
        if (activation != 0)
          for (int i = 0; i < t.mr; ++i) kt.activate_row(t.c + i * n_, t.nr, activation);
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace kiln::cpu
