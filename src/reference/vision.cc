// Reference kernels of the vision ops image towers use: Conv (and its quantized forms
// ConvInteger and QLinearConv, as onnx's reference computes them), ConvTranspose, MaxPool (with
// Indices), AveragePool, LpPool, GlobalAveragePool, GlobalMaxPool, BatchNormalization
// (inference), InstanceNormalization, GroupNormalization, LpNormalization, LRN, DepthToSpace,
// SpaceToDepth. Layout NC<spatial...> (any number of spatial dims). Window geometry comes
// from include/kiln/ir/window.h, which the shape rules share. Floating-point inputs (and
// i8/u8 for MaxPool), accumulated in double with one rounding per output (the policy of math.cc).
// Limits: plain loops (clarity over speed); BatchNormalization in training mode is Unimplemented.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kiln/ir/window.h"
#include "kiln/support/status.h"
#include "reference/kernel_util.h"
#include "reference/kernels.h"

namespace kiln::reference {
namespace {

absl::Status Bad(std::string_view msg) { return absl::InvalidArgumentError(std::string(msg)); }

int64_t Prod(absl::Span<const int64_t> d) {
  int64_t p = 1;
  for (int64_t x : d) p *= x;
  return p;
}

absl::Status RequireFloatArg(const std::string& op, const Tensor& t) {
  return IsFloat(t.dtype()) ? absl::OkStatus() : UnsupportedDType(op, t.dtype());
}

// A float output of `dims`, checked before anything is sized from it.
absl::StatusOr<std::vector<double>> Buffer(absl::Span<const int64_t> dims) {
  KILN_ASSIGN_OR_RETURN(int64_t n, CheckedNumElements(dims));
  if (n > (int64_t{1} << 37))
    return absl::ResourceExhaustedError(
        absl::StrCat("output of shape ", DimsStr(dims), " (", n, " elements) is too large"));
  return std::vector<double>(static_cast<size_t>(n), 0.0);
}

// X of rank >= 3: [N, C, spatial...].
absl::Status RequireImage(const std::string& op, const Tensor& x) {
  KILN_RETURN_IF_ERROR(RequireFloatArg(op, x));
  if (x.rank() < 3)
    return Bad(absl::StrCat("X must be [N, C, spatial...] (rank >= 3), got ", DimsStr(x.dims())));
  return absl::OkStatus();
}

// The spatial geometry of one windowed op: per dim the input and output sizes, the padding
// before, stride and dilation, and row-major strides of the input and output.
struct Geometry {
  int n = 0;  // spatial dims
  std::vector<int64_t> in, out, pad, stride, dil, kernel, pad_end;
  int64_t in_size = 1, out_size = 1, k_size = 1;
};

Geometry MakeGeometry(const window::Attrs& a, absl::Span<const int64_t> in,
                      const std::vector<window::Extent>& ext) {
  Geometry g;
  g.n = a.spatial;
  g.in.assign(in.begin(), in.end());
  for (int i = 0; i < g.n; ++i) {
    g.out.push_back(ext[i].out);
    g.pad.push_back(ext[i].pad_begin);
    g.pad_end.push_back(ext[i].pad_end);
  }
  g.stride = a.strides;
  g.dil = a.dilations;
  g.kernel = a.kernel;
  g.in_size = Prod(g.in);
  g.out_size = Prod(g.out);
  g.k_size = Prod(g.kernel);
  return g;
}

// Multi-index of flat `f` over `dims` (row-major).
void Unflatten(int64_t f, absl::Span<const int64_t> dims, std::vector<int64_t>& idx) {
  idx.resize(dims.size());
  for (int i = static_cast<int>(dims.size()) - 1; i >= 0; --i) {
    idx[i] = dims[i] == 0 ? 0 : f % dims[i];
    f = dims[i] == 0 ? 0 : f / dims[i];
  }
}

// Where kernel tap `kk` of output position `o` lands: the input's flat spatial index, or
// -1 in the padding (-2 past the end padding, which ceil_mode windows can reach).
int64_t Tap(const Geometry& g, const std::vector<int64_t>& o, const std::vector<int64_t>& k) {
  int64_t flat = 0;
  bool pad = false;
  for (int i = 0; i < g.n; ++i) {
    const int64_t c = o[i] * g.stride[i] - g.pad[i] + k[i] * g.dil[i];
    if (c >= g.in[i] + g.pad_end[i]) return -2;
    if (c < 0 || c >= g.in[i]) pad = true;
    flat = flat * g.in[i] + (pad ? 0 : c);
  }
  return pad ? -1 : flat;
}

absl::StatusOr<std::vector<window::Extent>> Extents(const window::Attrs& a,
                                                    absl::Span<const int64_t> in, bool transposed) {
  std::vector<window::Extent> e;
  for (int i = 0; i < a.spatial; ++i) {
    KILN_ASSIGN_OR_RETURN(window::Extent x, transposed ? window::Transposed(a, i, in[i])
                                                       : window::Forward(a, i, in[i]));
    e.push_back(x);
  }
  return e;
}

// ---------------------------------------------------------------------------------------
// Conv(X [N, C, s...], W [M, C/group, k...], B [M]?) and ConvTranspose(X [N, C, s...],
// W [C, M/group, k...], B [M]?).

struct ConvShape {
  int64_t batch, in_ch, out_ch, group;
};

absl::StatusOr<ConvShape> CheckConv(const Node& node, const Tensor& x, const Tensor& w,
                                    const Tensor* b, bool transposed) {
  const std::string& op = node.op();
  KILN_RETURN_IF_ERROR(RequireImage(op, x));
  if (w.dtype() != x.dtype() || (b && b->dtype() != x.dtype()))
    return Bad("X, W and B must share one dtype");
  if (w.rank() != x.rank())
    return Bad(absl::StrCat("W ", DimsStr(w.dims()), " must have X's rank ", x.rank()));
  ConvShape s{x.dims()[0], x.dims()[1], 0, node.attr_int_or("group", 1)};
  if (s.group < 1 || s.in_ch % s.group != 0)
    return Bad(
        absl::StrCat("group ", s.group, " does not divide the ", s.in_ch, " input channels"));
  if (transposed) {
    if (w.dims()[0] != s.in_ch)
      return Bad(absl::StrCat("W's dim 0 is ", w.dims()[0], "; X has ", s.in_ch, " channels"));
    s.out_ch = w.dims()[1] * s.group;
  } else {
    if (w.dims()[1] * s.group != s.in_ch)
      return Bad(absl::StrCat("W's dim 1 is ", w.dims()[1], "; X's ", s.in_ch, " channels over ",
                              s.group, " groups need ", s.in_ch / s.group));
    if (w.dims()[0] % s.group != 0)
      return Bad(absl::StrCat("group ", s.group, " does not divide W's ", w.dims()[0],
                              " output channels"));
    s.out_ch = w.dims()[0];
  }
  if (b && (b->rank() != 1 || b->dims()[0] != s.out_ch))
    return Bad(absl::StrCat("B must be [", s.out_ch, "], got ", DimsStr(b->dims())));
  return s;
}

// Conv's sums in double: y [N, M, out...] (`dims`) for x, w and the optional bias b.
struct ConvResult {
  std::vector<int64_t> dims;
  std::vector<double> y;
};

absl::StatusOr<ConvResult> ConvCompute(const Node& node, const Tensor* x, const Tensor* w,
                                       const Tensor* b) {
  KILN_ASSIGN_OR_RETURN(ConvShape s, CheckConv(node, *x, *w, b, false));
  const absl::Span<const int64_t> sp = absl::MakeSpan(x->dims()).subspan(2);
  KILN_ASSIGN_OR_RETURN(window::Attrs a,
                        window::Read(node, x->rank() - 2, absl::MakeSpan(w->dims()).subspan(2)));
  KILN_ASSIGN_OR_RETURN(std::vector<window::Extent> ext, Extents(a, sp, false));
  const Geometry g = MakeGeometry(a, sp, ext);
  std::vector<int64_t> out_dims = {s.batch, s.out_ch};
  out_dims.insert(out_dims.end(), g.out.begin(), g.out.end());
  KILN_ASSIGN_OR_RETURN(std::vector<double> y, Buffer(out_dims));
  const std::vector<double> xv = ToDoubles(*x), wv = ToDoubles(*w);
  const std::vector<double> bv = b ? ToDoubles(*b) : std::vector<double>();
  const int64_t cg = s.in_ch / s.group, mg = s.out_ch / s.group;
  // taps[o * k_size + kk]: the input spatial index each tap reads (-1 padding).
  std::vector<int64_t> taps(static_cast<size_t>(g.out_size * g.k_size));
  std::vector<int64_t> o_idx, k_idx;
  for (int64_t o = 0; o < g.out_size; ++o) {
    Unflatten(o, g.out, o_idx);
    for (int64_t kk = 0; kk < g.k_size; ++kk) {
      Unflatten(kk, g.kernel, k_idx);
      taps[o * g.k_size + kk] = Tap(g, o_idx, k_idx);
    }
  }
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t m = 0; m < s.out_ch; ++m) {
      const int64_t c0 = (m / mg) * cg;
      double* yrow = y.data() + (n * s.out_ch + m) * g.out_size;
      for (int64_t o = 0; o < g.out_size; ++o) {
        double acc = b ? bv[m] : 0.0;
        const int64_t* t = taps.data() + o * g.k_size;
        for (int64_t c = 0; c < cg; ++c) {
          const double* xc = xv.data() + (n * s.in_ch + c0 + c) * g.in_size;
          const double* wc = wv.data() + (m * cg + c) * g.k_size;
          for (int64_t kk = 0; kk < g.k_size; ++kk)
            if (t[kk] >= 0) acc += xc[t[kk]] * wc[kk];
        }
        yrow[o] = acc;
      }
    }
  return ConvResult{std::move(out_dims), std::move(y)};
}

Result ConvKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* w, Arg(in, 1, node.op()));
  KILN_ASSIGN_OR_RETURN(ConvResult r, ConvCompute(node, x, w, OptArg(in, 2)));
  return std::vector<Tensor>{FromDoubles(x->dtype(), r.dims, r.y)};
}

// t - zero point as f64 (exact for 8-bit integers): the zero point one value, or (w's,
// `per_channel`) one per output channel.
absl::StatusOr<Tensor> Centered(const std::string& op, const Tensor& t, const Tensor* zp,
                                const char* what, bool per_channel) {
  if (t.dtype() != DType::kU8 && t.dtype() != DType::kI8) return UnsupportedDType(op, t.dtype());
  if (zp != nullptr && zp->dtype() != t.dtype())
    return Bad(absl::StrCat(what, "'s zero point is ", DName(zp->dtype()), ", ", what, " is ",
                            DName(t.dtype())));
  if (zp != nullptr && zp->NumElements() == 0)
    return Bad(absl::StrCat(what, "'s zero point is empty"));
  const int64_t per = zp == nullptr || zp->NumElements() == 1 ? 0 : zp->NumElements();
  if (zp != nullptr && per != 0 &&
      (!per_channel || t.rank() < 1 || zp->rank() != 1 || t.dims()[0] != per))
    return Bad(absl::StrCat(what, "'s zero point ", DimsStr(zp->dims()), " is not one value",
                            per_channel ? " nor one per output channel" : ""));
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::Create(DType::kF64, t.dims()));
  const int64_t n = t.NumElements(), inner = per != 0 ? n / per : 1;
  for (int64_t i = 0; i < n; ++i) {
    const double z = zp == nullptr ? 0.0 : zp->GetAsDouble(per != 0 ? i / inner : 0);
    out.data<double>()[i] = t.GetAsDouble(i) - z;
  }
  return out;
}

// ConvInteger: Conv of (x - x_zero_point) and (w - w_zero_point) in int32.
Result ConvIntegerKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* w, Arg(in, 1, node.op()));
  KILN_ASSIGN_OR_RETURN(Tensor xc, Centered(node.op(), *x, OptArg(in, 2), "x", false));
  KILN_ASSIGN_OR_RETURN(Tensor wc, Centered(node.op(), *w, OptArg(in, 3), "w", true));
  KILN_ASSIGN_OR_RETURN(ConvResult r, ConvCompute(node, &xc, &wc, nullptr));
  // The sums are exact integers (|sum| < 2^53); int32 wraps them, as the reference's does.
  KILN_ASSIGN_OR_RETURN(Tensor y, Tensor::Create(DType::kI32, r.dims));
  for (size_t i = 0; i < r.y.size(); ++i)
    y.data<int32_t>()[i] =
        static_cast<int32_t>(static_cast<uint32_t>(static_cast<int64_t>(r.y[i])));
  return std::vector<Tensor>{std::move(y)};
}

// QLinearConv: y = saturate(rne(conv(x - x_zp, w - w_zp) + B) · x_scale·w_scale/y_scale +
// y_zp)), the scale in f32 (per output channel when w_scale is 1-D), as onnx's reference.
Result QLinearConvKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* xs, Arg(in, 1, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* w, Arg(in, 3, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* ws, Arg(in, 4, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* ys, Arg(in, 6, node.op()));
  const Tensor* yzp = OptArg(in, 7);
  const Tensor* bias = OptArg(in, 8);
  KILN_ASSIGN_OR_RETURN(Tensor xc, Centered(node.op(), *x, OptArg(in, 2), "x", false));
  KILN_ASSIGN_OR_RETURN(Tensor wc, Centered(node.op(), *w, OptArg(in, 5), "w", true));
  if (xs->NumElements() != 1 || ys->NumElements() != 1)
    return Bad("x_scale and y_scale must be one value each");
  if (yzp != nullptr && (yzp->NumElements() != 1 || !IsInteger(yzp->dtype())))
    return Bad("y_zero_point must be one integer");
  Tensor bias64;  // B as f64, exact
  if (bias != nullptr) {
    if (bias->dtype() != DType::kI32)
      return Bad(absl::StrCat("B must be int32, got ", DName(bias->dtype())));
    KILN_ASSIGN_OR_RETURN(bias64, Tensor::Create(DType::kF64, bias->dims()));
    for (int64_t i = 0; i < bias->NumElements(); ++i)
      bias64.data<double>()[i] = bias->GetAsDouble(i);
  }
  KILN_ASSIGN_OR_RETURN(ConvResult r,
                        ConvCompute(node, &xc, &wc, bias != nullptr ? &bias64 : nullptr));
  const int64_t m = r.dims[1];
  if (ws->NumElements() != 1 && ws->NumElements() != m)
    return Bad(absl::StrCat("w_scale has ", ws->NumElements(), " values for ", m, " channels"));
  const DType out = yzp != nullptr ? yzp->dtype() : x->dtype();
  const auto [lo, hi] = IntegerRange(out);
  const double zp = yzp != nullptr ? yzp->GetAsDouble(0) : 0.0;
  const int64_t plane = r.y.size() / std::max<int64_t>(r.dims[0] * m, 1);
  for (size_t i = 0; i < r.y.size(); ++i) {
    const int64_t ch = (static_cast<int64_t>(i) / std::max<int64_t>(plane, 1)) % m;
    const float scale = static_cast<float>(xs->GetAsDouble(0)) *
                        static_cast<float>(ws->GetAsDouble(ws->NumElements() == 1 ? 0 : ch)) /
                        static_cast<float>(ys->GetAsDouble(0));
    r.y[i] = std::nearbyint(std::clamp(r.y[i] * scale + zp, lo, hi));
  }
  return std::vector<Tensor>{FromDoubles(out, r.dims, r.y)};
}

Result ConvTransposeKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* w, Arg(in, 1, node.op()));
  const Tensor* b = OptArg(in, 2);
  KILN_ASSIGN_OR_RETURN(ConvShape s, CheckConv(node, *x, *w, b, true));
  const absl::Span<const int64_t> sp = absl::MakeSpan(x->dims()).subspan(2);
  KILN_ASSIGN_OR_RETURN(window::Attrs a,
                        window::Read(node, x->rank() - 2, absl::MakeSpan(w->dims()).subspan(2)));
  KILN_ASSIGN_OR_RETURN(std::vector<window::Extent> ext, Extents(a, sp, true));
  std::vector<int64_t> out_sp, out_dims = {s.batch, s.out_ch};
  for (const window::Extent& e : ext) out_sp.push_back(e.out);
  out_dims.insert(out_dims.end(), out_sp.begin(), out_sp.end());
  KILN_ASSIGN_OR_RETURN(std::vector<double> y, Buffer(out_dims));
  const std::vector<double> xv = ToDoubles(*x), wv = ToDoubles(*w);
  const int n_sp = a.spatial;
  const int64_t in_size = Prod(sp), out_size = Prod(out_sp), k_size = Prod(a.kernel);
  const int64_t cg = s.in_ch / s.group, mg = s.out_ch / s.group;
  // dest[p * k_size + kk]: where input position p's tap kk lands in the output (-1 cut off).
  std::vector<int64_t> dest(static_cast<size_t>(in_size * k_size));
  std::vector<int64_t> p_idx, k_idx;
  for (int64_t p = 0; p < in_size; ++p) {
    Unflatten(p, sp, p_idx);
    for (int64_t kk = 0; kk < k_size; ++kk) {
      Unflatten(kk, a.kernel, k_idx);
      int64_t flat = 0;
      for (int i = 0; i < n_sp && flat >= 0; ++i) {
        const int64_t c = p_idx[i] * a.strides[i] - ext[i].pad_begin + k_idx[i] * a.dilations[i];
        flat = c < 0 || c >= out_sp[i] ? -1 : flat * out_sp[i] + c;
      }
      dest[p * k_size + kk] = flat;
    }
  }
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t c = 0; c < s.in_ch; ++c) {
      const int64_t grp = c / cg;
      const double* xc = xv.data() + (n * s.in_ch + c) * in_size;
      for (int64_t m = 0; m < mg; ++m) {
        double* yc = y.data() + (n * s.out_ch + grp * mg + m) * out_size;
        const double* wc = wv.data() + (c * mg + m) * k_size;
        for (int64_t p = 0; p < in_size; ++p)
          for (int64_t kk = 0; kk < k_size; ++kk)
            if (const int64_t d = dest[p * k_size + kk]; d >= 0) yc[d] += xc[p] * wc[kk];
      }
    }
  if (b) {
    const std::vector<double> bv = ToDoubles(*b);
    for (int64_t n = 0; n < s.batch; ++n)
      for (int64_t m = 0; m < s.out_ch; ++m)
        for (int64_t o = 0; o < out_size; ++o) y[(n * s.out_ch + m) * out_size + o] += bv[m];
  }
  return std::vector<Tensor>{FromDoubles(x->dtype(), out_dims, y)};
}

// ---------------------------------------------------------------------------------------
// Pools over windows. A tap in the padding counts for AveragePool's count_include_pad=1
// (the explicit or SAME padding; not the region past it that a ceil_mode window reaches).

enum class Pool { kMax, kAverage, kLp };

template <Pool kPool>
Result PoolKernel(const Node& node, Inputs in) {
  const std::string& op = node.op();
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, op));
  // MaxPool also takes i8/u8 (opset 12), exact through double.
  const bool small_int = x->dtype() == DType::kI8 || x->dtype() == DType::kU8;
  if (!(kPool == Pool::kMax && small_int)) KILN_RETURN_IF_ERROR(RequireImage(op, *x));
  if (x->rank() < 3)
    return Bad(absl::StrCat("X must be [N, C, spatial...] (rank >= 3), got ", DimsStr(x->dims())));
  const absl::Span<const int64_t> sp = absl::MakeSpan(x->dims()).subspan(2);
  KILN_ASSIGN_OR_RETURN(window::Attrs a, window::Read(node, x->rank() - 2, {}));
  KILN_ASSIGN_OR_RETURN(std::vector<window::Extent> ext, Extents(a, sp, false));
  const Geometry g = MakeGeometry(a, sp, ext);
  const int64_t nc = x->dims()[0] * x->dims()[1];
  std::vector<int64_t> out_dims = {x->dims()[0], x->dims()[1]};
  out_dims.insert(out_dims.end(), g.out.begin(), g.out.end());
  KILN_ASSIGN_OR_RETURN(std::vector<double> y, Buffer(out_dims));
  const bool with_indices = kPool == Pool::kMax && node.num_outputs() > 1;
  const bool column_major = node.attr_int_or("storage_order", 0) != 0;
  const bool include_pad = node.attr_int_or("count_include_pad", 0) != 0;
  const int64_t p_norm = node.attr_int_or("p", 2);
  if (kPool == Pool::kLp && p_norm < 1) return Bad(absl::StrCat("p must be >= 1, got ", p_norm));
  std::vector<int64_t> indices(with_indices ? y.size() : 0);
  const std::vector<double> xv = ToDoubles(*x);
  std::vector<int64_t> o_idx, k_idx, t_idx;
  for (int64_t o = 0; o < g.out_size; ++o) {
    Unflatten(o, g.out, o_idx);
    std::vector<int64_t> taps;
    int64_t counted = 0;  // taps in the input or its padding
    for (int64_t kk = 0; kk < g.k_size; ++kk) {
      Unflatten(kk, g.kernel, k_idx);
      const int64_t t = Tap(g, o_idx, k_idx);
      if (t != -2) ++counted;
      if (t >= 0) taps.push_back(t);
    }
    for (int64_t c = 0; c < nc; ++c) {
      const double* xc = xv.data() + c * g.in_size;
      double r;
      if constexpr (kPool == Pool::kMax) {
        r = -std::numeric_limits<double>::infinity();
        int64_t best = taps.empty() ? 0 : taps[0];
        for (int64_t t : taps)
          if (xc[t] > r) {
            r = xc[t];
            best = t;
          }
        if (with_indices) {
          int64_t flat = best;
          if (column_major) {  // the spatial index in column-major order
            Unflatten(best, g.in, t_idx);
            flat = 0;
            for (int i = g.n - 1; i >= 0; --i) flat = flat * g.in[i] + t_idx[i];
          }
          indices[c * g.out_size + o] = c * g.in_size + flat;
        }
      } else if constexpr (kPool == Pool::kAverage) {
        double sum = 0;
        for (int64_t t : taps) sum += xc[t];
        const int64_t div = include_pad ? counted : static_cast<int64_t>(taps.size());
        r = div == 0 ? std::numeric_limits<double>::quiet_NaN() : sum / static_cast<double>(div);
      } else {
        double sum = 0;
        for (int64_t t : taps) sum += std::pow(std::abs(xc[t]), static_cast<double>(p_norm));
        r = std::pow(sum, 1.0 / static_cast<double>(p_norm));
      }
      y[c * g.out_size + o] = r;
    }
  }
  std::vector<Tensor> outs;
  outs.push_back(FromDoubles(x->dtype(), out_dims, y));
  if (with_indices) outs.push_back(Tensor::FromI64(out_dims, indices));
  return outs;
}

// GlobalAveragePool / GlobalMaxPool: over every spatial position, [N, C, 1, ...].
template <bool kMax>
Result GlobalPoolKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  KILN_RETURN_IF_ERROR(RequireImage(node.op(), *x));
  const int64_t nc = x->dims()[0] * x->dims()[1], len = Prod(absl::MakeSpan(x->dims()).subspan(2));
  std::vector<int64_t> out_dims(x->dims().size(), 1);
  out_dims[0] = x->dims()[0];
  out_dims[1] = x->dims()[1];
  const std::vector<double> xv = ToDoubles(*x);
  std::vector<double> y(static_cast<size_t>(nc));
  for (int64_t c = 0; c < nc; ++c) {
    double r = kMax ? -std::numeric_limits<double>::infinity() : 0.0;
    for (int64_t i = 0; i < len; ++i) r = kMax ? std::max(r, xv[c * len + i]) : r + xv[c * len + i];
    y[c] = kMax || len == 0 ? r : r / static_cast<double>(len);
  }
  return std::vector<Tensor>{FromDoubles(x->dtype(), out_dims, y)};
}

// ---------------------------------------------------------------------------------------
// Normalizations over channels and spatial positions.

// A per-channel vector input of `c` values.
absl::StatusOr<std::vector<double>> ChannelVector(const Tensor& t, int64_t c, const char* what) {
  if (t.NumElements() != c || t.rank() > 1)
    return Bad(
        absl::StrCat(what, " must hold ", c, " values (one per channel), got ", DimsStr(t.dims())));
  return ToDoubles(t);
}

// BatchNormalization(X, scale, B, mean, var) in inference mode.
Result BatchNormKernel(const Node& node, Inputs in) {
  const std::string& op = node.op();
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, op));
  KILN_RETURN_IF_ERROR(RequireFloatArg(op, *x));
  if (node.attr_int_or("training_mode", 0) != 0 || node.num_outputs() > 1)
    return absl::UnimplementedError(
        "BatchNormalization in training mode (or with its "
        "running-statistics outputs) is not supported");
  if (node.attr_int_or("spatial", 1) != 1)
    return absl::UnimplementedError("BatchNormalization with spatial=0 is not supported");
  if (x->rank() < 2) return Bad("X must have rank >= 2");
  const int64_t c = x->dims()[1], len = Prod(absl::MakeSpan(x->dims()).subspan(2));
  std::vector<std::vector<double>> p;
  const char* names[] = {"scale", "B", "input_mean", "input_var"};
  for (int i = 0; i < 4; ++i) {
    KILN_ASSIGN_OR_RETURN(const Tensor* t, Arg(in, i + 1, op));
    KILN_RETURN_IF_ERROR(RequireFloatArg(op, *t));
    KILN_ASSIGN_OR_RETURN(std::vector<double> v, ChannelVector(*t, c, names[i]));
    p.push_back(std::move(v));
  }
  const double eps = node.attr_float_or("epsilon", 1e-5f);
  std::vector<double> y = ToDoubles(*x);
  for (int64_t n = 0; n < x->dims()[0]; ++n)
    for (int64_t ch = 0; ch < c; ++ch) {
      const double inv = 1.0 / std::sqrt(p[3][ch] + eps);
      for (int64_t i = 0; i < len; ++i) {
        double& v = y[(n * c + ch) * len + i];
        v = (v - p[2][ch]) * inv * p[0][ch] + p[1][ch];
      }
    }
  return std::vector<Tensor>{FromDoubles(x->dtype(), x->dims(), y)};
}

// Normalizes each run of `len` values starting at `base` in place: (x - mean) / sqrt(var
// + eps), population variance.
void NormalizeRun(std::vector<double>& v, int64_t base, int64_t len, double eps) {
  double mean = 0, var = 0;
  for (int64_t i = 0; i < len; ++i) mean += v[base + i];
  mean /= static_cast<double>(len);
  for (int64_t i = 0; i < len; ++i) var += (v[base + i] - mean) * (v[base + i] - mean);
  var /= static_cast<double>(len);
  const double inv = 1.0 / std::sqrt(var + eps);
  for (int64_t i = 0; i < len; ++i) v[base + i] = (v[base + i] - mean) * inv;
}

// InstanceNormalization(input, scale, B): per (n, c) over the spatial positions.
Result InstanceNormKernel(const Node& node, Inputs in) {
  const std::string& op = node.op();
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, op));
  KILN_ASSIGN_OR_RETURN(const Tensor* scale, Arg(in, 1, op));
  KILN_ASSIGN_OR_RETURN(const Tensor* bias, Arg(in, 2, op));
  KILN_RETURN_IF_ERROR(RequireImage(op, *x));
  const int64_t c = x->dims()[1], len = Prod(absl::MakeSpan(x->dims()).subspan(2));
  KILN_ASSIGN_OR_RETURN(std::vector<double> sv, ChannelVector(*scale, c, "scale"));
  KILN_ASSIGN_OR_RETURN(std::vector<double> bv, ChannelVector(*bias, c, "B"));
  const double eps = node.attr_float_or("epsilon", 1e-5f);
  std::vector<double> y = ToDoubles(*x);
  for (int64_t n = 0; n < x->dims()[0]; ++n)
    for (int64_t ch = 0; ch < c; ++ch) {
      const int64_t base = (n * c + ch) * len;
      if (len == 0) continue;
      NormalizeRun(y, base, len, eps);
      for (int64_t i = 0; i < len; ++i) y[base + i] = y[base + i] * sv[ch] + bv[ch];
    }
  return std::vector<Tensor>{FromDoubles(x->dtype(), x->dims(), y)};
}

// GroupNormalization(X, scale, bias): per (n, group) over the group's channels and the
// spatial positions. scale and bias hold one value per channel (opset 21) or per group
// (opset 18); their length says which (they coincide when every group is one channel).
Result GroupNormKernel(const Node& node, Inputs in) {
  const std::string& op = node.op();
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, op));
  KILN_ASSIGN_OR_RETURN(const Tensor* scale, Arg(in, 1, op));
  KILN_ASSIGN_OR_RETURN(const Tensor* bias, Arg(in, 2, op));
  KILN_RETURN_IF_ERROR(RequireFloatArg(op, *x));
  if (x->rank() < 2) return Bad("X must have rank >= 2");
  const std::optional<int64_t> groups = node.attr_int("num_groups");
  const int64_t c = x->dims()[1], len = Prod(absl::MakeSpan(x->dims()).subspan(2));
  if (!groups || *groups < 1 || c % *groups != 0)
    return Bad(absl::StrCat("num_groups must divide the ", c, " channels"));
  const int64_t per = c / *groups;
  const int64_t n_params = scale->NumElements();
  if ((n_params != c && n_params != *groups) || bias->NumElements() != n_params)
    return Bad(absl::StrCat("scale and bias must hold ", c, " (per channel) or ", *groups,
                            " (per group) values"));
  const std::vector<double> sv = ToDoubles(*scale), bv = ToDoubles(*bias);
  const double eps = node.attr_float_or("epsilon", 1e-5f);
  std::vector<double> y = ToDoubles(*x);
  for (int64_t n = 0; n < x->dims()[0]; ++n)
    for (int64_t grp = 0; grp < *groups; ++grp) {
      const int64_t base = (n * c + grp * per) * len;
      if (per * len == 0) continue;
      NormalizeRun(y, base, per * len, eps);
      for (int64_t ch = 0; ch < per; ++ch) {
        const int64_t pi = n_params == c ? grp * per + ch : grp;
        for (int64_t i = 0; i < len; ++i) {
          double& v = y[base + ch * len + i];
          v = v * sv[pi] + bv[pi];
        }
      }
    }
  return std::vector<Tensor>{FromDoubles(x->dtype(), x->dims(), y)};
}

// LpNormalization(input): x / ||x||_p along `axis` (p 1 or 2); 0 where the norm is 0.
Result LpNormKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  KILN_RETURN_IF_ERROR(RequireFloatArg(node.op(), *x));
  if (x->rank() == 0) return Bad("input must have rank >= 1");
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.attr_int_or("axis", -1), x->rank()));
  const int64_t p = node.attr_int_or("p", 2);
  if (p != 1 && p != 2) return Bad(absl::StrCat("p must be 1 or 2, got ", p));
  const auto& d = x->dims();
  const int64_t outer = Prod(absl::MakeSpan(d).subspan(0, axis)), len = d[axis],
                inner = Prod(absl::MakeSpan(d).subspan(axis + 1));
  std::vector<double> y = ToDoubles(*x);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t q = 0; q < inner; ++q) {
      double* base = y.data() + o * len * inner + q;
      double norm = 0;
      for (int64_t j = 0; j < len; ++j)
        norm += p == 1 ? std::abs(base[j * inner]) : base[j * inner] * base[j * inner];
      if (p == 2) norm = std::sqrt(norm);
      // An all-zero slice stays zero (onnx's reference divides where the norm is not 0).
      for (int64_t j = 0; j < len; ++j) base[j * inner] = norm == 0 ? 0.0 : base[j * inner] / norm;
    }
  return std::vector<Tensor>{FromDoubles(x->dtype(), d, y)};
}

// ---------------------------------------------------------------------------------------
// DepthToSpace / SpaceToDepth: 4-D [N, C, H, W] block moves (any dtype; bytes copied).

template <bool kToSpace>
Result BlockMoveKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  if (x->rank() != 4) return Bad(absl::StrCat("input must be 4-D, got ", DimsStr(x->dims())));
  const int64_t b = node.attr_int_or("blocksize", 0);
  if (b < 1) return Bad("attribute 'blocksize' must be at least 1");
  const std::string* mode_attr = node.attr_string("mode");
  const std::string mode = mode_attr ? *mode_attr : "DCR";
  if (mode != "DCR" && mode != "CRD") return Bad("mode must be DCR or CRD");
  const int64_t n = x->dims()[0], c = x->dims()[1], h = x->dims()[2], w = x->dims()[3];
  std::vector<int64_t> out_dims;
  if (kToSpace) {
    if (c % (b * b) != 0)
      return Bad(absl::StrCat(c, " channels are not a multiple of blocksize² ", b * b));
    out_dims = {n, c / (b * b), h * b, w * b};
  } else {
    if (h % b != 0 || w % b != 0)
      return Bad(absl::StrCat("H ", h, " and W ", w, " must be multiples of blocksize ", b));
    out_dims = {n, c * b * b, h / b, w / b};
  }
  KILN_ASSIGN_OR_RETURN(Tensor y, Tensor::Create(x->dtype(), out_dims));
  const size_t es = DTypeSize(x->dtype());
  const std::byte* src = x->raw();
  std::byte* dst = y.raw();
  // Walk the deep (channel-blocked) side; `deep` is [N, C_deep, h_s, w_s] and `wide` is
  // [N, C_wide, h_s * b, w_s * b] with C_deep = C_wide · b².
  const int64_t c_wide = kToSpace ? out_dims[1] : c;
  const int64_t hs = kToSpace ? h : out_dims[2], ws = kToSpace ? w : out_dims[3];
  for (int64_t ni = 0; ni < n; ++ni)
    for (int64_t cw = 0; cw < c_wide; ++cw)
      for (int64_t bh = 0; bh < b; ++bh)
        for (int64_t bw = 0; bw < b; ++bw) {
          // SpaceToDepth and DepthToSpace DCR order channels (bh, bw, cw); CRD (cw, bh, bw).
          const int64_t cd =
              kToSpace && mode == "CRD" ? (cw * b + bh) * b + bw : (bh * b + bw) * c_wide + cw;
          for (int64_t i = 0; i < hs; ++i)
            for (int64_t j = 0; j < ws; ++j) {
              const int64_t deep = ((ni * c_wide * b * b + cd) * hs + i) * ws + j;
              const int64_t wide = ((ni * c_wide + cw) * hs * b + i * b + bh) * ws * b + j * b + bw;
              const int64_t from = kToSpace ? deep : wide, to = kToSpace ? wide : deep;
              std::memcpy(dst + to * es, src + from * es, es);
            }
        }
  return std::vector<Tensor>{std::move(y)};
}

// LRN over channels: y = x / (bias + alpha / size · Σ x²)^beta, the sum over channels
// [c - floor((size-1)/2), c + ceil((size-1)/2)] clipped to the tensor.
Result LrnKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  KILN_RETURN_IF_ERROR(RequireFloatArg(node.op(), *x));
  if (x->rank() < 3) return Bad("X must be [N, C, spatial...] (rank >= 3)");
  const int64_t size = node.attr_int_or("size", 0);
  if (size <= 0) return Bad("attribute 'size' must be positive");
  const double alpha = node.attr_float_or("alpha", 1e-4f);
  const double beta = node.attr_float_or("beta", 0.75f);
  const double bias = node.attr_float_or("bias", 1.0f);
  const std::vector<int64_t>& d = x->dims();
  const int64_t n = d[0], c = d[1], inner = Prod(absl::MakeConstSpan(d).subspan(2));
  const int64_t before = (size - 1) / 2, after = size - 1 - before;
  std::vector<double> v = ToDoubles(*x), y(v.size());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t i = 0; i < inner; ++i) {
        double sum = 0;
        for (int64_t k = std::max<int64_t>(0, ch - before); k <= std::min(c - 1, ch + after); ++k) {
          const double e = v[(b * c + k) * inner + i];
          sum += e * e;
        }
        const int64_t at = (b * c + ch) * inner + i;
        y[at] = v[at] / std::pow(bias + alpha / static_cast<double>(size) * sum, beta);
      }
  return std::vector<Tensor>{FromDoubles(x->dtype(), d, y)};
}

}  // namespace

void RegisterVisionKernels(KernelTable& table) {
  auto add = [&](std::string_view op, KernelFn fn) { table[KernelKey("", op)] = fn; };
  add("Conv", &ConvKernel);
  add("ConvTranspose", &ConvTransposeKernel);
  add("MaxPool", &PoolKernel<Pool::kMax>);
  add("AveragePool", &PoolKernel<Pool::kAverage>);
  add("LpPool", &PoolKernel<Pool::kLp>);
  add("GlobalAveragePool", &GlobalPoolKernel<false>);
  add("GlobalMaxPool", &GlobalPoolKernel<true>);
  add("BatchNormalization", &BatchNormKernel);
  add("InstanceNormalization", &InstanceNormKernel);
  add("GroupNormalization", &GroupNormKernel);
  add("LpNormalization", &LpNormKernel);
  add("DepthToSpace", &BlockMoveKernel<true>);
  add("SpaceToDepth", &BlockMoveKernel<false>);
  add("LRN", &LrnKernel);
  add("ConvInteger", &ConvIntegerKernel);
  add("QLinearConv", &QLinearConvKernel);
}

}  // namespace kiln::reference
