// Linear algebra beyond MatMul (math.cc): Einsum and Det.
// Einsum (opset 12): numpy's einsum over any number of inputs. The equation's terms name
// each input's axes by letters, `...` standing for the axes no letter names (broadcast
// numpy-style across inputs, right-aligned); a letter repeated within a term takes that
// term's diagonal. The output is the `->` term, or without one the `...` axes followed by
// the letters that appear once, in alphabetical (ASCII) order. Every output element is the
// sum, over the letters the output does not keep, of the product of the inputs' elements:
// one walk over the combined index space, floats accumulated in double (one rounding per
// output), integers in int64 (wrapping as their own type would). Limits: plain loops, the
// index space bounded (2^34 multiply-adds); inputs of one dtype.
// Det (opset 11): the determinant of each [M, M] matrix in the last two axes, by LU
// decomposition with partial pivoting in double, one rounding per output.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kiln/ir/einsum.h"
#include "kiln/support/status.h"
#include "reference/kernel_util.h"
#include "reference/kernels.h"

namespace kiln::reference {
namespace {

absl::Status Bad(std::string_view msg) { return absl::InvalidArgumentError(std::string(msg)); }

Result EinsumKernel(const Node& node, Inputs in) {
  const std::string* eq = node.attr_string("equation");
  if (eq == nullptr) return Bad("Einsum needs the 'equation' attribute");
  KILN_ASSIGN_OR_RETURN(EinsumSpec spec, ParseEinsum(*eq, in.size()));
  DType dt = DType::kUndefined;
  for (size_t i = 0; i < in.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(const Tensor* t, Arg(in, static_cast<int>(i), node.op()));
    if (!IsFloat(t->dtype()) && !IsInteger(t->dtype()))
      return UnsupportedDType(node.op(), t->dtype());
    if (i > 0 && t->dtype() != dt) return Bad("inputs differ in dtype");
    dt = t->dtype();
  }

  // Sizes: letters from their axes; the `...` axes broadcast, right-aligned.
  std::array<int64_t, 128> size;
  size.fill(-1);
  std::vector<int64_t> ell;  // the broadcast `...` dims
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    const std::vector<int64_t>& d = in[i]->dims();
    const bool has_ellipsis = EinsumHasEllipsis(spec.inputs[i]);
    const int named = static_cast<int>(spec.inputs[i].size()) - (has_ellipsis ? 1 : 0);
    const int ell_rank = static_cast<int>(d.size()) - named;
    if (ell_rank < 0 || (!has_ellipsis && ell_rank != 0))
      return Bad(
          absl::StrCat("input ", i, " has rank ", d.size(), ", its term names ", named, " axes"));
    int axis = 0;
    for (int label : spec.inputs[i]) {
      if (label == kEinsumEllipsis) {
        if (static_cast<int>(ell.size()) < ell_rank)
          ell.insert(ell.begin(), ell_rank - ell.size(), 1);
        for (int k = 0; k < ell_rank; ++k) {
          int64_t& e = ell[ell.size() - ell_rank + k];
          const int64_t v = d[axis + k];
          if (e != v && e != 1 && v != 1)
            return Bad(absl::StrCat("'...' dims of input ", i, " do not broadcast"));
          if (v != 1) e = v;
        }
        axis += ell_rank;
        continue;
      }
      if (size[label] >= 0 && size[label] != d[axis])
        return Bad(absl::StrCat("'", std::string(1, static_cast<char>(label)), "' is ", size[label],
                                " and ", d[axis]));
      size[label] = d[axis++];
    }
  }
  if (!EinsumHasEllipsis(spec.output) &&
      std::any_of(ell.begin(), ell.end(), [](int64_t e) { return e != 1; }))
    return Bad("the inputs' '...' axes must appear in the output");

  // The index space: the output's axes (the `...` ones at their place), then the summed
  // letters. Slot of a letter in `idx`: letter_slot[letter]; `...` axes: ell_slot + k.
  std::vector<int64_t> extent;
  std::vector<int> letter_slot(128, -1);
  int ell_slot = -1;
  std::vector<int64_t> out_dims;
  for (int label : spec.output) {
    if (label == kEinsumEllipsis) {
      ell_slot = static_cast<int>(extent.size());
      for (int64_t e : ell) {
        extent.push_back(e);
        out_dims.push_back(e);
      }
    } else {
      letter_slot[label] = static_cast<int>(extent.size());
      extent.push_back(size[label]);
      out_dims.push_back(size[label]);
    }
  }
  const size_t out_axes = extent.size();
  if (ell_slot < 0 && !ell.empty()) {  // `...` axes of size 1 summed away
    ell_slot = static_cast<int>(extent.size());
    for (int64_t e : ell) extent.push_back(e);
  }
  for (int c = 0; c < 128; ++c)
    if (size[c] >= 0 && letter_slot[c] < 0) {
      letter_slot[c] = static_cast<int>(extent.size());
      extent.push_back(size[c]);
    }
  int64_t work = 1;
  for (int64_t e : extent) {
    if (MulOverflows(work, e, &work) || work > (int64_t{1} << 34))
      return absl::ResourceExhaustedError("Einsum's index space is too large for the reference");
  }

  // Per input, the stride each index slot contributes (diagonals add up).
  std::vector<std::vector<int64_t>> stride(in.size(), std::vector<int64_t>(extent.size(), 0));
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    const std::vector<int64_t>& d = in[i]->dims();
    const std::vector<int64_t> st = Strides(d);
    const int named =
        static_cast<int>(spec.inputs[i].size()) - (EinsumHasEllipsis(spec.inputs[i]) ? 1 : 0);
    const int ell_rank = static_cast<int>(d.size()) - named;
    int axis = 0;
    for (int label : spec.inputs[i]) {
      if (label == kEinsumEllipsis) {
        for (int k = 0; k < ell_rank; ++k, ++axis)
          if (d[axis] != 1)  // broadcast dims stay at index 0
            stride[i][ell_slot + (ell.size() - ell_rank) + k] += st[axis];
        continue;
      }
      stride[i][letter_slot[label]] += st[axis++];
    }
  }

  int64_t out_count = 1;
  for (size_t a = 0; a < out_axes; ++a) out_count *= extent[a];
  int64_t inner = 1;
  for (size_t a = out_axes; a < extent.size(); ++a) inner *= extent[a];
  KILN_ASSIGN_OR_RETURN(Tensor y, Tensor::Create(dt, out_dims));
  const bool is_float = IsFloat(dt);
  std::vector<int64_t> idx(extent.size(), 0);
  std::vector<int64_t> off(in.size(), 0);
  for (int64_t o = 0; o < out_count; ++o) {
    double acc = 0;
    int64_t iacc = 0;
    for (int64_t k = 0; k < inner; ++k) {
      double p = 1;
      int64_t ip = 1;
      for (size_t i = 0; i < in.size(); ++i) {
        if (is_float) {
          p *= in[i]->GetAsDouble(off[i]);
        } else {
          ip = static_cast<int64_t>(static_cast<uint64_t>(ip) *
                                    static_cast<uint64_t>(in[i]->GetAsInt64(off[i])));
        }
      }
      acc += p;
      iacc = static_cast<int64_t>(static_cast<uint64_t>(iacc) + static_cast<uint64_t>(ip));
      // Next index (odometer, last slot fastest), offsets kept in step.
      for (size_t a = extent.size(); a-- > 0;) {
        for (size_t i = 0; i < in.size(); ++i) off[i] += stride[i][a];
        if (++idx[a] < extent[a]) break;
        for (size_t i = 0; i < in.size(); ++i) off[i] -= stride[i][a] * extent[a];
        idx[a] = 0;
      }
    }
    if (inner == 0) {  // no summed combinations: the odometer must still step the output
      for (size_t a = out_axes; a-- > 0;) {
        for (size_t i = 0; i < in.size(); ++i) off[i] += stride[i][a];
        if (++idx[a] < extent[a]) break;
        for (size_t i = 0; i < in.size(); ++i) off[i] -= stride[i][a] * extent[a];
        idx[a] = 0;
      }
    }
    if (is_float) {
      y.SetFromDouble(o, acc);
    } else {
      // Wrap to the dtype as integer arithmetic in it would.
      switch (dt) {
        case DType::kI64:
        case DType::kU64:
          std::memcpy(y.raw() + o * 8, &iacc, 8);
          break;
        default: {
          const size_t es = DTypeSize(dt);
          std::memcpy(y.raw() + o * es, &iacc, es);  // little-endian: the low bytes
        }
      }
    }
  }
  return std::vector<Tensor>{std::move(y)};
}

Result DetKernel(const Node& node, Inputs in) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, Arg(in, 0, node.op()));
  if (!IsFloat(x->dtype())) return UnsupportedDType(node.op(), x->dtype());
  const std::vector<int64_t>& d = x->dims();
  if (d.size() < 2 || d[d.size() - 1] != d[d.size() - 2])
    return Bad(absl::StrCat("input must be [..., M, M], got ", DimsStr(d)));
  const int64_t m = d.back();
  const std::vector<int64_t> out_dims(d.begin(), d.end() - 2);
  KILN_ASSIGN_OR_RETURN(Tensor y, Tensor::Create(x->dtype(), out_dims));
  const int64_t count = y.NumElements();
  if (count == 0 || x->NumElements() == 0) {  // no matrices, or 0x0 ones (det 1)
    for (int64_t b = 0; b < count; ++b) y.SetFromDouble(b, 1.0);
    return std::vector<Tensor>{std::move(y)};
  }
  std::vector<double> a(static_cast<size_t>(m * m));
  for (int64_t b = 0; b < count; ++b) {
    for (int64_t i = 0; i < m * m; ++i) a[i] = x->GetAsDouble(b * m * m + i);
    double det = 1;
    for (int64_t col = 0; col < m && det != 0; ++col) {
      int64_t pivot = col;
      for (int64_t r = col + 1; r < m; ++r)
        if (std::fabs(a[r * m + col]) > std::fabs(a[pivot * m + col])) pivot = r;
      if (a[pivot * m + col] == 0) {
        det = 0;
        break;
      }
      if (pivot != col) {
        for (int64_t k = 0; k < m; ++k) std::swap(a[pivot * m + k], a[col * m + k]);
        det = -det;
      }
      det *= a[col * m + col];
      for (int64_t r = col + 1; r < m; ++r) {
        const double f = a[r * m + col] / a[col * m + col];
        for (int64_t k = col; k < m; ++k) a[r * m + k] -= f * a[col * m + k];
      }
    }
    y.SetFromDouble(b, det);
  }
  return std::vector<Tensor>{std::move(y)};
}

}  // namespace

void RegisterLinalgKernels(KernelTable& t) {
  t[KernelKey("", "Einsum")] = &EinsumKernel;
  t[KernelKey("", "Det")] = &DetKernel;
}

}  // namespace kiln::reference
