// GatherND, GatherElements and CumSum (kernels/cpu/gather.h, cumsum.h) against the
// reference executor's GatherND, GatherElements and CumSum: exact (the gathers copy
// elements; CumSum sums floats sequentially in their own type on both sides, and integers
// wrap on both). Index arguments are built the way the shared kernel rules
// (runtime/kernel_rules.h) build them; out-of-range indices fail before anything is read.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "kernel_test_util.h"
#include "kernels/cpu/cumsum.h"
#include "kernels/cpu/gather.h"

namespace kiln::cpu {
namespace {

using testing::RandomVec;
using testing::RunReferenceOp;

CpuContext Ctx() {
  CpuContext c;
  c.num_threads = 2;
  return c;
}

std::vector<int64_t> Strides(const std::vector<int64_t>& d) {
  std::vector<int64_t> s(d.size(), 1);
  for (size_t i = d.size(); i-- > 1;) s[i - 1] = s[i] * d[i];
  return s;
}

int64_t Prod(const std::vector<int64_t>& d, size_t b, size_t e) {
  int64_t p = 1;
  for (size_t i = b; i < e; ++i) p *= d[i];
  return p;
}

Tensor Indices(std::vector<int64_t> dims, std::vector<int64_t> v, bool i32) {
  if (!i32) return Tensor::FromI64(std::move(dims), v);
  Tensor t = *Tensor::Create(DType::kI32, dims);
  for (size_t i = 0; i < v.size(); ++i) t.data<int32_t>()[i] = static_cast<int32_t>(v[i]);
  return t;
}

// Random indices in [-dim, dim) for entry j of each tuple of `k`.
std::vector<int64_t> RandomIndices(int64_t n, const std::vector<int64_t>& dims_per_entry,
                                   uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t d = dims_per_entry[i % dims_per_entry.size()];
    v[i] = std::uniform_int_distribution<int64_t>(-d, d - 1)(gen);
  }
  return v;
}

GatherNDArgs NDArgs(const Tensor& data, const Tensor& idx, int64_t b) {
  const auto& dd = data.dims();
  const auto& id = idx.dims();
  const int64_t k = id.back();
  const auto ds = Strides(dd);
  GatherNDArgs a;
  a.data = data.raw();
  a.indices = idx.raw();
  a.idx_i32 = idx.dtype() == DType::kI32;
  a.elem_size = static_cast<int64_t>(DTypeSize(data.dtype()));
  a.batch = Prod(dd, 0, b);
  a.batch_stride = Prod(dd, b, dd.size());
  a.tuples = Prod(id, b, id.size() - 1);
  a.k = static_cast<int>(k);
  for (int64_t j = 0; j < k; ++j) {
    a.dims[j] = dd[b + j];
    a.strides[j] = ds[b + j];
  }
  a.slice = Prod(dd, b + k, dd.size());
  return a;
}

TEST(IndexOps, GatherNDMatchesReference) {
  struct Case {
    std::vector<int64_t> data, idx;
    int64_t batch_dims;
  };
  // BERT dynamo's token pick ([B,S,H] by [B,1] tuples), full tuples, batch dims, slices.
  const Case cases[] = {{{2, 5, 3}, {2, 1}, 1},
                        {{4, 6}, {3, 2}, 0},
                        {{4, 6, 5}, {2, 3, 1}, 0},
                        {{2, 3, 4, 5}, {2, 3, 2}, 2},
                        {{3, 4, 2}, {3, 2, 1}, 1}};
  for (const Case& c : cases) {
    for (bool i32 : {false}) {  // ONNX GatherND takes int64 indices only
      Tensor data = testing::F32(c.data, RandomVec(Prod(c.data, 0, c.data.size()), 1));
      const int64_t k = c.idx.back();
      std::vector<int64_t> per(c.data.begin() + c.batch_dims, c.data.begin() + c.batch_dims + k);
      Tensor idx = Indices(c.idx, RandomIndices(Prod(c.idx, 0, c.idx.size()), per, 2), i32);
      auto want = RunReferenceOp("", "GatherND", {{"batch_dims", c.batch_dims}}, {&data, &idx});
      ASSERT_EQ(want.size(), 1u);
      Tensor y = *Tensor::Create(DType::kF32, want[0].dims());
      GatherNDArgs a = NDArgs(data, idx, c.batch_dims);
      a.y = y.raw();
      ASSERT_TRUE(GatherND(Ctx(), a).ok());
      EXPECT_TRUE(y.BitwiseEqual(want[0])) << "data " << c.data.size() << "-d, i32=" << i32;
    }
  }
}

TEST(IndexOps, GatherElementsMatchesReference) {
  for (int64_t axis : {0, 1, 2}) {
    for (bool i32 : {false, true}) {
      const std::vector<int64_t> dd = {3, 4, 5};
      std::vector<int64_t> id = {2, 3, 4};
      id[axis] = 6;  // the gathered axis may be longer than data's
      Tensor data = *Tensor::Create(DType::kI64, dd);
      for (int64_t i = 0; i < data.NumElements(); ++i) data.data<int64_t>()[i] = i * 3 - 7;
      Tensor idx = Indices(id, RandomIndices(Prod(id, 0, 3), {dd[axis]}, 3 + axis), i32);
      auto want = RunReferenceOp("", "GatherElements", {{"axis", axis}}, {&data, &idx});
      ASSERT_EQ(want.size(), 1u);
      Tensor y = *Tensor::Create(DType::kI64, id);
      GatherElementsArgs a;
      a.data = data.raw();
      a.indices = idx.raw();
      a.idx_i32 = i32;
      a.elem_size = 8;
      a.rank = 3;
      a.axis = static_cast<int>(axis);
      const auto ds = Strides(dd);
      for (int d = 0; d < 3; ++d) {
        a.idx_dims[d] = id[d];
        a.data_strides[d] = ds[d];
      }
      a.axis_dim = dd[axis];
      a.n = y.NumElements();
      a.y = y.raw();
      ASSERT_TRUE(GatherElements(Ctx(), a).ok());
      EXPECT_TRUE(y.BitwiseEqual(want[0])) << "axis " << axis << " i32=" << i32;
    }
  }
}

TEST(IndexOps, OutOfRangeIndicesFailBeforeReading) {
  Tensor data = testing::F32({4, 6}, RandomVec(24, 4));
  Tensor idx = Tensor::FromI64({2, 2}, {1, 2, 3, 6});  // 6 is past dim 1 (6)
  Tensor y = *Tensor::Create(DType::kF32, {2});
  GatherNDArgs a = NDArgs(data, idx, 0);
  a.y = y.raw();
  absl::Status st = GatherND(Ctx(), a);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(st.message()),
              ::testing::HasSubstr("GatherND index 6 (entry 1 of tuple 1) is outside [-6, 6)"));

  Tensor eidx = Tensor::FromI64({1, 2}, {-5, 0});  // -5 is before -4
  GatherElementsArgs e;
  e.data = data.raw();
  e.indices = eidx.raw();
  e.elem_size = 4;
  e.rank = 2;
  e.axis = 0;
  e.idx_dims[0] = 1;
  e.idx_dims[1] = 2;
  e.data_strides[0] = 6;
  e.data_strides[1] = 1;
  e.axis_dim = 4;
  e.n = 2;
  e.y = y.raw();
  st = GatherElements(Ctx(), e);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(st.message()),
              ::testing::HasSubstr("GatherElements index -5 at position 0 is outside [-4, 4)"));
}

TEST(IndexOps, CumSumMatchesReference) {
  const std::vector<int64_t> dims = {3, 70, 5};
  for (DType t : {DType::kF32, DType::kF64, DType::kI32, DType::kI64}) {
    Tensor x = *Tensor::Create(t, dims);
    const std::vector<float> v = RandomVec(x.NumElements(), 5, -3, 3);
    for (int64_t i = 0; i < x.NumElements(); ++i) {
      // Integers near the type's limit so the sums wrap.
      const double big = t == DType::kI32 ? 2.0e9 : 9.0e18;
      x.SetFromDouble(i, IsFloat(t) ? v[i] : (v[i] > 0 ? big : -big) + std::round(v[i]));
    }
    for (int64_t axis : {0, 1, 2}) {
      for (int flags = 0; flags < 4; ++flags) {
        const bool exclusive = flags & 1, reverse = flags & 2;
        Tensor at = Tensor::FromI64({}, {axis});
        auto want = RunReferenceOp(
            "", "CumSum", {{"exclusive", int64_t{exclusive}}, {"reverse", int64_t{reverse}}},
            {&x, &at});
        ASSERT_EQ(want.size(), 1u);
        Tensor y = *Tensor::Create(t, dims);
        CumSumArgs a;
        a.x = x.raw();
        a.y = y.raw();
        a.dtype = t;
        a.outer = Prod(dims, 0, axis);
        a.len = dims[axis];
        a.inner = Prod(dims, axis + 1, 3);
        a.exclusive = exclusive;
        a.reverse = reverse;
        ASSERT_TRUE(CumSum(Ctx(), a).ok());
        EXPECT_TRUE(y.BitwiseEqual(want[0])) << DTypeName(t) << " axis " << axis << " exclusive "
                                             << exclusive << " reverse " << reverse;
      }
    }
  }
  CumSumArgs bad;
  bad.dtype = DType::kBool;
  bad.outer = bad.len = bad.inner = 1;
  bad.x = bad.y = &bad;
  EXPECT_EQ(CumSum(Ctx(), bad).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln::cpu
