// Reference kernels of the detection-style ops, following onnx's reference implementations
// (onnx/reference/ops/op_non_max_suppression.py, op_roi_align.py, op_unique.py,
// op_col2im.py, op_max_unpool.py) step by step, their comparisons and tie-breaks included:
//  - NonMaxSuppression (opset 11): per (batch, class), boxes whose score passes
//    score_threshold (strictly greater; no filter when the input is omitted) are visited by
//    descending score, ties by ascending box index; a box is kept unless its IoU with a box
//    already kept for that class is > iou_threshold (default 0), until
//    max_output_boxes_per_class (default 0: none) are kept. The IoU is computed in the
//    boxes' precision (float for f32/f16/bf16, double for f64) as the reference does in
//    numpy float32, so boundary cases decide alike. Output int64 [num_selected, 3] of
//    (batch, class, box). A NaN score sorts after every number (Python's sort leaves it
//    wherever its merge puts it).
//  - RoiAlign (opset 16): [R, C, output_height, output_width]; each bin averages (or, mode
//    "max", takes the largest of the four weighted corners of) a sampling_ratio² grid
//    (ceil(roi size / bins) when sampling_ratio is 0) of bilinear samples; samples more than
//    one pixel outside the map contribute 0·X[0]. half_pixel shifts the roi by -0.5,
//    output_half_pixel clamps it to at least 1x1. In double, one rounding per output.
//  - Unique (opset 11): numpy.unique of the flattened input (NaNs folded into one, sorted
//    last) or of the slices along `axis` of a rank >= 2 input (compared lexicographically,
//    NaN last but first in float16 as numpy's field compare has it; a slice holding a NaN
//    equals no other), stable, so indices are first occurrences; sorted=0 reorders the
//    groups by first occurrence. Every dtype but strings; values compare as numbers (u64 as
//    unsigned). Outputs Y, indices, inverse_indices, counts, as many as the node has.
//  - Col2Im (opset 18): [N, C·prod(block), L] -> [N, C, image...], summing every column
//    entry into the image position its sliding block covers (pads, strides, dilations);
//    floats summed in double, integers in wrapping int64.
//  - MaxUnpool (opset 11): X scattered into a zero tensor of the inferred shape
//    ((in - 1)·stride - pads + kernel) at the flat indices I (negative ones counted from the
//    end, as numpy does; later elements overwrite earlier), then placed in the top-left
//    corner of output_shape when given.
// Where the reference is loose, the spec decides: unsorted Unique gathers the first
// occurrences along `axis` or from the flattened input (the reference's np.take(axis=0) is
// wrong there) and orders a lone Y output by first occurrence too (the reference returns it
// sorted). Limits: plain loops; outputs and RoiAlign's sample count are refused
// above 2^32 elements.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "kiln/support/status.h"
#include "reference/kernel_util.h"
#include "reference/kernels.h"

namespace kiln::reference {
namespace {

constexpr int64_t kMaxElements = int64_t{1} << 32;
constexpr int64_t kMaxAttr = int64_t{1} << 31;

absl::Status Bad(std::string_view msg) { return absl::InvalidArgumentError(std::string(msg)); }

absl::Status TooLarge(const char* what) {
  return absl::ResourceExhaustedError(
      absl::StrCat(what, " exceeds the reference's ", kMaxElements, " elements"));
}

// Element count of `dims`, or an error for a negative dim or a count above kMaxElements.
absl::StatusOr<int64_t> BoundedCount(absl::Span<const int64_t> dims, const char* what) {
  for (int64_t d : dims)
    if (d < 0) return Bad(absl::StrCat(what, " has a negative dim: ", DimsStr(dims)));
  for (int64_t d : dims)
    if (d == 0) return 0;
  int64_t n = 1;
  for (int64_t d : dims)
    if (MulOverflows(n, d, &n) || n > kMaxElements) return TooLarge(what);
  return n;
}

// Python's max(a, b) / min(a, b): the first argument unless the second compares greater
// (smaller), which decides what a NaN gives.
template <typename T>
T PyMax(T a, T b) {
  return b > a ? b : a;
}
template <typename T>
T PyMin(T a, T b) {
  return b < a ? b : a;
}

// An integer attribute list of `n` values (all `dflt` when absent), each in [lo, kMaxAttr].
absl::StatusOr<std::vector<int64_t>> IntsAttr(const Node& node, const std::string& name, size_t n,
                                              int64_t dflt, int64_t lo) {
  const std::vector<int64_t>* a = node.attr_ints(name);
  if (a == nullptr) return std::vector<int64_t>(n, dflt);
  if (a->size() != n)
    return Bad(absl::StrCat("attribute '", name, "' must have ", n, " values, got ", a->size()));
  for (int64_t v : *a)
    if (v < lo || v > kMaxAttr)
      return Bad(absl::StrCat("attribute '", name, "' value ", v, " is out of range"));
  return *a;
}

// Copies element `from` of `src` to element `to` of `dst` (same dtype).
void CopyElement(const Tensor& src, int64_t from, Tensor& dst, int64_t to) {
  const size_t es = DTypeSize(src.dtype());
  std::memcpy(dst.raw() + static_cast<size_t>(to) * es, src.raw() + static_cast<size_t>(from) * es,
              es);
}

// --- NonMaxSuppression ---

// (min, max) as the reference's max_min.
template <typename T>
std::pair<T, T> MinMax(T lhs, T rhs) {
  return lhs >= rhs ? std::pair<T, T>{rhs, lhs} : std::pair<T, T>{lhs, rhs};
}

template <typename T>
bool SuppressByIou(const T* b1, const T* b2, bool center, double iou_threshold) {
  T x1_min, x1_max, x2_min, x2_max, y1_min, y1_max, y2_min, y2_max;
  if (!center) {  // [y1, x1, y2, x2]
    std::tie(x1_min, x1_max) = MinMax(b1[1], b1[3]);
    std::tie(x2_min, x2_max) = MinMax(b2[1], b2[3]);
    std::tie(y1_min, y1_max) = MinMax(b1[0], b1[2]);
    std::tie(y2_min, y2_max) = MinMax(b2[0], b2[2]);
  } else {  // [x_center, y_center, width, height]
    const T w1 = b1[2] / 2, h1 = b1[3] / 2, w2 = b2[2] / 2, h2 = b2[3] / 2;
    x1_min = b1[0] - w1, x1_max = b1[0] + w1;
    x2_min = b2[0] - w2, x2_max = b2[0] + w2;
    y1_min = b1[1] - h1, y1_max = b1[1] + h1;
    y2_min = b2[1] - h2, y2_max = b2[1] + h2;
  }
  const T ix_min = PyMax(x1_min, x2_min), ix_max = PyMin(x1_max, x2_max);
  if (ix_max <= ix_min) return false;
  const T iy_min = PyMax(y1_min, y2_min), iy_max = PyMin(y1_max, y2_max);
  if (iy_max <= iy_min) return false;
  const T inter = (ix_max - ix_min) * (iy_max - iy_min);
  if (inter <= 0) return false;
  const T area1 = (x1_max - x1_min) * (y1_max - y1_min);
  const T area2 = (x2_max - x2_min) * (y2_max - y2_min);
  const T uni = area1 + area2 - inter;
  if (area1 <= 0 || area2 <= 0 || uni <= 0) return false;
  const T iou = inter / uni;
  return static_cast<double>(iou) > iou_threshold;
}

struct Candidate {
  double score;
  int64_t box;
};

// Visiting order: higher score first, then lower box index; NaN scores last.
bool VisitBefore(const Candidate& a, const Candidate& b) {
  const bool an = std::isnan(a.score), bn = std::isnan(b.score);
  if (an != bn) return bn;
  if (!an && a.score != b.score) return a.score > b.score;
  return a.box < b.box;
}

template <typename T>
Result Nms(const Tensor& boxes, const Tensor& scores, bool center, int64_t max_out,
           double iou_threshold, bool has_score_threshold, double score_threshold) {
  const int64_t batches = boxes.dims()[0], n = boxes.dims()[1], classes = scores.dims()[1];
  std::vector<T> bx(static_cast<size_t>(boxes.NumElements()));
  for (size_t i = 0; i < bx.size(); ++i)
    bx[i] = static_cast<T>(boxes.GetAsDouble(static_cast<int64_t>(i)));
  std::vector<int64_t> rows;  // (batch, class, box) triples
  for (int64_t b = 0; b < batches; ++b)
    for (int64_t c = 0; c < classes; ++c) {
      const int64_t s0 = (b * classes + c) * n;
      std::vector<Candidate> cand;
      for (int64_t i = 0; i < n; ++i) {
        const double s = scores.GetAsDouble(s0 + i);
        if (!has_score_threshold || s > score_threshold) cand.push_back({s, i});
      }
      std::stable_sort(cand.begin(), cand.end(), VisitBefore);
      std::vector<int64_t> kept;
      for (const Candidate& k : cand) {
        if (static_cast<int64_t>(kept.size()) >= max_out) break;
        bool selected = true;
        for (int64_t j : kept)
          if (SuppressByIou<T>(&bx[(b * n + k.box) * 4], &bx[(b * n + j) * 4], center,
                               iou_threshold)) {
            selected = false;
            break;
          }
        if (!selected) continue;
        kept.push_back(k.box);
        rows.insert(rows.end(), {b, c, k.box});
      }
    }
  const int64_t count = static_cast<int64_t>(rows.size() / 3);
  KILN_ASSIGN_OR_RETURN(Tensor y, Tensor::Create(DType::kI64, {count, 3}));
  if (!rows.empty()) std::memcpy(y.raw(), rows.data(), rows.size() * sizeof(int64_t));
  return std::vector<Tensor>{std::move(y)};
}

Result NonMaxSuppressionKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* boxes, Arg(in, 0, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* scores, Arg(in, 1, node.op()));
  if (!IsFloat(boxes->dtype())) return UnsupportedDType(node.op(), boxes->dtype());
  if (!IsFloat(scores->dtype())) return UnsupportedDType(node.op(), scores->dtype());
  if (boxes->rank() != 3 || boxes->dims()[2] != 4)
    return Bad(absl::StrCat("boxes must be [batches, boxes, 4], got ", DimsStr(boxes->dims())));
  if (scores->rank() != 3 || scores->dims()[0] != boxes->dims()[0] ||
      scores->dims()[2] != boxes->dims()[1])
    return Bad(absl::StrCat("scores ", DimsStr(scores->dims()), " must be [", boxes->dims()[0],
                            ", classes, ", boxes->dims()[1], "]"));
  const int64_t center = node.attr_int_or("center_point_box", 0);
  if (center != 0 && center != 1)
    return Bad(absl::StrCat("center_point_box ", center, " must be 0 or 1"));
  int64_t max_out = 0;
  if (const Tensor* t = OptArg(in, 2); t != nullptr && t->NumElements() > 0) {
    if (!IsInteger(t->dtype())) return Bad("max_output_boxes_per_class must be an integer");
    max_out = std::max<int64_t>(t->GetAsInt64(0), 0);
  }
  double iou_threshold = 0;
  if (const Tensor* t = OptArg(in, 3); t != nullptr && t->NumElements() > 0) {
    if (!IsFloat(t->dtype())) return Bad("iou_threshold must be a float");
    iou_threshold = t->GetAsDouble(0);
  }
  bool has_score_threshold = false;
  double score_threshold = 0;
  if (const Tensor* t = OptArg(in, 4); t != nullptr && t->NumElements() > 0) {
    if (!IsFloat(t->dtype())) return Bad("score_threshold must be a float");
    has_score_threshold = true;
    score_threshold = t->GetAsDouble(0);
  }
  if (boxes->dtype() == DType::kF64)
    return Nms<double>(*boxes, *scores, center != 0, max_out, iou_threshold, has_score_threshold,
                       score_threshold);
  return Nms<float>(*boxes, *scores, center != 0, max_out, iou_threshold, has_score_threshold,
                    score_threshold);
}

// --- RoiAlign ---

// One bilinear sample: four flat positions in an H·W plane and their weights.
struct Sample {
  int64_t pos[4] = {0, 0, 0, 0};
  double w[4] = {0, 0, 0, 0};
};

Sample BilinearSample(double y, double x, int64_t height, int64_t width) {
  Sample s;
  if (y < -1.0 || y > static_cast<double>(height) || x < -1.0 || x > static_cast<double>(width))
    return s;
  y = PyMax(y, 0.0);
  x = PyMax(x, 0.0);
  int64_t y_low = static_cast<int64_t>(y), x_low = static_cast<int64_t>(x), y_high, x_high;
  if (y_low >= height - 1) {
    y_high = y_low = height - 1;
    y = static_cast<double>(y_low);
  } else {
    y_high = y_low + 1;
  }
  if (x_low >= width - 1) {
    x_high = x_low = width - 1;
    x = static_cast<double>(x_low);
  } else {
    x_high = x_low + 1;
  }
  const double ly = y - static_cast<double>(y_low), lx = x - static_cast<double>(x_low);
  const double hy = 1.0 - ly, hx = 1.0 - lx;
  s.pos[0] = y_low * width + x_low;
  s.pos[1] = y_low * width + x_high;
  s.pos[2] = y_high * width + x_low;
  s.pos[3] = y_high * width + x_high;
  s.w[0] = hy * hx;
  s.w[1] = hy * lx;
  s.w[2] = ly * hx;
  s.w[3] = ly * lx;
  return s;
}

// The sampling grid along one roi side: sampling_ratio, else ceil(size / bins).
absl::StatusOr<int64_t> GridSize(int64_t sampling_ratio, double size, int64_t bins) {
  if (sampling_ratio > 0) {
    if (sampling_ratio > kMaxAttr) return TooLarge("RoiAlign's sampling grid");
    return sampling_ratio;
  }
  const double g = std::ceil(size / static_cast<double>(bins));
  if (std::fabs(g) > static_cast<double>(kMaxAttr)) return TooLarge("RoiAlign's sampling grid");
  return static_cast<int64_t>(g);
}

Result RoiAlignKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* rois, Arg(in, 1, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* batch_indices, Arg(in, 2, node.op()));
  if (!IsFloat(x->dtype())) return UnsupportedDType(node.op(), x->dtype());
  if (!IsFloat(rois->dtype())) return UnsupportedDType(node.op(), rois->dtype());
  if (!IsInteger(batch_indices->dtype())) return Bad("batch_indices must be integers");
  if (x->rank() != 4) return Bad(absl::StrCat("X must be [N, C, H, W], got ", DimsStr(x->dims())));
  if (rois->rank() != 2 || rois->dims()[1] != 4)
    return Bad(absl::StrCat("rois must be [num_rois, 4], got ", DimsStr(rois->dims())));
  const int64_t num_rois = rois->dims()[0];
  if (batch_indices->dims() != std::vector<int64_t>{num_rois})
    return Bad(absl::StrCat("batch_indices must be [", num_rois, "], got ",
                            DimsStr(batch_indices->dims())));
  const std::string* mode_attr = node.attr_string("mode");
  const std::string mode = absl::AsciiStrToLower(mode_attr ? *mode_attr : "avg");
  if (mode != "avg" && mode != "max")
    return Bad(absl::StrCat("mode '", mode, "' is not avg or max"));
  const std::string* ctm_attr = node.attr_string("coordinate_transformation_mode");
  const std::string ctm = absl::AsciiStrToLower(ctm_attr ? *ctm_attr : "half_pixel");
  if (ctm != "half_pixel" && ctm != "output_half_pixel")
    return Bad(absl::StrCat("coordinate_transformation_mode '", ctm,
                            "' is not half_pixel or output_half_pixel"));
  const bool half_pixel = ctm == "half_pixel";
  const int64_t out_h = node.attr_int_or("output_height", 1);
  const int64_t out_w = node.attr_int_or("output_width", 1);
  if (out_h < 1 || out_w < 1 || out_h > kMaxAttr || out_w > kMaxAttr)
    return Bad(
        absl::StrCat("output_height ", out_h, " and output_width ", out_w, " must be positive"));
  const int64_t sampling_ratio = node.attr_int_or("sampling_ratio", 0);
  const double scale = node.attr_float_or("spatial_scale", 1.0f);
  if (!std::isfinite(scale)) return Bad("spatial_scale must be finite");
  const int64_t batches = x->dims()[0], channels = x->dims()[1];
  const int64_t height = x->dims()[2], width = x->dims()[3];
  KILN_ASSIGN_OR_RETURN(const int64_t out_count,
                        BoundedCount({num_rois, channels, out_h, out_w}, "RoiAlign's output"));
  KILN_ASSIGN_OR_RETURN(Tensor y, Tensor::Create(x->dtype(), {num_rois, channels, out_h, out_w}));
  if (out_count == 0) return std::vector<Tensor>{std::move(y)};
  if (height == 0 || width == 0)
    return Bad(absl::StrCat("X ", DimsStr(x->dims()), " has no pixels to sample"));
  const bool avg = mode == "avg";
  const double offset = half_pixel ? 0.5 : 0.0;
  double work = 0;
  for (int64_t n = 0; n < num_rois; ++n) {
    const int64_t b = batch_indices->GetAsInt64(n);
    if (b < 0 || b >= batches)
      return Bad(absl::StrCat("batch index ", b, " of roi ", n, " is outside [0, ", batches, ")"));
    const double start_w = rois->GetAsDouble(n * 4 + 0) * scale - offset;
    const double start_h = rois->GetAsDouble(n * 4 + 1) * scale - offset;
    const double end_w = rois->GetAsDouble(n * 4 + 2) * scale - offset;
    const double end_h = rois->GetAsDouble(n * 4 + 3) * scale - offset;
    if (!std::isfinite(start_w) || !std::isfinite(start_h) || !std::isfinite(end_w) ||
        !std::isfinite(end_h))
      return Bad(absl::StrCat("roi ", n, " has a coordinate that is not finite"));
    double roi_w = end_w - start_w, roi_h = end_h - start_h;
    if (!half_pixel) {
      roi_w = PyMax(roi_w, 1.0);
      roi_h = PyMax(roi_h, 1.0);
    }
    const double bin_h = roi_h / static_cast<double>(out_h);
    const double bin_w = roi_w / static_cast<double>(out_w);
    KILN_ASSIGN_OR_RETURN(const int64_t grid_h, GridSize(sampling_ratio, roi_h, out_h));
    KILN_ASSIGN_OR_RETURN(const int64_t grid_w, GridSize(sampling_ratio, roi_w, out_w));
    const int64_t count = std::max<int64_t>(grid_h * grid_w, 1);
    const int64_t steps_h = std::max<int64_t>(grid_h, 0), steps_w = std::max<int64_t>(grid_w, 0);
    work += static_cast<double>(channels) * static_cast<double>(out_h * out_w) *
            static_cast<double>(steps_h) * static_cast<double>(steps_w);
    if (work > static_cast<double>(kMaxElements)) return TooLarge("RoiAlign's sample count");
    for (int64_t c = 0; c < channels; ++c) {
      const int64_t base = (b * channels + c) * height * width;
      for (int64_t ph = 0; ph < out_h; ++ph)
        for (int64_t pw = 0; pw < out_w; ++pw) {
          double out = 0.0;
          bool first = true;
          for (int64_t iy = 0; iy < steps_h; ++iy) {
            const double yy = start_h + static_cast<double>(ph) * bin_h +
                              (static_cast<double>(iy) + 0.5) * bin_h / static_cast<double>(grid_h);
            for (int64_t ix = 0; ix < steps_w; ++ix) {
              const double xx =
                  start_w + static_cast<double>(pw) * bin_w +
                  (static_cast<double>(ix) + 0.5) * bin_w / static_cast<double>(grid_w);
              const Sample s = BilinearSample(yy, xx, height, width);
              double v[4];
              for (int k = 0; k < 4; ++k) v[k] = s.w[k] * x->GetAsDouble(base + s.pos[k]);
              if (avg) {
                out += v[0] + v[1] + v[2] + v[3];
              } else {
                const double m = PyMax(PyMax(PyMax(v[0], v[1]), v[2]), v[3]);
                out = first ? m : PyMax(out, m);
                first = false;
              }
            }
          }
          if (avg) out /= static_cast<double>(count);
          y.SetFromDouble(((n * channels + c) * out_h + ph) * out_w + pw, out);
        }
    }
  }
  return std::vector<Tensor>{std::move(y)};
}

// --- Unique ---

// Elements of one tensor as comparable numbers: doubles for the float dtypes, uint64 for
// u64, int64 for the other integers and bool. NaNs sort after every number, or before when
// `nan_first` (numpy's compare of float16 fields, which np.unique uses along an axis).
class Keys {
 public:
  Keys(const Tensor& t, bool nan_first) : nan_order_(nan_first ? -1 : 1) {
    const int64_t n = t.NumElements();
    if (t.dtype() == DType::kU64) {
      kind_ = kUnsigned;
      u_.assign(t.data<uint64_t>(), t.data<uint64_t>() + n);
    } else if (IsInteger(t.dtype()) || t.dtype() == DType::kBool) {
      kind_ = kSigned;
      i_.resize(static_cast<size_t>(n));
      for (int64_t k = 0; k < n; ++k) i_[k] = t.GetAsInt64(k);
    } else {
      kind_ = kFloat;
      f_.resize(static_cast<size_t>(n));
      for (int64_t k = 0; k < n; ++k) f_[k] = t.GetAsDouble(k);
    }
  }
  // numpy's sort order: -1, 0, 1; NaNs equal to each other.
  int Compare(int64_t a, int64_t b) const {
    switch (kind_) {
      case kUnsigned:
        return u_[a] < u_[b] ? -1 : u_[a] > u_[b] ? 1 : 0;
      case kSigned:
        return i_[a] < i_[b] ? -1 : i_[a] > i_[b] ? 1 : 0;
      case kFloat:
        break;
    }
    const bool an = std::isnan(f_[a]), bn = std::isnan(f_[b]);
    if (an || bn) return an && bn ? 0 : an ? nan_order_ : -nan_order_;
    return f_[a] < f_[b] ? -1 : f_[a] > f_[b] ? 1 : 0;
  }
  bool IsNan(int64_t a) const { return kind_ == kFloat && std::isnan(f_[a]); }

 private:
  enum Kind { kUnsigned, kSigned, kFloat } kind_;
  int nan_order_;
  std::vector<uint64_t> u_;
  std::vector<int64_t> i_;
  std::vector<double> f_;
};

Result UniqueKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  const DType dt = x->dtype();
  if (DTypeSize(dt) == 0 || dt == DType::kString) return UnsupportedDType(node.op(), dt);
  const int num_out = node.num_outputs();
  if (num_out < 1 || num_out > 4)
    return Bad(absl::StrCat("Unique has 1 to 4 outputs, not ", num_out));
  const std::vector<int64_t>& d = x->dims();
  // Rows (the slices along `axis`, or the elements) of `width` fields; field f of row r is
  // element ((f / inner) · rows + r) · inner + f % inner.
  const bool by_axis = node.has_attr("axis");
  int axis = 0;
  int64_t rows = x->NumElements(), inner = 1, outer = 1;
  if (by_axis) {
    KILN_ASSIGN_OR_RETURN(axis, NormalizeAxis(node.attr_int_or("axis", 0), x->rank()));
    rows = d[axis];
    if (rows > kMaxElements) return TooLarge("Unique's inverse_indices");
    if (x->NumElements() == 0) {
      outer = 0;  // rows without fields (all equal), or no rows
    } else {
      for (int i = 0; i < axis; ++i) outer *= d[i];
      for (int i = axis + 1; i < x->rank(); ++i) inner *= d[i];
    }
  }
  const int64_t width = outer * inner;  // 1 without an axis
  // numpy takes a 1-D input's only axis as no axis: NaNs fold into one.
  const bool slices = by_axis && x->rank() > 1;
  const Keys keys(*x, slices && dt == DType::kF16);
  auto at = [&](int64_t r, int64_t f) { return ((f / inner) * rows + r) * inner + f % inner; };
  auto less = [&](int64_t a, int64_t b) {
    for (int64_t f = 0; f < width; ++f) {
      const int c = keys.Compare(at(a, f), at(b, f));
      if (c != 0) return c < 0;
    }
    return false;
  };
  // Adjacent sorted rows are one group when every field compares equal; along an axis a
  // NaN field equals nothing (numpy compares the slices with !=).
  auto same = [&](int64_t a, int64_t b) {
    for (int64_t f = 0; f < width; ++f) {
      const int64_t i = at(a, f), j = at(b, f);
      if (keys.Compare(i, j) != 0 || (slices && keys.IsNan(i))) return false;
    }
    return true;
  };
  std::vector<int64_t> perm(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) perm[r] = r;
  std::stable_sort(perm.begin(), perm.end(), less);
  std::vector<int64_t> first, counts, inverse(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) {
    if (i == 0 || !same(perm[i], perm[i - 1])) {
      first.push_back(perm[i]);
      counts.push_back(0);
    }
    ++counts.back();
    inverse[perm[i]] = static_cast<int64_t>(first.size()) - 1;
  }
  const int64_t groups = static_cast<int64_t>(first.size());
  if (node.attr_int_or("sorted", 1) == 0) {
    std::vector<int64_t> order(static_cast<size_t>(groups)), rank(static_cast<size_t>(groups));
    for (int64_t g = 0; g < groups; ++g) order[g] = g;
    std::sort(order.begin(), order.end(),
              [&](int64_t a, int64_t b) { return first[a] < first[b]; });
    std::vector<int64_t> f2(first.size()), c2(counts.size());
    for (int64_t k = 0; k < groups; ++k) {
      f2[k] = first[order[k]];
      c2[k] = counts[order[k]];
      rank[order[k]] = k;
    }
    first = std::move(f2);
    counts = std::move(c2);
    for (int64_t& v : inverse) v = rank[v];
  }
  std::vector<int64_t> ydims = {groups};
  if (by_axis) {
    ydims = d;
    ydims[axis] = groups;
  }
  KILN_ASSIGN_OR_RETURN(Tensor y, Tensor::Create(dt, ydims));
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t f = 0; f < width; ++f)
      CopyElement(*x, at(first[g], f), y, ((f / inner) * groups + g) * inner + f % inner);
  std::vector<Tensor> out;
  out.push_back(std::move(y));
  for (const std::vector<int64_t>* v : {&first, &inverse, &counts}) {
    if (static_cast<int>(out.size()) == num_out) break;
    const int64_t len = static_cast<int64_t>(v->size());
    KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::Create(DType::kI64, {len}));
    if (len > 0) std::memcpy(t.raw(), v->data(), v->size() * sizeof(int64_t));
    out.push_back(std::move(t));
  }
  return out;
}

// --- Col2Im ---

// The multi-index of flat `i` in `dims` (row-major).
std::vector<int64_t> Unravel(int64_t i, const std::vector<int64_t>& dims) {
  std::vector<int64_t> idx(dims.size());
  for (size_t k = dims.size(); k-- > 0;) {
    idx[k] = i % dims[k];
    i /= dims[k];
  }
  return idx;
}

// Stores integer `v` wrapped to integer dtype `t`'s width.
void StoreWrapped(Tensor& t, int64_t i, uint64_t v) {
  switch (t.dtype()) {
    case DType::kI8:
      t.data<int8_t>()[i] = static_cast<int8_t>(v);
      break;
    case DType::kU8:
      t.data<uint8_t>()[i] = static_cast<uint8_t>(v);
      break;
    case DType::kI16:
      t.data<int16_t>()[i] = static_cast<int16_t>(v);
      break;
    case DType::kU16:
      t.data<uint16_t>()[i] = static_cast<uint16_t>(v);
      break;
    case DType::kI32:
      t.data<int32_t>()[i] = static_cast<int32_t>(v);
      break;
    case DType::kU32:
      t.data<uint32_t>()[i] = static_cast<uint32_t>(v);
      break;
    case DType::kI64:
      t.data<int64_t>()[i] = static_cast<int64_t>(v);
      break;
    case DType::kU64:
      t.data<uint64_t>()[i] = v;
      break;
    default:
      break;
  }
}

Result Col2ImKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* data, Arg(in, 0, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* image_t, Arg(in, 1, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* block_t, Arg(in, 2, node.op()));
  const DType dt = data->dtype();
  const bool integer = IsInteger(dt);
  if (!IsFloat(dt) && !integer) return UnsupportedDType(node.op(), dt);
  if (data->rank() != 3)
    return Bad(
        absl::StrCat("input must be [N, C·prod(block_shape), L], got ", DimsStr(data->dims())));
  if (!IsInteger(image_t->dtype()) || !IsInteger(block_t->dtype()) || image_t->rank() != 1 ||
      block_t->rank() != 1)
    return Bad("image_shape and block_shape must be 1-D integer tensors");
  const std::vector<int64_t> image = ToInt64Vector(*image_t);
  const std::vector<int64_t> block = ToInt64Vector(*block_t);
  const size_t k = image.size();
  if (k == 0 || block.size() != k)
    return Bad(absl::StrCat("image_shape ", DimsStr(image), " and block_shape ", DimsStr(block),
                            " must have one positive length"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> dil, IntsAttr(node, "dilations", k, 1, 1));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, IntsAttr(node, "pads", 2 * k, 0, 0));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> strides, IntsAttr(node, "strides", k, 1, 1));
  int64_t block_size = 1, blocks = 1;
  std::vector<int64_t> n_blocks(k);
  for (size_t i = 0; i < k; ++i) {
    if (image[i] < 0 || image[i] > kMaxAttr || block[i] < 1 || block[i] > kMaxAttr)
      return Bad(absl::StrCat("image_shape ", DimsStr(image), " or block_shape ", DimsStr(block),
                              " is out of range"));
    const int64_t span = image[i] + pads[i] + pads[i + k] - dil[i] * (block[i] - 1) - 1;
    n_blocks[i] = (span >= 0 ? span / strides[i] : -((-span + strides[i] - 1) / strides[i])) + 1;
    if (n_blocks[i] < 0)
      return Bad(absl::StrCat("block ", block[i], " does not fit image dim ", image[i],
                              " with its pads and dilation"));
    if (MulOverflows(block_size, block[i], &block_size) || block_size > kMaxElements)
      return Bad(absl::StrCat("block_shape ", DimsStr(block), " is too large"));
    if (MulOverflows(blocks, n_blocks[i], &blocks) || blocks > kMaxElements)
      return Bad("the number of sliding blocks is too large");
  }
  const int64_t batch = data->dims()[0], planes = data->dims()[1], length = data->dims()[2];
  if (planes % block_size != 0)
    return Bad(absl::StrCat("input dim 1 (", planes, ") is not a multiple of prod(block_shape) ",
                            block_size));
  if (length != blocks)
    return Bad(
        absl::StrCat("input dim 2 (", length, ") is not the number of sliding blocks ", blocks));
  const int64_t channels = planes / block_size;
  std::vector<int64_t> ydims = {batch, channels};
  ydims.insert(ydims.end(), image.begin(), image.end());
  KILN_ASSIGN_OR_RETURN(const int64_t out_count, BoundedCount(ydims, "Col2Im's output"));
  KILN_ASSIGN_OR_RETURN(Tensor y, Tensor::Create(dt, ydims));
  const int64_t plane = out_count == 0 ? 0 : out_count / (batch * channels);
  std::vector<double> fsum(integer ? 0 : static_cast<size_t>(out_count), 0.0);
  std::vector<uint64_t> isum(integer ? static_cast<size_t>(out_count) : 0, 0);
  for (int64_t nc = 0; nc < batch * channels; ++nc)
    for (int64_t cc = 0; cc < block_size; ++cc) {
      const std::vector<int64_t> off = Unravel(cc, block);
      for (int64_t col = 0; col < length; ++col) {
        const std::vector<int64_t> pos = Unravel(col, n_blocks);
        int64_t dst = 0;
        bool inside = true;
        for (size_t i = 0; i < k && inside; ++i) {
          const int64_t p = pos[i] * strides[i] - pads[i] + off[i] * dil[i];
          inside = p >= 0 && p < image[i];
          dst = dst * image[i] + p;
        }
        if (!inside) continue;
        const int64_t src = (nc * block_size + cc) * length + col;
        if (integer)
          isum[nc * plane + dst] += static_cast<uint64_t>(data->GetAsInt64(src));
        else
          fsum[nc * plane + dst] += data->GetAsDouble(src);
      }
    }
  for (int64_t i = 0; i < out_count; ++i) {
    if (integer)
      StoreWrapped(y, i, isum[i]);
    else
      y.SetFromDouble(i, fsum[i]);
  }
  return std::vector<Tensor>{std::move(y)};
}

// --- MaxUnpool ---

Result MaxUnpoolKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* idx, Arg(in, 1, node.op()));
  const Tensor* shape_t = OptArg(in, 2);
  const DType dt = x->dtype();
  if (DTypeSize(dt) == 0 || dt == DType::kString) return UnsupportedDType(node.op(), dt);
  const int r = x->rank();
  if (r < 3) return Bad(absl::StrCat("X must be [N, C, spatial...], got ", DimsStr(x->dims())));
  if (!IsInteger(idx->dtype()) || idx->dims() != x->dims())
    return Bad(absl::StrCat("I must be integer indices of X's shape ", DimsStr(x->dims())));
  const size_t k = static_cast<size_t>(r - 2);
  const std::vector<int64_t>* kernel = node.attr_ints("kernel_shape");
  if (kernel == nullptr || kernel->size() != k)
    return Bad(absl::StrCat("attribute 'kernel_shape' must have ", k, " values"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> kern, IntsAttr(node, "kernel_shape", k, 1, 1));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, IntsAttr(node, "pads", 2 * k, 0, 0));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> strides, IntsAttr(node, "strides", k, 1, 1));
  std::vector<int64_t> inferred = {x->dims()[0], x->dims()[1]};
  for (size_t i = 0; i < k; ++i) {
    const int64_t in_d = x->dims()[i + 2];
    int64_t o = 0;
    if (MulOverflows(in_d - 1, strides[i], &o) ||
        AddOverflows(o, kern[i] - pads[i] - pads[i + k], &o) || o < 0)
      return Bad(absl::StrCat("spatial dim ", in_d, " gives no valid unpooled size"));
    inferred.push_back(o);
  }
  KILN_ASSIGN_OR_RETURN(const int64_t total, BoundedCount(inferred, "MaxUnpool's output"));
  KILN_ASSIGN_OR_RETURN(Tensor unpooled, Tensor::Create(dt, inferred));
  const int64_t n = x->NumElements();
  for (int64_t e = 0; e < n; ++e) {
    int64_t i = idx->GetAsInt64(e);
    if (i < 0 && i >= -total) i += total;
    if (i < 0 || i >= total)
      return Bad(absl::StrCat("index ", idx->GetAsInt64(e), " is outside the ", total,
                              " unpooled elements"));
    CopyElement(*x, e, unpooled, i);
  }
  if (shape_t == nullptr) return std::vector<Tensor>{std::move(unpooled)};
  if (!IsInteger(shape_t->dtype()) || shape_t->rank() != 1)
    return Bad("output_shape must be a 1-D integer tensor");
  const std::vector<int64_t> shape = ToInt64Vector(*shape_t);
  if (shape.size() != inferred.size())
    return Bad(absl::StrCat("output_shape ", DimsStr(shape), " must have rank ", r));
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] < inferred[i])
      return Bad(absl::StrCat("output_shape ", DimsStr(shape), " is smaller than the unpooled ",
                              DimsStr(inferred)));
  KILN_RETURN_IF_ERROR(BoundedCount(shape, "MaxUnpool's output").status());
  KILN_ASSIGN_OR_RETURN(Tensor y, Tensor::Create(dt, shape));
  for (int64_t j = 0; j < total; ++j) {
    const std::vector<int64_t> p = Unravel(j, inferred);
    int64_t to = 0;
    for (size_t i = 0; i < shape.size(); ++i) to = to * shape[i] + p[i];
    CopyElement(unpooled, j, y, to);
  }
  return std::vector<Tensor>{std::move(y)};
}

}  // namespace

void RegisterDetectionKernels(KernelTable& t) {
  t[KernelKey("", "NonMaxSuppression")] = &NonMaxSuppressionKernel;
  t[KernelKey("", "RoiAlign")] = &RoiAlignKernel;
  t[KernelKey("", "Unique")] = &UniqueKernel;
  t[KernelKey("", "Col2Im")] = &Col2ImKernel;
  t[KernelKey("", "MaxUnpool")] = &MaxUnpoolKernel;
}

}  // namespace kiln::reference
