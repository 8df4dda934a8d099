// The op catalogue's per-op facts (include/kiln/ir/ops.h) checked against what the ops do
// on the reference executor, so a wrong entry cannot hide behind the passes that trust it:
// every view (OpInfo::view, which lowering aliases instead of copying) returns its data
// input's elements in the same order — the same shape for kSame, a new one for kReshape.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "kiln/ir/ops.h"
#include "tests/reference/reference_test_util.h"

namespace kiln {
namespace {

using testing::Floats;
using testing::I64;
using testing::RunOp;

// One call of a view op on the data input x (f32[1, 4, 6]): its other inputs and attributes.
struct ViewCase {
  std::vector<Tensor> more_inputs;
  std::map<std::string, Attribute> attrs;
};

const std::map<std::string, ViewCase>& ViewCases() {
  static const auto* cases = new std::map<std::string, ViewCase>{
      {"Identity", {}},
      {"Reshape", {{I64({2}, {4, 6})}, {}}},
      {"Unsqueeze", {{I64({1}, {1})}, {}}},
      {"Squeeze", {{I64({1}, {0})}, {}}},
      {"Flatten", {{}, {{"axis", int64_t{2}}}}},
  };
  return *cases;
}

Tensor Data() {
  std::vector<float> v(24);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.37f * static_cast<float>(i) - 3.1f;
  return testing::F32({1, 4, 6}, v);
}

TEST(OpTraitsTest, EveryViewReturnsItsInputInOrder) {
  size_t views = 0;
  const Tensor x = Data();
  for (const OpInfo& op : AllOps()) {
    if (!IsView(&op)) continue;
    ++views;
    ASSERT_TRUE(op.domain.empty()) << op.name << ": a view outside the default domain";
    auto it = ViewCases().find(std::string(op.name));
    ASSERT_NE(it, ViewCases().end()) << "no view case for " << op.name << ": add one above";
    std::vector<Tensor> ins = {x};
    ins.insert(ins.end(), it->second.more_inputs.begin(), it->second.more_inputs.end());
    auto r = RunOp(std::string(op.name), ins, it->second.attrs);
    ASSERT_TRUE(r.ok()) << op.name << ": " << r.status();
    const Tensor& y = (*r)[0];
    EXPECT_EQ(y.dtype(), x.dtype()) << op.name;
    EXPECT_EQ(Floats(y), Floats(x)) << op.name << " moved or changed elements";
    if (op.view == ViewKind::kSame)
      EXPECT_EQ(y.dims(), x.dims()) << op.name;
    else
      EXPECT_NE(y.dims(), x.dims()) << op.name << ": the case should change the shape";
  }
  EXPECT_EQ(views, ViewCases().size()) << "a case above is for an op that is no view";
}

// Layout ops that move elements must never be aliased by lowering.
TEST(OpTraitsTest, DataMovementIsNoView) {
  for (const char* op : {"Transpose", "Slice", "Expand", "Concat", "Split", "Tile", "Cast"})
    EXPECT_FALSE(IsView(FindOp("", op))) << op;
}

}  // namespace
}  // namespace kiln
