// Resize (opset-19 form; Resize-10 and Upsample are canonicalized to it at import):
// nearest, linear and cubic interpolation, every coordinate_transformation_mode, antialias,
// exclude_outside, axes and keep_aspect_ratio_policy. Separable: one 1-D pass per resized
// axis, first axis first, each output position a weighted sum of a window of input
// positions (edge-clamped), exactly as the onnx reference computes it: the window is the n
// input positions nearest the source coordinate (ties to the smaller), the weights the
// mode's coefficients at the coordinate's fractional part (1 when it is whole). Computed in
// double; integer outputs round half to even and saturate. Output sizes: floor(scale × dim)
// for scales, or the sizes given (scale = size / dim, then the aspect policy rounds half
// up). Limits: plain loops (clarity over speed); outputs and each axis pass up to 2^28
// elements.
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

enum class Mode { kNearest, kLinear, kCubic };
enum class Coord {
  kHalfPixel,
  kHalfPixelSymmetric,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfCropAndResize,
  kTfHalfPixelForNn,  // opset 11 only
};
enum class Nearest { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };

struct Options {
  Mode mode = Mode::kNearest;
  Coord coord = Coord::kHalfPixel;
  Nearest nearest = Nearest::kRoundPreferFloor;
  bool antialias = false;
  bool exclude_outside = false;
  double cubic_a = -0.75;
  double extrapolation = 0.0;
};

std::string StringAttr(const Node& n, const std::string& name, const std::string& dflt) {
  const std::string* s = n.attr_string(name);
  return s ? *s : dflt;
}

absl::StatusOr<Options> ReadOptions(const Node& n) {
  Options o;
  const std::string mode = StringAttr(n, "mode", "nearest");
  if (mode == "nearest") {
    o.mode = Mode::kNearest;
  } else if (mode == "linear") {
    o.mode = Mode::kLinear;
  } else if (mode == "cubic") {
    o.mode = Mode::kCubic;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("mode '", mode, "' is not nearest, linear or cubic"));
  }
  const std::string coord = StringAttr(n, "coordinate_transformation_mode", "half_pixel");
  static constexpr std::pair<const char*, Coord> kCoords[] = {
      {"half_pixel", Coord::kHalfPixel},
      {"half_pixel_symmetric", Coord::kHalfPixelSymmetric},
      {"pytorch_half_pixel", Coord::kPytorchHalfPixel},
      {"align_corners", Coord::kAlignCorners},
      {"asymmetric", Coord::kAsymmetric},
      {"tf_crop_and_resize", Coord::kTfCropAndResize},
      {"tf_half_pixel_for_nn", Coord::kTfHalfPixelForNn}};
  bool found = false;
  for (const auto& [name, c] : kCoords)
    if (coord == name) {
      o.coord = c;
      found = true;
    }
  if (!found)
    return absl::InvalidArgumentError(
        absl::StrCat("coordinate_transformation_mode '", coord, "' is not known"));
  const std::string nearest = StringAttr(n, "nearest_mode", "round_prefer_floor");
  static constexpr std::pair<const char*, Nearest> kNearest[] = {
      {"round_prefer_floor", Nearest::kRoundPreferFloor},
      {"round_prefer_ceil", Nearest::kRoundPreferCeil},
      {"floor", Nearest::kFloor},
      {"ceil", Nearest::kCeil}};
  found = false;
  for (const auto& [name, m] : kNearest)
    if (nearest == name) {
      o.nearest = m;
      found = true;
    }
  if (!found)
    return absl::InvalidArgumentError(absl::StrCat("nearest_mode '", nearest, "' is not known"));
  o.antialias = n.attr_int_or("antialias", 0) != 0;
  if (o.antialias && o.mode == Mode::kNearest)
    return absl::InvalidArgumentError("antialias applies to linear and cubic modes only");
  o.exclude_outside = n.attr_int_or("exclude_outside", 0) != 0;
  o.cubic_a = n.attr_float_or("cubic_coeff_a", -0.75f);
  o.extrapolation = n.attr_float_or("extrapolation_value", 0.0f);
  return o;
}

// The mode's weights for the window around a source coordinate whose fractional part is
// `ratio` (in (0, 1]), at axis scale `scale`. Nearest, linear and cubic take 2, 2 and 4
// positions; antialiased ones (downscaling) stretch the filter by 1 / scale.
std::vector<double> Coefficients(const Options& o, double ratio, double scale) {
  switch (o.mode) {
    case Mode::kNearest: {
      if (ratio == 1.0) return {0.0, 1.0};
      bool right = false;
      switch (o.nearest) {
        case Nearest::kRoundPreferFloor:
          right = ratio > 0.5;
          break;
        case Nearest::kRoundPreferCeil:
          right = ratio >= 0.5;
          break;
        case Nearest::kFloor:
          right = false;
          break;
        case Nearest::kCeil:
          right = true;
          break;
      }
      return {right ? 0.0 : 1.0, right ? 1.0 : 0.0};
    }
    case Mode::kLinear: {
      if (!o.antialias) return {1.0 - ratio, ratio};
      const double s = std::min(scale, 1.0);
      const int64_t start = static_cast<int64_t>(std::floor(-1.0 / s)) + 1;
      const int64_t taps = 2 - 2 * start;
      std::vector<double> c(static_cast<size_t>(taps));
      double sum = 0;
      for (int64_t i = 0; i < taps; ++i) {
        const double arg = (static_cast<double>(start + i) - ratio) * s;
        c[i] = std::clamp(1.0 - std::fabs(arg), 0.0, 1.0);
        sum += c[i];
      }
      for (double& v : c) v /= sum;
      return c;
    }
    case Mode::kCubic: {
      const double a = o.cubic_a;
      if (!o.antialias) {
        const double r = ratio, q = 1.0 - ratio;
        return {((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
                ((a + 2) * r - (a + 3)) * r * r + 1, ((a + 2) * q - (a + 3)) * q * q + 1,
                ((a * (q + 1) - 5 * a) * (q + 1) + 8 * a) * (q + 1) - 4 * a};
      }
      const double s = std::min(scale, 1.0);
      auto weight = [a](double x) {
        x = std::fabs(x);
        if (x <= 1) return (a + 2) * x * x * x - (a + 3) * x * x + 1;
        if (x < 2) return a * x * x * x - 5 * a * x * x + 8 * a * x - 4 * a;
        return 0.0;
      };
      const int64_t start = static_cast<int64_t>(std::floor(-2.0 / s)) + 1;
      const int64_t end = 2 - start;
      std::vector<double> c;
      double sum = 0;
      for (int64_t i = start; i < end; ++i) {
        c.push_back(weight(s * (static_cast<double>(i) - ratio)));
        sum += c.back();
      }
      for (double& v : c) v /= sum;
      return c;
    }
  }
  return {};
}

// Source coordinate of output position `y` along an axis of `in` positions resized by
// `scale` to `out` positions; `roi` (start, end) for tf_crop_and_resize. Sets
// `*outside` when tf_crop_and_resize lands outside the input.
double SourceCoord(const Options& o, double y, double scale, int64_t in, int64_t out,
                   double roi_start, double roi_end, bool* outside) {
  const double width = scale * static_cast<double>(in);  // the unrounded output width
  const double w = static_cast<double>(in);
  *outside = false;
  switch (o.coord) {
    case Coord::kAlignCorners:
      return width == 1 ? 0.0 : y * (w - 1) / (width - 1);
    case Coord::kAsymmetric:
      return y / scale;
    case Coord::kTfCropAndResize: {
      double x = width == 1 ? (roi_end - roi_start) * (w - 1) / 2
                            : y * (roi_end - roi_start) * (w - 1) / (width - 1);
      x += roi_start * (w - 1);
      *outside = x < 0 || x > w - 1;
      return x;
    }
    case Coord::kPytorchHalfPixel:
      return width == 1 ? -0.5 : (y + 0.5) / scale - 0.5;
    case Coord::kHalfPixel:
      return (y + 0.5) / scale - 0.5;
    case Coord::kTfHalfPixelForNn:
      return (y + 0.5) / scale;
    case Coord::kHalfPixelSymmetric: {
      const double adjustment = static_cast<double>(out) / width;
      const double offset = w / 2 * (1 - adjustment);
      return offset + (y + 0.5) / scale - 0.5;
    }
  }
  return 0;
}

// One resized axis: `data` of `dims` -> `out` positions along `axis`.
std::vector<double> ResizeAxis(const std::vector<double>& data, std::vector<int64_t>& dims,
                               int axis, int64_t out, double scale, double roi_start,
                               double roi_end, const Options& o) {
  const int64_t in = dims[axis];
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= dims[i];
  for (size_t i = static_cast<size_t>(axis) + 1; i < dims.size(); ++i) inner *= dims[i];
  std::vector<double> result(static_cast<size_t>(outer * out * inner));
  for (int64_t y = 0; y < out; ++y) {
    bool outside;
    const double x =
        SourceCoord(o, static_cast<double>(y), scale, in, out, roi_start, roi_end, &outside);
    const double fl = std::floor(x);
    std::vector<double> c = Coefficients(o, x == fl ? 1.0 : x - fl, scale);
    const int64_t n = static_cast<int64_t>(c.size());
    // The n positions nearest x, ties to the smaller (n is even for every mode).
    const int64_t first = static_cast<int64_t>(fl) - n / 2 + (x == fl ? 0 : 1);
    if (o.exclude_outside) {
      double sum = 0;
      for (int64_t k = 0; k < n; ++k) {
        if (first + k < 0 || first + k >= in) c[k] = 0;
        sum += c[k];
      }
      if (sum != 0)
        for (double& v : c) v /= sum;
    }
    for (int64_t a = 0; a < outer; ++a) {
      const double* src = data.data() + a * in * inner;
      double* dst = result.data() + (a * out + y) * inner;
      for (int64_t b = 0; b < inner; ++b) {
        if (outside) {
          dst[b] = o.extrapolation;
          continue;
        }
        double acc = 0;
        for (int64_t k = 0; k < n; ++k) {
          const int64_t at = std::clamp<int64_t>(first + k, 0, in - 1);  // edge padding
          acc += c[k] * src[at * inner + b];
        }
        dst[b] = acc;
      }
    }
  }
  dims[axis] = out;
  return result;
}

// The reference computes in double: outputs and intermediates up to 2^28 elements (2 GiB).
constexpr int64_t kMaxElements = int64_t{1} << 28;

bool IsClose(double a, double b) {  // math.isclose's default relative tolerance
  return std::fabs(a - b) <= 1e-9 * std::max(std::fabs(a), std::fabs(b));
}

Result ResizeKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  if (!IsFloat(x->dtype()) && !IsInteger(x->dtype()))
    return UnsupportedDType(node.op(), x->dtype());
  KILN_ASSIGN_OR_RETURN(Options o, ReadOptions(node));
  // Empty roi/scales/sizes tensors count as absent (exporters write them so).
  auto given = [&](int i) -> const Tensor* {
    const Tensor* t = OptArg(in, i);
    return t != nullptr && t->NumElements() > 0 ? t : nullptr;
  };
  const Tensor* roi = given(1);
  const Tensor* scales = given(2);
  const Tensor* sizes = given(3);
  if ((scales == nullptr) == (sizes == nullptr))
    return absl::InvalidArgumentError("exactly one of scales and sizes must be given");
  const int r = x->rank();
  std::vector<int> axes;
  if (const std::vector<int64_t>* a = node.attr_ints("axes")) {
    for (int64_t v : *a) {
      KILN_ASSIGN_OR_RETURN(int ax, NormalizeAxis(v, r));
      if (std::find(axes.begin(), axes.end(), ax) != axes.end())
        return absl::InvalidArgumentError(absl::StrCat("axis ", ax, " repeats in axes"));
      axes.push_back(ax);
    }
  } else {
    for (int i = 0; i < r; ++i) axes.push_back(i);
  }
  const size_t k = axes.size();
  const std::vector<int64_t>& dims = x->dims();
  std::vector<double> scale(r, 1.0);
  std::vector<int64_t> out_dims = dims;
  std::vector<double> roi_start(r, 0.0), roi_end(r, 1.0);
  if (roi != nullptr) {
    if (static_cast<size_t>(roi->NumElements()) != 2 * k)
      return absl::InvalidArgumentError(
          absl::StrCat("roi has ", roi->NumElements(), " values for ", k, " axes"));
    for (size_t i = 0; i < k; ++i) {
      roi_start[axes[i]] = roi->GetAsDouble(static_cast<int64_t>(i));
      roi_end[axes[i]] = roi->GetAsDouble(static_cast<int64_t>(k + i));
    }
  }
  if (scales != nullptr) {
    if (!IsFloat(scales->dtype())) return UnsupportedDType(node.op(), scales->dtype());
    if (static_cast<size_t>(scales->NumElements()) != k)
      return absl::InvalidArgumentError(
          absl::StrCat("scales has ", scales->NumElements(), " values for ", k, " axes"));
    for (size_t i = 0; i < k; ++i) {
      const double s = scales->GetAsDouble(static_cast<int64_t>(i));
      if (!(s > 0) || !std::isfinite(s))
        return absl::InvalidArgumentError(absl::StrCat("scale ", s, " is not positive"));
      const double o_dim = std::floor(s * static_cast<double>(dims[axes[i]]));
      if (o_dim > 9e15) return absl::InvalidArgumentError("the output is too large");
      scale[axes[i]] = s;
      out_dims[axes[i]] = static_cast<int64_t>(o_dim);
    }
  } else {
    if (sizes->dtype() != DType::kI64) return UnsupportedDType(node.op(), sizes->dtype());
    if (static_cast<size_t>(sizes->NumElements()) != k)
      return absl::InvalidArgumentError(
          absl::StrCat("sizes has ", sizes->NumElements(), " values for ", k, " axes"));
    for (size_t i = 0; i < k; ++i) {
      const int64_t want = sizes->data<int64_t>()[i];
      if (want < 0) return absl::InvalidArgumentError(absl::StrCat("size ", want, " is negative"));
      if (dims[axes[i]] == 0 && want != 0)
        return absl::InvalidArgumentError("an empty axis cannot be resized to a non-empty one");
      scale[axes[i]] =
          dims[axes[i]] == 0 ? 1.0 : static_cast<double>(want) / static_cast<double>(dims[axes[i]]);
      out_dims[axes[i]] = want;
    }
    const std::string policy = StringAttr(node, "keep_aspect_ratio_policy", "stretch");
    if (policy != "stretch") {
      if (policy != "not_larger" && policy != "not_smaller")
        return absl::InvalidArgumentError(
            absl::StrCat("keep_aspect_ratio_policy '", policy, "' is not known"));
      double s = scale[axes[0]];
      for (int a : axes) s = policy == "not_larger" ? std::min(s, scale[a]) : std::max(s, scale[a]);
      for (int a : axes) {
        scale[a] = s;
        const double o_dim = std::floor(s * static_cast<double>(dims[a]) + 0.5);
        if (o_dim > 9e15) return absl::InvalidArgumentError("the output is too large");
        out_dims[a] = static_cast<int64_t>(o_dim);
      }
    }
  }
  KILN_ASSIGN_OR_RETURN(int64_t total, CheckedNumElements(out_dims));
  if (total > kMaxElements)
    return absl::ResourceExhaustedError(
        absl::StrCat("output ", DimsStr(out_dims), " is too large for the reference executor"));

  std::vector<double> data = ToDoubles(*x);
  std::vector<int64_t> cur = dims;
  for (int a = 0; a < r; ++a) {
    const bool trivial_roi = roi_start[a] == 0.0 && IsClose(roi_end[a], 1.0);
    if (IsClose(scale[a], 1.0) && out_dims[a] == cur[a] && trivial_roi) continue;
    if (cur[a] == 0 || out_dims[a] == 0) {
      data.assign(static_cast<size_t>(total), 0.0);
      cur[a] = out_dims[a];
      continue;
    }
    // Each pass's result is bounded too (an upscale before a downscale can outgrow both).
    int64_t next = 1;
    for (int i = 0; i < r; ++i) {
      if (MulOverflows(next, i == a ? out_dims[a] : cur[i], &next) || next > kMaxElements)
        return absl::ResourceExhaustedError(absl::StrCat(
            "resizing axis ", a, " makes an intermediate too large for the reference executor"));
    }
    data = ResizeAxis(data, cur, a, out_dims[a], scale[a], roi_start[a], roi_end[a], o);
  }
  if (IsInteger(x->dtype())) {
    const auto [lo, hi] = IntegerRange(x->dtype());
    for (double& v : data) v = std::clamp(std::nearbyint(v), lo, hi);
  }
  return std::vector<Tensor>{FromDoubles(x->dtype(), out_dims, data)};
}

}  // namespace

void RegisterResizeKernels(KernelTable& t) { t[KernelKey("", "Resize")] = &ResizeKernel; }

}  // namespace kiln::reference
