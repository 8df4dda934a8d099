// IR text parser, literals: numbers (ints, floats with shortest-exact text, `nan:0xBITS`)
// and tensor literals (element lists and `#hex` raw bytes) for Parser (text_parser.h).
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kiln/ir/narrow.h"
#include "kiln/support/status.h"
#include "src/ir/text_parser.h"

namespace kiln::text_internal {
namespace {

template <typename T>
void AppendBytes(std::string* bytes, T v) {
  char buf[sizeof(T)];
  std::memcpy(buf, &v, sizeof(T));
  bytes->append(buf, sizeof(T));
}

}  // namespace

absl::StatusOr<NumTok> Parser::ScanNumber(std::string_view what) {
  SkipSpace();
  NumTok tok;
  tok.pos = pos_;
  size_t p = pos_;
  const size_t n = text_.size();
  if (p < n && (text_[p] == '+' || text_[p] == '-')) {
    tok.negative = text_[p] == '-';
    ++p;
  }
  auto word_at = [&](std::string_view w) {
    return text_.substr(p, w.size()) == w &&
           (p + w.size() >= n || !IsIdentChar(text_[p + w.size()]));
  };
  if (word_at("inf")) {
    p += 3;
    tok.kind = NumTok::kFloat;
  } else if (word_at("nan")) {
    p += 3;
    tok.kind = NumTok::kNan;
    if (p < n && text_[p] == ':') {
      if (p != tok.pos + 3) return ErrorAt(tok.pos, "a NaN with explicit bits takes no sign");
      ++p;
      if (text_.substr(p, 2) != "0x")
        return ErrorAt(p, "expected '0x' and the NaN's bits after 'nan:'");
      p += 2;
      const size_t hs = p;
      while (p < n && IsHexDigit(text_[p])) tok.bits = tok.bits * 16 + HexValue(text_[p++]);
      if (p == hs || p - hs > 16) return ErrorAt(hs, "expected 1 to 16 hex digits of NaN bits");
      tok.has_bits = true;
    }
  } else if (p < n && IsDigit(text_[p])) {
    tok.kind = NumTok::kInt;
    while (p < n && IsDigit(text_[p])) ++p;
    if (p < n && text_[p] == '.') {
      tok.kind = NumTok::kFloat;
      ++p;
      while (p < n && IsDigit(text_[p])) ++p;
    }
    if (p < n && (text_[p] == 'e' || text_[p] == 'E')) {
      tok.kind = NumTok::kFloat;
      ++p;
      if (p < n && (text_[p] == '+' || text_[p] == '-')) ++p;
      if (p >= n || !IsDigit(text_[p])) return ErrorAt(p, "expected exponent digits");
      while (p < n && IsDigit(text_[p])) ++p;
    }
  } else {
    return Expected(what);
  }
  if (p < n && (IsIdentChar(text_[p]) || text_[p] == '.'))
    return ErrorAt(tok.pos, "malformed number");
  tok.text = text_.substr(tok.pos, p - tok.pos);
  pos_ = p;
  return tok;
}

absl::StatusOr<int64_t> Parser::ToInt64(const NumTok& t) {
  if (t.kind != NumTok::kInt) return ErrorAt(t.pos, "expected an integer");
  std::string_view s = t.text;
  if (!s.empty() && s[0] == '+') s.remove_prefix(1);
  int64_t v = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size())
    return ErrorAt(t.pos, "integer out of range for int64");
  return v;
}

absl::StatusOr<int64_t> Parser::ParseInt(std::string_view what) {
  KILN_ASSIGN_OR_RETURN(NumTok t, ScanNumber(what));
  return ToInt64(t);
}

absl::StatusOr<double> Parser::ToF64(const NumTok& t) {
  if (t.kind == NumTok::kNan) {
    if (!t.has_bits)
      return t.negative ? -std::numeric_limits<double>::quiet_NaN()
                        : std::numeric_limits<double>::quiet_NaN();
    double d;
    std::memcpy(&d, &t.bits, 8);
    if (!std::isnan(d)) return ErrorAt(t.pos, "bits after 'nan:' are not a NaN of f64");
    return d;
  }
  std::string_view s = t.text;
  if (!s.empty() && s[0] == '+') s.remove_prefix(1);
  if (s == "inf" || s == "-inf") return s[0] == '-' ? -HUGE_VAL : HUGE_VAL;
  double v = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size())
    return ErrorAt(t.pos, "number out of range for f64");
  return v;
}

absl::StatusOr<float> Parser::ToF32(const NumTok& t) {
  if (t.kind == NumTok::kNan) {
    if (!t.has_bits)
      return t.negative ? -std::numeric_limits<float>::quiet_NaN()
                        : std::numeric_limits<float>::quiet_NaN();
    const uint32_t b = static_cast<uint32_t>(t.bits);
    float f;
    std::memcpy(&f, &b, 4);
    if (t.bits > 0xffffffffu || !std::isnan(f))
      return ErrorAt(t.pos, "bits after 'nan:' are not a NaN of f32");
    return f;
  }
  std::string_view s = t.text;
  if (!s.empty() && s[0] == '+') s.remove_prefix(1);
  if (s == "inf" || s == "-inf") return s[0] == '-' ? -HUGE_VALF : HUGE_VALF;
  float v = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size())
    return ErrorAt(t.pos, "number out of range for f32");
  return v;
}

absl::Status Parser::ParseElement(DType dt, std::string* bytes) {
  SkipSpace();
  const size_t p = pos_;
  const std::string dname(DTypeName(dt));
  if (dt == DType::kBool) {
    if (ConsumeWord("true")) {
      bytes->push_back(1);
      return absl::OkStatus();
    }
    if (ConsumeWord("false")) {
      bytes->push_back(0);
      return absl::OkStatus();
    }
  }
  KILN_ASSIGN_OR_RETURN(NumTok tok, ScanNumber(absl::StrCat("a ", dname, " element")));
  switch (dt) {
    case DType::kF32: {
      KILN_ASSIGN_OR_RETURN(float f, ToF32(tok));
      AppendBytes(bytes, f);
      return absl::OkStatus();
    }
    case DType::kF64: {
      KILN_ASSIGN_OR_RETURN(double d, ToF64(tok));
      AppendBytes(bytes, d);
      return absl::OkStatus();
    }
    case DType::kF16:
    case DType::kBF16: {
      const bool half = dt == DType::kF16;
      uint16_t h;
      if (tok.kind == NumTok::kNan && tok.has_bits) {
        const bool nan = half ? ((tok.bits & 0x7c00u) == 0x7c00u && (tok.bits & 0x3ffu) != 0)
                              : ((tok.bits & 0x7f80u) == 0x7f80u && (tok.bits & 0x7fu) != 0);
        if (tok.bits > 0xffffu || !nan)
          return ErrorAt(p, absl::StrCat("bits after 'nan:' are not a NaN of ", dname));
        h = static_cast<uint16_t>(tok.bits);
      } else {
        KILN_ASSIGN_OR_RETURN(float f, ToF32(tok));
        h = half ? FloatToHalf(f) : FloatToBF16(f);
        const float back = half ? HalfToFloat(h) : BF16ToFloat(h);
        if (std::isfinite(f) && std::isinf(back))
          return ErrorAt(p, absl::StrCat("number out of range for ", dname));
      }
      AppendBytes(bytes, h);
      return absl::OkStatus();
    }
    case DType::kF8E4M3FN:
    case DType::kF8E4M3FNUZ:
    case DType::kF8E5M2:
    case DType::kF8E5M2FNUZ:
    case DType::kF8E8M0:
    case DType::kF4E2M1: {
      uint8_t code;
      if (tok.kind == NumTok::kNan && tok.has_bits) {
        if (tok.bits > 0xffu || !std::isnan(NarrowToFloat(static_cast<uint8_t>(tok.bits), dt)))
          return ErrorAt(p, absl::StrCat("bits after 'nan:' are not a NaN of ", dname));
        code = static_cast<uint8_t>(tok.bits);
      } else {
        KILN_ASSIGN_OR_RETURN(float f, ToF32(tok));
        code = dt == DType::kF8E8M0 ? E8M0FromFloat(f, /*saturate=*/false, E8M0Rounding::kNearest)
                                    : NarrowFromDouble(f, dt, /*saturate=*/false);
        // Rounding within the range is fine; a value outside it (which would saturate), a
        // NaN or infinity the type lacks, or E8M0's zero and signs are errors.
        const float back = NarrowToFloat(code, dt);
        const float max =
            NarrowToFloat(dt == DType::kF8E8M0 ? 0xfe : NarrowFromDouble(1e300, dt), dt);
        bool kept;
        if (std::isnan(f)) {
          kept = std::isnan(back);
        } else if (std::isinf(f)) {
          kept = back == f;
        } else {
          kept = std::isfinite(back) && std::fabs(f) <= max && (dt != DType::kF8E8M0 || f > 0);
        }
        if (!kept) return ErrorAt(p, absl::StrCat("number not representable in ", dname));
      }
      AppendBytes(bytes, code);
      return absl::OkStatus();
    }
    case DType::kU64: {
      if (tok.kind != NumTok::kInt || tok.negative)
        return ErrorAt(p, "expected a non-negative integer for u64");
      std::string_view s = tok.text;
      if (s[0] == '+') s.remove_prefix(1);
      uint64_t v = 0;
      auto r = std::from_chars(s.data(), s.data() + s.size(), v);
      if (r.ec != std::errc() || r.ptr != s.data() + s.size())
        return ErrorAt(p, "integer out of range for u64");
      AppendBytes(bytes, v);
      return absl::OkStatus();
    }
    default:
      break;
  }
  KILN_ASSIGN_OR_RETURN(int64_t v, ToInt64(tok));
  auto in = [&](int64_t lo, int64_t hi) -> absl::Status {
    if (v < lo || v > hi) return ErrorAt(p, absl::StrCat("integer out of range for ", dname));
    return absl::OkStatus();
  };
  switch (dt) {
    case DType::kI8:
      KILN_RETURN_IF_ERROR(in(INT8_MIN, INT8_MAX));
      AppendBytes(bytes, static_cast<int8_t>(v));
      break;
    case DType::kU8:
      KILN_RETURN_IF_ERROR(in(0, UINT8_MAX));
      AppendBytes(bytes, static_cast<uint8_t>(v));
      break;
    case DType::kBool:
      KILN_RETURN_IF_ERROR(in(0, UINT8_MAX));
      AppendBytes(bytes, static_cast<uint8_t>(v));
      break;
    case DType::kI16:
      KILN_RETURN_IF_ERROR(in(INT16_MIN, INT16_MAX));
      AppendBytes(bytes, static_cast<int16_t>(v));
      break;
    case DType::kU16:
      KILN_RETURN_IF_ERROR(in(0, UINT16_MAX));
      AppendBytes(bytes, static_cast<uint16_t>(v));
      break;
    case DType::kI32:
      KILN_RETURN_IF_ERROR(in(INT32_MIN, INT32_MAX));
      AppendBytes(bytes, static_cast<int32_t>(v));
      break;
    case DType::kU32:
      KILN_RETURN_IF_ERROR(in(0, UINT32_MAX));
      AppendBytes(bytes, static_cast<uint32_t>(v));
      break;
    case DType::kI64:
      AppendBytes(bytes, v);
      break;
    case DType::kI4:
    case DType::kU4:
    case DType::kI2:
    case DType::kU2: {
      const int bits = DTypeBits(dt);
      const bool is_signed = dt == DType::kI4 || dt == DType::kI2;
      const int64_t lo = is_signed ? -(int64_t{1} << (bits - 1)) : 0;
      const int64_t hi = is_signed ? (int64_t{1} << (bits - 1)) - 1 : (int64_t{1} << bits) - 1;
      KILN_RETURN_IF_ERROR(in(lo, hi));
      AppendBytes(bytes, WrapNarrowInt(v, dt));
      break;
    }
    default:
      return ErrorAt(p, absl::StrCat("tensors of ", dname, " hold no elements"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> Parser::ParseTensor() {
  SkipSpace();
  const size_t start = pos_;
  if (!ConsumeWord("tensor")) return Expected("'tensor'");
  KILN_RETURN_IF_ERROR(Expect('<', "'<' after 'tensor'"));
  if (Consume('?')) {
    KILN_RETURN_IF_ERROR(Expect('>', "'>' after 'tensor<?'"));
    return Tensor();
  }
  SkipSpace();
  const size_t dpos = pos_;
  KILN_ASSIGN_OR_RETURN(std::string dname, ParseIdent("a dtype"));
  std::optional<DType> dt = DTypeFromName(dname);
  if (!dt) return ErrorAt(dpos, absl::StrCat("unknown dtype '", dname, "'"));
  KILN_RETURN_IF_ERROR(Expect('[', "'[' and the tensor's dims"));
  std::vector<int64_t> dims;
  if (!Consume(']')) {
    do {
      SkipSpace();
      const size_t p = pos_;
      KILN_ASSIGN_OR_RETURN(int64_t d, ParseInt("a tensor dimension (integer)"));
      if (d < 0) return ErrorAt(p, "negative dimension");
      dims.push_back(d);
    } while (Consume(','));
    KILN_RETURN_IF_ERROR(Expect(']', "',' or ']' in tensor dims"));
  }
  KILN_RETURN_IF_ERROR(Expect('>', "'>' closing tensor<...>"));
  absl::StatusOr<int64_t> n = CheckedNumElements(dims);
  if (!n.ok()) return ErrorAt(start, std::string(n.status().message()));
  const int64_t esize = static_cast<int64_t>(DTypeSize(*dt));
  if (esize == 0) return Tensor(*dt, dims);  // e.g. string: the type only, no data
  int64_t nbytes;
  if (MulOverflows(*n, esize, &nbytes)) return ErrorAt(start, "tensor byte size overflows int64");

  std::string bytes;
  SkipSpace();
  const size_t body = pos_;
  if (text_.substr(pos_, 3) == "...")
    return ErrorAt(pos_,
                   "elided constant data '...' cannot be parsed (print with "
                   "elide_large_constants=false)");
  if (Consume('#')) {
    const size_t hs = pos_;
    while (pos_ < text_.size() && IsHexDigit(text_[pos_])) ++pos_;
    const int64_t digits = static_cast<int64_t>(pos_ - hs);
    if (digits % 2 != 0 || digits / 2 != nbytes)
      return ErrorAt(hs, absl::StrFormat("expected %d hex digits of tensor data, found %d",
                                         2 * nbytes, digits));
    bytes.resize(static_cast<size_t>(nbytes));
    for (int64_t i = 0; i < nbytes; ++i)
      bytes[i] =
          static_cast<char>(HexValue(text_[hs + 2 * i]) * 16 + HexValue(text_[hs + 2 * i + 1]));
  } else if (Consume('[')) {
    int64_t count = 0;
    if (!Consume(']')) {
      do {
        if (count == *n)
          return ErrorAt((SkipSpace(), pos_),
                         absl::StrCat("too many elements: the tensor has ", *n));
        KILN_RETURN_IF_ERROR(ParseElement(*dt, &bytes));
        ++count;
      } while (Consume(','));
      KILN_RETURN_IF_ERROR(Expect(']', "',' or ']' in tensor elements"));
    }
    if (count != *n)
      return ErrorAt(body,
                     absl::StrCat("the tensor has ", *n, " elements but ", count, " are given"));
  } else {
    return Expected("tensor data: '[' elements ']' or '#' hex bytes");
  }
  absl::StatusOr<Tensor> t = Tensor::Create(*dt, dims);
  if (!t.ok()) return ErrorAt(start, std::string(t.status().message()));
  if (!bytes.empty()) std::memcpy(t->raw(), bytes.data(), bytes.size());
  return std::move(t).value();
}

}  // namespace kiln::text_internal
