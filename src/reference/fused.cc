// Reference kernels for kiln's fused ops (domain "kiln", docs/fused-ops.md): Linear,
// SkipLayerNorm, RMSNorm, SkipRMSNorm, Rotary, Glu, MultiHeadAttention, Attention,
// EmbedLayerNorm, Pool. They are the oracle the fusion passes are checked against, so each is
// written as the plain formula of the contract, validates every shape, dtype, attribute and index
// before reading (bad input is InvalidArgument, an unsupported dtype Unimplemented), and
// accumulates in double with one rounding to the output dtype (f32, f16, bf16, f64). Limits: plain
// loops, no blocking or threading (clarity over speed); every float input of an op must share one
// dtype (no mixed precision), but for Linear's f32 X with bf16 W and QuantLinear's s8 W (the cpu
// bf16 and int8 plans' GEMMs); MultiHeadAttention materializes one [S, S] score row block per
// (batch, head). kiln.PackedCumSum accumulates as ONNX CumSum does (floats in their own type,
// integers wrapping), so a packed program's position ids equal the padded program's.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kiln/support/status.h"
#include "reference/kernel_util.h"
#include "reference/kernels.h"

namespace kiln::reference {
namespace {

// Rejects an output (or scratch buffer) of `dims` before anything is sized from it, with
// the errors Tensor::Create gives: InvalidArgument when the element count is negative or
// overflows int64, ResourceExhausted over Tensor::Create's 2^40-byte limit. The kernels
// hold values as double, so the limit is applied to 8-byte elements, which is at least as
// strict as Create's for every output dtype. Without it a shape like [1e9, 1e9] built
// from empty inputs would reach std::vector and abort with bad_alloc.
absl::Status CheckBufferSize(absl::Span<const int64_t> dims, const char* what) {
  absl::StatusOr<int64_t> n = CheckedNumElements(dims);
  if (!n.ok())
    return absl::InvalidArgumentError(
        absl::StrCat(what, " of shape ", DimsStr(dims), ": ", n.status().message()));
  if (*n > (int64_t{1} << 40) / static_cast<int64_t>(sizeof(double)))
    return absl::ResourceExhaustedError(
        absl::StrCat(what, " of shape ", DimsStr(dims), " (", *n, " elements) is too large"));
  return absl::OkStatus();
}

absl::StatusOr<const Tensor*> Arg(Inputs in, int i, const char* what) {
  if (i >= static_cast<int>(in.size()) || in[i] == nullptr)
    return absl::InvalidArgumentError(
        absl::StrCat("required input ", i, " (", what, ") is missing"));
  return in[i];
}

absl::Status RequireFloat(const Tensor& t, const char* what) {
  if (IsFloat(t.dtype())) return absl::OkStatus();
  return absl::UnimplementedError(absl::StrCat(what, " has dtype ", DName(t.dtype()),
                                               "; only f32, f16, bf16 and f64 are supported"));
}

absl::Status SameDType(const Tensor& ref, const Tensor* t, const char* ref_what, const char* what) {
  if (t == nullptr || t->dtype() == ref.dtype()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, " has dtype ", DName(t->dtype()), " but ",
                                                 ref_what, " has ", DName(ref.dtype())));
}

// Requires `t` (if present) to be exactly [n].
absl::Status RequireVector(const Tensor* t, int64_t n, const char* what) {
  if (t == nullptr || (t->rank() == 1 && t->dims()[0] == n)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(what, " must have shape [", n, "], got ", DimsStr(t->dims())));
}

// Integer attribute with default; an attribute of the wrong type is an error, not ignored.
absl::StatusOr<int64_t> IntAttr(const Node& node, const std::string& name,
                                std::optional<int64_t> dflt) {
  if (auto v = node.attr_int(name)) return *v;
  if (node.has_attr(name))
    return absl::InvalidArgumentError(absl::StrCat("attribute '", name, "' must be an int"));
  if (!dflt) return absl::InvalidArgumentError(absl::StrCat("attribute '", name, "' is required"));
  return *dflt;
}

absl::StatusOr<double> FloatAttr(const Node& node, const std::string& name,
                                 std::optional<float> dflt) {
  if (auto v = node.attr_float(name)) return static_cast<double>(*v);
  if (node.has_attr(name))
    return absl::InvalidArgumentError(absl::StrCat("attribute '", name, "' must be a float"));
  if (!dflt) return absl::InvalidArgumentError(absl::StrCat("attribute '", name, "' is required"));
  return static_cast<double>(*dflt);
}

absl::StatusOr<std::string> StringAttr(const Node& node, const std::string& name,
                                       std::optional<std::string> dflt) {
  if (const std::string* v = node.attr_string(name)) return *v;
  if (node.has_attr(name))
    return absl::InvalidArgumentError(absl::StrCat("attribute '", name, "' must be a string"));
  if (!dflt) return absl::InvalidArgumentError(absl::StrCat("attribute '", name, "' is required"));
  return *dflt;
}

// Normalizes row `x[0, n)` in place: (x - mean) / sqrt(var + eps) * gamma + beta, population
// variance, as ONNX LayerNormalization.
void LayerNormRow(double* x, int64_t n, double eps, const std::vector<double>& gamma,
                  const std::vector<double>* beta) {
  double mean = 0;
  for (int64_t j = 0; j < n; ++j) mean += x[j];
  mean /= static_cast<double>(n);
  double var = 0;
  for (int64_t j = 0; j < n; ++j) var += (x[j] - mean) * (x[j] - mean);
  var /= static_cast<double>(n);
  const double inv = 1.0 / std::sqrt(var + eps);
  for (int64_t j = 0; j < n; ++j) {
    x[j] = (x[j] - mean) * inv * gamma[j];
    if (beta) x[j] += (*beta)[j];
  }
}

// ---------------------------------------------------------------------------------------
// kiln.Linear(X, W, B?): Y = act(X · W' + B), W' = W [K,M] or Wᵀ (W [M,K]) with trans_w=1.

absl::StatusOr<double (*)(double)> Activation(const std::string& name) {
  if (name == "none") return +[](double v) { return v; };
  if (name == "gelu")
    return +[](double v) { return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); };
  if (name == "gelu_tanh")
    return +[](double v) {
      return 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    };
  if (name == "relu") return +[](double v) { return std::isnan(v) || v > 0 ? v : 0.0; };
  if (name == "tanh") return +[](double v) { return std::tanh(v); };
  return absl::InvalidArgumentError(absl::StrCat(
      "activation must be one of \"none\", \"gelu\", \"gelu_tanh\", \"relu\", \"tanh\"; got \"",
      name, "\""));
}

// A cpu bf16 plan's Linear takes f32 X with bf16 W (its GEMM runs on bf16 operands, fp32
// accumulation): X is rounded to bf16 (nearest even) before the product.
Result LinearKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, "X"));
  KILN_ASSIGN_OR_RETURN(const Tensor* w, Arg(in, 1, "W"));
  const Tensor* b = OptArg(in, 2);
  KILN_RETURN_IF_ERROR(RequireFloat(*x, "X"));
  const bool bf16_weights = x->dtype() == DType::kF32 && w->dtype() == DType::kBF16;
  if (!bf16_weights) KILN_RETURN_IF_ERROR(SameDType(*x, w, "X", "W"));
  KILN_RETURN_IF_ERROR(SameDType(*x, b, "X", "B"));
  KILN_ASSIGN_OR_RETURN(int64_t trans_w, IntAttr(node, "trans_w", 0));
  if (trans_w != 0 && trans_w != 1)
    return absl::InvalidArgumentError(absl::StrCat("trans_w must be 0 or 1, got ", trans_w));
  KILN_ASSIGN_OR_RETURN(std::string act_name, StringAttr(node, "activation", "none"));
  KILN_ASSIGN_OR_RETURN(auto act, Activation(act_name));
  if (x->rank() < 1) return absl::InvalidArgumentError("X must have rank >= 1, got a scalar");
  if (w->rank() != 2)
    return absl::InvalidArgumentError(
        absl::StrCat("W must have rank 2, got shape ", DimsStr(w->dims())));
  const int64_t k = x->dims().back();
  const int64_t wk = trans_w ? w->dims()[1] : w->dims()[0];
  const int64_t m = trans_w ? w->dims()[0] : w->dims()[1];
  if (wk != k)
    return absl::InvalidArgumentError(absl::StrCat("X ", DimsStr(x->dims()), " and W ",
                                                   DimsStr(w->dims()), " (trans_w=", trans_w,
                                                   ") disagree on K"));
  KILN_RETURN_IF_ERROR(RequireVector(b, m, "B"));
  std::vector<int64_t> out_dims(x->dims().begin(), x->dims().end() - 1);
  out_dims.push_back(m);
  KILN_RETURN_IF_ERROR(CheckBufferSize(out_dims, "output"));
  int64_t rows_out = 1;
  for (size_t i = 0; i + 1 < x->dims().size(); ++i) rows_out *= x->dims()[i];
  std::vector<double> xv = ToDoubles(*x);
  const std::vector<double> wv = ToDoubles(*w);
  if (bf16_weights)
    for (double& v : xv) v = BF16ToFloat(FloatToBF16(static_cast<float>(v)));
  const std::vector<double> bv = b ? ToDoubles(*b) : std::vector<double>();
  std::vector<double> y(static_cast<size_t>(rows_out * m));
  // Each y[r,j] sums its k products in ascending i; the loops run over the weights in their
  // memory order (W [K, M]: a row of W per i; Wᵀ: a dot product per j).
  for (int64_t r = 0; r < rows_out; ++r) {
    double* yr = y.data() + r * m;
    const double* xr = xv.data() + r * k;
    if (trans_w) {
      for (int64_t j = 0; j < m; ++j) {
        double acc = 0;
        for (int64_t i = 0; i < k; ++i) acc += xr[i] * wv[j * k + i];
        yr[j] = acc;
      }
    } else {
      for (int64_t i = 0; i < k; ++i) {
        const double xi = xr[i];
        const double* wi = wv.data() + i * m;
        for (int64_t j = 0; j < m; ++j) yr[j] += xi * wi[j];
      }
    }
    for (int64_t j = 0; j < m; ++j) yr[j] = act(b ? yr[j] + bv[j] : yr[j]);
  }
  return std::vector<Tensor>{FromDoubles(x->dtype(), std::move(out_dims), y)};
}

// ---------------------------------------------------------------------------------------
// kiln.QuantLinear(X, W, w_scale, B?, x_mul?) {activation, x_quant = "dynamic_row" |
// "static", x_absmax}: an int8 plan's Linear. W s8 [N, K] (one row per output channel),
// w_scale f32 [N], x_mul f32 [K] (the smoothing SmoothQuant-style calibration folds out of X
// into W; absent: ones). Each row r of X̃ = X ⊙ x_mul (f32 products) is quantized in f32
// arithmetic with a = max_k |X̃[r,k]| ("dynamic_row") or a = x_absmax (> 0, "static": the
// calibrated range): q[k] = clamp(rne(X̃[r,k] · (127 / a)), -127, 127) (q = 0 when a = 0),
// s = a / 127; then Y[r,n] = act(Σ_k q[k]·W[n,k] · s · w_scale[n] + B[n]). A row holding inf
// or NaN gives NaN. X may be f16 or bf16 (a cuda int8 plan's activations; Y then X's dtype,
// rounded once); B and x_mul are f32.

Result QuantLinearKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, "X"));
  KILN_ASSIGN_OR_RETURN(const Tensor* w, Arg(in, 1, "W"));
  KILN_ASSIGN_OR_RETURN(const Tensor* ws, Arg(in, 2, "w_scale"));
  const Tensor* b = OptArg(in, 3);
  const Tensor* mul = OptArg(in, 4);
  if (x->dtype() != DType::kF32 && x->dtype() != DType::kF16 && x->dtype() != DType::kBF16)
    return absl::UnimplementedError(
        absl::StrCat("X has dtype ", DName(x->dtype()), "; only f32, f16, bf16"));
  if (b != nullptr && b->dtype() != DType::kF32)
    return absl::InvalidArgumentError(absl::StrCat("B must be f32, got ", DName(b->dtype())));
  if (mul != nullptr && mul->dtype() != DType::kF32)
    return absl::InvalidArgumentError(absl::StrCat("x_mul must be f32, got ", DName(mul->dtype())));
  if (w->dtype() != DType::kI8)
    return absl::InvalidArgumentError(absl::StrCat("W must be int8, got ", DName(w->dtype())));
  if (ws->dtype() != DType::kF32)
    return absl::InvalidArgumentError(
        absl::StrCat("w_scale must be f32, got ", DName(ws->dtype())));
  KILN_ASSIGN_OR_RETURN(std::string act_name, StringAttr(node, "activation", "none"));
  KILN_ASSIGN_OR_RETURN(auto act, Activation(act_name));
  KILN_ASSIGN_OR_RETURN(std::string mode, StringAttr(node, "x_quant", "dynamic_row"));
  if (mode != "dynamic_row" && mode != "static")
    return absl::InvalidArgumentError(
        absl::StrCat("x_quant must be \"dynamic_row\" or \"static\", got \"", mode, "\""));
  float fixed_a = 0.0f;
  if (mode == "static") {
    KILN_ASSIGN_OR_RETURN(double range, FloatAttr(node, "x_absmax", std::nullopt));
    if (!(range > 0.0) || !std::isfinite(static_cast<float>(range)))
      return absl::InvalidArgumentError(
          absl::StrCat("x_quant \"static\" needs x_absmax finite and > 0, got ", range));
    fixed_a = static_cast<float>(range);
  }
  if (x->rank() < 1) return absl::InvalidArgumentError("X must have rank >= 1, got a scalar");
  if (w->rank() != 2)
    return absl::InvalidArgumentError(
        absl::StrCat("W must have rank 2 ([N, K]), got shape ", DimsStr(w->dims())));
  const int64_t k = x->dims().back(), n = w->dims()[0];
  if (w->dims()[1] != k)
    return absl::InvalidArgumentError(
        absl::StrCat("X ", DimsStr(x->dims()), " and W ", DimsStr(w->dims()), " disagree on K"));
  KILN_RETURN_IF_ERROR(RequireVector(ws, n, "w_scale"));
  KILN_RETURN_IF_ERROR(RequireVector(b, n, "B"));
  KILN_RETURN_IF_ERROR(RequireVector(mul, k, "x_mul"));
  std::vector<int64_t> out_dims(x->dims().begin(), x->dims().end() - 1);
  out_dims.push_back(n);
  KILN_RETURN_IF_ERROR(CheckBufferSize(out_dims, "output"));
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < x->dims().size(); ++i) rows *= x->dims()[i];
  const int8_t* wp = w->data<int8_t>();
  const float* sp = ws->data<float>();
  std::vector<double> y(static_cast<size_t>(rows * n));
  std::vector<int32_t> q(static_cast<size_t>(k));
  std::vector<float> scaled(static_cast<size_t>(k));
  for (int64_t r = 0; r < rows; ++r) {
    // X̃'s row in f32 (a 16-bit X widened exactly, then times x_mul in f32).
    for (int64_t i = 0; i < k; ++i) {
      const float v = static_cast<float>(x->GetAsDouble(r * k + i));
      scaled[i] = mul != nullptr ? v * mul->data<float>()[i] : v;
    }
    const float* row = scaled.data();
    float a = 0.0f;
    bool finite = true;
    for (int64_t i = 0; i < k; ++i) {
      finite &= std::isfinite(row[i]);
      a = std::max(a, std::fabs(row[i]));
    }
    if (fixed_a > 0.0f) a = fixed_a;
    // As the kernels (kernels/cpu/qgemm_internal.h): a row whose 127 / max |x| overflows
    // quantizes to zeros; a row holding inf or NaN gives NaN outputs.
    const float inv = a > 0.0f && std::isfinite(127.0f / a) ? 127.0f / a : 0.0f;
    const float s = a / 127.0f;
    for (int64_t i = 0; i < k; ++i) {
      const float v = finite ? std::nearbyint(row[i] * inv) : 0.0f;
      q[i] = static_cast<int32_t>(std::clamp(v, -127.0f, 127.0f));
    }
    for (int64_t j = 0; j < n; ++j) {
      int64_t acc = 0;
      for (int64_t i = 0; i < k; ++i) acc += int64_t{q[i]} * wp[j * k + i];
      double v =
          finite ? static_cast<double>(acc) * s * sp[j] : std::numeric_limits<double>::quiet_NaN();
      if (b) v += b->data<float>()[j];
      y[r * n + j] = act(v);
    }
  }
  // A 16-bit X (a cuda int8 plan's fp16 activations): Y rounded once to its dtype.
  return std::vector<Tensor>{FromDoubles(x->dtype(), std::move(out_dims), y)};
}

// ---------------------------------------------------------------------------------------
// kiln.BlockQuantLinear(X, W, scales, zero_points?, B?) {block_size, activation}: a weight-only
// int4 or int8 Linear (onnxruntime's MatMulNBits, 4 or 8 bits). W u4 or u8 [N, K], scales f32
// [N, KB] and zero_points of W's dtype or f32 (HQQ's fractional ones) [N, KB] (absent: 8 for
// u4, 128 for u8) with KB = ceil(K / block_size): weight [n, k] = (W[n,k] − zp[n, k / bs]) ·
// scales[n, k / bs] in f32 (what DequantizeLinear gives), then Y[r, n] = act(Σ_k X[r,k] ·
// weight[n,k] + B[n]), act as kiln.Linear's. X, B and Y f32, f16 or bf16 (X's dtype).

// The checks the kernels share (kernel_rules.cc repeats them for plan steps): (K, N, KB).
absl::StatusOr<std::array<int64_t, 3>> CheckBlockQuant(const Tensor& x, const Tensor& w,
                                                       const Tensor& scales, const Tensor* zp,
                                                       int64_t bs) {
  if (x.dtype() != DType::kF32 && x.dtype() != DType::kF16 && x.dtype() != DType::kBF16)
    return absl::UnimplementedError(
        absl::StrCat("X has dtype ", DName(x.dtype()), "; only f32, f16, bf16"));
  if (w.dtype() != DType::kU4 && w.dtype() != DType::kU8)
    return absl::InvalidArgumentError(
        absl::StrCat("W must be uint4 or uint8, got ", DName(w.dtype())));
  if (scales.dtype() != DType::kF32)
    return absl::InvalidArgumentError(
        absl::StrCat("scales must be f32, got ", DName(scales.dtype())));
  if (zp != nullptr && zp->dtype() != w.dtype() && zp->dtype() != DType::kF32)
    return absl::InvalidArgumentError(absl::StrCat("zero_points must have W's dtype ",
                                                   DName(w.dtype()), " or be f32, got ",
                                                   DName(zp->dtype())));
  if (bs < 16 || (bs & (bs - 1)) != 0)
    return absl::InvalidArgumentError(
        absl::StrCat("block_size must be a power of two >= 16, got ", bs));
  if (x.rank() < 1) return absl::InvalidArgumentError("X must have rank >= 1, got a scalar");
  if (w.rank() != 2)
    return absl::InvalidArgumentError(
        absl::StrCat("W must have rank 2 ([N, K]), got shape ", DimsStr(w.dims())));
  const int64_t k = x.dims().back(), n = w.dims()[0], kb = (k + bs - 1) / bs;
  if (w.dims()[1] != k)
    return absl::InvalidArgumentError(
        absl::StrCat("X ", DimsStr(x.dims()), " and W ", DimsStr(w.dims()), " disagree on K"));
  const std::vector<int64_t> blocks = {n, kb};
  if (scales.dims() != blocks)
    return absl::InvalidArgumentError(
        absl::StrCat("scales must have shape ", DimsStr(blocks), ", got ", DimsStr(scales.dims())));
  if (zp != nullptr && zp->dims() != blocks)
    return absl::InvalidArgumentError(absl::StrCat("zero_points must have shape ", DimsStr(blocks),
                                                   ", got ", DimsStr(zp->dims())));
  return std::array<int64_t, 3>{k, n, kb};
}

// kiln.BlockQuantGather(W, indices, scales, zero_points?) {block_size}: rows of a block-
// quantized table (onnxruntime's GatherBlockQuantized, gather_axis 0, quantize_axis 1). W u4
// or u8 [V, K], scales f32 [V, KB], zero_points of W's dtype or f32 [V, KB] (absent: 8 for u4,
// 128 for u8), KB = ceil(K / block_size); Y[i..., k] = (W[r, k] − zp[r, k / bs]) · scales[r, k
// / bs] in f32 (BlockQuantLinear's weight), r = indices[i...] (negative: r + V; outside [-V,
// V) an error). Y f32 [indices..., K].
Result BlockQuantGatherKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* w, Arg(in, 0, "W"));
  KILN_ASSIGN_OR_RETURN(const Tensor* ids, Arg(in, 1, "indices"));
  KILN_ASSIGN_OR_RETURN(const Tensor* sc, Arg(in, 2, "scales"));
  const Tensor* zp = OptArg(in, 3);
  KILN_ASSIGN_OR_RETURN(const int64_t bs, IntAttr(node, "block_size", std::nullopt));
  if (ids->dtype() != DType::kI32 && ids->dtype() != DType::kI64)
    return absl::InvalidArgumentError(
        absl::StrCat("indices must be int32 or int64, got ", DName(ids->dtype())));
  if (w->rank() != 2)
    return absl::InvalidArgumentError(
        absl::StrCat("W must have rank 2 ([V, K]), got shape ", DimsStr(w->dims())));
  // The checks BlockQuantLinear's weights get (a [1, K] stand-in for X).
  const Tensor probe(DType::kF32, {1, w->dims()[1]});
  KILN_ASSIGN_OR_RETURN(const auto sizes, CheckBlockQuant(probe, *w, *sc, zp, bs));
  const auto [k, v, kb] = sizes;
  std::vector<int64_t> out_dims = ids->dims();
  out_dims.push_back(k);
  KILN_RETURN_IF_ERROR(CheckBufferSize(out_dims, "output"));
  Tensor out(DType::kF32, out_dims);
  float* y = out.data<float>();
  const float default_zero = w->dtype() == DType::kU8 ? 128 : 8;
  const bool float_zero = zp != nullptr && zp->dtype() == DType::kF32;
  for (int64_t i = 0; i < ids->NumElements(); ++i) {
    int64_t r = static_cast<int64_t>(ids->GetAsDouble(i));
    if (r < -v || r >= v)
      return absl::InvalidArgumentError(
          absl::StrCat("index ", r, " is out of range for a table of ", v, " rows"));
    if (r < 0) r += v;
    for (int64_t c = 0; c < k; ++c) {
      const int64_t blk = r * kb + c / bs;
      const float zero = float_zero ? zp->data<float>()[blk]
                         : zp       ? static_cast<float>(zp->data<uint8_t>()[blk])
                                    : default_zero;
      const float code = static_cast<float>(w->data<uint8_t>()[r * k + c]);
      y[i * k + c] = (code - zero) * sc->data<float>()[blk];
    }
  }
  return std::vector<Tensor>{std::move(out)};
}

Result BlockQuantLinearKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, "X"));
  KILN_ASSIGN_OR_RETURN(const Tensor* w, Arg(in, 1, "W"));
  KILN_ASSIGN_OR_RETURN(const Tensor* sc, Arg(in, 2, "scales"));
  const Tensor* zp = OptArg(in, 3);
  const Tensor* b = OptArg(in, 4);
  KILN_ASSIGN_OR_RETURN(const int64_t bs, IntAttr(node, "block_size", std::nullopt));
  KILN_ASSIGN_OR_RETURN(const auto sizes, CheckBlockQuant(*x, *w, *sc, zp, bs));
  KILN_ASSIGN_OR_RETURN(std::string act_name, StringAttr(node, "activation", "none"));
  KILN_ASSIGN_OR_RETURN(auto act, Activation(act_name));
  const auto [k, n, kb] = sizes;
  KILN_RETURN_IF_ERROR(SameDType(*x, b, "X", "B"));
  KILN_RETURN_IF_ERROR(RequireVector(b, n, "B"));
  std::vector<int64_t> out_dims(x->dims().begin(), x->dims().end() - 1);
  out_dims.push_back(n);
  KILN_RETURN_IF_ERROR(CheckBufferSize(out_dims, "output"));
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < x->dims().size(); ++i) rows *= x->dims()[i];
  std::vector<double> wf(static_cast<size_t>(n * k));
  const float default_zero = w->dtype() == DType::kU8 ? 128 : 8;  // MatMulNBits' 2^(bits-1)
  const bool float_zero = zp != nullptr && zp->dtype() == DType::kF32;
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < k; ++i) {
      const int64_t blk = j * kb + i / bs;
      const float zero = float_zero ? zp->data<float>()[blk]
                         : zp       ? static_cast<float>(zp->data<uint8_t>()[blk])
                                    : default_zero;
      // The f32 difference (exact for integer zero points) times the scale in f32:
      // DequantizeLinear's value, and onnxruntime's for float zero points.
      const float code = static_cast<float>(w->data<uint8_t>()[j * k + i]);
      wf[j * k + i] = (code - zero) * sc->data<float>()[blk];
    }
  std::vector<double> xd(static_cast<size_t>(rows * k));
  for (int64_t i = 0; i < rows * k; ++i) xd[i] = x->GetAsDouble(i);
  std::vector<double> y(static_cast<size_t>(rows * n));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) {
      double acc = b ? b->GetAsDouble(j) : 0.0;
      for (int64_t i = 0; i < k; ++i) acc += xd[r * k + i] * wf[j * k + i];
      y[r * n + j] = act(acc);
    }
  // A 16-bit X: the result rounded once to its dtype (onnxruntime rounds its f32 sum).
  return std::vector<Tensor>{FromDoubles(x->dtype(), std::move(out_dims), y)};
}

// ---------------------------------------------------------------------------------------
// kiln.SkipLayerNorm(X, skip, gamma, beta?, bias?) -> (Y, Sum?):
// Sum = X + skip (+ bias); Y = LayerNorm(Sum over the last axis) · gamma + beta.
// kiln.SkipRMSNorm(X, skip, gamma, bias?) -> (Y, Sum?): the same Sum; Y = RMSNorm(Sum) · gamma.

void RmsNormRow(double* row, int64_t h, double eps, const std::vector<double>& gamma) {
  double ms = 0;
  for (int64_t j = 0; j < h; ++j) ms += row[j] * row[j];
  ms /= static_cast<double>(h);
  const double denom = std::sqrt(ms + eps);
  for (int64_t j = 0; j < h; ++j) row[j] = row[j] / denom * gamma[j];
}

Result SkipNormKernel(const Node& node, Inputs in, bool rms) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, "X"));
  KILN_ASSIGN_OR_RETURN(const Tensor* skip, Arg(in, 1, "skip"));
  KILN_ASSIGN_OR_RETURN(const Tensor* gamma, Arg(in, 2, "gamma"));
  const Tensor* beta = rms ? nullptr : OptArg(in, 3);
  const Tensor* bias = OptArg(in, rms ? 3 : 4);
  KILN_RETURN_IF_ERROR(RequireFloat(*x, "X"));
  KILN_RETURN_IF_ERROR(SameDType(*x, skip, "X", "skip"));
  KILN_RETURN_IF_ERROR(SameDType(*x, gamma, "X", "gamma"));
  KILN_RETURN_IF_ERROR(SameDType(*x, beta, "X", "beta"));
  KILN_RETURN_IF_ERROR(SameDType(*x, bias, "X", "bias"));
  KILN_ASSIGN_OR_RETURN(double eps, FloatAttr(node, "epsilon", rms ? 1e-6f : 1e-5f));
  if (x->rank() < 1) return absl::InvalidArgumentError("X must have rank >= 1, got a scalar");
  const auto& d = x->dims();
  if (!BroadcastsTo(skip->dims(), d))
    return absl::InvalidArgumentError(
        absl::StrCat("skip ", DimsStr(skip->dims()), " does not broadcast to X ", DimsStr(d)));
  const int64_t h = d.back();
  KILN_RETURN_IF_ERROR(RequireVector(gamma, h, "gamma"));
  KILN_RETURN_IF_ERROR(RequireVector(beta, h, "beta"));
  KILN_RETURN_IF_ERROR(RequireVector(bias, h, "bias"));
  const std::vector<double> gv = ToDoubles(*gamma);
  const std::vector<double> bv = beta ? ToDoubles(*beta) : std::vector<double>();
  const std::vector<double> biasv = bias ? ToDoubles(*bias) : std::vector<double>();
  const std::vector<double> sv = ToDoubles(*skip);
  const std::vector<int64_t> soff = BroadcastOffsets(skip->dims(), d);
  std::vector<double> sum = ToDoubles(*x);
  for (size_t i = 0; i < sum.size(); ++i) {
    sum[i] += sv[soff[i]];
    if (bias) sum[i] += biasv[static_cast<int64_t>(i) % h];
  }
  std::vector<double> y = sum;
  const int64_t rows = h == 0 ? 0 : static_cast<int64_t>(y.size()) / h;
  for (int64_t r = 0; r < rows; ++r) {
    if (rms)
      RmsNormRow(&y[r * h], h, eps, gv);
    else
      LayerNormRow(&y[r * h], h, eps, gv, beta ? &bv : nullptr);
  }
  std::vector<Tensor> outs;
  outs.push_back(FromDoubles(x->dtype(), d, y));
  if (node.num_outputs() > 1) outs.push_back(FromDoubles(x->dtype(), d, sum));
  return outs;
}

Result SkipLayerNormKernel(const Node& node, Inputs in) { return SkipNormKernel(node, in, false); }
Result SkipRMSNormKernel(const Node& node, Inputs in) { return SkipNormKernel(node, in, true); }

// ---------------------------------------------------------------------------------------
// kiln.RMSNorm(X, gamma): Y = X / sqrt(mean(X², last axis) + epsilon) · gamma.

Result RMSNormKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, "X"));
  KILN_ASSIGN_OR_RETURN(const Tensor* gamma, Arg(in, 1, "gamma"));
  KILN_RETURN_IF_ERROR(RequireFloat(*x, "X"));
  KILN_RETURN_IF_ERROR(SameDType(*x, gamma, "X", "gamma"));
  KILN_ASSIGN_OR_RETURN(double eps, FloatAttr(node, "epsilon", 1e-6f));
  if (x->rank() < 1) return absl::InvalidArgumentError("X must have rank >= 1, got a scalar");
  const int64_t h = x->dims().back();
  KILN_RETURN_IF_ERROR(RequireVector(gamma, h, "gamma"));
  const std::vector<double> gv = ToDoubles(*gamma);
  std::vector<double> y = ToDoubles(*x);
  const int64_t rows = h == 0 ? 0 : static_cast<int64_t>(y.size()) / h;
  for (int64_t r = 0; r < rows; ++r) RmsNormRow(&y[r * h], h, eps, gv);
  return std::vector<Tensor>{FromDoubles(x->dtype(), x->dims(), y)};
}

// ---------------------------------------------------------------------------------------
// kiln.Glu(X){activation}: X [..., 2F] = [A | B] -> Y = act(A) · B [..., F]; act is
// silu (x·sigmoid(x)), gelu (erf form) or gelu_tanh.

Result GluKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, "X"));
  KILN_RETURN_IF_ERROR(RequireFloat(*x, "X"));
  KILN_ASSIGN_OR_RETURN(std::string act, StringAttr(node, "activation", std::nullopt));
  if (act != "silu" && act != "gelu" && act != "gelu_tanh")
    return absl::InvalidArgumentError(
        absl::StrCat("activation must be silu, gelu or gelu_tanh, got ", act));
  if (x->rank() < 1 || x->dims().back() % 2 != 0)
    return absl::InvalidArgumentError(
        absl::StrCat("X must be [..., 2F] with an even last dim, got ", DimsStr(x->dims())));
  const int64_t two_f = x->dims().back(), f = two_f / 2;
  const int64_t rows = two_f == 0 ? 0 : x->NumElements() / two_f;
  std::vector<int64_t> yd = x->dims();
  yd.back() = f;
  const std::vector<double> xv = ToDoubles(*x);
  std::vector<double> y(static_cast<size_t>(rows * f));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < f; ++j) {
      const double a = xv[r * two_f + j], b = xv[r * two_f + f + j];
      double g;
      if (act == "silu")
        g = a / (1.0 + std::exp(-a));
      else if (act == "gelu")
        g = 0.5 * a * (1.0 + std::erf(a / std::sqrt(2.0)));
      else
        g = 0.5 * a * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (a + 0.044715 * a * a * a)));
      y[r * f + j] = g * b;
    }
  return std::vector<Tensor>{FromDoubles(x->dtype(), yd, y)};
}

// ---------------------------------------------------------------------------------------
// kiln.Rotary(X, cos, sin): rotary position embedding, rotate-half form, over the first R
// elements of X's last axis (R = cos's last dim, even, <= D = X's last dim):
// Y[..., :R] = X[..., :R] · cos + rotate_half(X[..., :R]) · sin, Y[..., R:] = X[..., R:];
// rotate_half(x) = concat(-x[R/2:], x[:R/2]); cos and sin [..., R] broadcast (numpy) to
// X[..., :R].

Result RotaryKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, "X"));
  KILN_ASSIGN_OR_RETURN(const int64_t interleaved, IntAttr(node, "interleaved", 0));
  if (interleaved != 0 && interleaved != 1)
    return absl::InvalidArgumentError(
        absl::StrCat("interleaved must be 0 or 1, got ", interleaved));
  KILN_ASSIGN_OR_RETURN(const Tensor* cs, Arg(in, 1, "cos"));
  KILN_ASSIGN_OR_RETURN(const Tensor* sn, Arg(in, 2, "sin"));
  KILN_RETURN_IF_ERROR(RequireFloat(*x, "X"));
  KILN_RETURN_IF_ERROR(SameDType(*x, cs, "X", "cos"));
  KILN_RETURN_IF_ERROR(SameDType(*x, sn, "X", "sin"));
  if (x->rank() < 1 || cs->rank() < 1 || sn->rank() < 1)
    return absl::InvalidArgumentError("X, cos and sin must have rank >= 1");
  if (cs->dims() != sn->dims())
    return absl::InvalidArgumentError(
        absl::StrCat("cos ", DimsStr(cs->dims()), " and sin ", DimsStr(sn->dims()), " differ"));
  const int64_t d = x->dims().back(), r = cs->dims().back();
  if (r % 2 != 0 || r > d)
    return absl::InvalidArgumentError(absl::StrCat("the rotary dim (cos's last dim) ", r,
                                                   " must be even and at most X's last dim ", d));
  std::vector<int64_t> xr = x->dims();
  xr.back() = r;
  if (!BroadcastsTo(cs->dims(), xr))
    return absl::InvalidArgumentError(absl::StrCat(
        "cos ", DimsStr(cs->dims()), " does not broadcast to X's rotated part ", DimsStr(xr)));
  const std::vector<double> xv = ToDoubles(*x), cv = ToDoubles(*cs), sv = ToDoubles(*sn);
  const std::vector<int64_t> toff = BroadcastOffsets(cs->dims(), xr);  // per rotated element
  std::vector<double> y = xv;
  const int64_t rows = d == 0 ? 0 : static_cast<int64_t>(y.size()) / d, half = r / 2;
  for (int64_t row = 0; row < rows; ++row)
    for (int64_t j = 0; j < r; ++j) {
      const double* xr_row = &xv[row * d];
      const double rot = interleaved ? (j % 2 == 0 ? -xr_row[j + 1] : xr_row[j - 1])
                                     : (j < half ? -xr_row[j + half] : xr_row[j - half]);
      const int64_t t = toff[row * r + j];
      y[row * d + j] = xv[row * d + j] * cv[t] + rot * sv[t];
    }
  return std::vector<Tensor>{FromDoubles(x->dtype(), x->dims(), y)};
}

// An attention mask as the reference kernels read it: its values and its strides
// right-aligned to the [B, N, S, L] scores (0 on broadcast dims).
struct ScoreMask {
  std::vector<double> values;
  int64_t stride[4] = {0, 0, 0, 0};
  bool is_bool = false;
  double At(int64_t b, int64_t n, int64_t i, int64_t j) const {
    return values[b * stride[0] + n * stride[1] + i * stride[2] + j * stride[3]];
  }
};

// `mask` (null: none) checked to be float or bool and to broadcast to `scores`
// (`what` names those dims in the error).
absl::StatusOr<ScoreMask> ReadMask(const Tensor* mask, const std::vector<int64_t>& scores,
                                   const char* what) {
  ScoreMask m;
  if (mask == nullptr) return m;
  if (mask->dtype() == DType::kBool) {
    m.is_bool = true;
  } else if (!IsFloat(mask->dtype())) {
    return absl::InvalidArgumentError(
        absl::StrCat("mask must be float or bool, got ", DName(mask->dtype())));
  }
  if (!BroadcastsTo(mask->dims(), scores))
    return absl::InvalidArgumentError(absl::StrCat(
        "mask ", DimsStr(mask->dims()), " does not broadcast to ", what, " = ", DimsStr(scores)));
  m.values = ToDoubles(*mask);
  int64_t st = 1;
  for (int i = mask->rank() - 1; i >= 0; --i) {
    m.stride[i + 4 - mask->rank()] = mask->dims()[i] == 1 ? 0 : st;
    st *= mask->dims()[i];
  }
  return m;
}

// Scores `p` (their max `row_max`) into softmax weights in place. False when every score
// is -inf (every key masked, or none): the row stays zero. NaN scores propagate.
bool Normalize(std::vector<double>& p, double row_max, bool any_nan) {
  if (row_max == -std::numeric_limits<double>::infinity() && !any_nan) return false;
  double denom = 0;
  for (double& x : p) {
    x = std::exp(x - row_max);
    denom += x;
  }
  for (double& x : p) x /= denom;
  return true;
}

// ---------------------------------------------------------------------------------------
// kiln.MultiHeadAttention(qkv, mask?, cos?, sin?): per batch b and head n (K/V head
// n / (N / Nkv)), Q and K rotated by the tables when given,
// P = softmax(scale · Q·Kᵀ + mask (+ causal −inf above the diagonal)), Y = P·V.

Result MultiHeadAttentionKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* qkv, Arg(in, 0, "qkv"));
  const Tensor* mask = OptArg(in, 1);
  const Tensor* cs = OptArg(in, 2);
  const Tensor* sn = OptArg(in, 3);
  KILN_RETURN_IF_ERROR(RequireFloat(*qkv, "qkv"));
  KILN_ASSIGN_OR_RETURN(int64_t heads, IntAttr(node, "num_heads", std::nullopt));
  KILN_ASSIGN_OR_RETURN(int64_t kv_heads, IntAttr(node, "num_kv_heads", heads));
  KILN_ASSIGN_OR_RETURN(double scale, FloatAttr(node, "scale", std::nullopt));
  KILN_ASSIGN_OR_RETURN(int64_t causal, IntAttr(node, "causal", 0));
  KILN_ASSIGN_OR_RETURN(const int64_t interleaved, IntAttr(node, "rotary_interleaved", 0));
  if (interleaved != 0 && interleaved != 1)
    return absl::InvalidArgumentError(
        absl::StrCat("rotary_interleaved must be 0 or 1, got ", interleaved));
  if (heads <= 0)
    return absl::InvalidArgumentError(absl::StrCat("num_heads must be positive, got ", heads));
  if (kv_heads <= 0 || heads % kv_heads != 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "num_kv_heads must be positive and divide num_heads = ", heads, ", got ", kv_heads));
  if (causal != 0 && causal != 1)
    return absl::InvalidArgumentError(absl::StrCat("causal must be 0 or 1, got ", causal));
  if (qkv->rank() != 3)
    return absl::InvalidArgumentError(
        absl::StrCat("qkv must have shape [B, S, (N + 2·Nkv)·D], got ", DimsStr(qkv->dims())));
  const int64_t nb = qkv->dims()[0], s = qkv->dims()[1], packed = qkv->dims()[2];
  const int64_t parts = heads + 2 * kv_heads;
  if (packed % parts != 0)
    return absl::InvalidArgumentError(absl::StrCat("qkv last dim ", packed,
                                                   " is not divisible by num_heads + 2 * "
                                                   "num_kv_heads = ",
                                                   parts));
  const int64_t hd = packed / parts, h = heads * hd, group = heads / kv_heads;
  KILN_ASSIGN_OR_RETURN(const ScoreMask m, ReadMask(mask, {nb, heads, s, s}, "[B, N, S, S]"));
  if ((cs == nullptr) != (sn == nullptr))
    return absl::InvalidArgumentError("cos and sin must be given together or both omitted");
  int64_t rot = 0, table_batch_stride = 0;
  std::vector<double> cv, sv;
  if (cs) {
    KILN_RETURN_IF_ERROR(SameDType(*qkv, cs, "qkv", "cos"));
    KILN_RETURN_IF_ERROR(SameDType(*qkv, sn, "qkv", "sin"));
    if (cs->dims() != sn->dims())
      return absl::InvalidArgumentError(
          absl::StrCat("cos ", DimsStr(cs->dims()), " and sin ", DimsStr(sn->dims()), " differ"));
    const std::vector<int64_t>& td = cs->dims();
    if (td.size() != 3 || (td[0] != 1 && td[0] != nb) || td[1] != s || td[2] % 2 != 0 ||
        td[2] > hd || td[2] == 0)
      return absl::InvalidArgumentError(
          absl::StrCat("cos/sin must be [1 or B, S, R] with R even and 0 < R <= D = ", hd, "; got ",
                       DimsStr(td), " for B = ", nb, ", S = ", s));
    rot = td[2];
    table_batch_stride = td[0] == 1 ? 0 : s * rot;
    cv = ToDoubles(*cs);
    sv = ToDoubles(*sn);
  }
  const double neg_inf = -std::numeric_limits<double>::infinity();
  KILN_RETURN_IF_ERROR(CheckBufferSize({nb, s, h}, "output"));
  KILN_RETURN_IF_ERROR(CheckBufferSize({s}, "score row"));
  std::vector<double> xv = ToDoubles(*qkv);
  // Rotate the Q and K heads in place (V, past Q and K, is untouched).
  if (rot > 0) {
    const int64_t half = rot / 2;
    std::vector<double> head(static_cast<size_t>(rot));
    for (int64_t b = 0; b < nb; ++b)
      for (int64_t t = 0; t < s; ++t) {
        const double* c = &cv[b * table_batch_stride + t * rot];
        const double* sg = &sv[b * table_batch_stride + t * rot];
        for (int64_t n = 0; n < heads + kv_heads; ++n) {
          double* x = &xv[(b * s + t) * packed + n * hd];
          std::copy(x, x + rot, head.begin());
          for (int64_t j = 0; j < rot; ++j) {
            const double r = interleaved ? (j % 2 == 0 ? -head[j + 1] : head[j - 1])
                                         : (j < half ? -head[j + half] : head[j - half]);
            x[j] = head[j] * c[j] + r * sg[j];
          }
        }
      }
  }
  std::vector<double> y(static_cast<size_t>(nb * s * h), 0.0);
  std::vector<double> p(static_cast<size_t>(s));
  // Element d of head n of Q (or of K/V head n) at batch b, position t.
  auto q_at = [&](int64_t b, int64_t t, int64_t n, int64_t dd) {
    return xv[(b * s + t) * packed + n * hd + dd];
  };
  auto kv_at = [&](int64_t b, int64_t t, int part, int64_t n, int64_t dd) {
    return xv[(b * s + t) * packed + h + part * kv_heads * hd + n * hd + dd];
  };
  for (int64_t b = 0; b < nb; ++b) {
    for (int64_t n = 0; n < heads; ++n) {
      const int64_t kvn = n / group;
      for (int64_t i = 0; i < s; ++i) {
        double row_max = neg_inf;
        bool any_nan = false;
        for (int64_t j = 0; j < s; ++j) {
          double score = 0;
          for (int64_t dd = 0; dd < hd; ++dd) score += q_at(b, i, n, dd) * kv_at(b, j, 0, kvn, dd);
          score *= scale;
          if (mask) {
            const double mj = m.At(b, n, i, j);
            if (m.is_bool) {
              if (mj == 0) score = neg_inf;
            } else {
              score += mj;
            }
          }
          if (causal && j > i) score = neg_inf;
          p[j] = score;
          if (score > row_max) row_max = score;
          any_nan |= std::isnan(score);
        }
        double* out = &y[(b * s + i) * h + n * hd];
        if (!Normalize(p, row_max, any_nan)) continue;
        for (int64_t j = 0; j < s; ++j)
          for (int64_t dd = 0; dd < hd; ++dd) out[dd] += p[j] * kv_at(b, j, 1, kvn, dd);
      }
    }
  }
  return std::vector<Tensor>{FromDoubles(qkv->dtype(), {nb, s, h}, y)};
}

// ---------------------------------------------------------------------------------------
// The paged cache's block table: [B, W] int64 ids, checked against the pool [P, H, bs, D].
struct BlockTable {
  const int64_t* ids = nullptr;
  int64_t batch = 0, width = 0, block_size = 0, blocks = 0;
  // Row of the pool (as [P·H·bs] rows) holding head h of sequence b's slot p.
  int64_t Row(int64_t b, int64_t h, int64_t heads, int64_t p) const {
    return (ids[b * width + p / block_size] * heads + h) * block_size + p % block_size;
  }
};

absl::StatusOr<BlockTable> ReadBlockTable(const Tensor& table, const Tensor& pool) {
  if (table.dtype() != DType::kI64 || table.rank() != 2 || pool.rank() != 4)
    return absl::InvalidArgumentError(absl::StrCat(
        "a paged cache needs a pool [P, H, bs, D] and an int64 block table [B, W]; "
        "got ",
        DimsStr(pool.dims()), " and ", DName(table.dtype()), " ", DimsStr(table.dims())));
  BlockTable t{table.data<int64_t>(), table.dims()[0], table.dims()[1], pool.dims()[2],
               pool.dims()[0]};
  for (int64_t i = 0; i < t.batch * t.width; ++i)
    if (t.ids[i] < 0 || t.ids[i] >= t.blocks)
      return absl::InvalidArgumentError(
          absl::StrCat("block table entry [", i / t.width, ", ", i % t.width, "] = ", t.ids[i],
                       " is outside the pool's ", t.blocks, " blocks"));
  return t;
}

// The dense [B, H, W·bs, D] view of a paged pool (the keys or values each sequence sees).
absl::StatusOr<Tensor> GatherPages(const Tensor& pool, const Tensor& table) {
  KILN_ASSIGN_OR_RETURN(const BlockTable t, ReadBlockTable(table, pool));
  const int64_t h = pool.dims()[1], d = pool.dims()[3], c = t.width * t.block_size;
  Tensor out(pool.dtype(), {t.batch, h, c, d});
  const size_t row = static_cast<size_t>(d) * DTypeSize(pool.dtype());
  for (int64_t b = 0; b < t.batch; ++b)
    for (int64_t hh = 0; hh < h; ++hh)
      for (int64_t p = 0; p < c; ++p)
        std::memcpy(out.raw() + ((b * h + hh) * c + p) * row, pool.raw() + t.Row(b, hh, h, p) * row,
                    row);
  return out;
}

// kiln.Attention(q [B, N, S, D], k [B, Nkv, L, D], v [B, Nkv, L, D], mask?) -> Y [B, S, N·D]:
// per batch b and head n (K/V head n / (N / Nkv)),
// P = softmax(scale · Q·Kᵀ + mask (+ causal: −inf where key j > L − S + query i)), Y = P·V
// with the heads merged. A fifth input, the block table [B, W] int64, makes k and v paged
// pools [P, Nkv, bs, D] with L = W·bs (read as GatherPages lays them out).

Result AttentionKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* q, Arg(in, 0, "q"));
  KILN_ASSIGN_OR_RETURN(const Tensor* k, Arg(in, 1, "k"));
  KILN_ASSIGN_OR_RETURN(const Tensor* v, Arg(in, 2, "v"));
  const Tensor* mask = OptArg(in, 3);
  Tensor k_pages, v_pages;  // a paged cache seen densely
  if (const Tensor* table = OptArg(in, 4)) {
    if (k->dims() != v->dims())
      return absl::InvalidArgumentError(
          absl::StrCat("paged k ", DimsStr(k->dims()), " and v ", DimsStr(v->dims()), " differ"));
    KILN_ASSIGN_OR_RETURN(k_pages, GatherPages(*k, *table));
    KILN_ASSIGN_OR_RETURN(v_pages, GatherPages(*v, *table));
    k = &k_pages;
    v = &v_pages;
  }
  KILN_RETURN_IF_ERROR(RequireFloat(*q, "q"));
  KILN_RETURN_IF_ERROR(SameDType(*q, k, "q", "k"));
  KILN_RETURN_IF_ERROR(SameDType(*q, v, "q", "v"));
  KILN_ASSIGN_OR_RETURN(double scale, FloatAttr(node, "scale", std::nullopt));
  KILN_ASSIGN_OR_RETURN(int64_t causal, IntAttr(node, "causal", 0));
  if (causal != 0 && causal != 1)
    return absl::InvalidArgumentError(absl::StrCat("causal must be 0 or 1, got ", causal));
  if (q->rank() != 4 || k->rank() != 4 || v->rank() != 4)
    return absl::InvalidArgumentError(
        absl::StrCat("q, k and v must be [B, N, S, D], [B, Nkv, L, D], [B, Nkv, L, D]; got ",
                     DimsStr(q->dims()), ", ", DimsStr(k->dims()), ", ", DimsStr(v->dims())));
  const int64_t nb = q->dims()[0], heads = q->dims()[1], s = q->dims()[2], hd = q->dims()[3];
  const int64_t kv_heads = k->dims()[1], l = k->dims()[2];
  if (k->dims()[0] != nb || k->dims()[3] != hd || v->dims() != k->dims() || kv_heads <= 0 ||
      heads % kv_heads != 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "k and v must both be [B, Nkv, L, D] with B and D of q and Nkv dividing N; got q ",
        DimsStr(q->dims()), ", k ", DimsStr(k->dims()), ", v ", DimsStr(v->dims())));
  if (causal && l < s)
    return absl::InvalidArgumentError(absl::StrCat(
        "causal attention needs at least as many keys as queries; got S = ", s, ", L = ", l));
  KILN_ASSIGN_OR_RETURN(const ScoreMask m, ReadMask(mask, {nb, heads, s, l}, "[B, N, S, L]"));
  KILN_RETURN_IF_ERROR(CheckBufferSize({nb, s, heads * hd}, "output"));
  const double neg_inf = -std::numeric_limits<double>::infinity();
  const std::vector<double> qv = ToDoubles(*q), kv = ToDoubles(*k), vv = ToDoubles(*v);
  const int64_t h = heads * hd, group = heads / kv_heads;
  std::vector<double> y(static_cast<size_t>(nb * s * h), 0.0);
  std::vector<double> p(static_cast<size_t>(l));
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t n = 0; n < heads; ++n) {
      const double* qh = &qv[(b * heads + n) * s * hd];
      const int64_t kvoff = (b * kv_heads + n / group) * l * hd;
      for (int64_t i = 0; i < s; ++i) {
        double row_max = neg_inf;
        bool any_nan = false;
        for (int64_t j = 0; j < l; ++j) {
          double score = 0;
          for (int64_t dd = 0; dd < hd; ++dd) score += qh[i * hd + dd] * kv[kvoff + j * hd + dd];
          score *= scale;
          if (mask) {
            const double mj = m.At(b, n, i, j);
            if (m.is_bool) {
              if (mj == 0) score = neg_inf;
            } else {
              score += mj;
            }
          }
          if (causal && j > l - s + i) score = neg_inf;
          p[j] = score;
          if (score > row_max) row_max = score;
          any_nan |= std::isnan(score);
        }
        double* out = &y[(b * s + i) * h + n * hd];
        if (!Normalize(p, row_max, any_nan)) continue;
        for (int64_t j = 0; j < l; ++j)
          for (int64_t dd = 0; dd < hd; ++dd) out[dd] += p[j] * vv[kvoff + j * hd + dd];
      }
    }
  return std::vector<Tensor>{FromDoubles(q->dtype(), {nb, s, h}, y)};
}

// ---------------------------------------------------------------------------------------
// kiln.EmbedLayerNorm(input_ids, segment_ids?, position_ids?, word_emb, pos_emb,
// segment_emb?, gamma, beta) -> (Y, Sum?): E = word_emb[ids] + pos_emb[pos]
// (+ segment_emb[seg]), Y = LayerNorm(E) · gamma + beta; Sum = E (rounded once).

absl::Status RequireIds(const Tensor& t, const char* what) {
  if (t.dtype() == DType::kI64 || t.dtype() == DType::kI32) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(what, " must be i64 or i32, got ", DName(t.dtype())));
}

absl::Status RequireTable(const Tensor& t, int64_t h, const char* what) {
  if (t.rank() == 2 && t.dims()[1] == h) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(what, " must have shape [rows, ", h, "], got ", DimsStr(t.dims())));
}

// Row of `table` (rows entries) for id `id`; negative ids count from the end, as ONNX Gather.
absl::StatusOr<int64_t> TableRow(int64_t id, int64_t rows, const char* what) {
  if (id < -rows || id >= rows)
    return absl::InvalidArgumentError(
        absl::StrCat(what, " contains ", id, ", out of range for a table of ", rows, " rows"));
  return id < 0 ? id + rows : id;
}

Result EmbedLayerNormKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* ids, Arg(in, 0, "input_ids"));
  const Tensor* seg = OptArg(in, 1);
  const Tensor* pos = OptArg(in, 2);
  KILN_ASSIGN_OR_RETURN(const Tensor* word, Arg(in, 3, "word_emb"));
  KILN_ASSIGN_OR_RETURN(const Tensor* pos_emb, Arg(in, 4, "pos_emb"));
  const Tensor* seg_emb = OptArg(in, 5);
  KILN_ASSIGN_OR_RETURN(const Tensor* gamma, Arg(in, 6, "gamma"));
  KILN_ASSIGN_OR_RETURN(const Tensor* beta, Arg(in, 7, "beta"));
  KILN_ASSIGN_OR_RETURN(double eps, FloatAttr(node, "epsilon", 1e-12f));
  KILN_RETURN_IF_ERROR(RequireIds(*ids, "input_ids"));
  if (seg) KILN_RETURN_IF_ERROR(RequireIds(*seg, "segment_ids"));
  if (pos) KILN_RETURN_IF_ERROR(RequireIds(*pos, "position_ids"));
  if ((seg == nullptr) != (seg_emb == nullptr))
    return absl::InvalidArgumentError(
        "segment_ids and segment_emb must be given together or both omitted");
  KILN_RETURN_IF_ERROR(RequireFloat(*word, "word_emb"));
  KILN_RETURN_IF_ERROR(SameDType(*word, pos_emb, "word_emb", "pos_emb"));
  KILN_RETURN_IF_ERROR(SameDType(*word, seg_emb, "word_emb", "segment_emb"));
  KILN_RETURN_IF_ERROR(SameDType(*word, gamma, "word_emb", "gamma"));
  KILN_RETURN_IF_ERROR(SameDType(*word, beta, "word_emb", "beta"));
  if (ids->rank() != 2)
    return absl::InvalidArgumentError(
        absl::StrCat("input_ids must have shape [B, S], got ", DimsStr(ids->dims())));
  const int64_t nb = ids->dims()[0], s = ids->dims()[1];
  if (word->rank() != 2)
    return absl::InvalidArgumentError(
        absl::StrCat("word_emb must have shape [vocab, H], got ", DimsStr(word->dims())));
  const int64_t h = word->dims()[1];
  KILN_RETURN_IF_ERROR(RequireTable(*pos_emb, h, "pos_emb"));
  if (seg_emb) KILN_RETURN_IF_ERROR(RequireTable(*seg_emb, h, "segment_emb"));
  KILN_RETURN_IF_ERROR(RequireVector(gamma, h, "gamma"));
  KILN_RETURN_IF_ERROR(RequireVector(beta, h, "beta"));
  if (seg && seg->dims() != ids->dims())
    return absl::InvalidArgumentError(absl::StrCat("segment_ids ", DimsStr(seg->dims()),
                                                   " must have the shape of input_ids ",
                                                   DimsStr(ids->dims())));
  std::vector<int64_t> pos_off;
  if (pos) {
    if (pos->rank() > 2 || !BroadcastsTo(pos->dims(), ids->dims()))
      return absl::InvalidArgumentError(absl::StrCat("position_ids ", DimsStr(pos->dims()),
                                                     " does not broadcast to input_ids ",
                                                     DimsStr(ids->dims())));
    pos_off = BroadcastOffsets(pos->dims(), ids->dims());
  }
  const int64_t vocab = word->dims()[0], max_pos = pos_emb->dims()[0];
  KILN_RETURN_IF_ERROR(CheckBufferSize({nb, s, h}, "output"));
  const std::vector<double> wv = ToDoubles(*word), pv = ToDoubles(*pos_emb);
  const std::vector<double> sv = seg_emb ? ToDoubles(*seg_emb) : std::vector<double>();
  const std::vector<double> gv = ToDoubles(*gamma), bv = ToDoubles(*beta);
  std::vector<double> y(static_cast<size_t>(nb * s * h));
  const bool want_sum = node.num_outputs() > 1;
  std::vector<double> sum(want_sum ? y.size() : 0);
  for (int64_t b = 0; b < nb; ++b) {
    for (int64_t t = 0; t < s; ++t) {
      const int64_t k = b * s + t;
      KILN_ASSIGN_OR_RETURN(int64_t wr, TableRow(ids->GetAsInt64(k), vocab, "input_ids"));
      KILN_ASSIGN_OR_RETURN(int64_t pr,
                            TableRow(pos ? pos->GetAsInt64(pos_off[k]) : t, max_pos,
                                     pos ? "position_ids" : "the implicit position ids 0..S-1"));
      int64_t sr = 0;
      if (seg) {
        KILN_ASSIGN_OR_RETURN(sr, TableRow(seg->GetAsInt64(k), seg_emb->dims()[0], "segment_ids"));
      }
      double* row = &y[k * h];
      for (int64_t j = 0; j < h; ++j) {
        row[j] = wv[wr * h + j] + pv[pr * h + j];
        if (seg) row[j] += sv[sr * h + j];
      }
      if (want_sum)
        for (int64_t j = 0; j < h; ++j) sum[k * h + j] = row[j];
      LayerNormRow(row, h, eps, gv, &bv);
    }
  }
  std::vector<Tensor> outs;
  outs.push_back(FromDoubles(word->dtype(), {nb, s, h}, y));
  if (want_sum) outs.push_back(FromDoubles(word->dtype(), {nb, s, h}, sum));
  return outs;
}

// Divides row `x[0, n)` by max(‖x‖₂, 1e-12) (sentence-transformers' Normalize).
void NormalizeL2(double* x, int64_t n) {
  double sq = 0;
  for (int64_t j = 0; j < n; ++j) sq += x[j] * x[j];
  const double denom = std::max(std::sqrt(sq), 1e-12);
  for (int64_t j = 0; j < n; ++j) x[j] /= denom;
}

// kiln.Pool's and kiln.PackedPool's attributes: mode "mean" or "cls" (kiln.Pool also
// "last"), normalize 0 or 1.
struct PoolAttrs {
  std::string mode;
  int64_t normalize = 0;
};
absl::StatusOr<PoolAttrs> ReadPoolAttrs(const Node& node, bool last_ok) {
  PoolAttrs a;
  KILN_ASSIGN_OR_RETURN(a.mode, StringAttr(node, "mode", std::nullopt));
  KILN_ASSIGN_OR_RETURN(a.normalize, IntAttr(node, "normalize", 0));
  if (a.mode != "mean" && a.mode != "cls" && !(last_ok && a.mode == "last"))
    return absl::InvalidArgumentError(absl::StrCat(
        "mode must be \"mean\", \"cls\"", last_ok ? " or \"last\"" : "", ", got \"", a.mode, "\""));
  if (a.normalize != 0 && a.normalize != 1)
    return absl::InvalidArgumentError(absl::StrCat("normalize must be 0 or 1, got ", a.normalize));
  return a;
}

// ---------------------------------------------------------------------------------------
// kiln.Pool(hidden, mask?): mean: Σ_s h·m / max(Σ_s m, 1e-9); cls: hidden[:, 0]; last:
// hidden[b, the last s with m != 0] (zeros when there is none; S - 1 without a mask);
// normalize=1 divides each row by max(‖Y[b]‖₂, 1e-12).

Result PoolKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* hidden, Arg(in, 0, "hidden"));
  const Tensor* mask = OptArg(in, 1);
  KILN_RETURN_IF_ERROR(RequireFloat(*hidden, "hidden"));
  KILN_ASSIGN_OR_RETURN(const PoolAttrs attrs, ReadPoolAttrs(node, /*last_ok=*/true));
  const std::string& mode = attrs.mode;
  const int64_t normalize = attrs.normalize;
  if (hidden->rank() != 3)
    return absl::InvalidArgumentError(
        absl::StrCat("hidden must have shape [B, S, H], got ", DimsStr(hidden->dims())));
  const int64_t nb = hidden->dims()[0], s = hidden->dims()[1], h = hidden->dims()[2];
  if (mask) {
    if (mask->dtype() != DType::kBool && !IsFloat(mask->dtype()) && !IsInteger(mask->dtype()))
      return absl::InvalidArgumentError(
          absl::StrCat("mask must be numeric or bool, got ", DName(mask->dtype())));
    if (mask->dims() != std::vector<int64_t>{nb, s})
      return absl::InvalidArgumentError(absl::StrCat(
          "mask ", DimsStr(mask->dims()), " must have shape [B, S] = ", DimsStr({nb, s})));
  }
  if (mode == "cls" && s == 0 && nb > 0 && h > 0)
    return absl::InvalidArgumentError("cls pooling needs a sequence length >= 1, got 0");
  KILN_RETURN_IF_ERROR(CheckBufferSize({nb, h}, "output"));
  const std::vector<double> hv = ToDoubles(*hidden);
  std::vector<double> y(static_cast<size_t>(nb * h), 0.0);
  for (int64_t b = 0; b < nb; ++b) {
    double* out = &y[b * h];
    if (mode == "cls") {
      for (int64_t j = 0; j < h; ++j) out[j] = hv[(b * s) * h + j];
    } else if (mode == "last") {
      int64_t last = -1;
      for (int64_t t = 0; t < s; ++t)
        if (!mask || mask->GetAsDouble(b * s + t) != 0.0) last = t;
      if (last >= 0)
        for (int64_t j = 0; j < h; ++j) out[j] = hv[(b * s + last) * h + j];
    } else {
      double count = 0;
      for (int64_t t = 0; t < s; ++t) {
        const double m = mask ? mask->GetAsDouble(b * s + t) : 1.0;
        count += m;
        for (int64_t j = 0; j < h; ++j) out[j] += hv[(b * s + t) * h + j] * m;
      }
      const double denom = std::max(count, 1e-9);
      for (int64_t j = 0; j < h; ++j) out[j] /= denom;
    }
    if (normalize) NormalizeL2(out, h);
  }
  return std::vector<Tensor>{FromDoubles(hidden->dtype(), {nb, h}, y)};
}

// ---------------------------------------------------------------------------------------
// kiln.CacheWrite(cache [B,H,C,D], new [B,H,S,D], positions [B,S] int64) -> [B,H,C,D]: the
// cache with new[b, h, s, :] written at slot positions[b, s] (every other slot as it was).
// A position outside [0, C) or two rows of one sequence at the same slot is an error.
// Paged (a fourth input, the block table [B, W] int64; paged_cache.h): the cache is a pool
// [P, H, bs, D], C = W·bs, and slot p of sequence b is row p % bs of block table[b, p / bs]
// (an id outside [0, P) is an error); rows of different sequences on one slot: the last wins.

Result CacheWriteKernel(const Node&, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* cache, Arg(in, 0, "cache"));
  KILN_ASSIGN_OR_RETURN(const Tensor* rows, Arg(in, 1, "new"));
  KILN_ASSIGN_OR_RETURN(const Tensor* pos, Arg(in, 2, "positions"));
  const Tensor* table = OptArg(in, 3);
  if (cache->rank() != 4 || rows->rank() != 4)
    return absl::InvalidArgumentError(absl::StrCat("cache and new must be rank 4, got ",
                                                   DimsStr(cache->dims()), " and ",
                                                   DimsStr(rows->dims())));
  if (rows->dtype() != cache->dtype())
    return absl::InvalidArgumentError(
        absl::StrCat("new is ", DName(rows->dtype()), " but the cache is ", DName(cache->dtype())));
  std::optional<BlockTable> paged;
  if (table) {
    KILN_ASSIGN_OR_RETURN(paged, ReadBlockTable(*table, *cache));
  }
  const int64_t b = paged ? paged->batch : cache->dims()[0], h = cache->dims()[1],
                c = paged ? paged->width * paged->block_size : cache->dims()[2],
                d = cache->dims()[3], s = rows->dims()[2];
  if (rows->dims()[0] != b || rows->dims()[1] != h || rows->dims()[3] != d)
    return absl::InvalidArgumentError(absl::StrCat("new ", DimsStr(rows->dims()),
                                                   " does not match the cache ",
                                                   DimsStr(cache->dims()), " in B, H or D"));
  if (pos->dtype() != DType::kI64 || pos->dims() != std::vector<int64_t>{b, s})
    return absl::InvalidArgumentError(absl::StrCat("positions must be int64 [", b, ",", s,
                                                   "], got ", DName(pos->dtype()), " ",
                                                   DimsStr(pos->dims())));
  const int64_t* p = pos->data<int64_t>();
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j < s; ++j) {
      if (p[i * s + j] < 0 || p[i * s + j] >= c)
        return absl::InvalidArgumentError(absl::StrCat("position ", p[i * s + j], " of sequence ",
                                                       i, " is outside the cache's ", c, " slots"));
      for (int64_t k = 0; k < j; ++k)
        if (p[i * s + k] == p[i * s + j])
          return absl::InvalidArgumentError(absl::StrCat(
              "sequence ", i, " writes slot ", p[i * s + j], " twice (rows ", k, " and ", j, ")"));
    }
  Tensor out(cache->dtype(), cache->dims());
  if (cache->NumBytes() > 0) std::memcpy(out.raw(), cache->raw(), cache->NumBytes());
  const size_t row = static_cast<size_t>(d) * DTypeSize(cache->dtype());
  for (int64_t i = 0; i < b; ++i)
    for (int64_t hh = 0; hh < h; ++hh)
      for (int64_t j = 0; j < s; ++j) {
        const int64_t at =
            paged ? paged->Row(i, hh, h, p[i * s + j]) : (i * h + hh) * c + p[i * s + j];
        std::memcpy(out.raw() + at * row, rows->raw() + ((i * h + hh) * s + j) * row, row);
      }
  return std::vector<Tensor>{std::move(out)};
}

// ---------------------------------------------------------------------------------------
// Packed-token ops (docs/fused-ops.md, docs/packing.md): tokens of several sequences laid
// end to end, [1, T, ...], with `lengths` [Nseq] (integer) saying how many belong to each
// sequence in order; tokens after the last sequence belong to none.

// The sequence offsets [Nseq + 1] of `lengths`, checked against the T tokens there are.
absl::StatusOr<std::vector<int64_t>> SegmentOffsets(const Tensor* lengths, int64_t tokens) {
  if (!IsInteger(lengths->dtype()) || lengths->rank() != 1)
    return absl::InvalidArgumentError(absl::StrCat("lengths must be an integer vector, got ",
                                                   DName(lengths->dtype()), " ",
                                                   DimsStr(lengths->dims())));
  std::vector<int64_t> off(static_cast<size_t>(lengths->NumElements() + 1), 0);
  for (int64_t b = 0; b < lengths->NumElements(); ++b) {
    const int64_t len = lengths->GetAsInt64(b);
    if (len < 0)
      return absl::InvalidArgumentError(
          absl::StrCat("sequence ", b, " has a negative length (", len, ")"));
    if (len > tokens - off[b])
      return absl::InvalidArgumentError(
          absl::StrCat("the sequence lengths add up to more than the ", tokens,
                       " tokens (at sequence ", b, ")"));
    off[b + 1] = off[b] + len;
  }
  return off;
}

absl::Status RequirePackedRows(const Tensor& t, const char* what, int rank) {
  if (t.rank() == rank && t.dims()[0] == 1) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      what, " must be packed tokens [1, T", rank == 3 ? ", C" : "", "], got ", DimsStr(t.dims())));
}

// kiln.PackedAttention(qkv [1, T, (N + 2·Nkv)·D], lengths [Nseq]) -> Y [1, T, N·D]: the
// attention of kiln.MultiHeadAttention (no mask, not causal) within each sequence; tokens of
// no sequence get zeros.
Result PackedAttentionKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* qkv, Arg(in, 0, "qkv"));
  KILN_ASSIGN_OR_RETURN(const Tensor* lengths, Arg(in, 1, "lengths"));
  KILN_RETURN_IF_ERROR(RequireFloat(*qkv, "qkv"));
  KILN_ASSIGN_OR_RETURN(int64_t heads, IntAttr(node, "num_heads", std::nullopt));
  KILN_ASSIGN_OR_RETURN(int64_t kv_heads, IntAttr(node, "num_kv_heads", heads));
  KILN_ASSIGN_OR_RETURN(double scale, FloatAttr(node, "scale", std::nullopt));
  if (heads <= 0 || kv_heads <= 0 || heads % kv_heads != 0)
    return absl::InvalidArgumentError(absl::StrCat("num_heads (", heads, ") and num_kv_heads (",
                                                   kv_heads, ") must be positive, Nkv dividing N"));
  KILN_RETURN_IF_ERROR(RequirePackedRows(*qkv, "qkv", 3));
  const int64_t t = qkv->dims()[1], packed = qkv->dims()[2], parts = heads + 2 * kv_heads;
  if (packed % parts != 0)
    return absl::InvalidArgumentError(absl::StrCat("qkv last dim ", packed,
                                                   " is not divisible by num_heads + 2 * "
                                                   "num_kv_heads = ",
                                                   parts));
  KILN_ASSIGN_OR_RETURN(const std::vector<int64_t> off, SegmentOffsets(lengths, t));
  const int64_t hd = packed / parts, h = heads * hd, group = heads / kv_heads;
  KILN_RETURN_IF_ERROR(CheckBufferSize({t, h}, "output"));
  const std::vector<double> xv = ToDoubles(*qkv);
  std::vector<double> y(static_cast<size_t>(t * h), 0.0), p;
  for (size_t b = 0; b + 1 < off.size(); ++b) {
    const int64_t o = off[b], len = off[b + 1] - off[b];
    p.assign(static_cast<size_t>(len), 0.0);
    for (int64_t n = 0; n < heads; ++n) {
      const int64_t kq = h + (n / group) * hd, vq = h + kv_heads * hd + (n / group) * hd;
      for (int64_t i = 0; i < len; ++i) {
        double row_max = -std::numeric_limits<double>::infinity();
        bool any_nan = false;
        for (int64_t j = 0; j < len; ++j) {
          double score = 0;
          for (int64_t d = 0; d < hd; ++d)
            score += xv[(o + i) * packed + n * hd + d] * xv[(o + j) * packed + kq + d];
          p[j] = score * scale;
          row_max = std::max(row_max, p[j]);
          any_nan |= std::isnan(p[j]);
        }
        if (!Normalize(p, row_max, any_nan)) continue;
        double* out = &y[(o + i) * h + n * hd];
        for (int64_t j = 0; j < len; ++j)
          for (int64_t d = 0; d < hd; ++d) out[d] += p[j] * xv[(o + j) * packed + vq + d];
      }
    }
  }
  return std::vector<Tensor>{FromDoubles(qkv->dtype(), {1, t, h}, y)};
}

// kiln.PackedPool(hidden [1, T, H], lengths [Nseq]) -> Y [Nseq, H]: kiln.Pool per sequence
// (mean over its tokens, or its first token for "cls"); an empty sequence pools to zeros.
Result PackedPoolKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* hidden, Arg(in, 0, "hidden"));
  KILN_ASSIGN_OR_RETURN(const Tensor* lengths, Arg(in, 1, "lengths"));
  KILN_RETURN_IF_ERROR(RequireFloat(*hidden, "hidden"));
  KILN_ASSIGN_OR_RETURN(const PoolAttrs attrs, ReadPoolAttrs(node, /*last_ok=*/false));
  const std::string& mode = attrs.mode;
  const int64_t normalize = attrs.normalize;
  KILN_RETURN_IF_ERROR(RequirePackedRows(*hidden, "hidden", 3));
  const int64_t t = hidden->dims()[1], h = hidden->dims()[2];
  KILN_ASSIGN_OR_RETURN(const std::vector<int64_t> off, SegmentOffsets(lengths, t));
  const int64_t nb = static_cast<int64_t>(off.size()) - 1;
  KILN_RETURN_IF_ERROR(CheckBufferSize({nb, h}, "output"));
  const std::vector<double> hv = ToDoubles(*hidden);
  std::vector<double> y(static_cast<size_t>(nb * h), 0.0);
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t len = off[b + 1] - off[b];
    double* out = &y[b * h];
    if (len == 0) continue;
    const int64_t rows = mode == "cls" ? 1 : len;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < h; ++j) out[j] += hv[(off[b] + r) * h + j];
    for (int64_t j = 0; j < h; ++j) out[j] /= static_cast<double>(rows);
    if (normalize) NormalizeL2(out, h);
  }
  return std::vector<Tensor>{FromDoubles(hidden->dtype(), {nb, h}, y)};
}

// kiln.PackedPositions(lengths [Nseq], tokens [1, T]) -> int64 [1, T]: each token's position
// in its sequence (0 for tokens of no sequence). `tokens` gives T only; its values are unread.
Result PackedPositionsKernel(const Node&, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* lengths, Arg(in, 0, "lengths"));
  KILN_ASSIGN_OR_RETURN(const Tensor* tokens, Arg(in, 1, "tokens"));
  KILN_RETURN_IF_ERROR(RequirePackedRows(*tokens, "tokens", 2));
  const int64_t t = tokens->dims()[1];
  KILN_ASSIGN_OR_RETURN(const std::vector<int64_t> off, SegmentOffsets(lengths, t));
  Tensor out(DType::kI64, {1, t});
  int64_t* p = out.data<int64_t>();
  std::fill(p, p + t, 0);
  for (size_t b = 0; b + 1 < off.size(); ++b)
    for (int64_t i = off[b]; i < off[b + 1]; ++i) p[i] = i - off[b];
  return std::vector<Tensor>{std::move(out)};
}

// kiln.PackedCumSum(x [1, T], lengths [Nseq]) {exclusive} -> x's type: ONNX CumSum along the
// tokens of each sequence (floats in their own type, integers wrapping, as CumSum); tokens
// of no sequence get 0.
template <typename T>
void SegmentCumSum(const T* x, T* y, const std::vector<int64_t>& off, int64_t t, bool exclusive) {
  // Integers wrap: summed as their unsigned type.
  using Acc = typename std::conditional_t<std::is_integral_v<T>, std::make_unsigned<T>,
                                          std::type_identity<T>>::type;
  std::fill(y, y + t, T(0));
  for (size_t b = 0; b + 1 < off.size(); ++b) {
    Acc acc = 0;
    for (int64_t i = off[b]; i < off[b + 1]; ++i) {
      if (exclusive) y[i] = static_cast<T>(acc);
      acc = static_cast<Acc>(acc + static_cast<Acc>(x[i]));
      if (!exclusive) y[i] = static_cast<T>(acc);
    }
  }
}

Result PackedCumSumKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, "x"));
  KILN_ASSIGN_OR_RETURN(const Tensor* lengths, Arg(in, 1, "lengths"));
  KILN_RETURN_IF_ERROR(RequirePackedRows(*x, "x", 2));
  const int64_t t = x->dims()[1];
  KILN_ASSIGN_OR_RETURN(const std::vector<int64_t> off, SegmentOffsets(lengths, t));
  const bool exclusive = node.attr_int_or("exclusive", 0) != 0;
  Tensor out(x->dtype(), x->dims());
  switch (x->dtype()) {
    case DType::kI32:
      SegmentCumSum(x->data<int32_t>(), out.data<int32_t>(), off, t, exclusive);
      break;
    case DType::kI64:
      SegmentCumSum(x->data<int64_t>(), out.data<int64_t>(), off, t, exclusive);
      break;
    case DType::kF32:
      SegmentCumSum(x->data<float>(), out.data<float>(), off, t, exclusive);
      break;
    case DType::kF64:
      SegmentCumSum(x->data<double>(), out.data<double>(), off, t, exclusive);
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("x must be i32, i64, f32 or f64, got ", DName(x->dtype())));
  }
  return std::vector<Tensor>{std::move(out)};
}

}  // namespace

void RegisterFusedKernels(KernelTable& table) {
  auto add = [&](const char* op, KernelFn fn) { table[KernelKey("kiln", op)] = fn; };
  add("Linear", &LinearKernel);
  add("QuantLinear", &QuantLinearKernel);
  add("BlockQuantLinear", &BlockQuantLinearKernel);
  add("BlockQuantGather", &BlockQuantGatherKernel);
  add("SkipLayerNorm", &SkipLayerNormKernel);
  add("RMSNorm", &RMSNormKernel);
  add("SkipRMSNorm", &SkipRMSNormKernel);
  add("Rotary", &RotaryKernel);
  add("Glu", &GluKernel);
  add("MultiHeadAttention", &MultiHeadAttentionKernel);
  add("Attention", &AttentionKernel);
  add("EmbedLayerNorm", &EmbedLayerNormKernel);
  add("Pool", &PoolKernel);
  add("CacheWrite", &CacheWriteKernel);
  add("PackedAttention", &PackedAttentionKernel);
  add("PackedPool", &PackedPoolKernel);
  add("PackedPositions", &PackedPositionsKernel);
  add("PackedCumSum", &PackedCumSumKernel);
}

}  // namespace kiln::reference
