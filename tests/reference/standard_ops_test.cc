// Reference kernels of the standard ops added for import breadth, on hand-computed values
// and their errors: Einsum and Det (linalg.cc), RotaryEmbedding and TensorScatter
// (decoder_ops.cc), Compress, ReverseSequence and CenterCropPad (movement_select.cc),
// BitCast, Shrink, Swish, the windows (signal.cc) and LRN; the refusals of GridSample, LSTM
// and DFT. The ONNX backend node tests
// (tests/conformance) cover each op's full matrix; these pin the semantics kiln chose
// where the spec leaves room and every refusal.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/reference/reference_test_util.h"

namespace kiln {
namespace {

using testing::F32;
using testing::I64;
using testing::Make;
using testing::Run1;
using testing::RunOp;
using testing::Values;

const Tensor kNone;

TEST(EinsumTest, ContractionsDiagonalsAndImplicitOutput) {
  const Tensor a = F32({2, 2}, {1, 2, 3, 4}), b = F32({2, 2}, {5, 6, 7, 8});
  Tensor mm = Run1("Einsum", {a, b}, {{"equation", std::string("ij,jk->ik")}});
  EXPECT_EQ(Values<float>(mm), (std::vector<float>{19, 22, 43, 50}));
  // Implicit output: letters used once, alphabetical: "ij,jk" -> "ik" as well.
  EXPECT_EQ(Values<float>(Run1("Einsum", {a, b}, {{"equation", std::string("ij,jk")}})),
            (std::vector<float>{19, 22, 43, 50}));
  EXPECT_EQ(Values<float>(Run1("Einsum", {a}, {{"equation", std::string("ii->i")}})),
            (std::vector<float>{1, 4}));
  EXPECT_EQ(Values<float>(Run1("Einsum", {a}, {{"equation", std::string("ii")}})),
            (std::vector<float>{5}));  // the trace
  EXPECT_EQ(Values<float>(Run1("Einsum", {a}, {{"equation", std::string("ij->ji")}})),
            (std::vector<float>{1, 3, 2, 4}));
  // `...` broadcasts: [2,1,2] x [2,2] batch of matrix-vector products.
  Tensor e = Run1("Einsum", {F32({2, 1, 2}, {1, 0, 0, 1}), a},
                  {{"equation", std::string("...j,kj->...k")}});
  EXPECT_EQ(e.dims(), (std::vector<int64_t>{2, 1, 2}));
  EXPECT_EQ(Values<float>(e), (std::vector<float>{1, 3, 2, 4}));
  // Integers accumulate in their own type.
  Tensor ints = Run1("Einsum", {I64({3}, {1, 2, 3}), I64({3}, {4, 5, 6})},
                     {{"equation", std::string("i,i->")}});
  EXPECT_EQ(Values<int64_t>(ints), (std::vector<int64_t>{32}));
  for (const char* bad : {"ij,jk->iz", "ij->ii", "i.j->i", "ij,jk,kl->il", "ijk->i"}) {
    SCOPED_TRACE(bad);
    auto r = RunOp("Einsum", {a, b}, {{"equation", std::string(bad)}});
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  }
  auto sizes = RunOp("Einsum", {a, F32({3}, {1, 2, 3})}, {{"equation", std::string("ij,j->i")}});
  EXPECT_EQ(sizes.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DetTest, PivotsAndBatches) {
  // [[0, 1], [2, 3]] needs a row swap: det = -2. [[2, 4], [1, 2]] is singular.
  Tensor d = Run1("Det", {F32({2, 2, 2}, {0, 1, 2, 3, 2, 4, 1, 2})});
  EXPECT_EQ(d.dims(), (std::vector<int64_t>{2}));
  EXPECT_EQ(Values<float>(d), (std::vector<float>{-2, 0}));
  // No matrices: nothing allocated for them, even at a huge M.
  Tensor none = Run1("Det", {F32({0, 100000, 100000}, {})});
  EXPECT_EQ(none.dims(), (std::vector<int64_t>{0}));
  auto bad = RunOp("Det", {F32({2, 3}, {1, 2, 3, 4, 5, 6})});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(RotaryEmbeddingTest, HalvesInterleavedAndPartial) {
  // One head of 4, one position, cos 0 and sin 1: a quarter turn, (x1, x2) -> (-x2, x1).
  const Tensor x = F32({1, 1, 1, 4}, {1, 2, 3, 4});
  const Tensor cos = F32({1, 2}, {0, 0}), sin = F32({1, 2}, {1, 1});
  const Tensor pos = I64({1, 1}, {0});
  EXPECT_EQ(Values<float>(Run1("RotaryEmbedding", {x, cos, sin, pos})),
            (std::vector<float>{-3, -4, 1, 2}));  // halves: x1 = (1, 2), x2 = (3, 4)
  EXPECT_EQ(
      Values<float>(Run1("RotaryEmbedding", {x, cos, sin, pos}, {{"interleaved", int64_t{1}}})),
      (std::vector<float>{-2, 1, -4, 3}));  // pairs (1, 2), (3, 4)
  // Partial: the first 2 rotate, the rest pass; 3-D input with num_heads.
  Tensor p = Run1("RotaryEmbedding",
                  {F32({1, 1, 4}, {1, 2, 3, 4}), F32({1, 1}, {0}), F32({1, 1}, {1}), pos},
                  {{"rotary_embedding_dim", int64_t{2}}, {"num_heads", int64_t{1}}});
  EXPECT_EQ(Values<float>(p), (std::vector<float>{-2, 1, 3, 4}));
  // An empty input with huge other dims: an empty output, nothing sized from B·S.
  Tensor empty = Run1("RotaryEmbedding", {F32({100000, 0, 100000, 4}, {}), cos, sin, kNone});
  EXPECT_EQ(empty.NumElements(), 0);
  auto out_of_range = RunOp("RotaryEmbedding", {x, cos, sin, I64({1, 1}, {1})});
  EXPECT_EQ(out_of_range.status().code(), absl::StatusCode::kInvalidArgument);
  auto odd = RunOp("RotaryEmbedding", {x, cos, sin, pos}, {{"rotary_embedding_dim", int64_t{3}}});
  EXPECT_EQ(odd.status().code(), absl::StatusCode::kInvalidArgument);
  auto no_heads = RunOp("RotaryEmbedding", {F32({1, 1, 4}, {1, 2, 3, 4}), cos, sin, pos});
  EXPECT_EQ(no_heads.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TensorScatterTest, LinearAndCircularWrites) {
  // Cache [2 batch, 3 positions, 1]; one new position per row at 2 and 0.
  const Tensor cache = F32({2, 3, 1}, {1, 2, 3, 4, 5, 6});
  const Tensor update = F32({2, 1, 1}, {7, 8});
  EXPECT_EQ(Values<float>(Run1("TensorScatter", {cache, update, I64({2}, {2, 0})})),
            (std::vector<float>{1, 2, 7, 8, 5, 6}));
  // Two positions from 2 wrap in circular mode; linear refuses them.
  const Tensor two = F32({2, 2, 1}, {7, 8, 9, 10});
  EXPECT_EQ(Values<float>(Run1("TensorScatter", {cache, two, I64({2}, {2, 0})},
                               {{"mode", std::string("circular")}})),
            (std::vector<float>{8, 2, 7, 9, 10, 6}));
  // A write index near INT64_MAX neither overflows the check nor the circular position.
  for (const char* mode : {"linear", "circular"}) {
    auto huge = RunOp("TensorScatter", {cache, two, I64({2}, {INT64_MAX, 0})},
                      {{"mode", std::string(mode)}});
    if (std::string(mode) == "linear") {
      EXPECT_EQ(huge.status().code(), absl::StatusCode::kInvalidArgument) << huge.status();
    } else {
      ASSERT_TRUE(huge.ok()) << huge.status();  // INT64_MAX % 3 = 1: positions 1 and 2
      EXPECT_EQ(Values<float>((*huge)[0]), (std::vector<float>{1, 7, 8, 9, 10, 6}));
    }
  }
  auto past_end = RunOp("TensorScatter", {cache, two, I64({2}, {2, 0})});
  EXPECT_EQ(past_end.status().code(), absl::StatusCode::kInvalidArgument);
  auto batch_axis = RunOp("TensorScatter", {cache, update}, {{"axis", int64_t{0}}});
  EXPECT_EQ(batch_axis.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SelectTest, CompressReverseSequenceCenterCropPad) {
  const Tensor x = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor cond = Make<uint8_t>(DType::kBool, {3}, {1, 0, 1});
  Tensor c = Run1("Compress", {x, cond}, {{"axis", int64_t{1}}});
  EXPECT_EQ(c.dims(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(Values<float>(c), (std::vector<float>{1, 3, 4, 6}));
  EXPECT_EQ(Values<float>(Run1("Compress", {x, cond})), (std::vector<float>{1, 3}));  // flattened
  // time axis 0, batch axis 1: column 0 reverses its first 2 steps, column 1 all 3... of 2.
  Tensor r = Run1("ReverseSequence", {F32({3, 2}, {1, 2, 3, 4, 5, 6}), I64({2}, {2, 3})});
  EXPECT_EQ(Values<float>(r), (std::vector<float>{3, 6, 1, 4, 5, 2}));
  auto too_long = RunOp("ReverseSequence", {F32({3, 2}, {1, 2, 3, 4, 5, 6}), I64({2}, {4, 1})});
  EXPECT_EQ(too_long.status().code(), absl::StatusCode::kInvalidArgument);
  // Crop 3 -> 2 keeps [0, 2) (the odd element goes at the end); pad 2 -> 5 puts 1 before.
  EXPECT_EQ(Values<float>(Run1("CenterCropPad", {F32({3}, {1, 2, 3}), I64({1}, {2})})),
            (std::vector<float>{1, 2}));
  EXPECT_EQ(Values<float>(Run1("CenterCropPad", {F32({2}, {1, 2}), I64({1}, {5})})),
            (std::vector<float>{0, 1, 2, 0, 0}));
}

TEST(BitCastShrinkWindowsLrnTest, Values) {
  Tensor b = Run1("BitCast", {F32({1}, {1.0f})}, {{"to", int64_t{6}}});  // INT32
  EXPECT_EQ(Values<int32_t>(b), (std::vector<int32_t>{0x3f800000}));
  Tensor n = Run1("BitCast", {Make<uint8_t>(DType::kU4, {2}, {0xf, 0x7})}, {{"to", int64_t{22}}});
  EXPECT_EQ(Values<int8_t>(n), (std::vector<int8_t>{-1, 7}));  // u4 -> i4 sign-extends
  auto width = RunOp("BitCast", {F32({1}, {1})}, {{"to", int64_t{7}}});
  EXPECT_EQ(width.status().code(), absl::StatusCode::kInvalidArgument);

  Tensor sw = Run1("Swish", {F32({2}, {0, 1})});
  EXPECT_EQ(Values<float>(sw)[0], 0.0f);
  EXPECT_NEAR(Values<float>(sw)[1], 0.7310586f, 1e-7f);

  Tensor s = Run1("Shrink", {F32({4}, {-2, -0.5f, 0.5f, 2})}, {{"lambd", 1.0f}, {"bias", 0.5f}});
  EXPECT_EQ(Values<float>(s), (std::vector<float>{-1.5f, 0, 0, 1.5f}));

  // Hann, periodic, size 4: sin²(0), sin²(π/4), sin²(π/2), sin²(3π/4).
  Tensor h = Run1("HannWindow", {I64({}, {4})});
  ASSERT_EQ(h.NumElements(), 4);
  EXPECT_NEAR(Values<float>(h)[1], 0.5f, 1e-7f);
  EXPECT_EQ(Values<float>(h)[2], 1.0f);
  Tensor sym = Run1("HammingWindow", {I64({}, {3})}, {{"periodic", int64_t{0}}});
  EXPECT_NEAR(Values<float>(sym)[2], 25.0f / 46 - 21.0f / 46, 1e-7f);  // n = N - 1: cos(2π) = 1
  auto negative = RunOp("BlackmanWindow", {I64({}, {-1})});
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument);

  // LRN size 1, alpha 1, beta 1, bias 0: x / x² = 1 / x.
  Tensor l = Run1("LRN", {F32({1, 2, 1, 1}, {2, 4})},
                  {{"size", int64_t{1}}, {"alpha", 1.0f}, {"beta", 1.0f}, {"bias", 0.0f}});
  EXPECT_EQ(Values<float>(l), (std::vector<float>{0.5f, 0.25f}));
}

// The kernels written against onnx's reference (grid_sample.cc, recurrent.cc, spectral.cc)
// pass every backend node test of their ops; here, their refusals.
TEST(SamplingRecurrentSpectralTest, Refusals) {
  const Tensor x = F32({1, 1, 2, 2}, {1, 2, 3, 4});
  auto batch = RunOp("GridSample", {x, F32({2, 1, 1, 2}, {0, 0, 0, 0})});
  EXPECT_EQ(batch.status().code(), absl::StatusCode::kInvalidArgument) << batch.status();
  auto pad = RunOp("GridSample", {x, F32({1, 1, 1, 2}, {0, 0})},
                   {{"padding_mode", std::string("mirror")}});
  EXPECT_EQ(pad.status().code(), absl::StatusCode::kInvalidArgument) << pad.status();
  Tensor centre =
      Run1("GridSample", {x, F32({1, 1, 1, 2}, {0, 0})}, {{"align_corners", int64_t{1}}});
  EXPECT_EQ(Values<float>(centre), (std::vector<float>{2.5f}));  // the mean of the four

  // LSTM, seq 1, batch 1, input 1, hidden 1.
  const Tensor lx = F32({1, 1, 1}, {1}), w = F32({1, 4, 1}, {1, 1, 1, 1}),
               r = F32({1, 4, 1}, {1, 1, 1, 1});
  auto act = RunOp("LSTM", {lx, w, r},
                   {{"hidden_size", int64_t{1}},
                    {"activations", std::vector<std::string>{"Sigmoid", "Cube", "Tanh"}}});
  EXPECT_EQ(act.status().code(), absl::StatusCode::kUnimplemented) << act.status();
  auto lens = RunOp("LSTM", {lx, w, r, kNone, Make<int32_t>(DType::kI32, {1}, {2})},
                    {{"hidden_size", int64_t{1}}});
  EXPECT_EQ(lens.status().code(), absl::StatusCode::kInvalidArgument) << lens.status();

  auto axis = RunOp("DFT", {F32({1, 4, 1}, {1, 2, 3, 4})}, {{"axis", int64_t{-1}}});
  EXPECT_EQ(axis.status().code(), absl::StatusCode::kInvalidArgument) << axis.status();
  // The DFT of [1, 1, 1, 1]: 4 at frequency 0, nothing elsewhere.
  Tensor f = Run1("DFT", {F32({1, 4, 1}, {1, 1, 1, 1})}, {{"axis", int64_t{1}}});
  EXPECT_EQ(f.dims(), (std::vector<int64_t>{1, 4, 2}));
  EXPECT_NEAR(Values<float>(f)[0], 4.0f, 1e-6f);
  for (int i = 1; i < 8; ++i) EXPECT_NEAR(Values<float>(f)[i], 0.0f, 1e-6f) << i;
}

}  // namespace
}  // namespace kiln
