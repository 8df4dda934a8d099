// Window geometry (include/kiln/ir/window.h): output sizes and paddings worked out by hand
// from the ONNX spec and onnxruntime's rules, and the attribute errors.
#include "kiln/ir/window.h"

#include "gtest/gtest.h"

namespace kiln {
namespace {

// A node carrying window attributes.
struct Op {
  Graph g;
  Node* n = g.AddNode("MaxPool", {}, 1);
};

window::Extent Fwd(const Node& n, int64_t in, absl::Span<const int64_t> kernel = {}) {
  auto a = window::Read(n, 1, kernel);
  EXPECT_TRUE(a.ok()) << a.status();
  auto e = window::Forward(*a, 0, in);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.value_or(window::Extent{});
}

TEST(Window, ExplicitPadsStridesDilations) {
  Op op;
  op.n->set_attr("kernel_shape", std::vector<int64_t>{3});
  op.n->set_attr("strides", std::vector<int64_t>{2});
  op.n->set_attr("pads", std::vector<int64_t>{1, 2});
  op.n->set_attr("dilations", std::vector<int64_t>{2});
  // span 5, padded input 7 + 3 = 10: windows at 0, 2, 4 (start 6 would end at 11).
  const window::Extent e = Fwd(*op.n, 7);
  EXPECT_EQ(e.out, 3);
  EXPECT_EQ(e.pad_begin, 1);
  EXPECT_EQ(e.pad_end, 2);
}

TEST(Window, CeilModeDropsAWindowStartingInTheEndPadding) {
  Op op;
  op.n->set_attr("kernel_shape", std::vector<int64_t>{2});
  op.n->set_attr("strides", std::vector<int64_t>{2});
  op.n->set_attr("ceil_mode", int64_t{1});
  EXPECT_EQ(Fwd(*op.n, 5).out, 3);  // floor 2; the third window starts at 4 < 5
  op.n->set_attr("pads", std::vector<int64_t>{0, 1});
  // room 4 is a multiple of 2: ceil adds nothing, 3 windows.
  EXPECT_EQ(Fwd(*op.n, 5).out, 3);
  op.n->set_attr("pads", std::vector<int64_t>{0, 2});
  // room 5: ceil gives 4, whose start 6 lies past the input's 5 positions: dropped.
  EXPECT_EQ(Fwd(*op.n, 5).out, 3);
}

TEST(Window, SameUpperAndLowerPutTheOddPadAfterAndBefore) {
  Op op;
  op.n->set_attr("kernel_shape", std::vector<int64_t>{4});
  op.n->set_attr("auto_pad", std::string("SAME_UPPER"));
  window::Extent e = Fwd(*op.n, 5);  // out 5, total pad 3
  EXPECT_EQ(e.out, 5);
  EXPECT_EQ(e.pad_begin, 1);
  EXPECT_EQ(e.pad_end, 2);
  op.n->set_attr("auto_pad", std::string("SAME_LOWER"));
  e = Fwd(*op.n, 5);
  EXPECT_EQ(e.pad_begin, 2);
  EXPECT_EQ(e.pad_end, 1);
  op.n->set_attr("strides", std::vector<int64_t>{3});
  EXPECT_EQ(Fwd(*op.n, 5).out, 2);  // ceil(5 / 3)
  op.n->set_attr("auto_pad", std::string("VALID"));
  EXPECT_EQ(Fwd(*op.n, 5).out, 1);  // (5 - 4) / 3 + 1
}

TEST(Window, TransposedSizes) {
  Op op;
  op.n->set_attr("strides", std::vector<int64_t>{3});
  auto a = window::Read(*op.n, 1, std::vector<int64_t>{3});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(window::Transposed(*a, 0, 3)->out, 9);  // 3·2 + 3
  a->output_padding = {1};
  EXPECT_EQ(window::Transposed(*a, 0, 3)->out, 10);
  a->output_padding.clear();
  a->output_shape = {10};  // one past what the input covers: zero-extended, no padding
  const window::Extent e = *window::Transposed(*a, 0, 3);
  EXPECT_EQ(e.out, 10);
  EXPECT_EQ(e.pad_begin, 0);
  a->output_shape = {7};  // total padding 2, split evenly
  EXPECT_EQ(window::Transposed(*a, 0, 3)->pad_begin, 1);
  a->output_shape.clear();
  a->pads = {5, 5};
  EXPECT_FALSE(window::Transposed(*a, 0, 3).ok());  // 9 - 10 < 1
}

TEST(Window, AttributeErrors) {
  Op op;
  EXPECT_EQ(window::Read(*op.n, 1, {}).status().message(), "attribute 'kernel_shape' is required");
  op.n->set_attr("kernel_shape", std::vector<int64_t>{3, 3});
  EXPECT_EQ(window::Read(*op.n, 1, {}).status().message(),
            "attribute 'kernel_shape' has 2 values; expected 1");
  op.n->set_attr("kernel_shape", std::vector<int64_t>{3});
  op.n->set_attr("strides", std::vector<int64_t>{0});
  EXPECT_NE(window::Read(*op.n, 1, {}).status().message().find("'strides' has the value 0"),
            std::string::npos);
  op.n->set_attr("strides", std::vector<int64_t>{1});
  op.n->set_attr("auto_pad", std::string("SAME"));
  EXPECT_FALSE(window::Read(*op.n, 1, {}).ok());
  op.n->set_attr("auto_pad", std::string("NOTSET"));
  auto a = window::Read(*op.n, 1, {});
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(window::Forward(*a, 0, 2).ok());  // a 3-wide window over 2 positions
}

}  // namespace
}  // namespace kiln
