// NumPy .npy reader and writer: little-endian, C order, the dtypes kiln knows. The reader
// validates the header and the data length against the file size before allocating; the
// .npz reader (uncompressed archives, as np.savez writes) parses each member the same way.
#include "kiln/support/npy.h"

#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
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

absl::StatusOr<Tensor> ParseNpy(std::string_view bytes, const std::string& path) {
  const int64_t file_size = static_cast<int64_t>(bytes.size());
  if (file_size < 10) return Bad(path, "too short");
  if (std::memcmp(bytes.data(), "\x93NUMPY", 6) != 0) return Bad(path, "bad magic");
  const int major = static_cast<unsigned char>(bytes[6]);
  const auto* u = reinterpret_cast<const unsigned char*>(bytes.data());
  uint32_t header_len = 0;
  int64_t pos = 8;
  if (major == 1) {
    header_len = u[8] | (u[9] << 8);
    pos = 10;
  } else if (major == 2 || major == 3) {
    if (file_size < 12) return Bad(path, "too short");
    header_len = u[8] | (u[9] << 8) | (u[10] << 16) | (static_cast<uint32_t>(u[11]) << 24);
    pos = 12;
  } else {
    return Bad(path, absl::StrCat("unknown format version ", major));
  }
  if (header_len > 1 << 20 || pos + header_len > file_size)
    return Bad(path, "header length out of range");
  const std::string header(bytes.substr(pos, header_len));
  pos += header_len;
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
  int64_t nbytes;
  if (MulOverflows(*n, static_cast<int64_t>(DTypeSize(*dtype)), &nbytes) ||
      pos + nbytes != file_size)
    return Bad(path, "data size does not match the shape");
  KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::Create(*dtype, dims));
  if (nbytes > 0) std::memcpy(t.raw(), bytes.data() + pos, static_cast<size_t>(nbytes));
  return t;
}

absl::StatusOr<std::string> ReadFileBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat("cannot open '", path, "'"));
  std::stringstream ss;
  ss << f.rdbuf();
  if (!f && !f.eof()) return absl::DataLossError(absl::StrCat("failed reading '", path, "'"));
  return ss.str();
}

uint32_t Le32(const unsigned char* p) {
  return p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
uint16_t Le16(const unsigned char* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

}  // namespace

absl::StatusOr<Tensor> ReadNpy(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(const std::string bytes, ReadFileBytes(path));
  return ParseNpy(bytes, path);
}

// .npz: a zip archive of .npy members. Only stored (uncompressed) members, as np.savez
// writes them; the central directory is read from the end-of-central-directory record and
// every offset and size is checked against the file before use.
absl::StatusOr<std::vector<std::pair<std::string, Tensor>>> ReadNpz(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(const std::string bytes, ReadFileBytes(path));
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is not a valid .npz file: ", why));
  };
  const auto* u = reinterpret_cast<const unsigned char*>(bytes.data());
  const int64_t size = static_cast<int64_t>(bytes.size());
  int64_t eocd = -1;
  for (int64_t i = size - 22; i >= 0 && i >= size - 22 - 65535; --i)
    if (Le32(u + i) == 0x06054b50u) {
      eocd = i;
      break;
    }
  if (eocd < 0) return bad("no zip end-of-central-directory record");
  const int64_t entries = Le16(u + eocd + 10);
  const int64_t dir_size = Le32(u + eocd + 12), dir_off = Le32(u + eocd + 16);
  if (dir_off + dir_size > eocd) return bad("central directory out of range");
  std::vector<std::pair<std::string, Tensor>> out;
  int64_t p = dir_off;
  for (int64_t e = 0; e < entries; ++e) {
    if (p + 46 > eocd || Le32(u + p) != 0x02014b50u) return bad("corrupt central directory");
    const int method = Le16(u + p + 10);
    const int64_t csize = Le32(u + p + 20), usize = Le32(u + p + 24);
    const int64_t name_len = Le16(u + p + 28), extra_len = Le16(u + p + 30),
                  comment_len = Le16(u + p + 32);
    const int64_t local = Le32(u + p + 42);
    if (p + 46 + name_len > eocd) return bad("corrupt central directory");
    std::string name = bytes.substr(p + 46, name_len);
    p += 46 + name_len + extra_len + comment_len;
    if (method != 0)
      return absl::UnimplementedError(absl::StrCat(
          "'", path, "': member '", name,
          "' is compressed; kiln reads .npz files written by np.savez (not savez_compressed)"));
    if (csize != usize || csize == 0xffffffff) return bad(absl::StrCat("member '", name, "' size"));
    if (local + 30 > size || Le32(u + local) != 0x04034b50u)
      return bad(absl::StrCat("member '", name, "' has no local header"));
    const int64_t data = local + 30 + Le16(u + local + 26) + Le16(u + local + 28);
    if (data + csize > size) return bad(absl::StrCat("member '", name, "' out of range"));
    if (absl::EndsWith(name, ".npy")) name.resize(name.size() - 4);
    KILN_ASSIGN_OR_RETURN(Tensor t, ParseNpy(std::string_view(bytes).substr(data, csize),
                                             absl::StrCat(path, ":", name)));
    out.emplace_back(std::move(name), std::move(t));
  }
  return out;
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
