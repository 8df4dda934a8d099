// Reference kernels of the spectral ops, after onnx's reference implementations
// (onnx/reference/ops/op_dft.py, op_stft.py, op_mel_weight_matrix.py):
//  - DFT (opset 17: `axis` attribute, default 1; opset 20: `axis` input 2, default -2; with
//    neither, the graph's opset picks the default): x is [signal dims..., 1] (real) or
//    [..., 2] (complex). Along `axis` (in [-r, -2] ∪ [0, r-2])
//    the signal is cut or zero-padded to n = dft_length (default the axis length; 2·(len-1)
//    for the IRFFT) and transformed: forward y[k] = Σ x[m]·e^(-2πikm/n), `onesided` keeping
//    k ≤ n/2; inverse x[m] = (1/n)·Σ y[k]·e^(2πikm/n); inverse with `onesided` is numpy's
//    irfft: the first n/2+1 bins (cut or zero-padded) are taken as half of a Hermitian
//    spectrum, the imaginary parts of bin 0 and (n even) bin n/2 are ignored, and the output
//    is real ([..., 1]). Other outputs are [..., 2]. As the reference, a complex input is
//    accepted by the forward onesided transform and a real one by the inverse.
//  - STFT (opset 17): signal [batch, length, 1|2], frame_step, window?, frame_length?.
//    frame_length defaults to the window's length (the signal's without a window), the
//    window to ones; frames = 1 + ⌊(length - frame_length) / frame_step⌋. Frame f holds
//    the window's length of samples from f·frame_step (zeros past the end) times the
//    window, and is transformed as DFT does with n = frame_length, `onesided` (default 1)
//    keeping n/2+1 bins: [batch, frames, bins, 2].
//  - MelWeightMatrix (opset 17): [dft_length/2 + 1, num_mel_bins] triangular filters on
//    num_mel_bins + 2 points spaced evenly in mel (2595·log10(1 + f/700)) between the edge
//    frequencies, each point's bin ⌊(dft_length + 1)·f / sample_rate⌋ (numpy's float floor
//    division). As numpy does, the edges' mels and the step are computed in the edges'
//    dtype, the rest in double; a negative bin index counts from the end, as numpy's.
// The transforms are direct O(n²) sums in double over a table of e^(2πij/n), rounded
// once to the input's dtype; numpy transforms f32 in single precision, so where the exact
// result is 0 its value may be rounding noise that this one does not reproduce. Limits: float
// dtypes (f32, f16, bf16, f64); n at most 2^24; outputs at most 2^32 elements; the axis,
// lengths and steps are checked, not wrapped.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kiln/support/status.h"
#include "reference/kernel_util.h"
#include "reference/kernels.h"

namespace kiln::reference {
namespace {

constexpr int64_t kMaxElements = int64_t{1} << 32;
constexpr int64_t kMaxLength = int64_t{1} << 24;

absl::Status Bad(std::string_view msg) { return absl::InvalidArgumentError(std::string(msg)); }

// The value of a one-element int32/int64 input.
absl::StatusOr<int64_t> ScalarInt(const Tensor& t, const char* what) {
  if ((t.dtype() != DType::kI32 && t.dtype() != DType::kI64) || t.NumElements() != 1)
    return Bad(absl::StrCat(what, " must be one int32 or int64 value"));
  return t.GetAsInt64(0);
}

absl::StatusOr<Tensor> MakeOutput(DType dtype, const std::vector<int64_t>& dims) {
  KILN_ASSIGN_OR_RETURN(int64_t n, CheckedNumElements(dims));
  if (n > kMaxElements)
    return absl::ResourceExhaustedError(
        absl::StrCat("output ", DimsStr(dims), " has more than 2^32 elements"));
  return Tensor::Create(dtype, dims);
}

absl::Status CheckLength(int64_t n, const char* what) {
  if (n < 1 || n > kMaxLength) return Bad(absl::StrCat(what, " ", n, " must be in [1, 2^24]"));
  return absl::OkStatus();
}

// cos(2πj/n) and sin(2πj/n) for j in [0, n).
struct Twiddles {
  explicit Twiddles(int64_t n) : n(n), c(static_cast<size_t>(n)), s(static_cast<size_t>(n)) {
    for (int64_t j = 0; j < n; ++j) {
      const double a = 2.0 * M_PI * static_cast<double>(j) / static_cast<double>(n);
      c[j] = std::cos(a);
      s[j] = std::sin(a);
    }
  }
  int64_t n;
  std::vector<double> c, s;
};

// Forward DFT bins k in [0, bins) of the n-point signal whose first m values are
// (re, im) (the rest zero): out[2k], out[2k+1].
void Forward(const Twiddles& w, const std::vector<double>& re, const std::vector<double>& im,
             int64_t m, int64_t bins, std::vector<double>& out) {
  for (int64_t k = 0; k < bins; ++k) {
    double sr = 0, si = 0;
    int64_t j = 0;  // k·t mod n
    for (int64_t t = 0; t < m; ++t) {
      sr += re[t] * w.c[j] + im[t] * w.s[j];
      si += im[t] * w.c[j] - re[t] * w.s[j];
      j += k;
      if (j >= w.n) j -= w.n;
    }
    out[2 * k] = sr;
    out[2 * k + 1] = si;
  }
}

// Inverse DFT of the n bins whose first m are (re, im): out[2t], out[2t+1] for t < n.
void Inverse(const Twiddles& w, const std::vector<double>& re, const std::vector<double>& im,
             int64_t m, std::vector<double>& out) {
  const double scale = 1.0 / static_cast<double>(w.n);
  for (int64_t t = 0; t < w.n; ++t) {
    double sr = 0, si = 0;
    int64_t j = 0;  // t·k mod n
    for (int64_t k = 0; k < m; ++k) {
      sr += re[k] * w.c[j] - im[k] * w.s[j];
      si += im[k] * w.c[j] + re[k] * w.s[j];
      j += t;
      if (j >= w.n) j -= w.n;
    }
    out[2 * t] = sr * scale;
    out[2 * t + 1] = si * scale;
  }
}

// numpy's irfft of the one-sided bins whose first m (at most n/2 + 1) are (re, im):
// out[t] for t < n.
void InverseReal(const Twiddles& w, const std::vector<double>& re, const std::vector<double>& im,
                 int64_t m, std::vector<double>& out) {
  const double scale = 1.0 / static_cast<double>(w.n);
  for (int64_t t = 0; t < w.n; ++t) {
    double sum = m > 0 ? re[0] : 0.0;
    int64_t j = t % w.n;  // t·k mod n, from k = 1
    for (int64_t k = 1; k < m; ++k) {
      if (2 * k == w.n)
        sum += re[k] * w.c[j];
      else
        sum += 2.0 * (re[k] * w.c[j] - im[k] * w.s[j]);
      j += t;
      if (j >= w.n) j -= w.n;
    }
    out[t] = sum * scale;
  }
}

Result DftKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  if (!IsFloat(x->dtype())) return UnsupportedDType(node.op(), x->dtype());
  const std::vector<int64_t>& d = x->dims();
  const int r = x->rank();
  if (r < 2 || (d[r - 1] != 1 && d[r - 1] != 2))
    return Bad(absl::StrCat("input must be [..., 1] or [..., 2], got ", DimsStr(d)));
  const int64_t comps = d[r - 1];
  const bool inverse = node.attr_int_or("inverse", 0) != 0;
  const bool onesided = node.attr_int_or("onesided", 0) != 0;
  const bool irfft = inverse && onesided;

  int64_t axis;
  if (std::optional<int64_t> a = node.attr_int("axis")) {
    axis = *a;
  } else if (const Tensor* at = OptArg(in, 2)) {
    KILN_ASSIGN_OR_RETURN(axis, ScalarInt(*at, "axis"));
  } else {
    axis = -2;  // opset 20's default; import gives earlier DFTs their axis=1 explicitly
  }
  if (axis < -r || axis > r - 2 || axis == -1)
    return Bad(absl::StrCat("axis ", axis, " is outside [-", r, ", -2] and [0, ", r - 2, "]"));
  if (axis < 0) axis += r;
  const int64_t len = d[axis];

  int64_t n = irfft ? 2 * (len - 1) : len;
  if (const Tensor* nt = OptArg(in, 1)) {
    KILN_ASSIGN_OR_RETURN(n, ScalarInt(*nt, "dft_length"));
  }
  KILN_RETURN_IF_ERROR(CheckLength(n, "dft_length"));
  const int64_t out_len = irfft || !onesided ? n : n / 2 + 1;
  const int64_t out_comps = irfft ? 1 : 2;
  std::vector<int64_t> od = d;
  od[axis] = out_len;
  od[r - 1] = out_comps;
  KILN_ASSIGN_OR_RETURN(Tensor y, MakeOutput(x->dtype(), od));

  if (y.NumElements() == 0) return std::vector<Tensor>{std::move(y)};
  int64_t outer = 1, inner = 1;  // both divide y's element count
  for (int i = 0; i < axis; ++i) outer *= d[i];
  for (int i = axis + 1; i < r - 1; ++i) inner *= d[i];

  const Twiddles w(n);
  const int64_t m = std::min(len, irfft ? n / 2 + 1 : n);  // input values read
  std::vector<double> re(static_cast<size_t>(m)), im(static_cast<size_t>(m));
  std::vector<double> out(static_cast<size_t>(out_comps == 2 ? 2 * std::max(out_len, n) : n));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      for (int64_t t = 0; t < m; ++t) {
        const int64_t at = ((o * len + t) * inner + i) * comps;
        re[t] = x->GetAsDouble(at);
        im[t] = comps == 2 ? x->GetAsDouble(at + 1) : 0.0;
      }
      if (irfft)
        InverseReal(w, re, im, m, out);
      else if (inverse)
        Inverse(w, re, im, m, out);
      else
        Forward(w, re, im, m, out_len, out);
      for (int64_t k = 0; k < out_len; ++k)
        for (int64_t c = 0; c < out_comps; ++c)
          y.SetFromDouble(((o * out_len + k) * inner + i) * out_comps + c, out[k * out_comps + c]);
    }
  }
  return std::vector<Tensor>{std::move(y)};
}

Result StftKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  KILN_ASSIGN_OR_RETURN(const Tensor* step_t, Arg(in, 1, node.op()));
  const Tensor* window = OptArg(in, 2);
  const Tensor* length_t = OptArg(in, 3);
  if (!IsFloat(x->dtype())) return UnsupportedDType(node.op(), x->dtype());
  const std::vector<int64_t>& d = x->dims();
  if (x->rank() != 3 || (d[2] != 1 && d[2] != 2))
    return Bad(absl::StrCat("signal must be [batch, length, 1|2], got ", DimsStr(d)));
  const int64_t batch = d[0], len = d[1], comps = d[2];
  KILN_ASSIGN_OR_RETURN(const int64_t step, ScalarInt(*step_t, "frame_step"));
  if (step < 1) return Bad(absl::StrCat("frame_step ", step, " must be positive"));
  if (window != nullptr) {
    if (!IsFloat(window->dtype())) return UnsupportedDType(node.op(), window->dtype());
    if (window->rank() != 1)
      return Bad(absl::StrCat("window must be 1-D, got ", DimsStr(window->dims())));
  }
  int64_t n = window != nullptr ? window->dims()[0] : len;
  if (length_t != nullptr) {
    KILN_ASSIGN_OR_RETURN(n, ScalarInt(*length_t, "frame_length"));
  }
  KILN_RETURN_IF_ERROR(CheckLength(n, "frame_length"));
  const int64_t wlen = window != nullptr ? window->dims()[0] : n;
  const int64_t span = len - n;  // ⌊span / step⌋ as Python's
  const int64_t frames = 1 + span / step - (span < 0 && span % step != 0 ? 1 : 0);
  if (frames < 1)
    return Bad(absl::StrCat("frame_length ", n, " leaves no frame in a signal of ", len));
  const bool onesided = node.attr_int_or("onesided", 1) != 0;
  const int64_t bins = onesided ? n / 2 + 1 : n;
  KILN_ASSIGN_OR_RETURN(Tensor y, MakeOutput(x->dtype(), {batch, frames, bins, 2}));
  if (y.NumElements() == 0) return std::vector<Tensor>{std::move(y)};

  const Twiddles w(n);
  const int64_t m = std::min(wlen, n);
  std::vector<double> re(static_cast<size_t>(m)), im(static_cast<size_t>(m));
  std::vector<double> out(static_cast<size_t>(2 * bins));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t f = 0; f < frames; ++f) {
      for (int64_t t = 0; t < m; ++t) {
        const int64_t s = f * step + t;
        const double wt = window != nullptr ? window->GetAsDouble(t) : 1.0;
        const int64_t at = (b * len + s) * comps;
        re[t] = s < len ? x->GetAsDouble(at) * wt : 0.0;
        im[t] = s < len && comps == 2 ? x->GetAsDouble(at + 1) * wt : 0.0;
      }
      Forward(w, re, im, m, bins, out);
      for (int64_t k = 0; k < 2 * bins; ++k)
        y.SetFromDouble((b * frames + f) * 2 * bins + k, out[k]);
    }
  }
  return std::vector<Tensor>{std::move(y)};
}

// `v` rounded to `dt` as numpy stores a result of that dtype (f16/bf16 through f32).
double RoundTo(DType dt, double v) {
  switch (dt) {
    case DType::kF32:
      return static_cast<float>(v);
    case DType::kF16:
      return HalfToFloat(FloatToHalf(static_cast<float>(v)));
    case DType::kBF16:
      return BF16ToFloat(FloatToBF16(static_cast<float>(v)));
    default:
      return v;
  }
}

// numpy's float floor_divide (npy_divmod), for b != 0.
double FloorDivide(double a, double b) {
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0) {
    if ((b < 0) != (mod < 0)) div -= 1.0;
  }
  if (div != 0) {
    double fl = std::floor(div);
    if (div - fl > 0.5) fl += 1.0;
    return fl;
  }
  return std::copysign(0.0, a / b);
}

bool IsMelOutputType(DType dt) {
  switch (dt) {
    case DType::kU8:
    case DType::kU16:
    case DType::kU32:
    case DType::kU64:
    case DType::kI8:
    case DType::kI16:
    case DType::kI32:
    case DType::kI64:
      return true;
    default:
      return IsFloat(dt);
  }
}

Result MelWeightMatrixKernel(const Node& node, Inputs in) {
  const Tensor* t[5];
  for (int i = 0; i < 5; ++i) {
    KILN_ASSIGN_OR_RETURN(t[i], Arg(in, i, node.op()));
  }
  KILN_ASSIGN_OR_RETURN(const int64_t mels, ScalarInt(*t[0], "num_mel_bins"));
  KILN_ASSIGN_OR_RETURN(const int64_t dft_length, ScalarInt(*t[1], "dft_length"));
  KILN_ASSIGN_OR_RETURN(const int64_t sample_rate, ScalarInt(*t[2], "sample_rate"));
  const DType et = t[3]->dtype();
  if (!IsFloat(et)) return UnsupportedDType(node.op(), et);
  if (t[4]->dtype() != et)
    return Bad("lower_edge_hertz and upper_edge_hertz must have the same dtype");
  if (t[3]->NumElements() != 1 || t[4]->NumElements() != 1)
    return Bad("lower_edge_hertz and upper_edge_hertz must be one value each");
  const int64_t code = node.attr_int_or("output_datatype", 1);
  const std::optional<DType> dt =
      code > 0 && code <= INT32_MAX ? DTypeFromOnnx(static_cast<int32_t>(code)) : std::nullopt;
  if (!dt || !IsMelOutputType(*dt))
    return absl::UnimplementedError(absl::StrCat("output_datatype ", code, " is not supported"));
  if (mels < 0 || mels > kMaxElements)
    return Bad(absl::StrCat("num_mel_bins ", mels, " is out of range"));
  if (dft_length < 0 || dft_length > kMaxElements)
    return Bad(absl::StrCat("dft_length ", dft_length, " is out of range"));
  if (sample_rate < 1) return Bad(absl::StrCat("sample_rate ", sample_rate, " must be positive"));
  const int64_t rows = dft_length / 2 + 1;
  KILN_ASSIGN_OR_RETURN(Tensor y, MakeOutput(*dt, {rows, mels}));

  // The edges' mels and the step in the edges' dtype, the points in double.
  auto mel = [&](double hz) {
    return RoundTo(et, 2595.0 * RoundTo(et, std::log10(RoundTo(et, 1.0 + RoundTo(et, hz / 700)))));
  };
  const double low = mel(t[3]->GetAsDouble(0));
  const double high = mel(t[4]->GetAsDouble(0));
  const double step =
      RoundTo(et, RoundTo(et, high - low) / RoundTo(et, static_cast<double>(mels + 2)));
  std::vector<int64_t> bin(static_cast<size_t>(mels + 2));
  for (int64_t i = 0; i < mels + 2; ++i) {
    const double pt = static_cast<double>(i) * step + low;
    const double hz = 700.0 * (std::pow(10.0, pt / 2595.0) - 1.0);
    const double b =
        FloorDivide(static_cast<double>(dft_length + 1) * hz, static_cast<double>(sample_rate));
    if (!std::isfinite(b) || std::fabs(b) > 9.0e18)
      return Bad(absl::StrCat("mel point ", i, " falls on bin ", b, ", out of range"));
    bin[i] = static_cast<int64_t>(b);
  }
  // output[j, i] = v, j counting from the end when negative (numpy's indexing).
  auto set = [&](int64_t j, int64_t i, double v) -> absl::Status {
    if (j < -rows || j >= rows)
      return Bad(absl::StrCat("mel bin ", i, " reaches row ", j, " of ", rows));
    if (j < 0) j += rows;
    y.SetFromDouble(j * mels + i, v);
    return absl::OkStatus();
  };
  for (int64_t i = 0; i < mels; ++i) {
    const int64_t left = bin[i], center = bin[i + 1], right = bin[i + 2];
    if (center == left) {
      KILN_RETURN_IF_ERROR(set(center, i, 1.0));
    } else {
      for (int64_t j = left; j <= center; ++j)
        KILN_RETURN_IF_ERROR(
            set(j, i, static_cast<double>(j - left) / static_cast<double>(center - left)));
    }
    if (right > center) {
      for (int64_t j = center; j < right; ++j)
        KILN_RETURN_IF_ERROR(
            set(j, i, static_cast<double>(right - j) / static_cast<double>(right - center)));
    }
  }
  return std::vector<Tensor>{std::move(y)};
}

}  // namespace

void RegisterSpectralKernels(KernelTable& t) {
  t[KernelKey("", "DFT")] = &DftKernel;
  t[KernelKey("", "STFT")] = &StftKernel;
  t[KernelKey("", "MelWeightMatrix")] = &MelWeightMatrixKernel;
}

}  // namespace kiln::reference
