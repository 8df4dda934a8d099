// TensorProto -> kiln::Tensor. Every dtype kiln knows is decoded from raw_data (little
// endian, exact byte count) or from its typed field (float_data, int32_data - which also
// carries f16/bf16 bit patterns, bool, int8/uint8/int16/uint16 -, int64_data,
// double_data, uint64_data - which also carries uint32 -), with exact counts and range
// checks. Element and byte counts use overflow-safe arithmetic and are checked against
// ImportOptions before anything is allocated. TakeTensorFromProto (initializers) adopts
// large raw_data instead of copying it: the Storage views the string released from the
// proto, so an inline-weight model is not held twice. The sub-byte types (INT4, UINT4,
// FLOAT4E2M1, INT2, UINT2) are packed in the file - in raw_data, external data, or one
// packed byte per int32_data value - and unpacked to kiln's one element per byte
// (kiln/ir/narrow.h); float8 types are a byte each. Limits: assumes a little-endian host;
// STRING and complex are Unimplemented; segments are Unimplemented.
#include <cstring>
#include <limits>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "kiln/ir/narrow.h"
#include "kiln/support/status.h"
#include "src/onnx/import_internal.h"

namespace kiln::onnx_import {
namespace {

// ONNX types kiln does not implement, by code, for a precise Unimplemented message.
std::string_view UnsupportedOnnxTypeName(int32_t code) {
  switch (code) {
    case 8:
      return "STRING";
    case 14:
      return "COMPLEX64";
    case 15:
      return "COMPLEX128";
    default:
      return "";
  }
}

absl::Status Invalid(std::string_view what, std::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat(std::string(what), ": ", std::string(msg)));
}

// Which typed field holds values of `dt`.
enum class Field { kFloat, kInt32, kInt64, kDouble, kUInt64 };

Field FieldFor(DType dt) {
  switch (dt) {
    case DType::kF32:
      return Field::kFloat;
    case DType::kF64:
      return Field::kDouble;
    case DType::kI64:
      return Field::kInt64;
    case DType::kU32:
    case DType::kU64:
      return Field::kUInt64;
    default:
      return Field::kInt32;  // i32, f16, bf16, bool, i8, u8, i16, u16
  }
}

std::string_view FieldName(Field f) {
  switch (f) {
    case Field::kFloat:
      return "float_data";
    case Field::kInt32:
      return "int32_data";
    case Field::kInt64:
      return "int64_data";
    case Field::kDouble:
      return "double_data";
    case Field::kUInt64:
      return "uint64_data";
  }
  return "?";
}

int64_t FieldCount(const onnx::TensorProto& tp, Field f) {
  switch (f) {
    case Field::kFloat:
      return tp.float_data_size();
    case Field::kInt32:
      return tp.int32_data_size();
    case Field::kInt64:
      return tp.int64_data_size();
    case Field::kDouble:
      return tp.double_data_size();
    case Field::kUInt64:
      return tp.uint64_data_size();
  }
  return 0;
}

// Range of int32_data values that fit `dt` (bit patterns for f16/bf16).
std::pair<int64_t, int64_t> Int32FieldRange(DType dt) {
  switch (dt) {
    case DType::kBool:
      return {0, 1};
    case DType::kI8:
      return {-128, 127};
    case DType::kU8:
      return {0, 255};
    case DType::kI16:
      return {-32768, 32767};
    case DType::kU16:
    case DType::kF16:
    case DType::kBF16:
      return {0, 65535};
    case DType::kF8E4M3FN:
    case DType::kF8E4M3FNUZ:
    case DType::kF8E5M2:
    case DType::kF8E5M2FNUZ:
    case DType::kF8E8M0:
    case DType::kF4E2M1:  // sub-byte types: one packed byte per value
    case DType::kI4:
    case DType::kU4:
    case DType::kI2:
    case DType::kU2:
      return {0, 255};
    default:
      return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
  }
}

absl::Status DecodeTypedField(const onnx::TensorProto& tp, DType dt, int64_t n,
                              std::string_view what, Tensor& t) {
  if (n == 0) return absl::OkStatus();  // empty fields may have a null data()
  const Field f = FieldFor(dt);
  std::byte* out = t.raw();
  switch (f) {
    case Field::kFloat:
      std::memcpy(out, tp.float_data().data(), n * sizeof(float));
      return absl::OkStatus();
    case Field::kDouble:
      std::memcpy(out, tp.double_data().data(), n * sizeof(double));
      return absl::OkStatus();
    case Field::kInt64:
      std::memcpy(out, tp.int64_data().data(), n * sizeof(int64_t));
      return absl::OkStatus();
    case Field::kUInt64:
      if (dt == DType::kU64) {
        std::memcpy(out, tp.uint64_data().data(), n * sizeof(uint64_t));
        return absl::OkStatus();
      }
      for (int64_t i = 0; i < n; ++i) {
        const uint64_t v = tp.uint64_data(static_cast<int>(i));
        if (v > std::numeric_limits<uint32_t>::max())
          return Invalid(what, absl::StrCat("uint64_data[", i, "] = ", v, " does not fit uint32"));
        const uint32_t u = static_cast<uint32_t>(v);
        std::memcpy(out + i * 4, &u, 4);
      }
      return absl::OkStatus();
    case Field::kInt32: {
      const auto [lo, hi] = Int32FieldRange(dt);
      const size_t es = DTypeSize(dt);
      for (int64_t i = 0; i < n; ++i) {
        const int32_t v = tp.int32_data(static_cast<int>(i));
        if (v < lo || v > hi)
          return Invalid(what, absl::StrCat("int32_data[", i, "] = ", v, " is out of range for ",
                                            std::string(DTypeName(dt))));
        // Little-endian host: the low `es` bytes of the value are its encoding.
        std::memcpy(out + i * es, &v, es);
      }
      return absl::OkStatus();
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DType> DTypeFromOnnxCode(int32_t code, std::string_view what) {
  if (code == 0) return Invalid(what, "data type is UNDEFINED (0)");
  std::string_view unsupported = UnsupportedOnnxTypeName(code);
  if (!unsupported.empty())
    return absl::UnimplementedError(absl::StrCat(std::string(what), ": data type ",
                                                 std::string(unsupported), " (", code,
                                                 ") is not supported by kiln"));
  std::optional<DType> dt = DTypeFromOnnx(code);
  if (!dt || *dt == DType::kString)
    return Invalid(what, absl::StrCat("unknown data type code ", code));
  return *dt;
}

namespace {

// Below this raw_data is copied into an aligned Storage of its own, as before (a view of
// a string buffer is only element-aligned).
constexpr int64_t kAdoptMinBytes = int64_t{64} << 10;

// `tp`'s raw_data (of `nbytes`) taken out of the proto as a Storage viewing the released
// string, or null when it is too small or not aligned to `element_bytes`.
std::shared_ptr<Storage> AdoptRawData(onnx::TensorProto& tp, int64_t nbytes, size_t element_bytes) {
  const auto at = reinterpret_cast<uintptr_t>(tp.raw_data().data());
  if (nbytes < kAdoptMinBytes || element_bytes == 0 || at % element_bytes != 0) return nullptr;
  std::shared_ptr<std::string> bytes(tp.release_raw_data());
  auto* data = reinterpret_cast<std::byte*>(bytes->data());
  return Storage::View(data, static_cast<size_t>(nbytes), std::move(bytes));
}

// TensorFromProto; with `take` (== &tp), large raw_data is adopted rather than copied.
absl::StatusOr<Tensor> Decode(const onnx::TensorProto& tp, std::string_view what,
                              TensorContext& ctx, onnx::TensorProto* take) {
  if (!tp.has_data_type()) return Invalid(what, "tensor has no data_type");
  KILN_ASSIGN_OR_RETURN(DType dt, DTypeFromOnnxCode(tp.data_type(), what));
  if (tp.has_segment())
    return absl::UnimplementedError(
        absl::StrCat(std::string(what), ": segmented tensors are not supported"));
  if (tp.dims_size() > ctx.options.max_rank)
    return Invalid(what, absl::StrCat("rank ", tp.dims_size(), " exceeds the limit of ",
                                      ctx.options.max_rank, " (ImportOptions.max_rank)"));
  std::vector<int64_t> dims(tp.dims().begin(), tp.dims().end());
  int64_t n = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0)
      return Invalid(what, absl::StrCat("dimension ", i, " is negative (", dims[i], ")"));
    if (MulOverflows(n, dims[i], &n)) return Invalid(what, "element count overflows int64");
  }
  int64_t nbytes;
  if (MulOverflows(n, static_cast<int64_t>(DTypeSize(dt)), &nbytes))
    return Invalid(what, "byte size overflows int64");
  if (nbytes > ctx.options.max_tensor_bytes)
    return Invalid(what, absl::StrCat("tensor of ", nbytes, " bytes exceeds the limit of ",
                                      ctx.options.max_tensor_bytes,
                                      " bytes (ImportOptions.max_tensor_bytes)"));
  int64_t total;
  if (AddOverflows(ctx.total_bytes, nbytes, &total) || total > ctx.options.max_total_bytes)
    return Invalid(what, absl::StrCat("tensors total more than ", ctx.options.max_total_bytes,
                                      " bytes (ImportOptions.max_total_bytes)"));

  const Field field = FieldFor(dt);
  int64_t typed_values = 0;
  for (Field f : {Field::kFloat, Field::kInt32, Field::kInt64, Field::kDouble, Field::kUInt64})
    typed_values += FieldCount(tp, f);
  if (tp.string_data_size() > 0) return Invalid(what, "string_data set on a numeric tensor");

  // Sub-byte types are packed in the file (`file_bytes`) and unpacked into `nbytes`.
  const bool packed = IsSubByte(dt);
  const int64_t file_bytes = PackedBytes(dt, n);
  auto unpack = [&](const std::byte* from) -> absl::StatusOr<std::shared_ptr<Storage>> {
    std::shared_ptr<Storage> out = Storage::Allocate(static_cast<size_t>(nbytes));
    if (!out)
      return absl::ResourceExhaustedError(absl::StrCat(std::string(what), ": out of memory"));
    UnpackSubByte(reinterpret_cast<const uint8_t*>(from), n, dt,
                  reinterpret_cast<uint8_t*>(out->data()));
    return out;
  };
  std::shared_ptr<Storage> storage;
  if (tp.data_location() == onnx::TensorProto::EXTERNAL) {
    if (tp.has_raw_data() || typed_values > 0)
      return Invalid(what, "external tensor also has inline data");
    KILN_ASSIGN_OR_RETURN(
        storage, ReadExternalData(tp, file_bytes, packed ? 1 : DTypeSize(dt), what, ctx.model_dir));
    if (packed) {
      KILN_ASSIGN_OR_RETURN(storage, unpack(storage->data()));
    }
  } else {
    if (tp.external_data_size() > 0)
      return Invalid(what, "external_data entries set but data_location is not EXTERNAL");
    if (tp.has_raw_data()) {
      if (typed_values > 0) return Invalid(what, "both raw_data and a typed data field are set");
      if (static_cast<int64_t>(tp.raw_data().size()) != file_bytes)
        return Invalid(what,
                       absl::StrCat("raw_data has ", tp.raw_data().size(), " bytes, expected ",
                                    file_bytes, " (", n, " x ", std::string(DTypeName(dt)),
                                    packed ? ", packed" : "", ")"));
      if (packed) {
        KILN_ASSIGN_OR_RETURN(storage,
                              unpack(reinterpret_cast<const std::byte*>(tp.raw_data().data())));
      } else {
        if (take) storage = AdoptRawData(*take, nbytes, DTypeSize(dt));
        if (!storage) {
          storage = Storage::Allocate(static_cast<size_t>(nbytes));
          if (!storage)
            return absl::ResourceExhaustedError(absl::StrCat(std::string(what), ": out of memory"));
          if (nbytes > 0) std::memcpy(storage->data(), tp.raw_data().data(), nbytes);
        }
      }
    } else {
      const int64_t have = FieldCount(tp, field);
      if (have != typed_values)
        return Invalid(
            what, absl::StrCat(std::string(DTypeName(dt)), " values must be in ",
                               std::string(FieldName(field)), " (other typed fields are set)"));
      // Packed types hold one packed byte per value.
      const int64_t want = packed ? file_bytes : n;
      if (have != want)
        return Invalid(
            what, absl::StrCat(std::string(FieldName(field)), " has ", have, " values, expected ",
                               want, packed ? absl::StrCat(" (", n, " packed elements)") : ""));
      storage = Storage::Allocate(static_cast<size_t>(packed ? file_bytes : nbytes));
      if (!storage)
        return absl::ResourceExhaustedError(absl::StrCat(std::string(what), ": out of memory"));
      Tensor tmp(dt, {want}, storage);
      KILN_RETURN_IF_ERROR(DecodeTypedField(tp, dt, want, what, tmp));
      if (packed) {
        KILN_ASSIGN_OR_RETURN(storage, unpack(storage->data()));
      }
    }
  }
  if (dt == DType::kBool) {
    // Normalise to 0/1 so kernels may rely on it (writing only bytes that change, so a
    // mapped tensor's pages stay shared with the file).
    auto* b = reinterpret_cast<uint8_t*>(storage->data());
    for (int64_t i = 0; i < n; ++i)
      if (b[i] > 1) b[i] = 1;
  }
  ctx.total_bytes = total;
  return Tensor(dt, std::move(dims), std::move(storage));
}

}  // namespace

absl::StatusOr<Tensor> TensorFromProto(const onnx::TensorProto& tp, std::string_view what,
                                       TensorContext& ctx) {
  return Decode(tp, what, ctx, nullptr);
}

absl::StatusOr<Tensor> TakeTensorFromProto(onnx::TensorProto& tp, std::string_view what,
                                           TensorContext& ctx) {
  absl::StatusOr<Tensor> t = Decode(tp, what, ctx, &tp);
  std::unique_ptr<std::string> copied(tp.release_raw_data());  // null when adopted
  return t;
}

}  // namespace kiln::onnx_import
