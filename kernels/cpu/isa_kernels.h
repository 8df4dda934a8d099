// Internal: the per-instruction-set inner loops behind the public CPU kernels (layer_norm.h,
// softmax.h, activation.h, attention.h, pool.h). One body (isa_impl.inc) is compiled three
// times — AVX-512, AVX2+FMA and portable scalar — and the public kernels pick a table at
// run time from CpuContext::ResolvedIsa(), so tests can force every path.
// Limits: rows are dense; pointers may alias only where a comment says so.
#pragma once

#include <cstdint>

#include "kernels/cpu/activation.h"
#include "kernels/cpu/cpu_context.h"

namespace kiln::cpu::internal {

// The most query rows the attention row kernel computes at once (register blocking).
constexpr int kAttentionRowBlock = 8;

// One block of query rows of one (batch, head) of multi-head attention.
struct AttentionRows {
  const float* q = nullptr;  // query row i at q + i * ldq
  int64_t ldq = 0;
  const float* kt = nullptr;  // Kᵀ packed [d, sp], columns s..sp-1 zero
  int64_t sp = 0;             // padded key count (a multiple of the vector width)
  const float* v = nullptr;   // value row j at v + j * ldv
  int64_t ldv = 0;
  int64_t s = 0, d = 0;  // keys, head size
  float scale = 1.0f;
  const float* mask_add = nullptr;     // additive mask: row i, key j at i*mask_si + j*mask_sj
  const uint8_t* mask_bool = nullptr;  // bool mask (0 = masked out), same indexing
  int64_t mask_si = 0, mask_sj = 0;
  bool causal = false;  // row i attends keys j <= i + causal_offset
  int64_t causal_offset = 0;
  int64_t row_begin = 0, row_end = 0;
  float* scores = nullptr;  // scratch, kAttentionRowBlock · sp floats
  float* out = nullptr;     // output row i at out + i * ldo
  int64_t ldo = 0;
};

// One register tile of kiln's GEMM (gemm_impl.inc): c[r, j] = act(Σ_p a[r, p] · b[p, j] +
// bias[j]) + residual[r, j] for r < mr, j < nr. `b` is one packed weight panel, [k][gemm_nr]
// with zeros past N; `bias` (may be null) holds gemm_nr floats of that panel.
struct GemmTile {
  const float* a = nullptr;  // row r at a + r * lda
  int64_t lda = 0;
  const float* b = nullptr;
  const float* bias = nullptr;
  const float* residual = nullptr;  // may be null; row r at residual + r * ldr
  int64_t ldr = 0;
  float* c = nullptr;  // row r at c + r * ldc; may alias residual (same ld)
  int64_t ldc = 0;
  int64_t k = 0;
  int mr = 0;          // 1 .. gemm_mr
  int nr = 0;          // 1 .. gemm_nr valid columns
  int activation = 0;  // 0 none, 1 gelu (erf), 2 gelu (tanh), 3 relu, 4 tanh
  // May be null: a packed panel of the same shape as `b` to pull into L2 while this tile
  // runs (the panel this thread multiplies next), row p alongside step p of the K loop.
  const float* prefetch = nullptr;
};

// One register tile of kiln's int4/int8 weight-only GEMM (blockq_impl.inc, blockq_gemm.h):
// c[r, j] = Σ_p a[r, p] · w[p, j] + bias[j] for r < mr, j < nr, with w[p, j] = (code − zero)
// · scale of p's block: from `dequantized` (f32, mr ≤ blockq_mr), or from the codes with
// the rows' block sums `xsum` (mr ≤ blockq_codes_mr). `b` is one packed panel of
// 2·W columns: with 4 bits [k][W] bytes, byte i of row p holding column i's code in its low
// nibble and column W + i's in its high one; with 8 bits [k][2·W] bytes, byte j column j's
// code. `scale` holds [ceil(k / block)][2·W] floats and the zero points are `zero`'s
// [ceil(k / block)] rows of bytes laid out as the codes', or `fzero`'s [ceil(k / block)][2·W]
// floats, or (both null) 2^(bits−1) each.
struct BlockQuantTile {
  const float* a = nullptr;  // row r at a + r * lda
  int64_t lda = 0;
  const uint8_t* b = nullptr;
  const float* scale = nullptr;
  const uint8_t* zero = nullptr;
  const float* fzero = nullptr;
  const float* dequantized = nullptr;  // non-null: the panel as f32 [k][2·W], b unused
  const float* xsum = nullptr;         // else: row r's Σ a over block b at xsum[r * ldxs + b]
  int64_t ldxs = 0;
  const float* bias = nullptr;  // 2·W floats, or null
  float* c = nullptr;           // row r at c + r * ldc
  int64_t ldc = 0;
  int64_t k = 0, block = 0;
  int bits = 4;  // 4 or 8
  int mr = 0;    // 1 .. blockq_mr
  int nr = 0;    // 1 .. 2·W valid columns
};

struct IsaKernels {
  int vector_width;  // floats per vector register
  // y = (x - mean) / sqrt(var + eps) * gamma (+ beta); y may alias x.
  void (*layer_norm_row)(const float* x, const float* gamma, const float* beta, float eps,
                         int64_t n, float* y);
  // y = x / sqrt(mean(x²) + eps) * gamma; y may alias x.
  void (*rms_norm_row)(const float* x, const float* gamma, float eps, int64_t n, float* y);
  // out = a + b (+ bias); out may alias a or b.
  void (*add_row)(const float* a, const float* b, const float* bias, int64_t n, float* out);
  // y = softmax(x); a row whose every entry is -inf becomes zeros. y may alias x.
  void (*softmax_row)(const float* x, int64_t n, float* y);
  // y = gelu(x) (erf form, or the tanh approximation); y may alias x.
  void (*gelu)(const float* x, int64_t n, bool tanh_form, float* y);
  // y += a * x.
  void (*axpy)(float a, const float* x, int64_t n, float* y);
  // x *= a.
  void (*scale)(float a, float* x, int64_t n);
  // y = exp(x), relative error ~2e-7, for x in [-87.3, 88.3] (below: 0; no inf, no NaN).
  void (*exp_row)(const float* x, int64_t n, float* y);
  // y = sigmoid(x) for x not NaN, relative error ~3e-7 (exp's, damped by 1/(1+e), plus a
  // division); 0 below x = -87.3, where the true value is < 1.2e-38.
  void (*sigmoid_row)(const float* x, int64_t n, float* y);
  // y = act(a) · b for n floats, act = silu (a·sigmoid(a), sigmoid_row's accuracy), gelu
  // or gelu_tanh (gelu's); y may alias a or b.
  void (*glu_row)(const float* a, const float* b, int64_t n, GluActivation act, float* y);
  // Σ x².
  float (*sum_squares)(const float* x, int64_t n);
  void (*attention_rows)(const AttentionRows& a);
  // Unnormalized softmax for attention's GEMM paths: x[j] = exp(x[j] + add[j] - m) for
  // j < n (add may be null), m the row max after the add; returns Σ x[j]. A row whose every
  // entry is -inf becomes zeros and returns 0. The caller divides by the sum later.
  float (*exp_shift_row)(float* x, const float* add, int64_t n);
  // Attention over a cache (few query rows, many keys, keys and values row-major):
  // scores[r·lds + j] = scale · Σ_c q[r][c] · k[j·ldk + c] for r < rows, j < n, c < d.
  void (*dot_rows)(const float* const* q, int rows, const float* k, int64_t ldk, int64_t d,
                   int64_t n, float scale, float* scores, int64_t lds);
  // out[r][c] += Σ_j p[r·lds + j] · v[j·ldv + c] for r < rows, c < d, j < n.
  void (*weighted_rows)(const float* p, int64_t lds, int rows, const float* v, int64_t ldv,
                        int64_t d, int64_t n, float* const* out);
  int gemm_mr;  // rows of a GEMM register tile
  int gemm_nr;  // columns of a GEMM register tile (the packed panel width)
  void (*gemm_tile)(const GemmTile& t);
  int blockq_mr;        // rows of an int4 GEMM tile over a dequantized panel (2·W wide)
  int blockq_codes_mr;  // rows of an int4 GEMM tile over the codes
  void (*blockq_tile)(const BlockQuantTile& t);
  // out = the panel of t (b, scale, zero, k, block) dequantized to f32, [k][2·W].
  void (*blockq_dequantize)(const BlockQuantTile& t, float* out);
  // y = act(y) for n floats, act as GemmTile::activation (0 none: nothing to do).
  void (*activate_row)(float* y, int64_t n, int act);
};

const IsaKernels& ScalarKernels();
const IsaKernels& Avx2Kernels();
const IsaKernels& Avx512Kernels();

// The table for ctx.ResolvedIsa().
const IsaKernels& KernelsFor(const CpuContext& ctx);

}  // namespace kiln::cpu::internal
