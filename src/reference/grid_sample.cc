// Reference kernels of the sampling-grid ops, following onnx's reference implementations
// (onnx/reference/ops/op_grid_sample.py, op_affine_grid.py):
//  - GridSample (opset 16 4-D form, opset 20+ N-D): X [N, C, D1..Dr], grid [N, O1..Or, r]
//    -> Y [N, C, O1..Or]. grid's last axis lists coordinates innermost first, so its
//    component r-1-i addresses spatial dim i. Each coordinate v is denormalized, in the
//    grid's dtype as numpy does, to (v+1)/2·(D-1) (align_corners) or ((v+1)·D-1)/2 and
//    stored as float32; "nearest" rounds it half to even. Outside the borders ([0, D-1] with
//    align_corners, else [-0.5, D-0.5]) "border" clamps it to [0, D-1] and "reflection"
//    reflects it by the borders until inside. "nearest" then reads the truncated index;
//    "linear" ("bilinear") and "cubic" ("bicubic", Keys with α = -0.75) weight the 2 or 4
//    neighbours of floor(x) along each dim (the N-linear/N-cubic product), where "zeros"
//    reads 0 outside the input, "border" clamps the index and "reflection" reflects it.
//  - AffineGrid (opset 20): theta [N, 2, 3] or [N, 3, 4] and size [N, C, H, W] or
//    [N, C, D, H, W] -> grid [N, H, W, 2] or [N, D, H, W, 3], each point theta·(x, y[, z], 1)
//    of the base grid spaced evenly over [-1, 1] (numpy's arange values: start + i·step,
//    at pixel centres without align_corners).
// Computed in double, one rounding per output. Limits: float dtypes only; outputs above 2^32
// elements and GridSample with more than 2^20 neighbours per point are refused. Where onnx's
// reference fails (a non-finite coordinate, reflection across a single-pixel align_corners
// dim, a size-1 align_corners AffineGrid dim) these give NaN, the only pixel, and -1 (as the
// ONNX function body of AffineGrid does for D). An empty GridSample output keeps its shape
// (the reference returns a 1-D empty array); AffineGrid's output has theta's dtype (the
// reference always returns float32).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kiln/support/status.h"
#include "reference/kernel_util.h"
#include "reference/kernels.h"

namespace kiln::reference {
namespace {

constexpr int64_t kMaxElements = int64_t{1} << 32;

enum class Mode { kNearest, kLinear, kCubic };
enum class Pad { kZeros, kBorder, kReflection };

absl::Status Bad(std::string_view msg) { return absl::InvalidArgumentError(std::string(msg)); }

// Product of `dims`, or -1 above kMaxElements.
int64_t CappedCount(const std::vector<int64_t>& dims) {
  for (int64_t d : dims)
    if (d == 0) return 0;
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0 || d > kMaxElements / n) return -1;
    n *= d;
  }
  return n;
}

// `v` rounded to float32, overflowing to ±inf as the hardware conversion does.
double ToF32(double v) {
  static const double kOverflow = std::ldexp(2.0 - std::ldexp(1.0, -24), 127);
  if (std::isnan(v)) return v;
  if (std::fabs(v) >= kOverflow) return std::copysign(INFINITY, v);
  return static_cast<float>(v);
}

// `v` rounded to `dt` (`scratch` is a one-element tensor of `dt`).
double RoundTo(DType dt, double v, Tensor& scratch) {
  if (dt == DType::kF64) return v;
  if (dt == DType::kF32) return ToF32(v);
  scratch.SetFromDouble(0, v);
  return scratch.GetAsDouble(0);
}

// _gs_reflect: `x` reflected by the borders `lo` and `hi` until within them.
double Reflect(double x, double lo, double hi) {
  const double rng = hi - lo;
  if (!std::isfinite(x)) return x;
  if (x < lo) {
    if (rng <= 0) return lo;
    const double dx = lo - x;
    const double n = std::trunc(dx / rng);
    const double r = dx - n * rng;
    return std::fmod(n, 2.0) == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    if (rng <= 0) return lo;
    const double dx = x - hi;
    const double n = std::trunc(dx / rng);
    const double r = dx - n * rng;
    return std::fmod(n, 2.0) == 0 ? hi - r : lo + r;
  }
  return x;
}

// The index padding reads for integer position `i` of a dim of size `d` with borders
// [lo, hi]; -1 when zeros padding reads 0.
int64_t PadIndex(double i, int64_t d, double lo, double hi, Pad pad) {
  const double last = static_cast<double>(d - 1);
  switch (pad) {
    case Pad::kZeros:
      return i >= 0 && i <= last ? static_cast<int64_t>(i) : -1;
    case Pad::kBorder:
      return i < 0 ? 0 : i > last ? d - 1 : static_cast<int64_t>(i);
    case Pad::kReflection: {
      double r = std::trunc(Reflect(i, lo, hi));
      if (!(r >= 0)) r = 0;
      if (r > last) r = last;
      return static_cast<int64_t>(r);
    }
  }
  return -1;
}

void CubicCoeffs(double x, double c[4]) {
  constexpr double a = -0.75;
  x = std::fabs(x);
  c[0] = ((a * (x + 1) - 5 * a) * (x + 1) + 8 * a) * (x + 1) - 4 * a;
  c[1] = ((a + 2) * x - (a + 3)) * x * x + 1;
  c[2] = ((a + 2) * (1 - x) - (a + 3)) * (1 - x) * (1 - x) + 1;
  c[3] = ((a * (2 - x) - 5 * a) * (2 - x) + 8 * a) * (2 - x) - 4 * a;
}

Result GridSampleKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* grid, Arg(in, 1, node.op()));
  if (!IsFloat(x->dtype())) return UnsupportedDType(node.op(), x->dtype());
  if (!IsFloat(grid->dtype())) return UnsupportedDType(node.op(), grid->dtype());
  const std::string* mode_s = node.attr_string("mode");
  const std::string* pad_s = node.attr_string("padding_mode");
  const std::string mode_name = mode_s ? *mode_s : "linear";
  const std::string pad_name = pad_s ? *pad_s : "zeros";
  Mode mode;
  if (mode_name == "linear" || mode_name == "bilinear") {
    mode = Mode::kLinear;
  } else if (mode_name == "cubic" || mode_name == "bicubic") {
    mode = Mode::kCubic;
  } else if (mode_name == "nearest") {
    mode = Mode::kNearest;
  } else {
    return Bad(absl::StrCat("unknown mode \"", mode_name, "\""));
  }
  Pad pad;
  if (pad_name == "zeros") {
    pad = Pad::kZeros;
  } else if (pad_name == "border") {
    pad = Pad::kBorder;
  } else if (pad_name == "reflection") {
    pad = Pad::kReflection;
  } else {
    return Bad(absl::StrCat("unknown padding_mode \"", pad_name, "\""));
  }
  const bool align = node.attr_int_or("align_corners", 0) != 0;

  const std::vector<int64_t>& xd = x->dims();
  const std::vector<int64_t>& gd = grid->dims();
  const int rank = x->rank();
  if (rank < 3) return Bad(absl::StrCat("X must be [N, C, D1...], got ", DimsStr(xd)));
  const int r = rank - 2;
  if (grid->rank() != rank || gd[0] != xd[0] || gd[rank - 1] != r)
    return Bad(absl::StrCat("grid must be [", xd[0], ", O1..O", r, ", ", r, "] for X ", DimsStr(xd),
                            ", got ", DimsStr(gd)));
  const int taps = mode == Mode::kNearest ? 1 : mode == Mode::kLinear ? 2 : 4;
  if (r * (taps == 4 ? 2 : taps - 1) > 20)
    return absl::UnimplementedError(absl::StrCat(node.op(), ": ", r, " spatial dims are too many"));
  std::vector<int64_t> out_dims = {xd[0], xd[1]};
  for (int i = 1; i <= r; ++i) out_dims.push_back(gd[i]);
  const int64_t count = CappedCount(out_dims);
  if (count < 0)
    return absl::ResourceExhaustedError(
        absl::StrCat("GridSample output ", DimsStr(out_dims), " is too large"));
  KILN_ASSIGN_OR_RETURN(Tensor y, Tensor::Create(x->dtype(), out_dims));
  if (count == 0) return std::vector<Tensor>{std::move(y)};

  const int64_t N = xd[0], C = xd[1];
  const std::vector<int64_t> dims(xd.begin() + 2, xd.end());
  int64_t in_size = 1;
  std::vector<int64_t> stride(r, 1);
  for (int i = r - 1; i >= 0; --i) {
    stride[i] = in_size;
    in_size *= dims[i];
  }
  if (in_size == 0 && pad != Pad::kZeros)
    return Bad(absl::StrCat("padding_mode ", pad_name, " needs non-empty spatial dims, got ",
                            DimsStr(xd)));
  std::vector<double> lo(r), hi(r);
  for (int i = 0; i < r; ++i) {
    lo[i] = align ? 0.0 : -0.5;
    hi[i] = align ? static_cast<double>(dims[i]) - 1.0 : static_cast<double>(dims[i]) - 0.5;
  }
  const int64_t points = count / (N * C);
  Tensor scratch(grid->dtype(), {1});
  auto g = [&](double v) { return RoundTo(grid->dtype(), v, scratch); };

  std::vector<int64_t> tap_idx(static_cast<size_t>(r * taps));
  std::vector<double> tap_w(static_cast<size_t>(r * taps));
  std::vector<int> k(r);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t p = 0; p < points; ++p) {
      const int64_t goff = (n * points + p) * r;
      bool finite = true;
      for (int i = 0; i < r; ++i) {
        const double v = grid->GetAsDouble(goff + (r - 1 - i));
        const double len = static_cast<double>(dims[i]);
        double c;
        if (align) {
          c = g(g(g(v + 1) / 2) * g(len - 1));
        } else {
          c = g(g(g(g(v + 1) * g(len)) - 1) / 2);
        }
        c = ToF32(c);
        if (mode == Mode::kNearest) c = std::nearbyint(c);
        if (c < lo[i] || c > hi[i]) {
          if (pad == Pad::kBorder) c = ToF32(c < 0 ? 0.0 : c > len - 1 ? len - 1 : c);
          if (pad == Pad::kReflection) c = ToF32(Reflect(c, lo[i], hi[i]));
        }
        if (!std::isfinite(c)) {
          finite = false;
          break;
        }
        int64_t* idx = &tap_idx[i * taps];
        double* w = &tap_w[i * taps];
        if (mode == Mode::kNearest) {
          idx[0] = PadIndex(std::trunc(c), dims[i], lo[i], hi[i], pad);
          w[0] = 1;
          continue;
        }
        const double x0 = std::floor(c);
        if (mode == Mode::kLinear) {
          w[0] = 1 - (c - x0);
          w[1] = c - x0;
        } else {
          CubicCoeffs(c - x0, w);
        }
        const double first = mode == Mode::kLinear ? x0 : x0 - 1;
        for (int t = 0; t < taps; ++t) idx[t] = PadIndex(first + t, dims[i], lo[i], hi[i], pad);
      }
      for (int64_t ch = 0; ch < C; ++ch) {
        const int64_t out_at = (n * C + ch) * points + p;
        if (!finite) {
          y.SetFromDouble(out_at, NAN);
          continue;
        }
        const int64_t base = (n * C + ch) * in_size;
        double acc = 0;
        std::fill(k.begin(), k.end(), 0);
        while (true) {
          double w = 1;
          int64_t off = base;
          bool valid = true;
          for (int i = 0; i < r; ++i) {
            const int64_t idx = tap_idx[i * taps + k[i]];
            if (idx < 0) {
              valid = false;
              break;
            }
            w *= tap_w[i * taps + k[i]];
            off += idx * stride[i];
          }
          if (valid) acc += w * x->GetAsDouble(off);
          int i = r - 1;
          while (i >= 0 && ++k[i] == taps) k[i--] = 0;
          if (i < 0) break;
        }
        y.SetFromDouble(out_at, acc);
      }
    }
  }
  return std::vector<Tensor>{std::move(y)};
}

// numpy arange's base coordinates along a dim of `len` points.
std::vector<double> BaseCoords(int64_t len, bool align) {
  std::vector<double> a(static_cast<size_t>(len));
  if (len == 0) return a;
  if (align && len == 1) {
    a[0] = -1;
    return a;
  }
  const double step = align ? 2.0 / static_cast<double>(len - 1) : 2.0 / static_cast<double>(len);
  const double start = align ? -1.0 : -1.0 + step / 2;
  a[0] = start;
  if (len > 1) a[1] = start + step;
  const double delta = (start + step) - start;
  for (int64_t i = 2; i < len; ++i) a[i] = start + static_cast<double>(i) * delta;
  return a;
}

Result AffineGridKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* theta, Arg(in, 0, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* size_t_, Arg(in, 1, node.op()));
  if (!IsFloat(theta->dtype())) return UnsupportedDType(node.op(), theta->dtype());
  if (!IsInteger(size_t_->dtype()) || size_t_->rank() != 1 ||
      (size_t_->NumElements() != 4 && size_t_->NumElements() != 5))
    return Bad(absl::StrCat("size must be 4 or 5 int64 values, got ", DName(size_t_->dtype()), " ",
                            DimsStr(size_t_->dims())));
  const std::vector<int64_t> size = ToInt64Vector(*size_t_);
  const int sp = static_cast<int>(size.size()) - 2;
  const std::vector<int64_t>& td = theta->dims();
  if (theta->rank() != 3 || td[1] != sp || td[2] != sp + 1)
    return Bad(absl::StrCat("theta must be [N, ", sp, ", ", sp + 1, "] for size ", DimsStr(size),
                            ", got ", DimsStr(td)));
  const int64_t N = td[0];
  if (size[0] != N) return Bad(absl::StrCat("size's batch ", size[0], " differs from theta's ", N));
  std::vector<int64_t> out_dims = {N};
  for (int i = 2; i < sp + 2; ++i) {
    if (size[i] < 0) return Bad(absl::StrCat("size ", DimsStr(size), " has a negative dim"));
    out_dims.push_back(size[i]);
  }
  out_dims.push_back(sp);
  const int64_t count = CappedCount(out_dims);
  if (count < 0)
    return absl::ResourceExhaustedError(
        absl::StrCat("AffineGrid output ", DimsStr(out_dims), " is too large"));
  KILN_ASSIGN_OR_RETURN(Tensor grid, Tensor::Create(theta->dtype(), out_dims));
  if (count == 0) return std::vector<Tensor>{std::move(grid)};

  const bool align = node.attr_int_or("align_corners", 0) == 1;
  // coords[j]: the base coordinates of component j (x over the last dim, then y, z).
  std::vector<std::vector<double>> coords(sp);
  for (int j = 0; j < sp; ++j) coords[j] = BaseCoords(size[size.size() - 1 - j], align);
  const int64_t points = count / (N * sp);
  const std::vector<double> th = ToDoubles(*theta);
  std::vector<double> base(sp + 1, 1.0);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t p = 0; p < points; ++p) {
      int64_t rest = p;
      for (int j = 0; j < sp; ++j) {
        const int64_t len = size[size.size() - 1 - j];
        base[j] = coords[j][rest % len];
        rest /= len;
      }
      for (int k = 0; k < sp; ++k) {
        double acc = 0;
        for (int j = 0; j <= sp; ++j) acc += th[(n * sp + k) * (sp + 1) + j] * base[j];
        grid.SetFromDouble((n * points + p) * sp + k, acc);
      }
    }
  }
  return std::vector<Tensor>{std::move(grid)};
}

}  // namespace

void RegisterGridKernels(KernelTable& t) {
  t[KernelKey("", "GridSample")] = &GridSampleKernel;
  t[KernelKey("", "AffineGrid")] = &AffineGridKernel;
}

}  // namespace kiln::reference
