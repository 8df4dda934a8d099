// Tests for the reference data-movement and shape kernels (src/reference/movement*.cc).
// Kernels are called straight from a KernelTable filled by RegisterMovementKernels, with
// nodes built through the Graph API so attributes and output counts are real. Every
// expected value is hand-computed from the ONNX spec; all checks are exact (the kernels
// only move bytes or do integer/float arithmetic whose results are exactly representable).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "kiln/ir/graph.h"
#include "kiln/ir/tensor.h"
#include "kiln/reference/executor.h"
#include "reference/kernels.h"
#include "tests/reference/reference_test_util.h"

namespace kiln::reference {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

const KernelTable& Table() {
  static const KernelTable* table = [] {
    auto* t = new KernelTable;
    RegisterMovementKernels(*t);
    return t;
  }();
  return *table;
}

using testing::Bool;
using testing::F32;
using testing::I32;
using testing::I64;
using testing::Make;
using testing::Values;

Tensor Iota(DType dt, std::vector<int64_t> dims) {
  Tensor t(dt, std::move(dims));
  for (int64_t i = 0; i < t.NumElements(); ++i) t.SetFromDouble(i, static_cast<double>(i));
  return t;
}

class MovementTest : public ::testing::Test {
 protected:
  // A node `op` with `n_in` inputs (graph inputs of unknown type) and `n_out` outputs.
  Node* MakeNode(const std::string& op, int n_in, int n_out = 1) {
    std::vector<Value> ins;
    for (int i = 0; i < n_in; ++i)
      ins.push_back(g_.AddInput(absl::StrCat("in", g_.num_nodes()), Type{})->output());
    return g_.AddNode(op, ins, n_out);
  }
  absl::StatusOr<std::vector<Tensor>> Run(const Node* n, std::vector<const Tensor*> in) {
    auto it = Table().find(KernelKey("", n->op()));
    if (it == Table().end()) return absl::NotFoundError(n->op());
    return it->second(*n, in);
  }
  // Runs a one-output node and returns the output; fails the test on error.
  Tensor Run1(const Node* n, std::vector<const Tensor*> in) {
    auto r = Run(n, std::move(in));
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok() || r->empty()) return Tensor();
    return (*r)[0];
  }
  absl::StatusCode Code(const Node* n, std::vector<const Tensor*> in) {
    return Run(n, std::move(in)).status().code();
  }
  Graph g_;
};

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

// ---------------------------------------------------------------- Gather

TEST_F(MovementTest, GatherAxis0MatrixIndices) {
  Node* n = MakeNode("Gather", 2);
  Tensor data = F32({3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor idx = I64({2, 2}, {0, 1, 1, 2});
  Tensor out = Run1(n, {&data, &idx});
  EXPECT_EQ(out.dims(), (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(Values<float>(out), (std::vector<float>{1, 2, 3, 4, 3, 4, 5, 6}));
}

TEST_F(MovementTest, GatherNegativeAxisNegativeInt32Indices) {
  Node* n = MakeNode("Gather", 2);
  n->set_attr("axis", int64_t{-1});
  Tensor data = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor idx = I32({2}, {-1, 0});
  Tensor out = Run1(n, {&data, &idx});
  EXPECT_EQ(out.dims(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(Values<float>(out), (std::vector<float>{3, 1, 6, 4}));
}

TEST_F(MovementTest, GatherScalarIndexDropsAxisAnyDtype) {
  Node* n = MakeNode("Gather", 2);
  Tensor data = Make<uint16_t>(DType::kF16, {3}, {0x3c00, 0x4000, 0x4200});
  Tensor idx = I64({}, {2});
  Tensor out = Run1(n, {&data, &idx});
  EXPECT_EQ(out.dtype(), DType::kF16);
  EXPECT_TRUE(out.dims().empty());
  EXPECT_EQ(Values<uint16_t>(out), (std::vector<uint16_t>{0x4200}));
}

TEST_F(MovementTest, GatherEmptyIndices) {
  Node* n = MakeNode("Gather", 2);
  n->set_attr("axis", int64_t{1});
  Tensor data = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor idx = I64({0}, {});
  Tensor out = Run1(n, {&data, &idx});
  EXPECT_EQ(out.dims(), (std::vector<int64_t>{2, 0}));
}

TEST_F(MovementTest, GatherErrors) {
  Node* n = MakeNode("Gather", 2);
  Tensor data = F32({3}, {1, 2, 3});
  Tensor hi = I64({1}, {3}), lo = I64({1}, {-4}), fl = F32({1}, {0});
  EXPECT_EQ(Code(n, {&data, &hi}), kInvalid);
  EXPECT_EQ(Code(n, {&data, &lo}), kInvalid);
  EXPECT_EQ(Code(n, {&data, &fl}), kInvalid);
  Tensor scalar = F32({}, {1});
  Tensor zero = I64({}, {0});
  EXPECT_EQ(Code(n, {&scalar, &zero}), kInvalid);  // rank-0 data has no axis 0
  EXPECT_EQ(Code(n, {&data, nullptr}), kInvalid);
}

TEST_F(MovementTest, ShortBufferIsRejectedBeforeReading) {
  Node* n = MakeNode("Gather", 2);
  Tensor data(DType::kF32, {4}, Storage::Allocate(8));  // claims 16 bytes, holds 8
  Tensor idx = I64({1}, {3});
  EXPECT_EQ(Code(n, {&data, &idx}), kInvalid);
  Tensor str(DType::kString, {1}, Storage::Allocate(8));
  Tensor zero = I64({1}, {0});
  EXPECT_EQ(Code(n, {&str, &zero}), absl::StatusCode::kUnimplemented);
}

// ---------------------------------------------------------------- Slice

TEST_F(MovementTest, SliceBasic2D) {
  Node* n = MakeNode("Slice", 3);
  Tensor data = Iota(DType::kF32, {3, 4});
  Tensor s = I64({2}, {1, 0}), e = I64({2}, {2, 3});
  Tensor out = Run1(n, {&data, &s, &e});
  EXPECT_EQ(out.dims(), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(Values<float>(out), (std::vector<float>{4, 5, 6}));
}

TEST_F(MovementTest, SliceNegativeStepToInt64Min) {
  Node* n = MakeNode("Slice", 5);
  Tensor data = Iota(DType::kI64, {10});
  Tensor s = I64({1}, {-1}), e = I64({1}, {kMin}), a = I64({1}, {0}), st = I64({1}, {-3});
  Tensor out = Run1(n, {&data, &s, &e, &a, &st});
  EXPECT_EQ(Values<int64_t>(out), (std::vector<int64_t>{9, 6, 3, 0}));
}

TEST_F(MovementTest, SliceNegativeStepEndBeforeStart) {
  Node* n = MakeNode("Slice", 5);
  Tensor data = Iota(DType::kI64, {4});
  // end -5 + 4 = -1 stays -1 (clamped to [-1, 3]): walk down to index 0 inclusive.
  Tensor s = I64({1}, {2}), e = I64({1}, {-5}), st = I64({1}, {-1});
  Tensor out = Run1(n, {&data, &s, &e, nullptr, &st});
  EXPECT_EQ(Values<int64_t>(out), (std::vector<int64_t>{2, 1, 0}));
}

TEST_F(MovementTest, SliceInt64MaxEndNegativeAxisStep2) {
  Node* n = MakeNode("Slice", 5);
  Tensor data = Iota(DType::kF32, {2, 5});
  Tensor s = I32({1}, {1}), e = I64({1}, {kMax}), a = I64({1}, {-1}), st = I64({1}, {2});
  Tensor out = Run1(n, {&data, &s, &e, &a, &st});
  EXPECT_EQ(out.dims(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(Values<float>(out), (std::vector<float>{1, 3, 6, 8}));
}

TEST_F(MovementTest, SliceClampsAndEmpty) {
  Node* n = MakeNode("Slice", 3);
  Tensor data = Iota(DType::kI64, {4});
  Tensor s = I64({1}, {-100}), e = I64({1}, {100});
  EXPECT_EQ(Values<int64_t>(Run1(n, {&data, &s, &e})), (std::vector<int64_t>{0, 1, 2, 3}));
  Tensor s2 = I64({1}, {3}), e2 = I64({1}, {1});
  Tensor empty = Run1(n, {&data, &s2, &e2});
  EXPECT_EQ(empty.dims(), (std::vector<int64_t>{0}));
  Node* m = MakeNode("Slice", 5);
  Tensor huge = I64({1}, {kMin});  // step INT64_MIN: exactly one element
  Tensor s3 = I64({1}, {3}), e3 = I64({1}, {kMin});
  EXPECT_EQ(Values<int64_t>(Run1(m, {&data, &s3, &e3, nullptr, &huge})), (std::vector<int64_t>{3}));
}

TEST_F(MovementTest, SliceZeroSizeDim) {
  Node* n = MakeNode("Slice", 5);
  Tensor data = F32({0, 3}, {});
  Tensor s = I64({1}, {0}), e = I64({1}, {2}), a = I64({1}, {1});
  Tensor out = Run1(n, {&data, &s, &e, &a});
  EXPECT_EQ(out.dims(), (std::vector<int64_t>{0, 2}));
  Tensor s0 = I64({1}, {-1}), e0 = I64({1}, {kMin}), a0 = I64({1}, {0}), st = I64({1}, {-1});
  Tensor out2 = Run1(n, {&data, &s0, &e0, &a0, &st});
  EXPECT_EQ(out2.dims(), (std::vector<int64_t>{0, 3}));
}

TEST_F(MovementTest, SliceErrors) {
  Node* n = MakeNode("Slice", 5);
  Tensor data = Iota(DType::kF32, {2, 3});
  Tensor s = I64({1}, {0}), e = I64({1}, {1}), zero = I64({1}, {0});
  EXPECT_EQ(Code(n, {&data, &s, &e, nullptr, &zero}), kInvalid);  // step 0
  Tensor s2 = I64({2}, {0, 0}), e2 = I64({2}, {1, 1}), dup = I64({2}, {1, -1});
  EXPECT_EQ(Code(n, {&data, &s2, &e2, &dup}), kInvalid);  // repeated axis
  EXPECT_EQ(Code(n, {&data, &s2, &e}), kInvalid);         // length mismatch
  Tensor bad_axis = I64({1}, {2});
  EXPECT_EQ(Code(n, {&data, &s, &e, &bad_axis}), kInvalid);
}

// ---------------------------------------------------------------- Concat

TEST_F(MovementTest, ConcatAxis1AndNegative) {
  Node* n = MakeNode("Concat", 2);
  n->set_attr("axis", int64_t{1});
  Tensor a = F32({2, 1}, {1, 2}), b = F32({2, 2}, {3, 4, 5, 6});
  Tensor out = Run1(n, {&a, &b});
  EXPECT_EQ(out.dims(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Values<float>(out), (std::vector<float>{1, 3, 4, 2, 5, 6}));

  Node* m = MakeNode("Concat", 3);
  m->set_attr("axis", int64_t{-2});
  Tensor c = F32({1, 2}, {1, 2}), d = F32({0, 2}, {}), e = F32({1, 2}, {3, 4});
  Tensor out2 = Run1(m, {&c, &d, &e});
  EXPECT_EQ(out2.dims(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(Values<float>(out2), (std::vector<float>{1, 2, 3, 4}));
}

TEST_F(MovementTest, ConcatErrors) {
  Node* n = MakeNode("Concat", 2);
  Tensor a = F32({2, 1}, {1, 2}), b = F32({3, 1}, {3, 4, 5}), c = I64({2, 1}, {1, 2});
  EXPECT_EQ(Code(n, {&a, &a}), kInvalid);  // no axis attribute
  n->set_attr("axis", int64_t{1});
  EXPECT_EQ(Code(n, {&a, &b}), kInvalid);  // off-axis dims differ
  EXPECT_EQ(Code(n, {&a, &c}), kInvalid);  // dtypes differ
  n->set_attr("axis", int64_t{2});
  EXPECT_EQ(Code(n, {&a, &a}), kInvalid);
}

// ---------------------------------------------------------------- Split

TEST_F(MovementTest, SplitWithSizesInput) {
  Node* n = MakeNode("Split", 2, 2);
  n->set_attr("axis", int64_t{-1});
  Tensor data = Iota(DType::kF32, {2, 3});
  Tensor sizes = I64({2}, {1, 2});
  auto r = Run(n, {&data, &sizes});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].dims(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(Values<float>((*r)[0]), (std::vector<float>{0, 3}));
  EXPECT_EQ((*r)[1].dims(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(Values<float>((*r)[1]), (std::vector<float>{1, 2, 4, 5}));
}

TEST_F(MovementTest, SplitEqualAndUneven) {
  Node* n = MakeNode("Split", 1, 3);
  Tensor six = Iota(DType::kI64, {6});
  auto r = Run(n, {&six});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Values<int64_t>((*r)[0]), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(Values<int64_t>((*r)[2]), (std::vector<int64_t>{4, 5}));
  Tensor five = Iota(DType::kI64, {5});  // ceil(5/3) = 2: [2, 2, 1]
  r = Run(n, {&five});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Values<int64_t>((*r)[1]), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Values<int64_t>((*r)[2]), (std::vector<int64_t>{4}));
  Node* four = MakeNode("Split", 1, 4);
  Tensor seven = Iota(DType::kI64, {7});  // [2, 2, 2, 1]
  r = Run(four, {&seven});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Values<int64_t>((*r)[3]), (std::vector<int64_t>{6}));
  EXPECT_EQ(Code(four, {&five}), kInvalid);  // 5 into 4 chunks of 2 leaves -1
}

TEST_F(MovementTest, SplitSizesMustSumAndMatchOutputs) {
  Node* n = MakeNode("Split", 2, 2);
  Tensor data = Iota(DType::kF32, {4});
  Tensor bad_sum = I64({2}, {1, 2}), bad_count = I64({3}, {1, 1, 2}), neg = I64({2}, {5, -1});
  EXPECT_EQ(Code(n, {&data, &bad_sum}), kInvalid);
  EXPECT_EQ(Code(n, {&data, &bad_count}), kInvalid);
  EXPECT_EQ(Code(n, {&data, &neg}), kInvalid);
}

// ---------------------------------------------------------------- Reshape

TEST_F(MovementTest, ReshapeZeroCopiesAndMinusOneInfers) {
  Node* n = MakeNode("Reshape", 2);
  Tensor data = Iota(DType::kF32, {2, 3, 4});
  Tensor shape = I64({2}, {0, -1});
  Tensor out = Run1(n, {&data, &shape});
  EXPECT_EQ(out.dims(), (std::vector<int64_t>{2, 12}));
  EXPECT_TRUE(out.Reshaped({2, 3, 4}).BitwiseEqual(data));
}

TEST_F(MovementTest, ReshapeAllowZero) {
  Node* n = MakeNode("Reshape", 2);
  n->set_attr("allowzero", int64_t{1});
  Tensor data = F32({0, 3}, {});
  Tensor shape = I64({3}, {3, 0, 5});
  Tensor out = Run1(n, {&data, &shape});
  EXPECT_EQ(out.dims(), (std::vector<int64_t>{3, 0, 5}));
  Tensor both = I64({2}, {0, -1});
  EXPECT_EQ(Code(n, {&data, &both}), kInvalid);
}

TEST_F(MovementTest, ReshapeErrors) {
  Node* n = MakeNode("Reshape", 2);
  Tensor data = Iota(DType::kF32, {2, 3});
  Tensor two_neg = I64({2}, {-1, -1}), bad = I64({2}, {4, 2}), nodiv = I64({2}, {4, -1});
  Tensor past_rank = I64({3}, {1, 6, 0}), neg = I64({2}, {-2, -3});
  Tensor huge = I64({3}, {kMax / 2, 4, 1});
  EXPECT_EQ(Code(n, {&data, &two_neg}), kInvalid);
  EXPECT_EQ(Code(n, {&data, &bad}), kInvalid);
  EXPECT_EQ(Code(n, {&data, &nodiv}), kInvalid);
  EXPECT_EQ(Code(n, {&data, &past_rank}), kInvalid);
  EXPECT_EQ(Code(n, {&data, &neg}), kInvalid);
  EXPECT_EQ(Code(n, {&data, &huge}), kInvalid);
  Tensor empty = F32({0}, {});
  Tensor infer_zero = I64({2}, {0, -1});  // 0 copies dim 0 (= 0): -1 is ambiguous
  EXPECT_EQ(Code(n, {&empty, &infer_zero}), kInvalid);
}

// ---------------------------------------------------------------- Transpose

TEST_F(MovementTest, TransposeDefaultReverses) {
  Node* n = MakeNode("Transpose", 1);
  Tensor data = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor out = Run1(n, {&data});
  EXPECT_EQ(out.dims(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(Values<float>(out), (std::vector<float>{1, 4, 2, 5, 3, 6}));
}

TEST_F(MovementTest, TransposePerm3D) {
  Node* n = MakeNode("Transpose", 1);
  n->set_attr("perm", std::vector<int64_t>{1, 2, 0});
  Tensor data = Iota(DType::kI64, {2, 3, 4});
  Tensor out = Run1(n, {&data});
  ASSERT_EQ(out.dims(), (std::vector<int64_t>{3, 4, 2}));
  // out[i][j][k] = data[k][i][j] = k*12 + i*4 + j
  const std::vector<int64_t> v = Values<int64_t>(out);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 2; ++k) EXPECT_EQ(v[(i * 4 + j) * 2 + k], k * 12 + i * 4 + j);
  n->set_attr("perm", std::vector<int64_t>{0, 0, 1});
  EXPECT_EQ(Code(n, {&data}), kInvalid);
  n->set_attr("perm", std::vector<int64_t>{0, 1});
  EXPECT_EQ(Code(n, {&data}), kInvalid);
}

// ---------------------------------------------------------------- Unsqueeze / Squeeze

TEST_F(MovementTest, UnsqueezeNegativeAxesRelativeToOutput) {
  Node* n = MakeNode("Unsqueeze", 2);
  Tensor data = F32({3}, {1, 2, 3});
  Tensor axes = I64({2}, {0, -1});
  Tensor out = Run1(n, {&data, &axes});
  EXPECT_EQ(out.dims(), (std::vector<int64_t>{1, 3, 1}));
  EXPECT_EQ(Values<float>(out), (std::vector<float>{1, 2, 3}));
  Tensor dup = I64({2}, {0, -3});  // both are axis 0 of the rank-3 output
  EXPECT_EQ(Code(n, {&data, &dup}), kInvalid);
  Tensor far = I64({1}, {2});
  EXPECT_EQ(Code(n, {&data, &far}), kInvalid);
}

TEST_F(MovementTest, SqueezeAllOnesOrGivenAxes) {
  Node* n = MakeNode("Squeeze", 1);
  Tensor data = F32({1, 3, 1}, {1, 2, 3});
  EXPECT_EQ(Run1(n, {&data}).dims(), (std::vector<int64_t>{3}));
  Node* m = MakeNode("Squeeze", 2);
  Tensor last = I64({1}, {-1});
  EXPECT_EQ(Run1(m, {&data, &last}).dims(), (std::vector<int64_t>{1, 3}));
  Tensor non_one = I64({1}, {1});
  EXPECT_EQ(Code(m, {&data, &non_one}), kInvalid);
}

// ---------------------------------------------------------------- Expand

TEST_F(MovementTest, ExpandBidirectional) {
  Node* n = MakeNode("Expand", 2);
  Tensor data = F32({3, 1}, {1, 2, 3});
  Tensor shape = I64({3}, {2, 1, 2});
  Tensor out = Run1(n, {&data, &shape});
  EXPECT_EQ(out.dims(), (std::vector<int64_t>{2, 3, 2}));
  EXPECT_EQ(Values<float>(out), (std::vector<float>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));
  Tensor smaller = I64({1}, {1});  // broadcast keeps the larger input shape
  Tensor same = Run1(n, {&data, &smaller});
  EXPECT_TRUE(same.BitwiseEqual(data));
}

TEST_F(MovementTest, ExpandErrorsAndHugeShapes) {
  Node* n = MakeNode("Expand", 2);
  Tensor data = F32({3}, {1, 2, 3});
  Tensor incompatible = I64({1}, {2}), neg = I64({1}, {-1});
  EXPECT_EQ(Code(n, {&data, &incompatible}), kInvalid);
  EXPECT_EQ(Code(n, {&data, &neg}), kInvalid);
  Tensor overflow = I64({3}, {int64_t{1} << 40, int64_t{1} << 40, 3});  // > int64 elements
  EXPECT_EQ(Code(n, {&data, &overflow}), kInvalid);
  Tensor too_big = I64({2}, {int64_t{1} << 40, 3});  // fits int64, too many bytes
  EXPECT_EQ(Code(n, {&data, &too_big}), absl::StatusCode::kResourceExhausted);
}

// ---------------------------------------------------------------- Flatten / Shape

TEST_F(MovementTest, FlattenAxes) {
  Node* n = MakeNode("Flatten", 1);
  Tensor data = Iota(DType::kF32, {2, 3, 4});
  EXPECT_EQ(Run1(n, {&data}).dims(), (std::vector<int64_t>{2, 12}));  // default axis 1
  const std::vector<std::pair<int64_t, std::vector<int64_t>>> cases = {
      {0, {1, 24}}, {2, {6, 4}}, {-1, {6, 4}}, {3, {24, 1}}, {-3, {1, 24}}};
  for (const auto& [axis, dims] : cases) {
    n->set_attr("axis", axis);
    EXPECT_EQ(Run1(n, {&data}).dims(), dims) << "axis " << axis;
  }
  n->set_attr("axis", int64_t{4});
  EXPECT_EQ(Code(n, {&data}), kInvalid);
  n->set_attr("axis", int64_t{-4});
  EXPECT_EQ(Code(n, {&data}), kInvalid);
}

TEST_F(MovementTest, ShapeStartEnd) {
  Node* n = MakeNode("Shape", 1);
  Tensor data = F32({2, 3, 4}, std::vector<float>(24, 1.f));
  Tensor out = Run1(n, {&data});
  EXPECT_EQ(out.dtype(), DType::kI64);
  EXPECT_EQ(Values<int64_t>(out), (std::vector<int64_t>{2, 3, 4}));
  n->set_attr("start", int64_t{-1});
  EXPECT_EQ(Values<int64_t>(Run1(n, {&data})), (std::vector<int64_t>{4}));
  n->set_attr("start", int64_t{0});
  n->set_attr("end", int64_t{-1});
  EXPECT_EQ(Values<int64_t>(Run1(n, {&data})), (std::vector<int64_t>{2, 3}));
  n->set_attr("start", int64_t{5});  // clamped to 3: empty
  EXPECT_EQ(Run1(n, {&data}).dims(), (std::vector<int64_t>{0}));
}

// ---------------------------------------------------------------- ConstantOfShape

TEST_F(MovementTest, ConstantOfShapeDefaultAndValue) {
  Node* n = MakeNode("ConstantOfShape", 1);
  Tensor shape = I64({2}, {2, 3});
  Tensor out = Run1(n, {&shape});
  EXPECT_EQ(out.dtype(), DType::kF32);
  EXPECT_EQ(Values<float>(out), std::vector<float>(6, 0.f));
  n->set_attr("value", I32({1}, {7}));
  out = Run1(n, {&shape});
  EXPECT_EQ(out.dtype(), DType::kI32);
  EXPECT_EQ(out.dims(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Values<int32_t>(out), std::vector<int32_t>(6, 7));
  Tensor none = I64({0}, {});
  out = Run1(n, {&none});
  EXPECT_TRUE(out.dims().empty());
  EXPECT_EQ(Values<int32_t>(out), std::vector<int32_t>{7});
}

TEST_F(MovementTest, ConstantOfShapeErrors) {
  Node* n = MakeNode("ConstantOfShape", 1);
  Tensor neg = I64({2}, {2, -3});
  EXPECT_EQ(Code(n, {&neg}), kInvalid);
  Tensor overflow = I64({2}, {kMax, 2});
  EXPECT_EQ(Code(n, {&overflow}), kInvalid);
  Tensor too_big = I64({2}, {int64_t{1} << 30, int64_t{1} << 20});  // 2^50 floats
  EXPECT_EQ(Code(n, {&too_big}), absl::StatusCode::kResourceExhausted);
  n->set_attr("value", F32({2}, {1, 2}));
  Tensor ok = I64({1}, {2});
  EXPECT_EQ(Code(n, {&ok}), kInvalid);
}

// ---------------------------------------------------------------- Range

TEST_F(MovementTest, RangeIntegerTypes) {
  Node* n = MakeNode("Range", 3);
  Tensor s = I64({}, {0}), l = I64({}, {10}), d = I64({}, {3});
  EXPECT_EQ(Values<int64_t>(Run1(n, {&s, &l, &d})), (std::vector<int64_t>{0, 3, 6, 9}));
  Tensor s32 = I32({}, {10}), l32 = I32({}, {4}), d32 = I32({}, {-2});
  Tensor out = Run1(n, {&s32, &l32, &d32});
  EXPECT_EQ(out.dtype(), DType::kI32);
  EXPECT_EQ(Values<int32_t>(out), (std::vector<int32_t>{10, 8, 6}));
  Tensor s16 = Make<int16_t>(DType::kI16, {}, {-3}), l16 = Make<int16_t>(DType::kI16, {}, {0}),
         d16 = Make<int16_t>(DType::kI16, {}, {1});
  EXPECT_EQ(Values<int16_t>(Run1(n, {&s16, &l16, &d16})), (std::vector<int16_t>{-3, -2, -1}));
  Tensor e1 = I64({}, {5}), e2 = I64({}, {1}), e3 = I64({}, {2});  // wrong direction: empty
  EXPECT_EQ(Run1(n, {&e1, &e2, &e3}).dims(), (std::vector<int64_t>{0}));
}

TEST_F(MovementTest, RangeFloatTypes) {
  Node* n = MakeNode("Range", 3);
  Tensor s = F32({}, {1}), l = F32({}, {2}), d = F32({}, {0.25f});
  EXPECT_EQ(Values<float>(Run1(n, {&s, &l, &d})), (std::vector<float>{1, 1.25f, 1.5f, 1.75f}));
  Tensor sd = Make<double>(DType::kF64, {}, {0.5}), ld = Make<double>(DType::kF64, {}, {-1}),
         dd = Make<double>(DType::kF64, {}, {-0.5});
  EXPECT_EQ(Values<double>(Run1(n, {&sd, &ld, &dd})), (std::vector<double>{0.5, 0, -0.5}));
  Tensor l2 = F32({}, {2.1f});  // ceil((2.1 - 1) / 0.5) = 3
  Tensor half = F32({}, {0.5f});
  EXPECT_EQ(Values<float>(Run1(n, {&s, &l2, &half})), (std::vector<float>{1, 1.5f, 2}));
}

TEST_F(MovementTest, RangeErrors) {
  Node* n = MakeNode("Range", 3);
  Tensor s = I64({}, {0}), l = I64({}, {10}), zero = I64({}, {0});
  EXPECT_EQ(Code(n, {&s, &l, &zero}), kInvalid);
  Tensor lf = F32({}, {10});
  Tensor one = I64({}, {1});
  EXPECT_EQ(Code(n, {&s, &lf, &one}), kInvalid);  // mixed dtypes
  Tensor vec = I64({2}, {0, 1});
  EXPECT_EQ(Code(n, {&vec, &l, &one}), kInvalid);     // not a scalar
  Tensor lo = I64({}, {kMin}), hi = I64({}, {kMax});  // 2^64 elements
  EXPECT_EQ(Code(n, {&lo, &hi, &one}), absl::StatusCode::kResourceExhausted);
  Tensor fs = F32({}, {0}), fl = F32({}, {1e30f}), fd = F32({}, {1e-30f});
  EXPECT_EQ(Code(n, {&fs, &fl, &fd}), absl::StatusCode::kResourceExhausted);
  Tensor inf = F32({}, {INFINITY}), fone = F32({}, {1});
  EXPECT_EQ(Code(n, {&fs, &inf, &fone}), absl::StatusCode::kResourceExhausted);
}

// ---------------------------------------------------------------- Identity / Dropout

TEST_F(MovementTest, IdentityAndInferenceDropout) {
  Tensor data = F32({2, 2}, {1, -2, 3, -4});
  EXPECT_TRUE(Run1(MakeNode("Identity", 1), {&data}).BitwiseEqual(data));
  Node* n = MakeNode("Dropout", 3, 2);
  auto r = Run(n, {&data});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_TRUE((*r)[0].BitwiseEqual(data));
  EXPECT_EQ((*r)[1].dtype(), DType::kBool);
  EXPECT_EQ((*r)[1].dims(), data.dims());
  EXPECT_EQ(Values<uint8_t>((*r)[1]), std::vector<uint8_t>(4, 1));
  Tensor ratio0 = F32({}, {0}), ratio = F32({}, {0.3f}), on = Bool({}, {1}), off = Bool({}, {0});
  r = Run(n, {&data, &ratio0, &on});  // training with ratio 0 is the identity
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE((*r)[0].BitwiseEqual(data));
  r = Run(n, {&data, &ratio, &off});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE((*r)[0].BitwiseEqual(data));
  EXPECT_EQ(Code(n, {&data, &ratio, &on}), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(Code(n, {&data, nullptr, &on}), absl::StatusCode::kUnimplemented);  // ratio 0.5
  Tensor one = F32({}, {1});
  EXPECT_EQ(Code(n, {&data, &one}), kInvalid);
  Node* single = MakeNode("Dropout", 1, 1);
  r = Run(single, {&data});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->size(), 1u);
}

// ---------------------------------------------------------------- Trilu

TEST_F(MovementTest, TriluUpperLowerK) {
  Tensor data = F32({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Node* up = MakeNode("Trilu", 1);
  EXPECT_EQ(Values<float>(Run1(up, {&data})), (std::vector<float>{1, 2, 3, 0, 5, 6, 0, 0, 9}));
  Node* upk = MakeNode("Trilu", 2);
  Tensor k1 = I64({}, {1}), km1 = I64({}, {-1}), big = I64({}, {100});
  EXPECT_EQ(Values<float>(Run1(upk, {&data, &k1})),
            (std::vector<float>{0, 2, 3, 0, 0, 6, 0, 0, 0}));
  EXPECT_EQ(Values<float>(Run1(upk, {&data, &big})), std::vector<float>(9, 0.f));
  Node* low = MakeNode("Trilu", 2);
  low->set_attr("upper", int64_t{0});
  EXPECT_EQ(Values<float>(Run1(low, {&data, &km1})),
            (std::vector<float>{0, 0, 0, 4, 0, 0, 7, 8, 0}));
}

TEST_F(MovementTest, TriluBatchedNonSquare) {
  Node* low = MakeNode("Trilu", 1);
  low->set_attr("upper", int64_t{0});
  Tensor data = Iota(DType::kI64, {2, 2, 3});  // two 2x3 matrices
  EXPECT_EQ(Values<int64_t>(Run1(low, {&data})),
            (std::vector<int64_t>{0, 0, 0, 3, 4, 0, 6, 0, 0, 9, 10, 0}));
  Tensor vec = F32({3}, {1, 2, 3});
  EXPECT_EQ(Code(low, {&vec}), kInvalid);
}

// ---------------------------------------------------------------- CumSum

TEST_F(MovementTest, CumSumModes) {
  Node* n = MakeNode("CumSum", 2);
  Tensor x = F32({4}, {1, 2, 3, 4});
  Tensor axis = I64({}, {0});
  EXPECT_EQ(Values<float>(Run1(n, {&x, &axis})), (std::vector<float>{1, 3, 6, 10}));
  n->set_attr("exclusive", int64_t{1});
  EXPECT_EQ(Values<float>(Run1(n, {&x, &axis})), (std::vector<float>{0, 1, 3, 6}));
  n->set_attr("reverse", int64_t{1});
  EXPECT_EQ(Values<float>(Run1(n, {&x, &axis})), (std::vector<float>{9, 7, 4, 0}));
  n->set_attr("exclusive", int64_t{0});
  EXPECT_EQ(Values<float>(Run1(n, {&x, &axis})), (std::vector<float>{10, 9, 7, 4}));
}

TEST_F(MovementTest, CumSum2DInt32Axis) {
  Node* n = MakeNode("CumSum", 2);
  Tensor x = I32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor last = I32({}, {-1}), first = I32({1}, {0});
  EXPECT_EQ(Values<int32_t>(Run1(n, {&x, &last})), (std::vector<int32_t>{1, 3, 6, 4, 9, 15}));
  EXPECT_EQ(Values<int32_t>(Run1(n, {&x, &first})), (std::vector<int32_t>{1, 2, 3, 5, 7, 9}));
  Tensor bad = I64({}, {2});
  EXPECT_EQ(Code(n, {&x, &bad}), kInvalid);
}

// ---------------------------------------------------------------- ArgMax

TEST_F(MovementTest, ArgMaxKeepdimsAndLastIndex) {
  Node* n = MakeNode("ArgMax", 1);
  n->set_attr("axis", int64_t{1});
  Tensor x = F32({2, 3}, {1, 5, 5, 7, 2, 7});
  Tensor out = Run1(n, {&x});
  EXPECT_EQ(out.dtype(), DType::kI64);
  EXPECT_EQ(out.dims(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(Values<int64_t>(out), (std::vector<int64_t>{1, 0}));
  n->set_attr("select_last_index", int64_t{1});
  n->set_attr("keepdims", int64_t{0});
  out = Run1(n, {&x});
  EXPECT_EQ(out.dims(), (std::vector<int64_t>{2}));
  EXPECT_EQ(Values<int64_t>(out), (std::vector<int64_t>{2, 2}));
  Node* m = MakeNode("ArgMax", 1);  // axis 0 (default) on columns
  EXPECT_EQ(Values<int64_t>(Run1(m, {&x})), (std::vector<int64_t>{1, 0, 1}));
}

TEST_F(MovementTest, ArgMaxNanAndInt64Precision) {
  Node* n = MakeNode("ArgMax", 1);
  n->set_attr("axis", int64_t{-1});
  Tensor x = F32({4}, {1, NAN, 3, NAN});
  EXPECT_EQ(Values<int64_t>(Run1(n, {&x})), (std::vector<int64_t>{1}));
  // Values that collapse to one double: only exact int64 comparison separates them.
  Tensor big = I64({2}, {(int64_t{1} << 60), (int64_t{1} << 60) + 1});
  EXPECT_EQ(Values<int64_t>(Run1(n, {&big})), (std::vector<int64_t>{1}));
  Tensor empty = F32({0}, {});
  EXPECT_EQ(Code(n, {&empty}), kInvalid);
}

// ---------------------------------------------------------------- Extras

TEST_F(MovementTest, SizeAndTile) {
  Tensor x = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor size = Run1(MakeNode("Size", 1), {&x});
  EXPECT_TRUE(size.dims().empty());
  EXPECT_EQ(Values<int64_t>(size), std::vector<int64_t>{6});
  Node* tile = MakeNode("Tile", 2);
  Tensor reps = I64({2}, {2, 1});
  Tensor out = Run1(tile, {&x, &reps});
  EXPECT_EQ(out.dims(), (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(Values<float>(out), (std::vector<float>{1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6}));
  Tensor reps2 = I64({2}, {1, 2});
  EXPECT_EQ(Values<float>(Run1(tile, {&x, &reps2})),
            (std::vector<float>{1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6}));
  Tensor bad = I64({1}, {2}), huge = I64({2}, {kMax, 2});
  EXPECT_EQ(Code(tile, {&x, &bad}), kInvalid);
  EXPECT_EQ(Code(tile, {&x, &huge}), kInvalid);
}

TEST_F(MovementTest, PadConstant) {
  Node* n = MakeNode("Pad", 3);
  Tensor x = F32({2, 2}, {1, 2, 3, 4});
  Tensor pads = I64({4}, {0, 1, 1, 0});  // x1_begin x2_begin x1_end x2_end
  Tensor value = F32({}, {9});
  Tensor out = Run1(n, {&x, &pads, &value});
  EXPECT_EQ(out.dims(), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(Values<float>(out), (std::vector<float>{9, 1, 2, 9, 3, 4, 9, 9, 9}));
  Tensor crop = I64({4}, {-1, 0, 0, 0});  // negative pad removes the first row
  EXPECT_EQ(Values<float>(Run1(n, {&x, &crop})), (std::vector<float>{3, 4}));
  Node* axes_node = MakeNode("Pad", 4);
  Tensor ax = I64({1}, {-1}), p2 = I64({2}, {1, 1});
  EXPECT_EQ(Values<float>(Run1(axes_node, {&x, &p2, nullptr, &ax})),
            (std::vector<float>{0, 1, 2, 0, 0, 3, 4, 0}));
  n->set_attr("mode", std::string("mirror"));
  EXPECT_EQ(Code(n, {&x, &pads}), kInvalid);
}

TEST_F(MovementTest, PadEdgeReflectWrap) {
  Node* n = MakeNode("Pad", 2);
  Tensor x = F32({3}, {1, 2, 3});
  Tensor pads = I64({2}, {2, 2});
  const std::vector<std::pair<std::string, std::vector<float>>> cases = {
      {"edge", {1, 1, 1, 2, 3, 3, 3}},
      {"reflect", {3, 2, 1, 2, 3, 2, 1}},
      {"wrap", {2, 3, 1, 2, 3, 1, 2}}};
  for (const auto& [mode, want] : cases) {
    n->set_attr("mode", mode);
    EXPECT_EQ(Values<float>(Run1(n, {&x, &pads})), want) << mode;
  }
  Tensor empty = F32({0}, {});
  EXPECT_EQ(Code(n, {&empty, &pads}), kInvalid);  // nothing to wrap around
}

TEST_F(MovementTest, GatherElementsAndScatterND) {
  Node* ge = MakeNode("GatherElements", 2);
  ge->set_attr("axis", int64_t{1});
  Tensor x = F32({2, 2}, {1, 2, 3, 4});
  Tensor idx = I64({2, 2}, {0, 0, 1, -2});
  EXPECT_EQ(Values<float>(Run1(ge, {&x, &idx})), (std::vector<float>{1, 1, 4, 3}));
  Tensor oob = I64({2, 2}, {0, 2, 0, 0});
  EXPECT_EQ(Code(ge, {&x, &oob}), kInvalid);

  Node* sc = MakeNode("ScatterND", 3);
  Tensor data = Iota(DType::kF32, {4, 2});
  Tensor where = I64({2, 1}, {2, -4});
  Tensor upd = F32({2, 2}, {10, 11, 12, 13});
  EXPECT_EQ(Values<float>(Run1(sc, {&data, &where, &upd})),
            (std::vector<float>{12, 13, 2, 3, 10, 11, 6, 7}));
  Tensor bad = I64({2, 1}, {4, 0});
  EXPECT_EQ(Code(sc, {&data, &bad, &upd}), kInvalid);
  Tensor bad_upd = F32({2}, {1, 2});
  EXPECT_EQ(Code(sc, {&data, &where, &bad_upd}), kInvalid);
}

TEST_F(MovementTest, ScatterNDReductionsAccumulateDuplicates) {
  Node* sc = MakeNode("ScatterND", 3);
  Tensor data = I32({4}, {1, 2, 3, 4});
  Tensor where = I64({3, 1}, {1, 1, 3});
  Tensor upd = I32({3}, {10, 20, 5});
  const std::vector<std::pair<std::string, std::vector<int32_t>>> cases = {{"add", {1, 32, 3, 9}},
                                                                           {"mul", {1, 400, 3, 20}},
                                                                           {"max", {1, 20, 3, 5}},
                                                                           {"min", {1, 2, 3, 4}}};
  for (const auto& [red, want] : cases) {
    sc->set_attr("reduction", red);
    EXPECT_EQ(Values<int32_t>(Run1(sc, {&data, &where, &upd})), want) << red;
  }
  Tensor flags = Bool({4}, {0, 1, 0, 1}), bupd = Bool({3}, {1, 1, 1});
  EXPECT_EQ(Code(sc, {&flags, &where, &bupd}), absl::StatusCode::kUnimplemented);
}

TEST_F(MovementTest, OneHotNonZeroTopK) {
  Node* oh = MakeNode("OneHot", 3);
  Tensor ind = I64({3}, {0, -1, 5});  // 5 is out of range: all off
  Tensor depth = F32({}, {3});
  Tensor vals = F32({2}, {0, 7});
  Tensor out = Run1(oh, {&ind, &depth, &vals});
  EXPECT_EQ(out.dims(), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(Values<float>(out), (std::vector<float>{7, 0, 0, 0, 0, 7, 0, 0, 0}));
  oh->set_attr("axis", int64_t{0});
  EXPECT_EQ(Values<float>(Run1(oh, {&ind, &depth, &vals})),
            (std::vector<float>{7, 0, 0, 0, 0, 0, 0, 7, 0}));

  Node* nz = MakeNode("NonZero", 1);
  Tensor m = I32({2, 2}, {0, 3, 5, 0});
  out = Run1(nz, {&m});
  EXPECT_EQ(out.dims(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(Values<int64_t>(out), (std::vector<int64_t>{0, 1, 1, 0}));

  Node* tk = MakeNode("TopK", 2, 2);
  Tensor x = F32({2, 3}, {1, 3, 3, 9, 2, 5});
  Tensor k = I64({1}, {2});
  auto r = Run(tk, {&x, &k});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Values<float>((*r)[0]), (std::vector<float>{3, 3, 9, 5}));
  EXPECT_EQ(Values<int64_t>((*r)[1]), (std::vector<int64_t>{1, 2, 0, 2}));
  tk->set_attr("largest", int64_t{0});
  r = Run(tk, {&x, &k});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Values<float>((*r)[0]), (std::vector<float>{1, 3, 2, 5}));
  EXPECT_EQ(Values<int64_t>((*r)[1]), (std::vector<int64_t>{0, 1, 1, 2}));
  Tensor k4 = I64({1}, {4});
  EXPECT_EQ(Code(tk, {&x, &k4}), kInvalid);
}

// ---------------------------------------------------------------- Through the executor

TEST_F(MovementTest, EvaluateNodeDispatchesAndPrefixesErrors) {
  Node* n = MakeNode("Gather", 2);
  n->add_provenance("gather_0");
  Tensor data = F32({3}, {1, 2, 3});
  Tensor idx = I64({1}, {2}), bad = I64({1}, {7});
  auto r = EvaluateNode(*n, {&data, &idx});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Values<float>((*r)[0]), std::vector<float>{3});
  r = EvaluateNode(*n, {&data, &bad});
  EXPECT_EQ(r.status().code(), kInvalid);
  EXPECT_NE(r.status().message().find("node 'gather_0' (Gather"), absl::string_view::npos)
      << r.status();
  EXPECT_NE(r.status().message().find("index 7 is out of range"), absl::string_view::npos)
      << r.status();
}

TEST_F(MovementTest, RunReferenceTransposeThenReshape) {
  Graph g;
  Node* x = g.AddInput("x", Type::Static(DType::kF32, {2, 3}));
  Node* t = g.AddNode("Transpose", {x->output()}, 1);
  Node* shape = g.AddConstant("shape", I64({1}, {-1}));
  Node* r = g.AddNode("Reshape", {t->output(), shape->output()}, 1);
  g.AddOutput("y", r->output());
  absl::flat_hash_map<std::string, Tensor> inputs;
  inputs["x"] = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  auto out = RunReference(g, inputs);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].dims(), (std::vector<int64_t>{6}));
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{1, 4, 2, 5, 3, 6}));
}

TEST_F(MovementTest, EveryRequiredOpIsRegistered) {
  for (const char* op : {"Gather", "Slice", "Concat", "Split", "Reshape", "Transpose", "Unsqueeze",
                         "Squeeze", "Expand", "Flatten", "Shape", "ConstantOfShape", "Range",
                         "Identity", "Dropout", "Trilu", "CumSum", "ArgMax"}) {
    EXPECT_TRUE(Table().contains(KernelKey("", op))) << op;
    EXPECT_TRUE(HasReferenceKernel("", op)) << op;
  }
}

}  // namespace
}  // namespace kiln::reference
