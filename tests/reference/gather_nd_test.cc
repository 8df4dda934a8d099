// Tests for the reference GatherND kernel (src/reference/movement_gather.cc): the ONNX
// spec's examples, batch_dims 1 and 2, negative indices, several data dtypes, empty
// index sets, and one failing input per diagnosable mistake. Expected values are
// hand-computed from the spec; all checks are exact (GatherND only copies bytes).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kiln/ir/graph.h"
#include "kiln/ir/tensor.h"
#include "reference/kernels.h"
#include "tests/reference/reference_test_util.h"

namespace kiln::reference {
namespace {

using testing::Bool;
using testing::F32;
using testing::I32;
using testing::I64;
using testing::Make;
using testing::Values;

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

Tensor Iota(DType dt, std::vector<int64_t> dims) {
  Tensor t(dt, std::move(dims));
  for (int64_t i = 0; i < t.NumElements(); ++i) t.SetFromDouble(i, static_cast<double>(i));
  return t;
}

class GatherNDTest : public ::testing::Test {
 protected:
  GatherNDTest() {
    RegisterMovementKernels(table_);
    std::vector<Value> ins;
    for (int i = 0; i < 2; ++i) ins.push_back(g_.AddInput(absl::StrCat("in", i), Type{})->output());
    node_ = g_.AddNode("GatherND", ins, 1);
  }
  void SetBatchDims(int64_t b) { node_->set_attr("batch_dims", b); }
  absl::StatusOr<std::vector<Tensor>> Run(const Tensor& data, const Tensor& indices) {
    auto it = table_.find(KernelKey("", "GatherND"));
    if (it == table_.end()) return absl::NotFoundError("no GatherND kernel");
    return it->second(*node_, {&data, &indices});
  }
  Tensor Run1(const Tensor& data, const Tensor& indices) {
    auto r = Run(data, indices);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok() || r->size() != 1) return Tensor();
    return (*r)[0];
  }
  absl::Status Status(const Tensor& data, const Tensor& indices) {
    return Run(data, indices).status();
  }

  KernelTable table_;
  Graph g_;
  Node* node_ = nullptr;
};

// The four batch_dims = 0 examples of the ONNX operator spec.
TEST_F(GatherNDTest, SpecExamples) {
  Tensor d2 = I32({2, 2}, {0, 1, 2, 3});
  Tensor out = Run1(d2, I64({2, 2}, {0, 0, 1, 1}));
  EXPECT_EQ(out.dtype(), DType::kI32);
  EXPECT_EQ(out.dims(), (std::vector<int64_t>{2}));
  EXPECT_EQ(Values<int32_t>(out), (std::vector<int32_t>{0, 3}));

  out = Run1(d2, I64({2, 1}, {1, 0}));
  EXPECT_EQ(out.dims(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(Values<int32_t>(out), (std::vector<int32_t>{2, 3, 0, 1}));

  Tensor d3 = I32({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  out = Run1(d3, I64({2, 2}, {0, 1, 1, 0}));
  EXPECT_EQ(out.dims(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(Values<int32_t>(out), (std::vector<int32_t>{2, 3, 4, 5}));

  out = Run1(d3, I64({2, 1, 2}, {0, 1, 1, 0}));
  EXPECT_EQ(out.dims(), (std::vector<int64_t>{2, 1, 2}));
  EXPECT_EQ(Values<int32_t>(out), (std::vector<int32_t>{2, 3, 4, 5}));
}

// The spec's batch_dims = 1 example: each batch entry gathers from its own data[b].
TEST_F(GatherNDTest, BatchDims1) {
  SetBatchDims(1);
  Tensor d3 = I32({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  Tensor out = Run1(d3, I64({2, 1}, {1, 0}));
  EXPECT_EQ(out.dims(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(Values<int32_t>(out), (std::vector<int32_t>{2, 3, 4, 5}));

  // Full index tuples (k = r - b = 2) and several tuples per batch entry: data[b][i][j].
  Tensor f = Iota(DType::kF32, {2, 3, 2});
  out = Run1(f, I64({2, 2, 2}, {2, 1, 0, 0, 1, 1, -1, -2}));
  EXPECT_EQ(out.dims(), (std::vector<int64_t>{2, 2}));
  // data[0][2][1] = 5, data[0][0][0] = 0, data[1][1][1] = 9, data[1][2][0] = 10.
  EXPECT_EQ(Values<float>(out), (std::vector<float>{5, 0, 9, 10}));
}

// batch_dims = 2 is the "attention_mask[batch_idx, kv_idx]"-style per-element lookup.
TEST_F(GatherNDTest, BatchDims2) {
  SetBatchDims(2);
  Tensor data = Iota(DType::kI64, {2, 2, 3});
  Tensor out = Run1(data, I64({2, 2, 1}, {2, 0, 1, -1}));
  EXPECT_EQ(out.dims(), (std::vector<int64_t>{2, 2}));
  // data[0][0][2] = 2, data[0][1][0] = 3, data[1][0][1] = 7, data[1][1][2] = 11.
  EXPECT_EQ(Values<int64_t>(out), (std::vector<int64_t>{2, 3, 7, 11}));
}

TEST_F(GatherNDTest, NegativeIndicesCountFromTheEnd) {
  Tensor data = Iota(DType::kF32, {2, 3});
  Tensor out = Run1(data, I64({2, 2}, {-1, -3, 0, -1}));
  // data[1][0] = 3, data[0][2] = 2.
  EXPECT_EQ(Values<float>(out), (std::vector<float>{3, 2}));
  out = Run1(data, I64({1, 1}, {-2}));
  EXPECT_EQ(out.dims(), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(Values<float>(out), (std::vector<float>{0, 1, 2}));
}

TEST_F(GatherNDTest, CopiesAnyDtypeBytewise) {
  Tensor flags = Bool({2, 2}, {1, 0, 0, 1});
  Tensor out = Run1(flags, I64({3, 2}, {1, 1, 0, 1, 0, 0}));
  EXPECT_EQ(out.dtype(), DType::kBool);
  EXPECT_EQ(Values<uint8_t>(out), (std::vector<uint8_t>{1, 0, 1}));

  // f16 bit patterns 1.0, 2.0, -0.0, inf travel unchanged.
  Tensor half = Make(DType::kF16, {4}, std::vector<uint16_t>{0x3C00, 0x4000, 0x8000, 0x7C00});
  out = Run1(half, I64({4, 1}, {3, 2, 1, 0}));
  EXPECT_EQ(out.dtype(), DType::kF16);
  EXPECT_EQ(Values<uint16_t>(out), (std::vector<uint16_t>{0x7C00, 0x8000, 0x4000, 0x3C00}));

  Tensor f64 = Make(DType::kF64, {2, 2}, std::vector<double>{0.5, 1.5, 2.5, 3.5});
  out = Run1(f64, I64({1}, {1}));
  EXPECT_EQ(out.dims(), (std::vector<int64_t>{2}));
  EXPECT_EQ(Values<double>(out), (std::vector<double>{2.5, 3.5}));
}

TEST_F(GatherNDTest, EmptyIndexSetsAndSlices) {
  Tensor data = Iota(DType::kF32, {2, 3});
  Tensor out = Run1(data, I64({0, 2}, {}));
  EXPECT_EQ(out.dims(), (std::vector<int64_t>{0}));
  Tensor empty_rows = F32({2, 0}, {});
  out = Run1(empty_rows, I64({3, 1}, {1, 0, -1}));
  EXPECT_EQ(out.dims(), (std::vector<int64_t>{3, 0}));
}

TEST_F(GatherNDTest, RejectsOutOfRangeIndices) {
  Tensor data = Iota(DType::kF32, {2, 3});
  absl::Status s = Status(data, I64({1, 2}, {1, 3}));
  EXPECT_EQ(s.code(), kInvalid);
  EXPECT_EQ(s.message(), "index 3 is out of range for axis 1 of size 3");
  EXPECT_EQ(Status(data, I64({1, 2}, {-3, 0})).code(), kInvalid);
  EXPECT_EQ(Status(data, I64({1}, {2})).code(), kInvalid);
  // With batch_dims the range is that of the first indexed axis after the batch axes.
  SetBatchDims(1);
  s = Status(data, I64({2, 1}, {0, 3}));
  EXPECT_EQ(s.code(), kInvalid);
  EXPECT_EQ(s.message(), "index 3 is out of range for axis 1 of size 3");
  // An empty axis has no valid index.
  SetBatchDims(0);
  EXPECT_EQ(Status(F32({0, 2}, {}), I64({1, 1}, {0})).code(), kInvalid);
}

TEST_F(GatherNDTest, RejectsMalformedInputs) {
  Tensor data = Iota(DType::kF32, {2, 3});
  EXPECT_EQ(Status(data, I32({1, 2}, {0, 0})).message(), "indices must be int64");
  EXPECT_EQ(Status(data, I64({}, {0})).code(), kInvalid);           // rank-0 indices
  EXPECT_EQ(Status(F32({}, {1}), I64({1}, {0})).code(), kInvalid);  // rank-0 data
  EXPECT_EQ(Status(data, I64({2, 0}, {})).message(),                // k = 0
            "indices last dim 0 must be in [1, 2]");
  EXPECT_EQ(Status(data, I64({1, 3}, {0, 0, 0})).code(), kInvalid);  // k > r
  SetBatchDims(1);
  EXPECT_EQ(Status(data, I64({2, 2}, {0, 0, 0, 0})).code(), kInvalid);  // k > r - b
  EXPECT_EQ(Status(data, I64({3, 1}, {0, 0, 0})).message(),
            "batch dim 0 differs: data [2,3], indices [3,1]");
  SetBatchDims(2);  // must be < min(r, q)
  EXPECT_EQ(Status(data, I64({2, 3, 1}, {0, 0, 0, 0, 0, 0})).code(), kInvalid);
  SetBatchDims(-1);
  EXPECT_EQ(Status(data, I64({1, 1}, {0})).code(), kInvalid);
}

// Through the executor: the catalogue row and the registration are wired up, and errors
// name the node.
TEST(GatherNDExecutorTest, RunsThroughTheExecutor) {
  Tensor d3 = I32({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  Tensor out = testing::Run1("GatherND", {d3, I64({2, 1}, {1, 0})}, {{"batch_dims", int64_t{1}}});
  EXPECT_EQ(out.dims(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(Values<int32_t>(out), (std::vector<int32_t>{2, 3, 4, 5}));
  auto bad = testing::RunOp("GatherND", {d3, I64({1, 1}, {2})});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), kInvalid);
  EXPECT_TRUE(testing::Contains(bad.status(), "n_GatherND")) << bad.status();
  EXPECT_TRUE(testing::Contains(bad.status(), "index 2 is out of range")) << bad.status();
}

}  // namespace
}  // namespace kiln::reference
