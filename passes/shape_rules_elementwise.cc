// Shape rules of the elementwise family: unary ops (same type), Cast/CastLike, Dropout,
// Quantize/DequantizeLinear and DynamicQuantizeLinear,
// Clip, Gelu, Softmax/LogSoftmax, Trilu, CumSum, binary and variadic ops with
// multidirectional broadcasting, comparisons (bool), Where, LayerNormalization (with its
// optional Mean/InvStdDev outputs). Dtypes follow the ONNX type constraints; a dtype the
// inputs do not determine stays undefined.
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "kiln/support/status.h"
#include "passes/shape_inference_internal.h"

namespace kiln::shape_inference {
namespace {

// Output type = input 0's type, every output.
absl::StatusOr<std::vector<Type>> SameAsInput(const RuleContext& ctx) {
  return Outputs(ctx, ctx.input_type(0));
}

absl::StatusOr<std::vector<Type>> BoolOfInput(const RuleContext& ctx) {
  return Outputs(ctx, MakeType(DType::kBool, ctx.input_type(0).shape));
}

// Softmax / LogSoftmax: same type; the axis must name a dim.
absl::StatusOr<std::vector<Type>> SoftmaxRule(const RuleContext& ctx) {
  const Type& x = ctx.input_type(0);
  if (x.has_rank())
    KILN_RETURN_IF_ERROR(NormalizeAxis(ctx, ctx.node().attr_int_or("axis", -1), x.rank()).status());
  return Outputs(ctx, x);
}

// Y has X's shape and scale's dtype.
absl::StatusOr<std::vector<Type>> RMSNormalizationRule(const RuleContext& ctx) {
  const Type& x = ctx.input_type(0);
  if (x.has_rank())
    KILN_RETURN_IF_ERROR(NormalizeAxis(ctx, ctx.node().attr_int_or("axis", -1), x.rank()).status());
  return Outputs(ctx, MakeType(ctx.input_type(1).dtype, x.shape));
}

absl::StatusOr<std::vector<Type>> CastRule(const RuleContext& ctx) {
  std::optional<int64_t> to = ctx.node().attr_int("to");
  DType dt = DType::kUndefined;
  if (to) {
    std::optional<DType> d = DTypeFromOnnx(static_cast<int32_t>(*to));
    if (!d) return ctx.Error(absl::StrCat("attribute 'to' is not a known ONNX dtype: ", *to));
    dt = *d;
  }
  return Outputs(ctx, MakeType(dt, ctx.input_type(0).shape));
}

absl::StatusOr<std::vector<Type>> CastLikeRule(const RuleContext& ctx) {
  return Outputs(ctx, MakeType(ctx.input_type(1).dtype, ctx.input_type(0).shape));
}

// Dropout: output = data; optional mask = bool of the same shape.
// QuantizeLinear: x's shape in the zero point's dtype, else output_dtype's, else u8.
absl::StatusOr<std::vector<Type>> QuantizeRule(const RuleContext& ctx) {
  DType dt = DType::kU8;
  if (ctx.has_input(2)) {
    dt = ctx.input_type(2).dtype;
  } else if (const int64_t code = ctx.node().attr_int_or("output_dtype", 0); code != 0) {
    std::optional<DType> d = DTypeFromOnnx(static_cast<int32_t>(code));
    if (!d) return ctx.Error(absl::StrCat("output_dtype is not a known ONNX dtype: ", code));
    dt = *d;
  }
  return Outputs(ctx, MakeType(dt, ctx.input_type(0).shape));
}

// DequantizeLinear: x's shape in the scale's dtype.
absl::StatusOr<std::vector<Type>> DequantizeRule(const RuleContext& ctx) {
  return Outputs(ctx, MakeType(ctx.input_type(1).dtype, ctx.input_type(0).shape));
}

// DynamicQuantizeLinear: (u8 like x, f32 scalar scale, u8 scalar zero point).
absl::StatusOr<std::vector<Type>> DynamicQuantizeRule(const RuleContext& ctx) {
  return std::vector<Type>{MakeType(DType::kU8, ctx.input_type(0).shape),
                           MakeType(DType::kF32, Shape{}), MakeType(DType::kU8, Shape{})};
}

absl::StatusOr<std::vector<Type>> DropoutRule(const RuleContext& ctx) {
  std::vector<Type> out = Outputs(ctx, ctx.input_type(0));
  if (out.size() > 1) out[1].dtype = DType::kBool;
  return out;
}

absl::StatusOr<std::optional<Shape>> BroadcastAll(const RuleContext& ctx, int first) {
  std::vector<const std::optional<Shape>*> shapes;
  for (int i = first; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    shapes.push_back(&ctx.input_type(i).shape);
  }
  return BroadcastShapes(ctx, shapes);
}

DType FirstDefinedDType(const RuleContext& ctx, int first) {
  for (int i = first; i < ctx.num_inputs(); ++i)
    if (ctx.input_type(i).dtype != DType::kUndefined) return ctx.input_type(i).dtype;
  return DType::kUndefined;
}

// Add, Mul, Min, Sum, ...: every input has the output's dtype (ONNX's single T); inputs of
// two dtypes are an error here rather than a kernel's refusal at run time.
absl::StatusOr<std::vector<Type>> BroadcastSameDType(const RuleContext& ctx) {
  KILN_ASSIGN_OR_RETURN(std::optional<Shape> shape, BroadcastAll(ctx, 0));
  const DType dt = FirstDefinedDType(ctx, 0);
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    const DType other = ctx.input_type(i).dtype;
    if (other != DType::kUndefined && other != dt)
      return ctx.Error(absl::StrCat("inputs have different dtypes (", std::string(DTypeName(dt)),
                                    " and ", std::string(DTypeName(other)), " at input ", i,
                                    "); the op takes one"));
  }
  return Outputs(ctx, MakeType(dt, std::move(shape)));
}

// Pow, PRelu: the output has input 0's dtype (Pow's exponent may differ).
absl::StatusOr<std::vector<Type>> BroadcastFirstDType(const RuleContext& ctx) {
  KILN_ASSIGN_OR_RETURN(std::optional<Shape> shape, BroadcastAll(ctx, 0));
  return Outputs(ctx, MakeType(ctx.input_type(0).dtype, std::move(shape)));
}

absl::StatusOr<std::vector<Type>> BroadcastBool(const RuleContext& ctx) {
  KILN_ASSIGN_OR_RETURN(std::optional<Shape> shape, BroadcastAll(ctx, 0));
  return Outputs(ctx, MakeType(DType::kBool, std::move(shape)));
}

absl::StatusOr<std::vector<Type>> WhereRule(const RuleContext& ctx) {
  KILN_ASSIGN_OR_RETURN(std::optional<Shape> shape, BroadcastAll(ctx, 0));
  return Outputs(ctx, MakeType(FirstDefinedDType(ctx, 1), std::move(shape)));
}

// LayerNormalization: Y has X's type; Mean and InvStdDev have X's dims before `axis` and
// 1 from `axis` on, in dtype stash_type (default f32).
absl::StatusOr<std::vector<Type>> LayerNormRule(const RuleContext& ctx) {
  const Type& x = ctx.input_type(0);
  std::vector<Type> out = Outputs(ctx, x);
  if (out.size() == 1) return out;
  const int64_t stash = ctx.node().attr_int_or("stash_type", 1);
  std::optional<DType> stash_dt = DTypeFromOnnx(static_cast<int32_t>(stash));
  if (!stash_dt || !IsFloat(*stash_dt))
    return ctx.Error(absl::StrCat("stash_type ", stash, " is not a floating-point type"));
  Type stat = MakeType(*stash_dt, std::nullopt);
  if (x.has_rank()) {
    KILN_ASSIGN_OR_RETURN(int64_t axis,
                          NormalizeAxis(ctx, ctx.node().attr_int_or("axis", -1), x.rank()));
    stat.shape.emplace();
    for (int64_t i = 0; i < x.rank(); ++i)
      stat.shape->push_back(i < axis ? (*x.shape)[i] : Dim::Known(1));
  }
  for (size_t i = 1; i < out.size(); ++i) out[i] = stat;
  return out;
}

const absl::flat_hash_map<std::string, ShapeRule>& Table() {
  static const auto* table = [] {
    auto* t = new absl::flat_hash_map<std::string, ShapeRule>();
    for (const char* op :
         {"Sqrt",    "Reciprocal", "Exp",   "Log",         "Erf",       "Tanh",
          "Sigmoid", "Relu",       "Neg",   "Abs",         "Not",       "BitwiseNot",
          "Floor",   "Ceil",       "Round", "Sin",         "Cos",       "Tan",
          "Asin",    "Acos",       "Atan",  "Sinh",        "Cosh",      "Asinh",
          "Acosh",   "Atanh",      "Sign",  "Softplus",    "Softsign",  "LeakyRelu",
          "Elu",     "Celu",       "Selu",  "HardSigmoid", "HardSwish", "ThresholdedRelu",
          "Mish",    "Identity",   "Gelu",  "Clip",        "Trilu",     "CumSum",
          "CumProd", "Shrink",     "Swish"})
      (*t)[op] = &SameAsInput;
    for (const char* op : {"IsNaN", "IsInf"}) (*t)[op] = &BoolOfInput;
    for (const char* op : {"Softmax", "LogSoftmax", "Hardmax"}) (*t)[op] = &SoftmaxRule;
    (*t)["RMSNormalization"] = &RMSNormalizationRule;
    (*t)["Cast"] = &CastRule;
    (*t)["BitCast"] = &CastRule;  // `to`'s dtype, the same shape
    (*t)["CastLike"] = &CastLikeRule;
    (*t)["Dropout"] = &DropoutRule;
    (*t)["QuantizeLinear"] = &QuantizeRule;
    (*t)["DequantizeLinear"] = &DequantizeRule;
    (*t)["DynamicQuantizeLinear"] = &DynamicQuantizeRule;
    for (const char* op : {"Add", "Sub", "Mul", "Div", "Mod", "BitShift", "And", "Or", "Xor", "Min",
                           "Max", "Sum", "Mean", "BitwiseAnd", "BitwiseOr", "BitwiseXor"})
      (*t)[op] = &BroadcastSameDType;
    for (const char* op : {"Pow", "PRelu"}) (*t)[op] = &BroadcastFirstDType;
    for (const char* op : {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"})
      (*t)[op] = &BroadcastBool;
    (*t)["Where"] = &WhereRule;
    (*t)["LayerNormalization"] = &LayerNormRule;
    return t;
  }();
  return *table;
}

}  // namespace

ShapeRule FindElementwiseRule(std::string_view op) {
  auto it = Table().find(std::string(op));
  return it == Table().end() ? nullptr : it->second;
}

}  // namespace kiln::shape_inference
