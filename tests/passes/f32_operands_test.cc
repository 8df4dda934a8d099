// f32-operands (passes/f32_operands.cc): a model's own 16-bit value at an f32-only operand
// (kiln.Attention's additive mask) is read through a Cast to f32; f32 operands and the
// other operands are left alone.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "kiln/ir/text.h"
#include "tests/passes/pass_test_util.h"

namespace kiln {
namespace {

using testing::ExpectNoChange;
using testing::ExpectRewrite;

constexpr char kPass[] = "f32-operands";

TEST(F32Operands, ASixteenBitMaskIsCastUp) {
  // An fp16 export's packed-qkv attention with its own bf16 additive mask [B, 1, 1, L].
  ExpectRewrite(kPass, R"(
graph g opset=21 {
  %0 = Input() : bf16[1,4,6] "qkv"
  %1 = Input() : bf16[1,1,1,4] "mask"
  %2 = kiln.MultiHeadAttention(%0, %1) {num_heads=1, scale=0.5} : bf16[1,4,2] "y"
  return "y": %2
})",
                R"(
graph g opset=21 {
  %0 = Input() : bf16[1,4,6] "qkv"
  %1 = Input() : bf16[1,1,1,4] "mask"
  %2 = Cast(%1) {to=1} : f32[1,1,1,4] "mask_f32"
  %3 = kiln.MultiHeadAttention(%0, %2) {num_heads=1, scale=0.5} : bf16[1,4,2] "y"
  return "y": %3
})");
}

TEST(F32Operands, AnF32MaskAndTheOtherOperandsStay) {
  ExpectNoChange(kPass, R"(
graph g opset=21 {
  %0 = Input() : f16[1,2,3,4] "q"
  %1 = Input() : f16[1,2,5,4] "k"
  %2 = Input() : f32[1,1,3,5] "mask"
  %3 = kiln.Attention(%0, %1, %1, %2) {scale=0.5} : f16[1,3,8] "y"
  return "y": %3
})");
}

}  // namespace
}  // namespace kiln
