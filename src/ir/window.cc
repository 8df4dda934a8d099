// Sliding-window geometry (include/kiln/ir/window.h).
#include "kiln/ir/window.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kiln::window {
namespace {

constexpr int64_t kMaxExtent = int64_t{1} << 40;

absl::Status Bad(const std::string& msg) { return absl::InvalidArgumentError(msg); }

// An INTS attribute of exactly `n` values (or `dflt` when absent), each >= `min`.
absl::StatusOr<std::vector<int64_t>> Ints(const Node& node, const char* name, size_t n,
                                          int64_t dflt, int64_t min) {
  const std::vector<int64_t>* v = node.attr_ints(name);
  if (v == nullptr) {
    if (node.has_attr(name)) return Bad(absl::StrCat("attribute '", name, "' must be INTS"));
    return std::vector<int64_t>(n, dflt);
  }
  if (v->size() != n)
    return Bad(absl::StrCat("attribute '", name, "' has ", v->size(), " values; expected ", n));
  for (int64_t x : *v)
    if (x < min || x > kMaxExtent)
      return Bad(absl::StrCat("attribute '", name, "' has the value ", x, " (must be at least ",
                              min, ")"));
  return *v;
}

}  // namespace

absl::StatusOr<Attrs> Read(const Node& n, int spatial, absl::Span<const int64_t> kernel) {
  Attrs a;
  a.spatial = spatial;
  if (spatial < 1) return Bad("the input needs at least one spatial dim (rank >= 3)");
  const size_t s = static_cast<size_t>(spatial);
  if (n.has_attr("kernel_shape")) {
    auto k = Ints(n, "kernel_shape", s, 1, 1);
    if (!k.ok()) return k.status();
    a.kernel = *std::move(k);
    if (!kernel.empty() && !std::equal(kernel.begin(), kernel.end(), a.kernel.begin()))
      return Bad("attribute 'kernel_shape' differs from the weights' spatial dims");
  } else {
    if (kernel.empty()) return Bad("attribute 'kernel_shape' is required");
    if (kernel.size() != s) return Bad("the weights' rank does not match the input's");
    a.kernel.assign(kernel.begin(), kernel.end());
    for (int64_t k : a.kernel)
      if (k < 1) return Bad(absl::StrCat("a kernel dim is ", k, " (must be at least 1)"));
  }
  for (auto [field, name] : {std::pair{&a.strides, "strides"}, {&a.dilations, "dilations"}}) {
    auto v = Ints(n, name, s, 1, 1);
    if (!v.ok()) return v.status();
    *field = *std::move(v);
  }
  auto pads = Ints(n, "pads", 2 * s, 0, 0);
  if (!pads.ok()) return pads.status();
  a.pads = *std::move(pads);
  if (const std::string* ap = n.attr_string("auto_pad")) a.auto_pad = *ap;
  if (a.auto_pad != "NOTSET" && a.auto_pad != "SAME_UPPER" && a.auto_pad != "SAME_LOWER" &&
      a.auto_pad != "VALID")
    return Bad(absl::StrCat("attribute 'auto_pad' is '", a.auto_pad,
                            "'; expected NOTSET, SAME_UPPER, SAME_LOWER or VALID"));
  a.ceil_mode = n.attr_int_or("ceil_mode", 0) != 0;
  if (n.has_attr("output_padding")) {
    auto op = Ints(n, "output_padding", s, 0, 0);
    if (!op.ok()) return op.status();
    a.output_padding = *std::move(op);
  }
  if (n.has_attr("output_shape")) {
    const std::vector<int64_t>* os = n.attr_ints("output_shape");
    if (os == nullptr) return Bad("attribute 'output_shape' must be INTS");
    // ONNX allows the full output shape or only its spatial part.
    std::vector<int64_t> v = *os;
    if (v.size() == s + 2) v.erase(v.begin(), v.begin() + 2);
    if (v.size() != s)
      return Bad(absl::StrCat("attribute 'output_shape' has ", os->size(), " values; expected ", s,
                              " (or ", s + 2, ")"));
    for (int64_t x : v)
      if (x < 1 || x > kMaxExtent)
        return Bad(absl::StrCat("attribute 'output_shape' has the value ", x));
    a.output_shape = std::move(v);
  }
  return a;
}

absl::StatusOr<Extent> Forward(const Attrs& a, int i, int64_t in) {
  const int64_t k = a.kernel[i], s = a.strides[i], d = a.dilations[i];
  const int64_t span = (k - 1) * d + 1;
  Extent e;
  if (a.auto_pad == "SAME_UPPER" || a.auto_pad == "SAME_LOWER") {
    e.out = (in + s - 1) / s;
    const int64_t total = std::max<int64_t>(0, (e.out - 1) * s + span - in);
    const int64_t small = total / 2, large = total - small;
    e.pad_begin = a.auto_pad == "SAME_UPPER" ? small : large;
    e.pad_end = total - e.pad_begin;
    return e;
  }
  if (a.auto_pad == "NOTSET") {
    e.pad_begin = a.pads[i];
    e.pad_end = a.pads[a.spatial + i];
  }
  const int64_t room = in + e.pad_begin + e.pad_end - span;
  if (room < 0)
    return Bad(absl::StrCat("the window of spatial dim ", i, " (", span,
                            " with dilation) is larger than the padded input (",
                            in + e.pad_begin + e.pad_end, ")"));
  e.out = room / s + 1;
  if (a.ceil_mode && room % s != 0) {
    ++e.out;
    // The last window must start inside the input or its begin padding.
    if ((e.out - 1) * s >= in + e.pad_begin) --e.out;
  }
  return e;
}

absl::StatusOr<Extent> Transposed(const Attrs& a, int i, int64_t in) {
  const int64_t s = a.strides[i], span = (a.kernel[i] - 1) * a.dilations[i] + 1;
  const int64_t op = a.output_padding.empty() ? 0 : a.output_padding[i];
  const int64_t full = s * (in - 1) + op + span;  // the output with no padding removed
  Extent e;
  int64_t target = -1;
  if (!a.output_shape.empty()) {
    target = a.output_shape[i];
  } else if (a.auto_pad == "SAME_UPPER" || a.auto_pad == "SAME_LOWER") {
    target = in * s;
  }
  if (target >= 0) {
    // A target larger than the input gives is zero-extended at the end (no padding to
    // remove), as onnxruntime does.
    const int64_t total = std::max<int64_t>(0, full - target);
    e.pad_begin = a.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    e.pad_end = total - e.pad_begin;
    e.out = target;
    return e;
  }
  if (a.auto_pad == "NOTSET") {
    e.pad_begin = a.pads[i];
    e.pad_end = a.pads[a.spatial + i];
  }
  e.out = full - e.pad_begin - e.pad_end;
  if (e.out < 1) return Bad(absl::StrCat("spatial dim ", i, " of the output would be ", e.out));
  return e;
}

}  // namespace kiln::window
