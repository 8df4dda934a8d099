#include "kiln/ir/tensor.h"

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kiln/ir/narrow.h"
#include "kiln/support/status.h"

namespace kiln {
namespace {

struct DTypeRow {
  DType type;
  std::string_view name;
  size_t size;
  int32_t onnx;
};

// ONNX TensorProto.DataType: FLOAT=1 UINT8=2 INT8=3 UINT16=4 INT16=5 INT32=6 INT64=7
// STRING=8 BOOL=9 FLOAT16=10 DOUBLE=11 UINT32=12 UINT64=13 BFLOAT16=16 FLOAT8E4M3FN=17
// FLOAT8E4M3FNUZ=18 FLOAT8E5M2=19 FLOAT8E5M2FNUZ=20 UINT4=21 INT4=22 FLOAT4E2M1=23
// FLOAT8E8M0=24 UINT2=25 INT2=26.
constexpr DTypeRow kRows[] = {
    {DType::kF32, "f32", 4, 1},
    {DType::kF16, "f16", 2, 10},
    {DType::kBF16, "bf16", 2, 16},
    {DType::kF64, "f64", 8, 11},
    {DType::kI8, "i8", 1, 3},
    {DType::kU8, "u8", 1, 2},
    {DType::kI16, "i16", 2, 5},
    {DType::kU16, "u16", 2, 4},
    {DType::kI32, "i32", 4, 6},
    {DType::kU32, "u32", 4, 12},
    {DType::kI64, "i64", 8, 7},
    {DType::kU64, "u64", 8, 13},
    {DType::kBool, "bool", 1, 9},
    {DType::kString, "string", 0, 8},
    {DType::kF8E4M3FN, "f8e4m3fn", 1, 17},
    {DType::kF8E4M3FNUZ, "f8e4m3fnuz", 1, 18},
    {DType::kF8E5M2, "f8e5m2", 1, 19},
    {DType::kF8E5M2FNUZ, "f8e5m2fnuz", 1, 20},
    {DType::kF8E8M0, "f8e8m0", 1, 24},
    {DType::kF4E2M1, "f4e2m1", 1, 23},
    {DType::kI4, "i4", 1, 22},
    {DType::kU4, "u4", 1, 21},
    {DType::kI2, "i2", 1, 26},
    {DType::kU2, "u2", 1, 25},
};

const DTypeRow* Row(DType t) {
  for (const auto& r : kRows)
    if (r.type == t) return &r;
  return nullptr;
}

}  // namespace

size_t DTypeSize(DType t) {
  const DTypeRow* r = Row(t);
  return r ? r->size : 0;
}

std::string_view DTypeName(DType t) {
  const DTypeRow* r = Row(t);
  return r ? r->name : "undefined";
}

std::optional<DType> DTypeFromName(std::string_view name) {
  for (const auto& r : kRows)
    if (r.name == name) return r.type;
  return std::nullopt;
}

bool IsFloat(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16 || t == DType::kF64;
}

bool IsInteger(DType t) {
  switch (t) {
    case DType::kI8:
    case DType::kU8:
    case DType::kI16:
    case DType::kU16:
    case DType::kI32:
    case DType::kU32:
    case DType::kI64:
    case DType::kU64:
      return true;
    default:
      return false;
  }
}

std::optional<DType> DTypeFromOnnx(int32_t code) {
  for (const auto& r : kRows)
    if (r.onnx == code) return r.type;
  return std::nullopt;
}

int32_t DTypeToOnnx(DType t) {
  const DTypeRow* r = Row(t);
  return r ? r->onnx : 0;
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ffu;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or nan
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (abs < 0x38800000u) {  // subnormal or zero in half
    // value = abs_float; half subnormal unit = 2^-24
    float af;
    std::memcpy(&af, &abs, 4);
    const float scaled = af * 16777216.0f;  // / 2^-24
    const uint32_t m = static_cast<uint32_t>(std::nearbyint(scaled));
    return static_cast<uint16_t>(sign | m);
  }
  // normal: round mantissa to 10 bits, nearest even
  uint32_t e = ((abs >> 23) - 127 + 15);
  uint32_t mant = abs & 0x7fffffu;
  uint32_t half = (e << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;
  return static_cast<uint16_t>(sign | half);
}

float BF16ToFloat(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t FloatToBF16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  const uint32_t lsb = (x >> 16) & 1u;
  x += 0x7fffu + lsb;
  return static_cast<uint16_t>(x >> 16);
}

absl::StatusOr<int64_t> CheckedNumElements(absl::Span<const int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) return absl::InvalidArgumentError(absl::StrCat("negative dimension ", d));
    if (MulOverflows(n, d, &n)) return absl::InvalidArgumentError("element count overflows int64");
  }
  return n;
}

std::shared_ptr<Storage> Storage::Allocate(size_t bytes) {
  const size_t rounded = (bytes + 63) / 64 * 64;
  void* p = rounded == 0 ? std::aligned_alloc(64, 64) : std::aligned_alloc(64, rounded);
  if (p == nullptr) return nullptr;
  std::memset(p, 0, rounded == 0 ? 64 : rounded);
  return std::shared_ptr<Storage>(new Storage(static_cast<std::byte*>(p), bytes));
}

std::shared_ptr<Storage> Storage::View(std::byte* data, size_t bytes, std::shared_ptr<void> owner) {
  if (!owner) return nullptr;  // a view without an owner would be freed as if ours
  return std::shared_ptr<Storage>(new Storage(data, bytes, std::move(owner)));
}

Storage::~Storage() {
  if (!owner_) std::free(data_);
}

Tensor::Tensor(DType dtype, std::vector<int64_t> dims) : dtype_(dtype), dims_(std::move(dims)) {
  storage_ = Storage::Allocate(NumBytes());
}

absl::StatusOr<Tensor> Tensor::Create(DType dtype, std::vector<int64_t> dims) {
  KILN_ASSIGN_OR_RETURN(int64_t n, CheckedNumElements(dims));
  int64_t bytes;
  if (MulOverflows(n, static_cast<int64_t>(DTypeSize(dtype)), &bytes) || bytes > (int64_t{1} << 40))
    return absl::ResourceExhaustedError(absl::StrCat("tensor of ", n, " elements is too large"));
  Tensor t;
  t.dtype_ = dtype;
  t.dims_ = std::move(dims);
  t.storage_ = Storage::Allocate(static_cast<size_t>(bytes));
  if (!t.storage_)
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", bytes, " bytes"));
  return t;
}

Tensor::Tensor(DType dtype, std::vector<int64_t> dims, std::shared_ptr<Storage> storage)
    : dtype_(dtype), dims_(std::move(dims)), storage_(std::move(storage)) {}

Tensor Tensor::FromF32(std::vector<int64_t> dims, absl::Span<const float> values) {
  Tensor t(DType::kF32, std::move(dims));
  if (!values.empty())
    std::memcpy(t.raw(), values.data(), std::min(t.NumBytes(), values.size() * 4));
  return t;
}

Tensor Tensor::FromI64(std::vector<int64_t> dims, absl::Span<const int64_t> values) {
  Tensor t(DType::kI64, std::move(dims));
  if (!values.empty())
    std::memcpy(t.raw(), values.data(), std::min(t.NumBytes(), values.size() * 8));
  return t;
}

int64_t Tensor::NumElements() const {
  int64_t n = 1;
  for (int64_t d : dims_) n *= d;
  return n;
}

double Tensor::GetAsDouble(int64_t i) const {
  const std::byte* p = raw();
  switch (dtype_) {
    case DType::kF32:
      return reinterpret_cast<const float*>(p)[i];
    case DType::kF16:
      return HalfToFloat(reinterpret_cast<const uint16_t*>(p)[i]);
    case DType::kBF16:
      return BF16ToFloat(reinterpret_cast<const uint16_t*>(p)[i]);
    case DType::kF64:
      return reinterpret_cast<const double*>(p)[i];
    case DType::kI8:
      return reinterpret_cast<const int8_t*>(p)[i];
    case DType::kU8:
      return reinterpret_cast<const uint8_t*>(p)[i];
    case DType::kI16:
      return reinterpret_cast<const int16_t*>(p)[i];
    case DType::kU16:
      return reinterpret_cast<const uint16_t*>(p)[i];
    case DType::kI32:
      return reinterpret_cast<const int32_t*>(p)[i];
    case DType::kU32:
      return reinterpret_cast<const uint32_t*>(p)[i];
    case DType::kI64:
      return static_cast<double>(reinterpret_cast<const int64_t*>(p)[i]);
    case DType::kU64:
      return static_cast<double>(reinterpret_cast<const uint64_t*>(p)[i]);
    case DType::kBool:
      return reinterpret_cast<const uint8_t*>(p)[i] ? 1.0 : 0.0;
    case DType::kI4:
    case DType::kI2:
      return reinterpret_cast<const int8_t*>(p)[i];
    case DType::kU4:
    case DType::kU2:
      return reinterpret_cast<const uint8_t*>(p)[i];
    default:
      if (IsNarrowFloat(dtype_))
        return NarrowToFloat(reinterpret_cast<const uint8_t*>(p)[i], dtype_);
      return 0.0;
  }
}

int64_t Tensor::GetAsInt64(int64_t i) const {
  const std::byte* p = raw();
  switch (dtype_) {
    case DType::kI64:
      return reinterpret_cast<const int64_t*>(p)[i];
    case DType::kU64:
      return static_cast<int64_t>(reinterpret_cast<const uint64_t*>(p)[i]);
    case DType::kI32:
      return reinterpret_cast<const int32_t*>(p)[i];
    case DType::kU32:
      return reinterpret_cast<const uint32_t*>(p)[i];
    case DType::kI16:
      return reinterpret_cast<const int16_t*>(p)[i];
    case DType::kU16:
      return reinterpret_cast<const uint16_t*>(p)[i];
    case DType::kI8:
      return reinterpret_cast<const int8_t*>(p)[i];
    case DType::kU8:
      return reinterpret_cast<const uint8_t*>(p)[i];
    case DType::kBool:
      return reinterpret_cast<const uint8_t*>(p)[i] ? 1 : 0;
    case DType::kI4:
    case DType::kI2:
      return reinterpret_cast<const int8_t*>(p)[i];
    case DType::kU4:
    case DType::kU2:
      return reinterpret_cast<const uint8_t*>(p)[i];
    default: {
      const double d = GetAsDouble(i);
      if (!(d == d)) return 0;  // NaN
      if (d >= 9.2e18) return INT64_MAX;
      if (d <= -9.2e18) return INT64_MIN;
      return static_cast<int64_t>(d);
    }
  }
}

void Tensor::SetFromDouble(int64_t i, double v) {
  std::byte* p = raw();
  switch (dtype_) {
    case DType::kF32:
      reinterpret_cast<float*>(p)[i] = static_cast<float>(v);
      break;
    case DType::kF16:
      reinterpret_cast<uint16_t*>(p)[i] = FloatToHalf(static_cast<float>(v));
      break;
    case DType::kBF16:
      reinterpret_cast<uint16_t*>(p)[i] = FloatToBF16(static_cast<float>(v));
      break;
    case DType::kF64:
      reinterpret_cast<double*>(p)[i] = v;
      break;
    case DType::kI8:
      reinterpret_cast<int8_t*>(p)[i] = static_cast<int8_t>(v);
      break;
    case DType::kU8:
      reinterpret_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v);
      break;
    case DType::kI16:
      reinterpret_cast<int16_t*>(p)[i] = static_cast<int16_t>(v);
      break;
    case DType::kU16:
      reinterpret_cast<uint16_t*>(p)[i] = static_cast<uint16_t>(v);
      break;
    case DType::kI32:
      reinterpret_cast<int32_t*>(p)[i] = static_cast<int32_t>(v);
      break;
    case DType::kU32:
      reinterpret_cast<uint32_t*>(p)[i] = static_cast<uint32_t>(v);
      break;
    case DType::kI64:
      reinterpret_cast<int64_t*>(p)[i] = static_cast<int64_t>(v);
      break;
    case DType::kU64:
      reinterpret_cast<uint64_t*>(p)[i] = static_cast<uint64_t>(v);
      break;
    case DType::kBool:
      reinterpret_cast<uint8_t*>(p)[i] = v != 0.0 ? 1 : 0;
      break;
    case DType::kI4:
    case DType::kU4:
    case DType::kI2:
    case DType::kU2:  // in range: callers saturate first; NaN and beyond int64 give 0
      reinterpret_cast<uint8_t*>(p)[i] =
          WrapNarrowInt(std::fabs(v) < 9.2e18 ? static_cast<int64_t>(v) : 0, dtype_);
      break;
    default:
      if (IsNarrowFloat(dtype_)) reinterpret_cast<uint8_t*>(p)[i] = NarrowFromDouble(v, dtype_);
      break;
  }
}

Tensor Tensor::Reshaped(std::vector<int64_t> dims) const {
  return Tensor(dtype_, std::move(dims), storage_);
}

Tensor Tensor::Clone() const {
  Tensor t(dtype_, dims_);
  if (NumBytes() > 0) std::memcpy(t.raw(), raw(), NumBytes());
  return t;
}

bool Tensor::BitwiseEqual(const Tensor& o) const {
  if (dtype_ != o.dtype_ || dims_ != o.dims_) return false;
  if (NumBytes() == 0) return true;
  return std::memcmp(raw(), o.raw(), NumBytes()) == 0;
}

std::string Tensor::ShapeString() const {
  if (dims_.empty()) return "scalar";
  return absl::StrJoin(dims_, "x");
}

}  // namespace kiln
