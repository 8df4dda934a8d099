// What the CPU and CUDA `eltwise` kernels share (kernels/cpu/eltwise.h, kernels/cuda/
// eltwise.h): the op vocabulary as an enum (its names are src/plan/eltwise_ops.h's, the
// plan's `op` parameter), the computation domain, and the host-side broadcast layout —
// numpy broadcasting of up to three inputs to the output, collapsed into the fewest dims.
// Header-only so that both kernel libraries (and nvcc) take it without a dependency.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::kernels {

enum class EltOp : uint8_t {
  kIdentity,
  kNeg,
  kAbs,
  kSign,
  kRelu,
  kSqrt,
  kReciprocal,
  kExp,
  kLog,
  kErf,
  kTanh,
  kSigmoid,
  kSin,
  kCos,
  kFloor,
  kCeil,
  kRound,
  kGelu,
  kGeluTanh,
  kIsNaN,
  kNot,
  kAdd,
  kSub,
  kMul,
  kDiv,
  kPow,
  kMax,
  kMin,
  kMod,
  kFMod,
  kEqual,
  kLess,
  kLessOrEqual,
  kGreater,
  kGreaterOrEqual,
  kAnd,
  kOr,
  kXor,
  kWhere,
  kClip,
};

// The op of a plan's `op` parameter; false for a name that is not one (the contracts allow
// exactly these names).
inline bool EltOpFromName(std::string_view name, EltOp* op) {
  static constexpr std::pair<std::string_view, EltOp> kOps[] = {
      {"Identity", EltOp::kIdentity},
      {"Neg", EltOp::kNeg},
      {"Abs", EltOp::kAbs},
      {"Sign", EltOp::kSign},
      {"Relu", EltOp::kRelu},
      {"Sqrt", EltOp::kSqrt},
      {"Reciprocal", EltOp::kReciprocal},
      {"Exp", EltOp::kExp},
      {"Log", EltOp::kLog},
      {"Erf", EltOp::kErf},
      {"Tanh", EltOp::kTanh},
      {"Sigmoid", EltOp::kSigmoid},
      {"Sin", EltOp::kSin},
      {"Cos", EltOp::kCos},
      {"Floor", EltOp::kFloor},
      {"Ceil", EltOp::kCeil},
      {"Round", EltOp::kRound},
      {"Gelu", EltOp::kGelu},
      {"GeluTanh", EltOp::kGeluTanh},
      {"IsNaN", EltOp::kIsNaN},
      {"Not", EltOp::kNot},
      {"Add", EltOp::kAdd},
      {"Sub", EltOp::kSub},
      {"Mul", EltOp::kMul},
      {"Div", EltOp::kDiv},
      {"Pow", EltOp::kPow},
      {"Max", EltOp::kMax},
      {"Min", EltOp::kMin},
      {"Mod", EltOp::kMod},
      {"FMod", EltOp::kFMod},
      {"Equal", EltOp::kEqual},
      {"Less", EltOp::kLess},
      {"LessOrEqual", EltOp::kLessOrEqual},
      {"Greater", EltOp::kGreater},
      {"GreaterOrEqual", EltOp::kGreaterOrEqual},
      {"And", EltOp::kAnd},
      {"Or", EltOp::kOr},
      {"Xor", EltOp::kXor},
      {"Where", EltOp::kWhere},
      {"Clip", EltOp::kClip},
  };
  for (const auto& [n, o] : kOps)
    if (n == name) {
      *op = o;
      return true;
    }
  return false;
}

// Mirrors kiln::EltDomain (src/plan/eltwise_ops.h), which kernels cannot include.
enum class EltDomainKind : uint8_t { kF32, kF64, kI64, kU64, kBool };

inline constexpr int kMaxEltRank = 8;

struct BroadcastLayout {
  int rank = 0;                    // collapsed output rank (0: a scalar)
  int64_t dims[kMaxEltRank] = {};  // collapsed output dims
  int64_t n = 0;                   // output elements
  bool contiguous = false;         // no input broadcasts: every operand by the flat index
  int num_inputs = 0;
  int64_t strides[3][kMaxEltRank] = {};  // per input, elements per step of each dim (0: repeat)
};

// Fills `a` for an output of dims `out` and inputs of dims `ins` (right-aligned, size-1
// dims repeat). False when an input does not broadcast to `out`, there are more than three
// inputs, or the collapsed rank exceeds kMaxEltRank.
inline bool ComputeBroadcastLayout(const std::vector<int64_t>& out,
                                   const std::vector<std::vector<int64_t>>& ins,
                                   BroadcastLayout* a) {
  const int r = static_cast<int>(out.size());
  const int k = static_cast<int>(ins.size());
  if (k > 3) return false;
  // Full-rank strides per input (0 where the input broadcasts).
  std::vector<std::vector<int64_t>> st(k, std::vector<int64_t>(r, 0));
  for (int i = 0; i < k; ++i) {
    const std::vector<int64_t>& d = ins[i];
    if (static_cast<int>(d.size()) > r) return false;
    const int shift = r - static_cast<int>(d.size());
    int64_t stride = 1;
    for (int j = static_cast<int>(d.size()) - 1; j >= 0; --j) {
      if (d[j] != out[j + shift] && d[j] != 1) return false;
      if (d[j] == out[j + shift] && d[j] != 1) st[i][j + shift] = stride;
      stride *= d[j];
    }
  }
  int64_t n = 1;
  for (int64_t d : out) n *= d;
  a->n = n;
  a->num_inputs = k;
  // Drop size-1 dims, then merge dim j into j+1 when every operand's strides allow it.
  std::vector<int64_t> dims;
  std::vector<std::vector<int64_t>> cs(k);
  for (int j = 0; j < r; ++j) {
    if (out[j] == 1) continue;
    bool merge = !dims.empty();
    for (int i = 0; i < k && merge; ++i)
      if (cs[i].back() != st[i][j] * out[j]) merge = false;
    if (merge) {
      dims.back() *= out[j];
      for (int i = 0; i < k; ++i) cs[i].back() = st[i][j];
    } else {
      dims.push_back(out[j]);
      for (int i = 0; i < k; ++i) cs[i].push_back(st[i][j]);
    }
  }
  if (static_cast<int>(dims.size()) > kMaxEltRank) return false;
  a->rank = static_cast<int>(dims.size());
  for (int j = 0; j < a->rank; ++j) a->dims[j] = dims[j];
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < kMaxEltRank; ++j) a->strides[i][j] = i < k && j < a->rank ? cs[i][j] : 0;
  bool contiguous = true;
  for (int i = 0; i < k && contiguous; ++i) {
    int64_t expect = 1;
    for (int j = a->rank - 1; j >= 0; --j) {
      if (a->strides[i][j] != expect) contiguous = false;
      expect *= a->dims[j];
    }
  }
  a->contiguous = contiguous;
  return true;
}

}  // namespace kiln::kernels
