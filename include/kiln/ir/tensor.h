// Element types and dense tensors. A Tensor is a dtype, a concrete shape and a
// reference-counted Storage; copies of a Tensor share bytes (weight sharing and dedup
// for free). Storage the library allocates is 64-byte aligned so kernels may use aligned
// vector loads; a Storage that views bytes someone else owns (a file mapping: the
// importer's external data) is aligned as that owner placed them, at least to the
// element size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace kiln {

enum class DType : uint8_t {
  kUndefined = 0,
  kF32,
  kF16,
  kBF16,
  kF64,
  kI8,
  kU8,
  kI16,
  kU16,
  kI32,
  kU32,
  kI64,
  kU64,
  kBool,
  kString,  // only so the importer can name it in errors; no kernel accepts it
  // Narrow types (kiln/ir/narrow.h): one element per byte in memory, packed only in files.
  // Cast, CastLike, QuantizeLinear, DequantizeLinear and the data-movement ops take them.
  kF8E4M3FN,
  kF8E4M3FNUZ,
  kF8E5M2,
  kF8E5M2FNUZ,
  kF8E8M0,
  kF4E2M1,
  kI4,
  kU4,
  kI2,
  kU2,
};

// Size of one element in memory in bytes (0 for kUndefined / kString; 1 for the narrow
// types, sub-byte ones included).
size_t DTypeSize(DType t);
// Short lowercase name used by the IR text format: f32 f16 bf16 f64 i8 u8 i16 u16 i32
// u32 i64 u64 bool string f8e4m3fn f8e4m3fnuz f8e5m2 f8e5m2fnuz f8e8m0 f4e2m1 i4 u4 i2 u2.
std::string_view DTypeName(DType t);
std::optional<DType> DTypeFromName(std::string_view name);
bool IsFloat(DType t);    // f32 f16 bf16 f64
bool IsInteger(DType t);  // signed and unsigned integers (not bool)

// ONNX TensorProto.DataType codes <-> DType. Unknown codes give nullopt.
std::optional<DType> DTypeFromOnnx(int32_t code);
int32_t DTypeToOnnx(DType t);

// Half-precision conversions (round to nearest even).
float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);
float BF16ToFloat(uint16_t h);
uint16_t FloatToBF16(float f);

// Product of dims, or an error if any dim is negative or the product overflows int64.
absl::StatusOr<int64_t> CheckedNumElements(absl::Span<const int64_t> dims);

// Tensor bytes: owned (64-byte aligned, zero-initialised) or a view of bytes kept alive
// by an owner, e.g. a private file mapping, so that importing a model's external data
// maps it instead of copying it.
class Storage {
 public:
  static std::shared_ptr<Storage> Allocate(size_t bytes);
  // Views [data, data + bytes), kept alive by `owner` (non-null; else nullptr is
  // returned) until this Storage goes. The bytes
  // must stay writable for whoever holds the Storage (a MAP_PRIVATE mapping is: writes
  // are copy-on-write and never reach the file).
  static std::shared_ptr<Storage> View(std::byte* data, size_t bytes, std::shared_ptr<void> owner);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  std::byte* data() { return data_; }
  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  bool is_view() const { return owner_ != nullptr; }

 private:
  Storage(std::byte* data, size_t size, std::shared_ptr<void> owner = nullptr)
      : data_(data), size_(size), owner_(std::move(owner)) {}
  std::byte* data_;
  size_t size_;
  std::shared_ptr<void> owner_;  // null: data_ is ours (aligned_alloc)
};

class Tensor {
 public:
  Tensor() = default;
  // Allocates zeroed storage. Callers must have validated dims (CheckedNumElements).
  Tensor(DType dtype, std::vector<int64_t> dims);
  // Validates dims and byte size before allocating.
  static absl::StatusOr<Tensor> Create(DType dtype, std::vector<int64_t> dims);
  // Shares `storage`; storage->size() must be >= NumBytes().
  Tensor(DType dtype, std::vector<int64_t> dims, std::shared_ptr<Storage> storage);

  // Convenience constructors for tests and constant building.
  static Tensor FromF32(std::vector<int64_t> dims, absl::Span<const float> values);
  static Tensor FromI64(std::vector<int64_t> dims, absl::Span<const int64_t> values);
  static Tensor ScalarF32(float v) { return FromF32({}, {v}); }
  static Tensor ScalarI64(int64_t v) { return FromI64({}, {v}); }

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& dims() const { return dims_; }
  int rank() const { return static_cast<int>(dims_.size()); }
  int64_t NumElements() const;
  size_t NumBytes() const { return static_cast<size_t>(NumElements()) * DTypeSize(dtype_); }
  bool defined() const { return dtype_ != DType::kUndefined; }

  std::byte* raw() { return storage_ ? storage_->data() : nullptr; }
  const std::byte* raw() const { return storage_ ? storage_->data() : nullptr; }
  template <typename T>
  T* data() {
    return reinterpret_cast<T*>(raw());
  }
  template <typename T>
  const T* data() const {
    return reinterpret_cast<const T*>(raw());
  }
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  // Element i converted to double / int64 (any numeric dtype, bool included).
  double GetAsDouble(int64_t i) const;
  int64_t GetAsInt64(int64_t i) const;
  // Stores `v` converted to this tensor's dtype.
  void SetFromDouble(int64_t i, double v);

  // A new tensor with the same bytes reinterpreted under new dims (same element count).
  Tensor Reshaped(std::vector<int64_t> dims) const;
  // Deep copy.
  Tensor Clone() const;
  // True when dtype, dims and bytes are all equal.
  bool BitwiseEqual(const Tensor& other) const;

  std::string ShapeString() const;  // e.g. "2x3", "scalar"

 private:
  DType dtype_ = DType::kUndefined;
  std::vector<int64_t> dims_;
  std::shared_ptr<Storage> storage_;
};

}  // namespace kiln
