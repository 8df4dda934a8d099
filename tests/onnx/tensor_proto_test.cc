// TensorProto decoding: every kiln dtype from raw_data and from its typed field (the
// sub-byte ones packed), exact
// size/count checks, range checks of narrow types carried in int32_data/uint64_data, and
// the ImportOptions limits. Calls the private TensorFromProto directly.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "src/onnx/import_internal.h"

namespace kiln {
namespace {

using onnx::TensorProto;
using onnx_import::TensorContext;
using onnx_import::TensorFromProto;

struct DTypeCase {
  DType dtype;
  int32_t code;
  // Two elements: the typed-field values and the little-endian bytes they encode.
  void (*fill)(TensorProto&);
  std::vector<uint8_t> bytes;
};

const std::vector<DTypeCase>& Cases() {
  static const auto* cases = new std::vector<DTypeCase>{
      {DType::kF32,
       1,
       [](TensorProto& t) {
         t.add_float_data(1.f);
         t.add_float_data(-2.f);
       },
       {0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0}},
      {DType::kF64,
       11,
       [](TensorProto& t) {
         t.add_double_data(1.0);
         t.add_double_data(-2.0);
       },
       {0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0, 0, 0, 0, 0, 0, 0, 0xc0}},
      {DType::kF16,
       10,
       [](TensorProto& t) {
         t.add_int32_data(0x3c00);
         t.add_int32_data(0xc000);
       },
       {0x00, 0x3c, 0x00, 0xc0}},
      {DType::kBF16,
       16,
       [](TensorProto& t) {
         t.add_int32_data(0x3f80);
         t.add_int32_data(0xc000);
       },
       {0x80, 0x3f, 0x00, 0xc0}},
      {DType::kI8,
       3,
       [](TensorProto& t) {
         t.add_int32_data(-1);
         t.add_int32_data(127);
       },
       {0xff, 0x7f}},
      {DType::kU8,
       2,
       [](TensorProto& t) {
         t.add_int32_data(255);
         t.add_int32_data(1);
       },
       {0xff, 0x01}},
      {DType::kI16,
       5,
       [](TensorProto& t) {
         t.add_int32_data(-2);
         t.add_int32_data(0x1234);
       },
       {0xfe, 0xff, 0x34, 0x12}},
      {DType::kU16,
       4,
       [](TensorProto& t) {
         t.add_int32_data(65535);
         t.add_int32_data(2);
       },
       {0xff, 0xff, 0x02, 0x00}},
      {DType::kI32,
       6,
       [](TensorProto& t) {
         t.add_int32_data(-1);
         t.add_int32_data(0x01020304);
       },
       {0xff, 0xff, 0xff, 0xff, 0x04, 0x03, 0x02, 0x01}},
      {DType::kU32,
       12,
       [](TensorProto& t) {
         t.add_uint64_data(0xffffffffu);
         t.add_uint64_data(5);
       },
       {0xff, 0xff, 0xff, 0xff, 0x05, 0, 0, 0}},
      {DType::kI64,
       7,
       [](TensorProto& t) {
         t.add_int64_data(-1);
         t.add_int64_data(258);
       },
       {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0x01, 0, 0, 0, 0, 0, 0}},
      {DType::kU64,
       13,
       [](TensorProto& t) {
         t.add_uint64_data(~uint64_t{0});
         t.add_uint64_data(3);
       },
       {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x03, 0, 0, 0, 0, 0, 0, 0}},
      {DType::kBool,
       9,
       [](TensorProto& t) {
         t.add_int32_data(1);
         t.add_int32_data(0);
       },
       {0x01, 0x00}},
      // float8: one byte per value, its code.
      {DType::kF8E4M3FN,
       17,
       [](TensorProto& t) {
         t.add_int32_data(0x38);
         t.add_int32_data(0xc1);
       },
       {0x38, 0xc1}},
      {DType::kF8E4M3FNUZ,
       18,
       [](TensorProto& t) {
         t.add_int32_data(0x38);
         t.add_int32_data(0xc1);
       },
       {0x38, 0xc1}},
      {DType::kF8E5M2,
       19,
       [](TensorProto& t) {
         t.add_int32_data(0x38);
         t.add_int32_data(0xc1);
       },
       {0x38, 0xc1}},
      {DType::kF8E5M2FNUZ,
       20,
       [](TensorProto& t) {
         t.add_int32_data(0x38);
         t.add_int32_data(0xc1);
       },
       {0x38, 0xc1}},
      {DType::kF8E8M0,
       24,
       [](TensorProto& t) {
         t.add_int32_data(0x38);
         t.add_int32_data(0xc1);
       },
       {0x38, 0xc1}},
  };
  return *cases;
}

std::vector<uint8_t> Bytes(const Tensor& t) {
  const auto* p = reinterpret_cast<const uint8_t*>(t.raw());
  return std::vector<uint8_t>(p, p + t.NumBytes());
}

TEST(TensorProto, EveryDTypeFromTypedFieldAndRawData) {
  // Every DType except kUndefined, kString and the packed sub-byte ones (PackedSubByteTypes).
  ASSERT_EQ(Cases().size(), 18u);
  for (const DTypeCase& c : Cases()) {
    SCOPED_TRACE(std::string(DTypeName(c.dtype)));
    TensorProto typed;
    typed.set_data_type(c.code);
    typed.add_dims(2);
    c.fill(typed);
    TensorContext ctx;
    auto t = TensorFromProto(typed, "t", ctx);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->dtype(), c.dtype);
    EXPECT_EQ(t->dims(), std::vector<int64_t>{2});
    EXPECT_EQ(Bytes(*t), c.bytes);
    EXPECT_EQ(ctx.total_bytes, static_cast<int64_t>(c.bytes.size()));

    TensorProto raw;
    raw.set_data_type(c.code);
    raw.add_dims(2);
    raw.set_raw_data(std::string(c.bytes.begin(), c.bytes.end()));
    auto r = TensorFromProto(raw, "t", ctx);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(Bytes(*r), c.bytes);

    raw.set_raw_data(std::string(c.bytes.begin(), c.bytes.end()) + "x");
    auto bad = TensorFromProto(raw, "t", ctx);
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(bad.status().message().find(absl::StrCat("raw_data has ", c.bytes.size() + 1,
                                                       " bytes, expected ", c.bytes.size())),
              std::string::npos)
        << bad.status();

    typed.add_dims(1);  // 2x1: still 2 elements -> ok; 2x2 -> count mismatch
    EXPECT_TRUE(TensorFromProto(typed, "t", ctx).ok());
    typed.set_dims(1, 2);
    auto short_count = TensorFromProto(typed, "t", ctx);
    EXPECT_EQ(short_count.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(short_count.status().message().find("has 2 values, expected 4"), std::string::npos)
        << short_count.status();
  }
}

TEST(TensorProto, ScalarAndEmptyTensors) {
  TensorContext ctx;
  TensorProto s;
  s.set_data_type(TensorProto::INT64);
  s.add_int64_data(42);
  auto t = TensorFromProto(s, "s", ctx);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->rank(), 0);
  EXPECT_EQ(t->GetAsInt64(0), 42);

  TensorProto e;
  e.set_data_type(TensorProto::FLOAT);
  e.add_dims(0);
  e.add_dims(int64_t{1} << 62);  // zero elements: no overflow, no data needed
  auto z = TensorFromProto(e, "e", ctx);
  ASSERT_TRUE(z.ok()) << z.status();
  EXPECT_EQ(z->NumElements(), 0);
}

TEST(TensorProto, BoolRawDataIsNormalised) {
  TensorContext ctx;
  TensorProto b;
  b.set_data_type(TensorProto::BOOL);
  b.add_dims(3);
  b.set_raw_data(std::string("\x00\x02\xff", 3));
  auto t = TensorFromProto(b, "b", ctx);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(Bytes(*t), (std::vector<uint8_t>{0, 1, 1}));
}

TEST(TensorProto, NarrowTypedValuesOutOfRange) {
  struct Row {
    int32_t code;
    int64_t value;
  };
  for (Row r : {Row{3, 128}, Row{3, -129}, Row{2, 256}, Row{2, -1}, Row{5, 40000}, Row{4, -1},
                Row{10, 65536}, Row{16, -5}, Row{9, 2}, Row{12, int64_t{1} << 32}}) {
    SCOPED_TRACE(r.code);
    TensorContext ctx;
    TensorProto t;
    t.set_data_type(r.code);
    t.add_dims(1);
    if (r.code == 12)
      t.add_uint64_data(static_cast<uint64_t>(r.value));
    else
      t.add_int32_data(static_cast<int32_t>(r.value));
    auto s = TensorFromProto(t, "t", ctx);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(s.status().message().find("out of range") != std::string::npos ||
                s.status().message().find("does not fit uint32") != std::string::npos)
        << s.status();
  }
}

// INT4, UINT4, FLOAT4E2M1, INT2, UINT2: packed in raw_data (and one packed byte per
// int32_data value), first element in the low bits; kiln holds one element per byte,
// signed ones sign-extended. An odd count leaves the last byte's high bits unused.
TEST(TensorProto, PackedSubByteTypes) {
  struct Row {
    int32_t code;
    DType dtype;
    std::string packed;
    std::vector<uint8_t> unpacked;
  };
  const std::vector<Row> rows = {
      {22, DType::kI4, std::string("\x8f\x07", 2), {0xff, 0xf8, 0x07}},  // -1 -8 7
      {21, DType::kU4, std::string("\x8f\x07", 2), {0x0f, 0x08, 0x07}},
      {23, DType::kF4E2M1, std::string("\x8f\x07", 2), {0x0f, 0x08, 0x07}},
      {26, DType::kI2, std::string("\x1e", 1), {0xfe, 0xff, 0x01}},  // -2 -1 1
      {25, DType::kU2, std::string("\x1e", 1), {0x02, 0x03, 0x01}},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.code);
    TensorContext ctx;
    TensorProto raw;
    raw.set_data_type(r.code);
    raw.add_dims(3);
    raw.set_raw_data(r.packed);
    auto t = TensorFromProto(raw, "t", ctx);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->dtype(), r.dtype);
    EXPECT_EQ(Bytes(*t), r.unpacked);
    EXPECT_EQ(ctx.total_bytes, 3);  // counted as held in memory

    TensorProto typed;
    typed.set_data_type(r.code);
    typed.add_dims(3);
    for (char c : r.packed) typed.add_int32_data(static_cast<uint8_t>(c));
    auto u = TensorFromProto(typed, "t", ctx);
    ASSERT_TRUE(u.ok()) << u.status();
    EXPECT_EQ(Bytes(*u), r.unpacked);

    raw.set_raw_data(r.packed + "x");
    auto bad = TensorFromProto(raw, "t", ctx);
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(bad.status().message().find(absl::StrCat("expected ", r.packed.size(), " (3 x ")),
              std::string::npos)
        << bad.status();
    typed.add_int32_data(0);
    bad = TensorFromProto(typed, "t", ctx);
    EXPECT_NE(bad.status().message().find("(3 packed elements)"), std::string::npos)
        << bad.status();
    typed.set_int32_data(0, 256);  // a packed byte is 0..255
    typed.mutable_int32_data()->RemoveLast();
    bad = TensorFromProto(typed, "t", ctx);
    EXPECT_NE(bad.status().message().find("out of range"), std::string::npos) << bad.status();
  }
}

TEST(TensorProto, LimitsCheckedBeforeAllocation) {
  TensorContext ctx;
  ctx.options.max_tensor_bytes = 64;
  ctx.options.max_total_bytes = 100;
  TensorProto big;
  big.set_data_type(TensorProto::FLOAT);
  big.add_dims(17);  // 68 bytes, and no data at all: the limit must fire first
  auto s = TensorFromProto(big, "big", ctx);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("68 bytes exceeds the limit of 64"), std::string::npos)
      << s.status();

  TensorProto ok;
  ok.set_data_type(TensorProto::FLOAT);
  ok.add_dims(16);
  for (int i = 0; i < 16; ++i) ok.add_float_data(i);
  ASSERT_TRUE(TensorFromProto(ok, "a", ctx).ok());
  EXPECT_EQ(ctx.total_bytes, 64);
  s = TensorFromProto(ok, "b", ctx);  // 128 > 100 in total
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("max_total_bytes"), std::string::npos) << s.status();
  EXPECT_EQ(ctx.total_bytes, 64);  // a rejected tensor does not count
}

TEST(TensorProto, HugeDimsNeverAllocate) {
  TensorContext ctx;
  TensorProto t;
  t.set_data_type(TensorProto::DOUBLE);
  t.add_dims(int64_t{1} << 61);  // elements fit int64, bytes overflow
  auto s = TensorFromProto(t, "t", ctx);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("byte size overflows"), std::string::npos) << s.status();
  t.add_dims(8);  // elements overflow
  s = TensorFromProto(t, "t", ctx);
  EXPECT_NE(s.status().message().find("element count overflows"), std::string::npos) << s.status();
}

TEST(TensorProto, UnsupportedAndUnknownCodes) {
  TensorContext ctx;
  for (int32_t code : {8, 14, 15}) {
    TensorProto t;
    t.set_data_type(code);
    EXPECT_EQ(TensorFromProto(t, "t", ctx).status().code(), absl::StatusCode::kUnimplemented)
        << code;
  }
  for (int32_t code : {0, 27, 99, -1}) {
    TensorProto t;
    t.set_data_type(code);
    EXPECT_EQ(TensorFromProto(t, "t", ctx).status().code(), absl::StatusCode::kInvalidArgument)
        << code;
  }
}

}  // namespace
}  // namespace kiln
