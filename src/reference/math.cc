// Math reference kernels: MatMul, MatMulInteger, QLinearMatMul, Gemm, Softmax, LogSoftmax, Hardmax,
// LayerNormalization, RMSNormalization and
// the Reduce* family (opset-21 forms: reduction axes come as an optional i64 input). Accuracy
// policy: floating-point data (f16, bf16, f32, f64) is accumulated in double and rounded once to
// the output type, so this oracle is at least as accurate as any implementation under test; integer
// MatMul and integer reductions stay in integer arithmetic with two's-complement wrap-around (no
// precision loss through double for int64). Softmax-type kernels subtract the row maximum first
// (numerically stable). Limits: Gemm supports float dtypes only; loops are plain (clarity over
// speed).
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kiln/support/status.h"
#include "reference/kernel_util.h"
#include "reference/kernels.h"

namespace kiln::reference {
namespace {

absl::Status RequireFloat(const std::string& op, const Tensor& t) {
  return IsFloat(t.dtype()) ? absl::OkStatus() : UnsupportedDType(op, t.dtype());
}

int64_t Product(absl::Span<const int64_t> d, size_t begin = 0, size_t end = SIZE_MAX) {
  int64_t p = 1;
  for (size_t i = begin; i < std::min(end, d.size()); ++i) p *= d[i];
  return p;
}

// Wrap-around integer store of an int64 into any integer dtype.
void StoreWrapped(Tensor& t, int64_t i, uint64_t v) {
  std::byte* p = t.raw();
  switch (t.dtype()) {
    case DType::kI8:
      reinterpret_cast<int8_t*>(p)[i] = static_cast<int8_t>(v);
      break;
    case DType::kU8:
      reinterpret_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v);
      break;
    case DType::kI16:
      reinterpret_cast<int16_t*>(p)[i] = static_cast<int16_t>(v);
      break;
    case DType::kU16:
      reinterpret_cast<uint16_t*>(p)[i] = static_cast<uint16_t>(v);
      break;
    case DType::kI32:
      reinterpret_cast<int32_t*>(p)[i] = static_cast<int32_t>(v);
      break;
    case DType::kU32:
      reinterpret_cast<uint32_t*>(p)[i] = static_cast<uint32_t>(v);
      break;
    case DType::kI64:
      reinterpret_cast<int64_t*>(p)[i] = static_cast<int64_t>(v);
      break;
    case DType::kU64:
      reinterpret_cast<uint64_t*>(p)[i] = v;
      break;
    case DType::kBool:
      reinterpret_cast<uint8_t*>(p)[i] = v != 0;
      break;
    default:
      break;
  }
}

// ---------------------------------------------------------------------------------------
// MatMul: numpy matmul semantics (1-D operands get a dim prepended/appended and removed
// again; batch dims broadcast).

Result MatMulKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* a, Arg(in, 0, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* b, Arg(in, 1, node.op()));
  if (a->dtype() != b->dtype())
    return absl::InvalidArgumentError(
        absl::StrCat("input dtypes differ (", DName(a->dtype()), " vs ", DName(b->dtype()), ")"));
  const DType dt = a->dtype();
  if (!IsFloat(dt) && !IsInteger(dt)) return UnsupportedDType(node.op(), dt);
  if (a->rank() == 0 || b->rank() == 0)
    return absl::InvalidArgumentError("MatMul operands must have rank >= 1");
  std::vector<int64_t> ad = a->dims(), bd = b->dims();
  const bool drop_m = ad.size() == 1, drop_n = bd.size() == 1;
  if (drop_m) ad.insert(ad.begin(), 1);
  if (drop_n) bd.push_back(1);
  const int64_t m = ad[ad.size() - 2], k = ad.back(), n = bd.back();
  if (bd[bd.size() - 2] != k)
    return absl::InvalidArgumentError(
        absl::StrCat("inner dimensions differ: ", DimsStr(a->dims()), " x ", DimsStr(b->dims())));
  const std::vector<int64_t> abatch(ad.begin(), ad.end() - 2), bbatch(bd.begin(), bd.end() - 2);
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> batch, BroadcastShapes(abatch, bbatch));
  std::vector<int64_t> out_dims = batch;
  if (!drop_m) out_dims.push_back(m);
  if (!drop_n) out_dims.push_back(n);
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::Create(dt, out_dims));
  const std::vector<int64_t> aoff = BroadcastOffsets(abatch, batch);
  const std::vector<int64_t> boff = BroadcastOffsets(bbatch, batch);
  const int64_t nb = Product(batch);
  if (IsFloat(dt)) {
    const std::vector<double> av = ToDoubles(*a), bv = ToDoubles(*b);
    std::vector<double> row(static_cast<size_t>(n));
    for (int64_t bi = 0; bi < nb; ++bi) {
      const double* pa = av.data() + aoff[bi] * m * k;
      const double* pb = bv.data() + boff[bi] * k * n;
      for (int64_t i = 0; i < m; ++i) {
        std::fill(row.begin(), row.end(), 0.0);
        for (int64_t kk = 0; kk < k; ++kk) {
          const double x = pa[i * k + kk];
          const double* brow = pb + kk * n;
          for (int64_t j = 0; j < n; ++j) row[j] += x * brow[j];
        }
        for (int64_t j = 0; j < n; ++j) out.SetFromDouble((bi * m + i) * n + j, row[j]);
      }
    }
  } else {
    std::vector<uint64_t> av(a->NumElements()), bv(b->NumElements());
    for (size_t i = 0; i < av.size(); ++i) av[i] = static_cast<uint64_t>(a->GetAsInt64(i));
    for (size_t i = 0; i < bv.size(); ++i) bv[i] = static_cast<uint64_t>(b->GetAsInt64(i));
    for (int64_t bi = 0; bi < nb; ++bi) {
      const uint64_t* pa = av.data() + aoff[bi] * m * k;
      const uint64_t* pb = bv.data() + boff[bi] * k * n;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          uint64_t acc = 0;
          for (int64_t kk = 0; kk < k; ++kk) acc += pa[i * k + kk] * pb[kk * n + j];
          StoreWrapped(out, (bi * m + i) * n + j, acc);
        }
    }
  }
  return std::vector<Tensor>{std::move(out)};
}

// MatMulInteger: (A - a_zero_point) · (B - b_zero_point) in int32, MatMul's shapes. A and B
// are u8 or i8; a zero point has its operand's dtype and is one element (per tensor), or 1-D
// with one per row of A / column of B.
absl::StatusOr<Tensor> MinusZeroPoint(const Tensor& t, const Tensor* zp, bool rows,
                                      const std::string& what) {
  if (t.dtype() != DType::kU8 && t.dtype() != DType::kI8)
    return UnsupportedDType("MatMulInteger", t.dtype());
  if (zp != nullptr && zp->dtype() != t.dtype())
    return absl::InvalidArgumentError(absl::StrCat(what, "'s zero point is ", DName(zp->dtype()),
                                                   ", ", what, " is ", DName(t.dtype())));
  const int64_t r = t.rank();
  // Per row of A: the zero point indexes dim -2; per column of B: dim -1.
  const int64_t axis_len = r >= 2 ? t.dims()[rows ? r - 2 : r - 1] : 1;
  const bool per_tensor = zp == nullptr || (zp->NumElements() == 1 && zp->rank() <= 1);
  if (!per_tensor && (r < 2 || zp->rank() != 1 || zp->dims()[0] != axis_len))
    return absl::InvalidArgumentError(absl::StrCat(
        what, "'s zero point ", DimsStr(zp->dims()), " is neither one element nor one per ",
        rows ? "row" : "column", " of ", what, " ", DimsStr(t.dims())));
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::Create(DType::kI32, t.dims()));
  int32_t* o = out.data<int32_t>();
  const int64_t cols = r >= 1 ? t.dims().back() : 1;
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    int64_t z = 0;
    if (zp != nullptr) z = zp->GetAsInt64(per_tensor ? 0 : rows ? (i / cols) % axis_len : i % cols);
    o[i] = static_cast<int32_t>(t.GetAsInt64(i) - z);
  }
  return out;
}

Result MatMulIntegerKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* a, Arg(in, 0, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* b, Arg(in, 1, node.op()));
  KILN_ASSIGN_OR_RETURN(Tensor a32, MinusZeroPoint(*a, OptArg(in, 2), true, "A"));
  KILN_ASSIGN_OR_RETURN(Tensor b32, MinusZeroPoint(*b, OptArg(in, 3), false, "B"));
  const Tensor* ins[] = {&a32, &b32};
  return MatMulKernel(node, ins);
}

// QLinearMatMul: y = saturate(rne((A - a_zp)·(B - b_zp) · a_scale·b_scale/y_scale + y_zp)),
// the integer product exact, the scale in f32 (per column of B when b_scale is 1-D),
// applied in double, as onnx's reference computes it.
Result QLinearMatMulKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* a, Arg(in, 0, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* as, Arg(in, 1, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* b, Arg(in, 3, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* bs, Arg(in, 4, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* ys, Arg(in, 6, node.op()));
  const Tensor* yzp = OptArg(in, 7);
  for (const Tensor* s : {as, bs, ys})
    if (!IsFloat(s->dtype())) return UnsupportedDType(node.op(), s->dtype());
  if (yzp != nullptr && (yzp->NumElements() != 1 || !IsInteger(yzp->dtype())))
    return absl::InvalidArgumentError("y_zero_point must be one integer");
  KILN_ASSIGN_OR_RETURN(Tensor a32, MinusZeroPoint(*a, OptArg(in, 2), true, "A"));
  KILN_ASSIGN_OR_RETURN(Tensor b32, MinusZeroPoint(*b, OptArg(in, 5), false, "B"));
  const Tensor* ins[] = {&a32, &b32};
  KILN_ASSIGN_OR_RETURN(std::vector<Tensor> c, MatMulKernel(node, ins));
  const Tensor& prod = c[0];
  const int64_t n = prod.rank() >= 1 ? prod.dims().back() : 1;
  if (as->NumElements() != 1 || ys->NumElements() != 1 ||
      (bs->NumElements() != 1 && bs->NumElements() != n))
    return absl::InvalidArgumentError(
        absl::StrCat("scales must be one value each (b_scale: or one per column of ", n, "), got ",
                     as->NumElements(), ", ", bs->NumElements(), ", ", ys->NumElements()));
  const DType out = yzp != nullptr ? yzp->dtype() : a->dtype();
  const auto [lo, hi] = IntegerRange(out);
  const double zp = yzp != nullptr ? yzp->GetAsDouble(0) : 0.0;
  KILN_ASSIGN_OR_RETURN(Tensor y, Tensor::Create(out, prod.dims()));
  for (int64_t i = 0; i < prod.NumElements(); ++i) {
    const float scale = static_cast<float>(as->GetAsDouble(0)) *
                        static_cast<float>(bs->GetAsDouble(bs->NumElements() == 1 ? 0 : i % n)) /
                        static_cast<float>(ys->GetAsDouble(0));
    y.SetFromDouble(i, std::clamp(std::nearbyint(prod.GetAsDouble(i) * scale + zp), lo, hi));
  }
  return std::vector<Tensor>{std::move(y)};
}

// ---------------------------------------------------------------------------------------
// Gemm: Y = alpha * A' * B' + beta * C, A' = transA ? A^T : A (2-D), C unidirectionally
// broadcast to [M, N] and optional.

Result GemmKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* a, Arg(in, 0, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* b, Arg(in, 1, node.op()));
  const Tensor* c = OptArg(in, 2);
  KILN_RETURN_IF_ERROR(RequireFloat(node.op(), *a));
  if (a->dtype() != b->dtype() || (c && c->dtype() != a->dtype()))
    return absl::InvalidArgumentError("Gemm inputs must share one dtype");
  if (a->rank() != 2 || b->rank() != 2)
    return absl::InvalidArgumentError(absl::StrCat(
        "Gemm needs 2-D A and B, got ", DimsStr(a->dims()), " and ", DimsStr(b->dims())));
  const bool ta = node.attr_int_or("transA", 0) != 0;
  const bool tb = node.attr_int_or("transB", 0) != 0;
  const double alpha = node.attr_float_or("alpha", 1.0f);
  const double beta = node.attr_float_or("beta", 1.0f);
  const int64_t m = ta ? a->dims()[1] : a->dims()[0];
  const int64_t k = ta ? a->dims()[0] : a->dims()[1];
  const int64_t kb = tb ? b->dims()[1] : b->dims()[0];
  const int64_t n = tb ? b->dims()[0] : b->dims()[1];
  if (k != kb)
    return absl::InvalidArgumentError(
        absl::StrCat("inner dimensions differ: A' is ", m, "x", k, ", B' is ", kb, "x", n));
  const std::vector<int64_t> out_dims = {m, n};
  std::vector<int64_t> coff;
  std::vector<double> cv;
  if (c) {
    if (!BroadcastsTo(c->dims(), out_dims))
      return absl::InvalidArgumentError(absl::StrCat("C of shape ", DimsStr(c->dims()),
                                                     " does not broadcast to ", DimsStr(out_dims)));
    coff = BroadcastOffsets(c->dims(), out_dims);
    cv = ToDoubles(*c);
  }
  const std::vector<double> av = ToDoubles(*a), bv = ToDoubles(*b);
  std::vector<double> y(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t kk = 0; kk < k; ++kk) {
        const double x = ta ? av[kk * m + i] : av[i * k + kk];
        const double w = tb ? bv[j * k + kk] : bv[kk * n + j];
        acc += x * w;
      }
      double v = alpha * acc;
      if (c) v += beta * cv[coff[i * n + j]];
      y[i * n + j] = v;
    }
  return std::vector<Tensor>{FromDoubles(a->dtype(), out_dims, y)};
}

// ---------------------------------------------------------------------------------------
// Softmax / LogSoftmax / Hardmax (opset 13+): along one axis, default -1. Hardmax puts 1
// at the first maximum of each row, 0 elsewhere.

enum class RowOp { kSoftmax, kLogSoftmax, kHardmax };

template <RowOp kOp>
Result SoftmaxKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  KILN_RETURN_IF_ERROR(RequireFloat(node.op(), *x));
  if (x->rank() == 0) return absl::InvalidArgumentError("input must have rank >= 1");
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.attr_int_or("axis", -1), x->rank()));
  const auto& d = x->dims();
  const int64_t outer = Product(d, 0, axis), len = d[axis], inner = Product(d, axis + 1);
  std::vector<double> v = ToDoubles(*x);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t q = 0; q < inner; ++q) {
      double* base = v.data() + o * len * inner + q;
      if constexpr (kOp == RowOp::kHardmax) {
        int64_t best = 0;
        for (int64_t j = 1; j < len; ++j)
          if (base[j * inner] > base[best * inner]) best = j;
        for (int64_t j = 0; j < len; ++j) base[j * inner] = j == best ? 1.0 : 0.0;
        continue;
      }
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < len; ++j) mx = std::max(mx, base[j * inner]);
      if (std::isinf(mx)) mx = 0;  // all -inf row or an inf: avoid inf - inf
      double sum = 0;
      for (int64_t j = 0; j < len; ++j) sum += std::exp(base[j * inner] - mx);
      const double log_sum = std::log(sum);
      for (int64_t j = 0; j < len; ++j) {
        const double s = base[j * inner] - mx;
        base[j * inner] = kOp == RowOp::kLogSoftmax ? s - log_sum : std::exp(s) / sum;
      }
    }
  return std::vector<Tensor>{FromDoubles(x->dtype(), d, v)};
}

// The normalizations' stash_type (default 1, f32): the precision ONNX asks the statistics
// in at least; these kernels compute in double, so only its validity matters.
absl::StatusOr<DType> StashType(const Node& node) {
  const int64_t stash = node.attr_int_or("stash_type", 1);
  const std::optional<DType> dt = DTypeFromOnnx(static_cast<int32_t>(stash));
  if (!dt || !IsFloat(*dt))
    return absl::InvalidArgumentError(
        absl::StrCat("stash_type ", stash, " is not a floating-point type"));
  return *dt;
}

// ---------------------------------------------------------------------------------------
// LayerNormalization (opset 17): normalize over dims [axis, rank); Scale and optional B
// broadcast to X; optional outputs Mean and InvStdDev (dtype = stash_type) keep X's rank
// with the normalized dims set to 1.

Result LayerNormKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* scale, Arg(in, 1, node.op()));
  const Tensor* bias = OptArg(in, 2);
  KILN_RETURN_IF_ERROR(RequireFloat(node.op(), *x));
  if (scale->dtype() != x->dtype() || (bias && bias->dtype() != x->dtype()))
    return absl::InvalidArgumentError("X, Scale and B must share one dtype");
  if (x->rank() == 0) return absl::InvalidArgumentError("X must have rank >= 1");
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.attr_int_or("axis", -1), x->rank()));
  const double eps = node.attr_float_or("epsilon", 1e-5f);
  KILN_ASSIGN_OR_RETURN(const DType stash_dt, StashType(node));
  const auto& d = x->dims();
  for (const Tensor* t : {scale, bias}) {
    if (t && !BroadcastsTo(t->dims(), d))
      return absl::InvalidArgumentError(
          absl::StrCat("shape ", DimsStr(t->dims()), " does not broadcast to X ", DimsStr(d)));
  }
  const int64_t outer = Product(d, 0, axis), len = Product(d, axis);
  const std::vector<double> xv = ToDoubles(*x), sv = ToDoubles(*scale);
  const std::vector<double> bv = bias ? ToDoubles(*bias) : std::vector<double>();
  const std::vector<int64_t> soff = BroadcastOffsets(scale->dims(), d);
  const std::vector<int64_t> boff = bias ? BroadcastOffsets(bias->dims(), d) : soff;
  std::vector<double> y(xv.size()), mean_v(outer), inv_v(outer);
  for (int64_t o = 0; o < outer; ++o) {
    const int64_t base = o * len;
    double mean = 0;
    for (int64_t j = 0; j < len; ++j) mean += xv[base + j];
    mean /= static_cast<double>(len);
    double var = 0;
    for (int64_t j = 0; j < len; ++j) var += (xv[base + j] - mean) * (xv[base + j] - mean);
    var /= static_cast<double>(len);
    const double inv = 1.0 / std::sqrt(var + eps);
    mean_v[o] = mean;
    inv_v[o] = inv;
    for (int64_t j = 0; j < len; ++j) {
      const int64_t i = base + j;
      double v = (xv[i] - mean) * inv * sv[soff[i]];
      if (bias) v += bv[boff[i]];
      y[i] = v;
    }
  }
  std::vector<int64_t> stat_dims(d.begin(), d.begin() + axis);
  stat_dims.resize(d.size(), 1);
  std::vector<Tensor> outs;
  outs.push_back(FromDoubles(x->dtype(), d, y));
  if (node.num_outputs() > 1) outs.push_back(FromDoubles(stash_dt, stat_dims, mean_v));
  if (node.num_outputs() > 2) outs.push_back(FromDoubles(stash_dt, stat_dims, inv_v));
  return outs;
}

// ---------------------------------------------------------------------------------------
// RMSNormalization (opset 23): Y = X / sqrt(mean(X² over dims [axis, rank)) + epsilon) ·
// scale, scale broadcast to X; Y has scale's dtype. Computed in double (stash_type, the
// precision ONNX asks for at least, must name a float type).

Result RMSNormKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* scale, Arg(in, 1, node.op()));
  KILN_RETURN_IF_ERROR(RequireFloat(node.op(), *x));
  KILN_RETURN_IF_ERROR(RequireFloat(node.op(), *scale));
  if (x->rank() == 0) return absl::InvalidArgumentError("X must have rank >= 1");
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.attr_int_or("axis", -1), x->rank()));
  const double eps = node.attr_float_or("epsilon", 1e-5f);
  KILN_RETURN_IF_ERROR(StashType(node).status());
  const auto& d = x->dims();
  if (!BroadcastsTo(scale->dims(), d))
    return absl::InvalidArgumentError(absl::StrCat("scale shape ", DimsStr(scale->dims()),
                                                   " does not broadcast to X ", DimsStr(d)));
  const int64_t outer = Product(d, 0, axis), len = Product(d, axis);
  const std::vector<double> xv = ToDoubles(*x), sv = ToDoubles(*scale);
  const std::vector<int64_t> soff = BroadcastOffsets(scale->dims(), d);
  std::vector<double> y(xv.size());
  for (int64_t o = 0; o < outer; ++o) {
    const int64_t base = o * len;
    double ms = 0;
    for (int64_t j = 0; j < len; ++j) ms += xv[base + j] * xv[base + j];
    const double inv = 1.0 / std::sqrt(ms / static_cast<double>(len) + eps);
    for (int64_t j = 0; j < len; ++j) y[base + j] = xv[base + j] * inv * sv[soff[base + j]];
  }
  return std::vector<Tensor>{FromDoubles(scale->dtype(), d, y)};
}

// ---------------------------------------------------------------------------------------
// Reductions. Empty reduced sets give the identity of the operation (Sum 0, Prod 1, Max
// -inf or the dtype's minimum, Min +inf or the maximum, LogSum/LogSumExp -inf, Mean NaN
// for floats). With empty axes and noop_with_empty_axes=1 nothing is reduced, but the
// per-element part still applies (ReduceL2 gives |x|, ReduceSumSquare x^2), as in the
// ONNX reference implementation.

enum class Red { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kSumSquare, kLogSum, kLogSumExp };

struct ReducePlan {
  std::vector<int64_t> out_dims;
  std::vector<int64_t> out_index;  // for each input element, its output element
  int64_t out_count = 0;
  int64_t group = 1;  // input elements per output element
};

absl::StatusOr<ReducePlan> PlanReduce(const Node& node, const Tensor& x, const Tensor* axes_t) {
  const int r = x.rank();
  std::vector<bool> reduced(r, false);
  std::vector<int64_t> axes;
  if (axes_t) {
    if (!IsInteger(axes_t->dtype()) || axes_t->rank() > 1)
      return absl::InvalidArgumentError("axes must be a 1-D integer tensor");
    axes = ToInt64Vector(*axes_t);
  }
  if (axes.empty()) {
    if (node.attr_int_or("noop_with_empty_axes", 0) == 0) reduced.assign(r, true);
  } else {
    for (int64_t a : axes) {
      KILN_ASSIGN_OR_RETURN(int ax, NormalizeAxis(a, r));
      if (reduced[ax])
        return absl::InvalidArgumentError(absl::StrCat("axis ", a, " is repeated in axes"));
      reduced[ax] = true;
    }
  }
  const bool keep = node.attr_int_or("keepdims", 1) != 0;
  ReducePlan p;
  std::vector<int64_t> kept_dims(r);
  for (int i = 0; i < r; ++i) {
    kept_dims[i] = reduced[i] ? 1 : x.dims()[i];
    if (reduced[i]) p.group *= x.dims()[i];
    if (!reduced[i] || keep) p.out_dims.push_back(kept_dims[i]);
  }
  p.out_count = Product(kept_dims);
  // Map each input element to its output element: kept_dims broadcast to x's dims.
  p.out_index = BroadcastOffsets(kept_dims, x.dims());
  // BroadcastOffsets treats size-1 source dims as broadcast; a kept dim of size 1 in x is
  // also size 1 in kept_dims, so the mapping is exact.
  return p;
}

template <Red kOp>
Result ReduceKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  const DType dt = x->dtype();
  const bool is_bool = dt == DType::kBool;
  if (!IsFloat(dt) && !IsInteger(dt) && !(is_bool && (kOp == Red::kMax || kOp == Red::kMin)))
    return UnsupportedDType(node.op(), dt);
  KILN_ASSIGN_OR_RETURN(ReducePlan p, PlanReduce(node, *x, OptArg(in, 1)));
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::Create(dt, p.out_dims));
  const int64_t n = x->NumElements();
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const bool integer_path =
      !IsFloat(dt) && kOp != Red::kL2 && kOp != Red::kLogSum && kOp != Red::kLogSumExp;
  if (!integer_path) {
    const std::vector<double> xv = ToDoubles(*x);
    std::vector<double> acc(p.out_count);
    std::vector<double> mx;
    double init = 0;
    if (kOp == Red::kProd) init = 1;
    if (kOp == Red::kMax) init = -kInf;
    if (kOp == Red::kMin) init = kInf;
    std::fill(acc.begin(), acc.end(), init);
    if (kOp == Red::kLogSumExp) {
      mx.assign(p.out_count, -kInf);
      for (int64_t i = 0; i < n; ++i) mx[p.out_index[i]] = std::max(mx[p.out_index[i]], xv[i]);
      for (double& m : mx)
        if (std::isinf(m)) m = 0;  // keep -inf/+inf results without inf - inf
    }
    for (int64_t i = 0; i < n; ++i) {
      double& a = acc[p.out_index[i]];
      const double v = xv[i];
      switch (kOp) {
        case Red::kSum:
        case Red::kMean:
        case Red::kLogSum:
          a += v;
          break;
        case Red::kProd:
          a *= v;
          break;
        case Red::kMax:
          a = (std::isnan(a) || std::isnan(v)) ? NAN : std::max(a, v);
          break;
        case Red::kMin:
          a = (std::isnan(a) || std::isnan(v)) ? NAN : std::min(a, v);
          break;
        case Red::kL1:
          a += std::fabs(v);
          break;
        case Red::kL2:
        case Red::kSumSquare:
          a += v * v;
          break;
        case Red::kLogSumExp:
          a += std::exp(v - mx[p.out_index[i]]);
          break;
      }
    }
    for (int64_t o = 0; o < p.out_count; ++o) {
      double v = acc[o];
      switch (kOp) {
        case Red::kMean:
          v = v / static_cast<double>(p.group);
          break;
        case Red::kL2:
          v = std::sqrt(v);
          break;
        case Red::kLogSum:
          v = std::log(v);
          break;
        case Red::kLogSumExp:
          v = mx[o] + std::log(v);
          break;
        default:
          break;
      }
      if (IsFloat(dt)) {
        out.SetFromDouble(o, v);
      } else {  // L2 / LogSum / LogSumExp of integers: truncate, saturate
        const double lim = 9.2e18;
        StoreWrapped(out, o,
                     static_cast<uint64_t>(static_cast<int64_t>(
                         std::isnan(v) ? 0 : std::max(-lim, std::min(lim, v)))));
      }
    }
  } else {
    // Integer (and bool max/min) path, in wrap-around 64-bit arithmetic. Signedness
    // matters only for Max/Min ordering and Mean's division.
    const bool is_unsigned =
        dt == DType::kU8 || dt == DType::kU16 || dt == DType::kU32 || dt == DType::kU64 || is_bool;
    auto load = [&](int64_t i) -> uint64_t {
      return dt == DType::kU64 ? x->data<uint64_t>()[i] : static_cast<uint64_t>(x->GetAsInt64(i));
    };
    auto less = [is_unsigned](uint64_t a, uint64_t b) {
      return is_unsigned ? a < b : static_cast<int64_t>(a) < static_cast<int64_t>(b);
    };
    // Identity values for Max/Min over an empty set: the dtype's minimum / maximum.
    uint64_t lowest = 0, highest = 0;
    switch (dt) {
      case DType::kI8:
        lowest = static_cast<uint64_t>(int64_t{INT8_MIN});
        highest = INT8_MAX;
        break;
      case DType::kI16:
        lowest = static_cast<uint64_t>(int64_t{INT16_MIN});
        highest = INT16_MAX;
        break;
      case DType::kI32:
        lowest = static_cast<uint64_t>(int64_t{INT32_MIN});
        highest = INT32_MAX;
        break;
      case DType::kI64:
        lowest = static_cast<uint64_t>(INT64_MIN);
        highest = INT64_MAX;
        break;
      case DType::kU8:
        highest = UINT8_MAX;
        break;
      case DType::kU16:
        highest = UINT16_MAX;
        break;
      case DType::kU32:
        highest = UINT32_MAX;
        break;
      case DType::kU64:
        highest = UINT64_MAX;
        break;
      case DType::kBool:
        highest = 1;
        break;
      default:
        break;
    }
    uint64_t init = 0;
    if (kOp == Red::kProd) init = 1;
    if (kOp == Red::kMax) init = lowest;
    if (kOp == Red::kMin) init = highest;
    std::vector<uint64_t> acc(p.out_count, init);
    for (int64_t i = 0; i < n; ++i) {
      uint64_t& a = acc[p.out_index[i]];
      const uint64_t v = load(i);
      switch (kOp) {
        case Red::kSum:
        case Red::kMean:
          a += v;
          break;
        case Red::kProd:
          a *= v;
          break;
        case Red::kMax:
          if (less(a, v)) a = v;
          break;
        case Red::kMin:
          if (less(v, a)) a = v;
          break;
        case Red::kL1:
          a += (!is_unsigned && static_cast<int64_t>(v) < 0) ? uint64_t{0} - v : v;
          break;
        case Red::kSumSquare:
          a += v * v;
          break;
        default:
          break;
      }
    }
    for (int64_t o = 0; o < p.out_count; ++o) {
      uint64_t v = acc[o];
      if (kOp == Red::kMean) {
        if (p.group == 0) return absl::InvalidArgumentError("ReduceMean of an empty integer set");
        v = is_unsigned ? v / static_cast<uint64_t>(p.group)
                        : static_cast<uint64_t>(static_cast<int64_t>(v) / p.group);
      }
      StoreWrapped(out, o, v);
    }
  }
  return std::vector<Tensor>{std::move(out)};
}

}  // namespace

void RegisterMathKernels(KernelTable& t) {
  auto add = [&t](const std::string& op, KernelFn fn) { t[KernelKey("", op)] = fn; };
  add("MatMul", &MatMulKernel);
  add("MatMulInteger", &MatMulIntegerKernel);
  add("QLinearMatMul", &QLinearMatMulKernel);
  add("Gemm", &GemmKernel);
  add("Softmax", &SoftmaxKernel<RowOp::kSoftmax>);
  add("LogSoftmax", &SoftmaxKernel<RowOp::kLogSoftmax>);
  add("Hardmax", &SoftmaxKernel<RowOp::kHardmax>);
  add("RMSNormalization", &RMSNormKernel);
  add("LayerNormalization", &LayerNormKernel);
  add("ReduceSum", &ReduceKernel<Red::kSum>);
  add("ReduceMean", &ReduceKernel<Red::kMean>);
  add("ReduceMax", &ReduceKernel<Red::kMax>);
  add("ReduceMin", &ReduceKernel<Red::kMin>);
  add("ReduceProd", &ReduceKernel<Red::kProd>);
  add("ReduceL1", &ReduceKernel<Red::kL1>);
  add("ReduceL2", &ReduceKernel<Red::kL2>);
  add("ReduceSumSquare", &ReduceKernel<Red::kSumSquare>);
  add("ReduceLogSum", &ReduceKernel<Red::kLogSum>);
  add("ReduceLogSumExp", &ReduceKernel<Red::kLogSumExp>);
}

}  // namespace kiln::reference
