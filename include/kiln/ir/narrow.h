// Narrow element types: the float8 formats (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ, E8M0),
// FLOAT4E2M1 and the 4- and 2-bit integers. In memory kiln holds every one of them one
// element per byte: a float8 is its own byte, a FLOAT4E2M1 is its 4-bit code in the low
// bits, an INT4/INT2 is its value sign-extended to int8 and a UINT4/UINT2 its value as a
// uint8. Only ONNX files pack the sub-byte types (two or four per byte, first element in
// the low bits); PackSubByte/UnpackSubByte convert at that boundary.
//
// Conversions follow the ONNX specification of Cast and the onnx reference (ml_dtypes):
// floats round to nearest even; with `saturate`, a value beyond the largest finite one
// (infinities included) becomes that value, without it NaN (Inf for E5M2, which has one);
// FLOAT4E2M1 has no NaN or Inf and always saturates (a NaN becomes -0, as ml_dtypes does).
// E8M0 (a power of two, 2^(code - 127), 0xFF NaN) rounds as its `round_mode` says.
#pragma once

#include <cstdint>

#include "kiln/ir/tensor.h"

namespace kiln {

// f8e4m3fn f8e4m3fnuz f8e5m2 f8e5m2fnuz f8e8m0 f4e2m1.
bool IsNarrowFloat(DType t);
// i4 u4 i2 u2.
bool IsNarrowInt(DType t);
// Bits per element in an ONNX file: 4 (f4e2m1, i4, u4), 2 (i2, u2), else 8 x DTypeSize.
int DTypeBits(DType t);
// f4e2m1 i4 u4 i2 u2: packed in files.
bool IsSubByte(DType t);
// Bytes `n` elements take packed as in an ONNX file.
int64_t PackedBytes(DType t, int64_t n);

// The value of narrow-float code `code` of type `t` (an IsNarrowFloat type).
float NarrowToFloat(uint8_t code, DType t);
// `v` rounded to the nearest `t` (an IsNarrowFloat type other than f8e8m0).
uint8_t NarrowFromDouble(double v, DType t, bool saturate = true);

enum class E8M0Rounding { kUp, kDown, kNearest };
// `v` (as float32) to E8M0: NaN and Inf become 0xFF (NaN); the sign is dropped.
uint8_t E8M0FromFloat(float v, bool saturate, E8M0Rounding rounding);

// `v` wrapped to the 4- or 2-bit integer type `t` (modular, as integer narrowing is) and
// held as kiln holds it: sign-extended for i4/i2.
uint8_t WrapNarrowInt(int64_t v, DType t);

// `n` elements of sub-byte type `t` between the packed file form and kiln's one per byte.
// UnpackSubByte reads PackedBytes(t, n) bytes; PackSubByte writes them (a last byte's
// unused bits are 0).
void UnpackSubByte(const uint8_t* packed, int64_t n, DType t, uint8_t* out);
void PackSubByte(const uint8_t* in, int64_t n, DType t, uint8_t* packed);

}  // namespace kiln
