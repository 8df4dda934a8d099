// NumPy .npy reader and writer: little-endian, C order, the dtypes kiln knows. The reader
// validates the header and the data length against the file size before allocating.
#include "kiln/support/npy.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "kiln/support/status.h"

namespace kiln {
namespace {

struct Descr {
  const char* code;
  DType dtype;
};
constexpr Descr kDescrs[] = {
    {"<f4", DType::kF32}, {"<f8", DType::kF64}, {"<f2", DType::kF16}, {"<i8", DType::kI64},
    {"<i4", DType::kI32}, {"<i2", DType::kI16}, {"|i1", DType::kI8},  {"|u1", DType::kU8},
    {"<u2", DType::kU16}, {"<u4", DType::kU32}, {"<u8", DType::kU64}, {"|b1", DType::kBool},
};

absl::Status Bad(const std::string& path, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("'", path, "' is not a valid .npy file: ", why));
}

// Finds `'key': value` in the header dict and returns the raw value text.
std::optional<std::string> DictValue(const std::string& header, const std::string& key) {
  const std::string k = "'" + key + "'";
  size_t p = header.find(k);
  if (p == std::string::npos) return std::nullopt;
  p = header.find(':', p + k.size());
  if (p == std::string::npos) return std::nullopt;
  ++p;
  while (p < header.size() && header[p] == ' ') ++p;
  if (p >= header.size()) return std::nullopt;
  size_t end;
  if (header[p] == '(') {
    end = header.find(')', p);
    if (end == std::string::npos) return std::nullopt;
    return header.substr(p, end - p + 1);
  }
  if (header[p] == '\'') {
    end = header.find('\'', p + 1);
    if (end == std::string::npos) return std::nullopt;
    return header.substr(p + 1, end - p - 1);
  }
  end = header.find_first_of(",}", p);
  if (end == std::string::npos) return std::nullopt;
  return std::string(absl::StripAsciiWhitespace(header.substr(p, end - p)));
}

}  // namespace

absl::StatusOr<Tensor> ReadNpy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat("cannot open '", path, "'"));
  f.seekg(0, std::ios::end);
  const int64_t file_size = f.tellg();
  f.seekg(0);
  char magic[8];
  if (file_size < 10 || !f.read(magic, 8)) return Bad(path, "too short");
  if (std::memcmp(magic, "\x93NUMPY", 6) != 0) return Bad(path, "bad magic");
  const int major = static_cast<unsigned char>(magic[6]);
  uint32_t header_len = 0;
  if (major == 1) {
    unsigned char b[2];
    if (!f.read(reinterpret_cast<char*>(b), 2)) return Bad(path, "too short");
    header_len = b[0] | (b[1] << 8);
  } else if (major == 2 || major == 3) {
    unsigned char b[4];
    if (!f.read(reinterpret_cast<char*>(b), 4)) return Bad(path, "too short");
    header_len = b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<uint32_t>(b[3]) << 24);
  } else {
    return Bad(path, absl::StrCat("unknown format version ", major));
  }
  if (header_len > 1 << 20 || static_cast<int64_t>(f.tellg()) + header_len > file_size)
    return Bad(path, "header length out of range");
  std::string header(header_len, '\0');
  if (!f.read(header.data(), header_len)) return Bad(path, "truncated header");
  auto descr = DictValue(header, "descr");
  auto fortran = DictValue(header, "fortran_order");
  auto shape_text = DictValue(header, "shape");
  if (!descr || !fortran || !shape_text) return Bad(path, "header lacks descr/fortran_order/shape");
  if (*fortran != "False") return Bad(path, "Fortran order is not supported");
  std::optional<DType> dtype;
  std::string d = *descr;
  if (d == "=f4" || d == "f4") d = "<f4";  // tolerate native-order spellings
  for (const auto& e : kDescrs)
    if (d == e.code) dtype = e.dtype;
  if (!dtype)
    return absl::UnimplementedError(
        absl::StrCat("'", path, "': npy dtype '", *descr, "' is not supported"));
  std::vector<int64_t> dims;
  if (shape_text->size() < 2 || shape_text->front() != '(' || shape_text->back() != ')')
    return Bad(path, absl::StrCat("shape '", *shape_text, "' is not a tuple"));
  std::string inner = shape_text->substr(1, shape_text->size() - 2);
  for (absl::string_view part : absl::StrSplit(inner, ',', absl::SkipWhitespace())) {
    int64_t v;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &v) || v < 0)
      return Bad(path, absl::StrCat("bad shape ", *shape_text));
    dims.push_back(v);
  }
  auto n = CheckedNumElements(dims);
  if (!n.ok()) return Bad(path, std::string(n.status().message()));
  int64_t bytes;
  if (MulOverflows(*n, static_cast<int64_t>(DTypeSize(*dtype)), &bytes) ||
      static_cast<int64_t>(f.tellg()) + bytes != file_size)
    return Bad(path, "data size does not match the shape");
  KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::Create(*dtype, dims));
  if (bytes > 0 && !f.read(reinterpret_cast<char*>(t.raw()), bytes))
    return Bad(path, "truncated data");
  return t;
}

absl::Status WriteNpy(const std::string& path, const Tensor& t) {
  const char* code = nullptr;
  for (const auto& e : kDescrs)
    if (e.dtype == t.dtype()) code = e.code;
  if (t.dtype() == DType::kBF16) {
    return absl::UnimplementedError("numpy has no bfloat16; cast the output to f32 first");
  }
  if (code == nullptr)
    return absl::UnimplementedError(
        absl::StrCat("cannot write dtype ", std::string(DTypeName(t.dtype())), " to .npy"));
  std::string shape = "(";
  for (int64_t d : t.dims()) absl::StrAppend(&shape, d, ",");
  if (t.rank() > 1) shape.pop_back();
  shape += ")";
  std::string header =
      absl::StrCat("{'descr': '", code, "', 'fortran_order': False, 'shape': ", shape, ", }");
  // Pad so that magic(6)+version(2)+len(2)+header is a multiple of 64, ending in '\n'.
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return absl::PermissionDeniedError(absl::StrCat("cannot write '", path, "'"));
  const unsigned char pre[10] = {0x93,
                                 'N',
                                 'U',
                                 'M',
                                 'P',
                                 'Y',
                                 1,
                                 0,
                                 static_cast<unsigned char>(header.size() & 0xff),
                                 static_cast<unsigned char>(header.size() >> 8)};
  f.write(reinterpret_cast<const char*>(pre), 10);
  f.write(header.data(), header.size());
  if (t.NumBytes() > 0) f.write(reinterpret_cast<const char*>(t.raw()), t.NumBytes());
  if (!f) return absl::DataLossError(absl::StrCat("failed writing '", path, "'"));
  return absl::OkStatus();
}

}  // namespace kiln
