// Kernel choice for the standard ONNX ops, for every target (docs/plan-kernels.md): what
// the fused ops leave around them — the attention-mask chains, embedding and position
// gathers, shape and layout ops, unfused attention's MatMul/Softmax — lowers to the kernel
// families (eltwise, transpose/slice/expand/concat, the gathers, cumsum, reduce, matmul)
// that the target's contract table has: cuda has them all; cpu has eltwise and gather, and
// runs the rest as `ref` steps. Attributes and constant operands (axes, starts, perms) become step
// parameters here, normalized (negative axes resolved, slices clamped as the reference
// does), so the executor sees only static numbers. A node no rule takes gets a reason.
// Limits: MatMul batch dims must be equal or one side's all 1; Slice/Reduce/CumSum need
// constant starts/axes; Softmax over the last axis only.
#include <algorithm>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/lower.h"
#include "kiln/ir/window.h"
#include "kiln/reference/slice.h"
#include "plan/eltwise_ops.h"
#include "plan/kernel_contract.h"

namespace kiln::compiler {
namespace {

using Dims = std::vector<int64_t>;

bool Present(const Node& n, int i) { return i < n.num_inputs() && n.input(i); }
Dims InDims(const Node& n, int i) { return n.input(i).type().StaticDims().value_or(Dims{}); }
Dims OutDims(const Node& n, int i) { return n.output_info(i).type.StaticDims().value_or(Dims{}); }

// The values of constant input i (through alias ops), or nullopt.
std::optional<Dims> ConstInts(const Node& n, int i) {
  if (!Present(n, i)) return std::nullopt;
  Value v = n.input(i);
  while (v && IsAliasOp(*v.node)) v = v.node->input(0);
  const Tensor* t = v ? v.node->constant_value() : nullptr;
  if (t == nullptr || !IsInteger(t->dtype())) return std::nullopt;
  Dims out;
  for (int64_t k = 0; k < t->NumElements(); ++k) out.push_back(t->GetAsInt64(k));
  return out;
}

std::optional<int64_t> NormAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

PlanParam Int(const char* name, int64_t v) { return PlanParam{name, v}; }
PlanParam Ints(const char* name, Dims v) { return PlanParam{name, std::move(v)}; }
PlanParam Str(const char* name, std::string v) { return PlanParam{name, std::move(v)}; }

// The chooser's result: a kernel, or the reason none fits.
struct Choice {
  std::optional<KernelChoice> kernel;
  std::string why;
};

Choice No(std::string why) { return {std::nullopt, std::move(why)}; }

Choice Emit(PlanTarget t, const Node& n, std::string_view id, std::vector<PlanParam> params,
            std::vector<int> operands) {
  const KernelContract* c = FindKernelContract(t, id);
  if (c == nullptr)
    return No(
        absl::StrCat("no ", std::string(PlanTargetName(t)), " kernel '", std::string(id), "'"));
  KernelChoice k{
      std::string(id), std::move(params), c->inplace_ok,
      c->variadic_inputs ? static_cast<int>(operands.size()) : static_cast<int>(c->inputs.size())};
  k.operands = std::move(operands);
  return {std::move(k), ""};
}

// numpy broadcasting of every input to the output's dims.
bool Broadcasts(const Dims& in, const Dims& out) {
  if (in.size() > out.size()) return false;
  const size_t shift = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i] != 1 && in[i] != out[i + shift]) return false;
  return true;
}

Choice Eltwise(PlanTarget t, const Node& n, const std::string& op) {
  if (n.num_outputs() != 1) return No("more than one output");
  std::vector<DType> types;
  std::vector<int> operands;
  const Dims out = OutDims(n, 0);
  if (out.size() > 8) return No("rank above 8");
  for (int i = 0; i < n.num_inputs(); ++i) {
    if (!Present(n, i)) return No(absl::StrCat("input ", i, " is omitted"));
    if (!Broadcasts(InDims(n, i), out))
      return No(absl::StrCat("input ", i, " does not broadcast to the output"));
    types.push_back(n.input(i).type().dtype);
    operands.push_back(i);
  }
  absl::StatusOr<EltDomain> d = TypeEltwise(op, types, n.output_info(0).type.dtype);
  if (!d.ok()) return No(std::string(d.status().message()));
  return Emit(t, n, "eltwise", {Str("op", op)}, operands);
}

Choice Transpose(PlanTarget t, const Node& n) {
  const Dims x = InDims(n, 0);
  const int64_t r = static_cast<int64_t>(x.size());
  Dims perm(r);
  if (const std::vector<int64_t>* p = n.attr_ints("perm")) {
    perm = *p;
  } else {
    for (int64_t i = 0; i < r; ++i) perm[i] = r - 1 - i;
  }
  if (static_cast<int64_t>(perm.size()) != r || r > 8) return No("perm does not fit rank <= 8");
  for (int64_t& p : perm) {
    const std::optional<int64_t> a = NormAxis(p, r);
    if (!a) return No("perm out of range");
    p = *a;
  }
  return Emit(t, n, "transpose", {Ints("perm", perm)}, {0});
}

// Slice with constant starts/ends/axes/steps, normalized as the reference executor does.
Choice Slice(PlanTarget t, const Node& n) {
  const std::optional<Dims> starts = ConstInts(n, 1), ends = ConstInts(n, 2);
  if (!starts || !ends) return No("starts and ends must be constants");
  std::optional<Dims> axes = Dims{}, steps = Dims{};
  if (Present(n, 3) && !(axes = ConstInts(n, 3))) return No("axes must be a constant");
  if (Present(n, 4) && !(steps = ConstInts(n, 4))) return No("steps must be a constant");
  const Dims x = InDims(n, 0);
  if (x.size() > 8) return No("rank above 8");
  absl::StatusOr<SliceBounds> b = NormalizeSlice(x, *starts, *ends, *axes, *steps);
  if (!b.ok()) return No(std::string(b.status().message()));
  if (b->dims != OutDims(n, 0)) return No("the output dims disagree with the slice");
  return Emit(t, n, "slice", {Ints("starts", b->first), Ints("steps", b->step)}, {0});
}

Choice Concat(PlanTarget t, const Node& n) {
  const Dims out = OutDims(n, 0);
  const std::optional<int64_t> axis = NormAxis(n.attr_int_or("axis", 0), out.size());
  if (!axis || out.size() > 8) return No("axis out of range or rank above 8");
  std::vector<int> operands;
  for (int i = 0; i < n.num_inputs(); ++i) {
    if (!Present(n, i)) return No("an omitted input");
    if (n.input(i).type().dtype != n.output_info(0).type.dtype) return No("dtypes differ");
    operands.push_back(i);
  }
  return Emit(t, n, "concat", {Int("axis", *axis)}, operands);
}

Choice Gather(PlanTarget t, const Node& n, const char* id, const char* attr) {
  const Dims data = InDims(n, 0);
  const int64_t r = static_cast<int64_t>(data.size());
  int64_t v = n.attr_int_or(attr, 0);
  if (std::string(attr) == "axis") {
    const std::optional<int64_t> a = NormAxis(v, r);
    if (!a) return No("axis out of range");
    v = *a;
  } else if (v < 0 || v >= r) {
    return No("batch_dims out of range");
  }
  if (r > 8 || InDims(n, 1).size() > 8) return No("rank above 8");
  return Emit(t, n, id, {Int(attr, v)}, {0, 1});
}

Choice CumSum(PlanTarget t, const Node& n) {
  const std::optional<Dims> axis = ConstInts(n, 1);
  if (!axis || axis->size() != 1) return No("axis must be a constant scalar");
  const std::optional<int64_t> a = NormAxis((*axis)[0], InDims(n, 0).size());
  if (!a) return No("axis out of range");
  return Emit(t, n, "cumsum",
              {Int("axis", *a), Int("exclusive", n.attr_int_or("exclusive", 0) != 0),
               Int("reverse", n.attr_int_or("reverse", 0) != 0)},
              {0});
}

Choice Reduce(PlanTarget t, const Node& n, const std::string& op) {
  const Dims x = InDims(n, 0);
  const int64_t r = static_cast<int64_t>(x.size());
  if (r > 8) return No("rank above 8");
  const DType dt = n.input(0).type().dtype;
  const bool integer = dt == DType::kI32 || dt == DType::kI64;
  if (dt != DType::kF32 && dt != DType::kF16 && dt != DType::kBF16 && !integer)
    return No("not an f32, f16, bf16, int32 or int64 tensor");
  if (integer && (op == "mean" || op == "l2")) return No("an integer mean or L2");
  Dims axes;
  if (Present(n, 1)) {
    const std::optional<Dims> a = ConstInts(n, 1);
    if (!a) return No("axes must be a constant");
    axes = *a;
  }
  if (axes.empty()) {
    if (n.attr_int_or("noop_with_empty_axes", 0) != 0) return No("noop_with_empty_axes");
    axes.resize(r);
    std::iota(axes.begin(), axes.end(), 0);
  }
  for (int64_t& a : axes) {
    const std::optional<int64_t> na = NormAxis(a, r);
    if (!na) return No("axis out of range");
    a = *na;
  }
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) return No("repeated axis");
  for (int64_t a : axes)
    if (x[a] == 0) return No("reduces an empty dim");
  return Emit(t, n, "reduce", {Str("op", op), Ints("axes", axes)}, {0});
}

// MatMul of activations: [.., M, K] x [.., K, N] with equal batch dims, or one side 2-D /
// all-ones batch (broadcast). 1-D operands and other broadcasts are not taken.
Choice MatMul(PlanTarget t, const Node& n) {
  const Dims a = InDims(n, 0), b = InDims(n, 1), y = OutDims(n, 0);
  if (a.size() < 2 || b.size() < 2) return No("1-D operands");
  const int64_t m = a[a.size() - 2], k = a.back(), n_ = b.back();
  if (b[b.size() - 2] != k || k == 0) return No("inner dims disagree or are 0");
  const Dims ab(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2), yb(y.begin(), y.end() - 2);
  auto prod = [](const Dims& d) {
    int64_t p = 1;
    for (int64_t v : d) p *= v;
    return p;
  };
  const int64_t pa = prod(ab), pb = prod(bb), py = prod(yb);
  if (bb.empty() || pb == 1) {  // b is one matrix: fold a's batch into M
    return Emit(t, n, "matmul",
                {Int("batch", 1), Int("m", pa * m), Int("k", k), Int("n", n_),
                 Int("broadcast_a", 0), Int("broadcast_b", 1)},
                {0, 1});
  }
  if (pa == py && pb == py && ab.size() == bb.size() && ab == bb)
    return Emit(t, n, "matmul",
                {Int("batch", py), Int("m", m), Int("k", k), Int("n", n_), Int("broadcast_a", 0),
                 Int("broadcast_b", 0)},
                {0, 1});
  if (pa == 1 && pb == py)
    return Emit(t, n, "matmul",
                {Int("batch", py), Int("m", m), Int("k", k), Int("n", n_), Int("broadcast_a", 1),
                 Int("broadcast_b", 0)},
                {0, 1});
  return No("batch dims broadcast in a way the matmul kernel does not take");
}

// A constant, possibly seen through alias ops: it lowers to a weight buffer.
bool IsConstant(Value v) {
  while (v && IsAliasOp(*v.node)) v = v.node->input(0);
  return v && v.node->is_constant();
}

// Conv over 1 or 2 spatial dims, f32, with constant weights (and bias): oneDNN's
// convolution, its geometry (window.h, as the reference kernel's) in the params; a 1-D
// convolution runs as in_h = 1.
Choice Conv(PlanTarget t, const Node& n) {
  const Dims x = InDims(n, 0), w = InDims(n, 1), y = OutDims(n, 0);
  if (x.size() != 3 && x.size() != 4) return No("only 1-D and 2-D convolutions have a kernel");
  if (n.input(0).type().dtype != DType::kF32 || n.input(1).type().dtype != DType::kF32 ||
      (Present(n, 2) && n.input(2).type().dtype != DType::kF32))
    return No("not f32");
  if (!IsConstant(n.input(1)) || (Present(n, 2) && !IsConstant(n.input(2))))
    return No("the weights (and bias) must be constants");
  if (w.size() != x.size() || y.size() != x.size()) return No("W or Y rank differs from X's");
  const int spatial = static_cast<int>(x.size()) - 2;
  absl::StatusOr<window::Attrs> a = window::Read(n, spatial, absl::MakeSpan(w).subspan(2));
  if (!a.ok()) return No(std::string(a.status().message()));
  std::vector<window::Extent> e;
  for (int i = 0; i < spatial; ++i) {
    absl::StatusOr<window::Extent> ei = window::Forward(*a, i, x[2 + i]);
    if (!ei.ok()) return No(std::string(ei.status().message()));
    if (ei->out != y[2 + i]) return No("the output type disagrees with the geometry");
    e.push_back(*ei);
  }
  // 1-D: a unit H dim in front.
  const bool one_d = spatial == 1;
  const int h = one_d ? -1 : 0, wi = one_d ? 0 : 1;
  auto at = [&](const Dims& d, int i, int64_t unit) { return i < 0 ? unit : d[i]; };
  const int64_t group = n.attr_int_or("group", 1);
  return Emit(
      t, n, "conv",
      {Int("batch", x[0]), Int("in_ch", x[1]), Int("in_h", one_d ? 1 : x[2]), Int("in_w", x.back()),
       Int("out_ch", w[0]), Int("out_h", one_d ? 1 : y[2]), Int("out_w", y.back()),
       Int("k_h", at(a->kernel, h, 1)), Int("k_w", a->kernel[wi]), Int("group", group),
       Int("stride_h", at(a->strides, h, 1)), Int("stride_w", a->strides[wi]),
       Int("dil_h", at(a->dilations, h, 1)), Int("dil_w", a->dilations[wi]),
       Int("pad_top", one_d ? 0 : e[0].pad_begin), Int("pad_left", e[wi].pad_begin),
       Int("pad_bottom", one_d ? 0 : e[0].pad_end), Int("pad_right", e[wi].pad_end)},
      Present(n, 2) ? std::vector<int>{0, 1, 2} : std::vector<int>{0, 1});
}

// Pad, mode constant, with constant pads (and axes) that only grow the dims: `begin` (x's
// offset in y per dim) and the value as a double (the constant_value input, 0 without).
Choice Pad(PlanTarget t, const Node& n) {
  const std::string* mode = n.attr_string("mode");
  if (mode && *mode != "constant") return No("only mode constant has a kernel");
  const Dims x = InDims(n, 0), y = OutDims(n, 0);
  const std::optional<Dims> pads = ConstInts(n, 1);
  if (!pads) return No("the pads are not a constant");
  const DType dt = n.input(0).type().dtype;
  const size_t es = DTypeSize(dt);
  if (x.size() > 8 || (es != 1 && es != 2 && es != 4 && es != 8))
    return No("rank above 8 or elements not of 1, 2, 4 or 8 bytes");
  Dims axes(x.size());
  std::iota(axes.begin(), axes.end(), int64_t{0});
  if (Present(n, 3)) {
    const std::optional<Dims> given = ConstInts(n, 3);
    if (!given) return No("the axes are not a constant");
    axes.clear();
    for (int64_t a : *given) {
      const std::optional<int64_t> na = NormAxis(a, static_cast<int64_t>(x.size()));
      if (!na) return No("an axis is out of range");
      if (std::find(axes.begin(), axes.end(), *na) != axes.end()) return No("a repeated axis");
      axes.push_back(*na);
    }
  }
  if (pads->size() != 2 * axes.size() || y.size() != x.size()) return No("pads and dims disagree");
  Dims begin(x.size(), 0), end(x.size(), 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    begin[axes[i]] = (*pads)[i];
    end[axes[i]] = (*pads)[i + axes.size()];
  }
  for (size_t d = 0; d < x.size(); ++d) {
    if (begin[d] < 0 || end[d] < 0) return No("negative pads (a crop)");
    if (x[d] + begin[d] + end[d] != y[d]) return No("the output dims disagree with the pads");
  }
  double value = 0;
  if (Present(n, 2)) {
    Value v = n.input(2);
    while (v && IsAliasOp(*v.node)) v = v.node->input(0);
    const Tensor* c = v ? v.node->constant_value() : nullptr;
    if (c == nullptr || c->NumElements() != 1) return No("constant_value is not a constant scalar");
    value = c->GetAsDouble(0);
    // The step carries it as a double: integers beyond 2^53 would not survive.
    if (IsInteger(dt) &&
        (c->GetAsInt64(0) > (int64_t{1} << 53) || c->GetAsInt64(0) < -(int64_t{1} << 53)))
      return No("an integer constant_value beyond 2^53");
  }
  return Emit(t, n, "pad", {Ints("begin", begin), PlanParam{"value", value}}, {0});
}

// TensorScatter (opset 24): update's rows into a copy of the cache along `axis` from each
// batch row's write index.
Choice TensorScatter(PlanTarget t, const Node& n) {
  const Dims c = InDims(n, 0), u = InDims(n, 1);
  if (c.size() < 2 || u.size() != c.size()) return No("cache and update ranks");
  const std::optional<int64_t> axis =
      NormAxis(n.attr_int_or("axis", -2), static_cast<int64_t>(c.size()));
  if (!axis || *axis == 0) return No("the axis is the batch axis or out of range");
  for (size_t d = 0; d < c.size(); ++d)
    if (static_cast<int64_t>(d) == *axis ? u[d] > c[d] : u[d] != c[d])
      return No("update does not fit the cache");
  if (c[*axis] == 0) return No("an empty cache axis");
  int64_t update = 1;
  for (int64_t d : u) update *= d;
  if (update == 0) return No("an empty update (its write indices would go unchecked)");
  const std::string* mode = n.attr_string("mode");
  if (mode && *mode != "linear" && *mode != "circular") return No("unknown mode");
  if (Present(n, 2) && (n.input(2).type().dtype != DType::kI64 || InDims(n, 2) != Dims{c[0]}))
    return No("write_indices are not int64 [batch]");
  int64_t outer = 1, inner = 1;
  for (int64_t d = 1; d < *axis; ++d) outer *= c[d];
  for (size_t d = *axis + 1; d < c.size(); ++d) inner *= c[d];
  return Emit(t, n, "tensor_scatter",
              {Int("batch", c[0]), Int("outer", outer), Int("cap", c[*axis]), Int("seq", u[*axis]),
               Int("inner", inner), Int("circular", mode && *mode == "circular" ? 1 : 0)},
              Present(n, 2) ? std::vector<int>{0, 1, 2} : std::vector<int>{0, 1});
}

Choice ChooseStandard(PlanTarget t, const Node& n) {
  const std::string& op = n.op();
  if (op == "Cast") return Eltwise(t, n, "Identity");
  if (op == "Mod") return Eltwise(t, n, n.attr_int_or("fmod", 0) != 0 ? "FMod" : "Mod");
  if (op == "Max" || op == "Min") {
    if (n.num_inputs() != 2) return No("Max/Min with other than two inputs");
    return Eltwise(t, n, op);
  }
  if (op == "Expand") {
    if (n.input(0).type().dtype != n.output_info(0).type.dtype) return No("dtypes differ");
    if (!Broadcasts(InDims(n, 0), OutDims(n, 0))) return No("does not broadcast");
    return Emit(t, n, "expand", {}, {0});
  }
  if (op == "Transpose") return Transpose(t, n);
  if (op == "Slice") return Slice(t, n);
  if (op == "Concat") return Concat(t, n);
  if (op == "Gather") return Gather(t, n, "gather", "axis");
  if (op == "GatherElements") return Gather(t, n, "gather_elements", "axis");
  if (op == "GatherND") return Gather(t, n, "gather_nd", "batch_dims");
  if (op == "CumSum") return CumSum(t, n);
  if (op == "MatMul") return MatMul(t, n);
  if (op == "Conv") return Conv(t, n);
  if (op == "Pad") return Pad(t, n);
  if (op == "TensorScatter") return TensorScatter(t, n);
  static const std::pair<const char*, const char*> kReduce[] = {
      {"ReduceSum", "sum"}, {"ReduceMean", "mean"},           {"ReduceMax", "max"},
      {"ReduceMin", "min"}, {"ReduceProd", "prod"},           {"ReduceL1", "l1"},
      {"ReduceL2", "l2"},   {"ReduceSumSquare", "sum_square"}};
  for (const auto& [onnx, kind] : kReduce)
    if (op == onnx) return Reduce(t, n, kind);
  if (FindEltOp(op) != nullptr && op != "Gelu" && op != "GeluTanh" && op != "FMod")
    return Eltwise(t, n, op);
  return No("no kernel for this op");
}

}  // namespace

std::optional<KernelChoice> ChooseStandardKernel(const Node& n, PlanTarget target,
                                                 std::string* why_not) {
  if (!n.domain().empty()) {
    if (why_not) *why_not = "no kernel for this op";
    return std::nullopt;
  }
  Choice c = ChooseStandard(target, n);
  if (!c.kernel && why_not) *why_not = c.why;
  return c.kernel;
}

}  // namespace kiln::compiler
