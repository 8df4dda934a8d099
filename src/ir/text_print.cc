// IR text printer: PrintGraph writes a Graph as text, one node per line, that ParseGraph
// (text_parse.cc) reads back. Why: pass tests read as Before/Expected IR, and dumps
// (`--print-after`, `kiln inspect`) must be exact enough to re-parse and diff. The grammar
// is documented in include/kiln/ir/text.h and docs/ir.md.
// Limits: values are renumbered in print order; use-list order is not preserved (it is not
// part of the graph's meaning). Operands may refer forward, so non-topological (even
// cyclic) graphs print; the verifier, not the parser, rejects them.
#include <charconv>
#include <cmath>
#include <cstring>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "kiln/ir/narrow.h"
#include "kiln/ir/text.h"
#include "src/ir/text_chars.h"

namespace kiln {
namespace text_internal {

void AppendQuoted(std::string* out, std::string_view s) {
  out->push_back('"');
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\t':
        out->append("\\t");
        break;
      case '\r':
        out->append("\\r");
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          absl::StrAppendFormat(out, "\\x%02x", c);
        } else {
          out->push_back(ch);  // bytes >= 0x80 pass through (UTF-8 stays readable)
        }
    }
  }
  out->push_back('"');
}

}  // namespace text_internal

namespace {

using text_internal::AppendQuoted;
using text_internal::IsIdentChar;
using text_internal::IsIdentStart;

bool IsIdent(std::string_view s) {
  if (s.empty() || !IsIdentStart(s[0])) return false;
  for (char c : s)
    if (!IsIdentChar(c)) return false;
  return true;
}

// Bare when an identifier other than the statement keyword `return`; quoted otherwise.
void AppendName(std::string* out, std::string_view s) {
  if (IsIdent(s) && s != "return") {
    out->append(s);
  } else {
    AppendQuoted(out, s);
  }
}

template <typename F>
std::string Shortest(F v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

// Shortest text that reads back to the same value; NaN prints its exact bits.
std::string F32Text(float v) {
  if (std::isnan(v)) {
    uint32_t b;
    std::memcpy(&b, &v, 4);
    return absl::StrFormat("nan:0x%08x", b);
  }
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  return Shortest(v);
}

std::string F64Text(double v) {
  if (std::isnan(v)) {
    uint64_t b;
    std::memcpy(&b, &v, 8);
    return absl::StrFormat("nan:0x%016x", b);
  }
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  return Shortest(v);
}

std::string F16Text(uint16_t h) {
  if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0) return absl::StrFormat("nan:0x%04x", h);
  return F32Text(HalfToFloat(h));
}

std::string BF16Text(uint16_t h) {
  if ((h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0) return absl::StrFormat("nan:0x%04x", h);
  return F32Text(BF16ToFloat(h));
}

// A float attribute must not read back as an int: force a '.' when the text has none.
std::string FloatAttrText(float v) {
  std::string s = F32Text(v);
  if (s.find_first_of(".ein") == std::string::npos) s += ".0";
  return s;
}

template <typename T>
T Load(const std::byte* p, int64_t i) {
  T v;
  std::memcpy(&v, p + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return v;
}

void AppendElement(std::string* out, const Tensor& t, int64_t i) {
  const std::byte* p = t.raw();
  switch (t.dtype()) {
    case DType::kF32:
      out->append(F32Text(Load<float>(p, i)));
      break;
    case DType::kF64:
      out->append(F64Text(Load<double>(p, i)));
      break;
    case DType::kF16:
      out->append(F16Text(Load<uint16_t>(p, i)));
      break;
    case DType::kBF16:
      out->append(BF16Text(Load<uint16_t>(p, i)));
      break;
    case DType::kI8:
      absl::StrAppend(out, static_cast<int>(Load<int8_t>(p, i)));
      break;
    case DType::kU8:
      absl::StrAppend(out, static_cast<int>(Load<uint8_t>(p, i)));
      break;
    case DType::kI16:
      absl::StrAppend(out, Load<int16_t>(p, i));
      break;
    case DType::kU16:
      absl::StrAppend(out, Load<uint16_t>(p, i));
      break;
    case DType::kI32:
      absl::StrAppend(out, Load<int32_t>(p, i));
      break;
    case DType::kU32:
      absl::StrAppend(out, Load<uint32_t>(p, i));
      break;
    case DType::kI64:
      absl::StrAppend(out, Load<int64_t>(p, i));
      break;
    case DType::kU64:
      absl::StrAppend(out, Load<uint64_t>(p, i));
      break;
    case DType::kBool: {
      const uint8_t b = Load<uint8_t>(p, i);
      if (b <= 1) {
        out->append(b ? "true" : "false");
      } else {
        absl::StrAppend(out, static_cast<int>(b));
      }
      break;
    }
    default:
      if (IsNarrowInt(t.dtype())) {
        absl::StrAppend(out, t.GetAsInt64(i));
      } else if (IsNarrowFloat(t.dtype())) {
        const uint8_t code = Load<uint8_t>(p, i);
        const float v = NarrowToFloat(code, t.dtype());
        out->append(std::isnan(v) ? absl::StrFormat("nan:0x%02x", code) : F32Text(v));
      } else {
        out->append("?");
      }
      break;
  }
}

void AppendTensor(std::string* out, const Tensor& t, const PrintOptions& options) {
  out->append("tensor<");
  if (!t.defined()) {
    out->append("?>");
    return;
  }
  absl::StrAppend(out, std::string(DTypeName(t.dtype())), "[", absl::StrJoin(t.dims(), ","), "]>");
  if (DTypeSize(t.dtype()) == 0) return;  // e.g. string: no data to print
  const int64_t n = t.NumElements();
  if (n > 0 && t.raw() == nullptr) {  // no storage: nothing exact to print
    out->append("...");
    return;
  }
  if (n > options.max_inline_elements) {
    if (options.elide_large_constants) {
      out->append("...");
      return;
    }
    static constexpr char kHex[] = "0123456789abcdef";
    const size_t bytes = t.NumBytes();
    const auto* p = reinterpret_cast<const unsigned char*>(t.raw());
    out->push_back('#');
    out->reserve(out->size() + 2 * bytes + 64);
    for (size_t i = 0; i < bytes; ++i) {
      out->push_back(kHex[p[i] >> 4]);
      out->push_back(kHex[p[i] & 15]);
    }
    return;
  }
  out->push_back('[');
  for (int64_t i = 0; i < n; ++i) {
    if (i > 0) out->append(", ");
    AppendElement(out, t, i);
  }
  out->push_back(']');
}

struct AttrPrinter {
  std::string* out;
  const PrintOptions& options;

  void operator()(int64_t v) const { absl::StrAppend(out, v); }
  void operator()(float v) const { out->append(FloatAttrText(v)); }
  void operator()(const std::string& v) const { AppendQuoted(out, v); }
  void operator()(const Tensor& v) const { AppendTensor(out, v, options); }
  void operator()(const std::vector<int64_t>& v) const {
    if (v.empty()) {
      out->append("ints[]");
      return;
    }
    absl::StrAppend(out, "[", absl::StrJoin(v, ", "), "]");
  }
  void operator()(const std::vector<float>& v) const {
    if (v.empty()) {
      out->append("floats[]");
      return;
    }
    out->push_back('[');
    for (size_t i = 0; i < v.size(); ++i) {
      if (i > 0) out->append(", ");
      out->append(FloatAttrText(v[i]));
    }
    out->push_back(']');
  }
  void operator()(const std::vector<std::string>& v) const {
    if (v.empty()) {
      out->append("strings[]");
      return;
    }
    out->push_back('[');
    for (size_t i = 0; i < v.size(); ++i) {
      if (i > 0) out->append(", ");
      AppendQuoted(out, v[i]);
    }
    out->push_back(']');
  }
};

void AppendType(std::string* out, const Type& t) {
  if (t.dtype == DType::kUndefined) {
    out->push_back('?');
    if (!t.shape) return;
  } else {
    out->append(DTypeName(t.dtype));
  }
  if (!t.shape) {
    out->append("[*]");
    return;
  }
  out->push_back('[');
  for (size_t i = 0; i < t.shape->size(); ++i) {
    if (i > 0) out->push_back(',');
    const Dim& d = (*t.shape)[i];
    if (d.is_known()) {
      absl::StrAppend(out, d.value());
    } else if (d.is_symbol()) {
      AppendName(out, d.symbol());
    } else {
      out->push_back('?');
    }
  }
  out->push_back(']');
}

// A domain prints bare when each '.'-separated segment is an identifier and the first is
// not `return`; otherwise it prints as one quoted string.
bool DomainIsBare(std::string_view d) {
  size_t start = 0;
  while (true) {
    const size_t dot = d.find('.', start);
    const std::string_view seg = d.substr(start, dot == std::string_view::npos ? dot : dot - start);
    if (!IsIdent(seg) || (start == 0 && seg == "return")) return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

bool IsTrivialOutput(const NodeOutput& o) {
  return o.type.dtype == DType::kUndefined && !o.type.shape && o.name.empty();
}

}  // namespace

std::string PrintGraph(const Graph& g, const PrintOptions& options) {
  // Number every value in print order before printing, so forward operands resolve.
  absl::flat_hash_map<const Node*, int64_t> first;
  int64_t next = 0;
  for (const auto& p : g.nodes()) {
    first[p.get()] = next;
    next += p->num_outputs();
  }
  auto value_text = [&](const Value& v) -> std::string {
    if (!v) return "_";
    auto it = first.find(v.node);
    if (it == first.end() || v.index < 0 || v.index >= v.node->num_outputs())
      return "<invalid>";  // a broken graph: printed for diagnostics, not parseable
    return absl::StrCat("%", it->second + v.index);
  };

  std::string out = "graph ";
  AppendName(&out, g.name());
  absl::StrAppend(&out, " opset=", g.opset(), " {\n");
  for (const auto& p : g.nodes()) {
    const Node& n = *p;
    out.append("  ");
    if (n.num_outputs() > 0) {
      for (int i = 0; i < n.num_outputs(); ++i)
        absl::StrAppend(&out, i > 0 ? ", " : "", "%", first[&n] + i);
      out.append(" = ");
    }
    const std::string& domain = n.domain();
    if (!domain.empty()) {
      if (DomainIsBare(domain)) {
        out.append(domain);
      } else {
        AppendQuoted(&out, domain);
      }
      out.push_back('.');
    }
    AppendName(&out, n.op());
    out.push_back('(');
    for (int i = 0; i < n.num_inputs(); ++i) {
      if (i > 0) out.append(", ");
      out.append(value_text(n.input(i)));
    }
    out.push_back(')');
    if (!n.attrs().empty()) {
      out.append(" {");
      bool first_attr = true;
      for (const auto& [name, attr] : n.attrs()) {
        if (!first_attr) out.append(", ");
        first_attr = false;
        AppendName(&out, name);
        out.push_back('=');
        std::visit(AttrPrinter{&out, options}, attr);
      }
      out.push_back('}');
    }
    bool any_type = false;
    for (int i = 0; i < n.num_outputs(); ++i)
      any_type = any_type || !IsTrivialOutput(n.output_info(i));
    if (any_type) {
      out.append(" : ");
      for (int i = 0; i < n.num_outputs(); ++i) {
        if (i > 0) out.append(", ");
        AppendType(&out, n.output_info(i).type);
        if (!n.output_info(i).name.empty()) {
          out.push_back(' ');
          AppendQuoted(&out, n.output_info(i).name);
        }
      }
    }
    if (!n.provenance().empty()) {
      out.append(" @ ");
      for (size_t i = 0; i < n.provenance().size(); ++i) {
        if (i > 0) out.append(", ");
        AppendQuoted(&out, n.provenance()[i]);
      }
    }
    out.push_back('\n');
  }
  out.append("  return");
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    out.append(i > 0 ? ", " : " ");
    AppendQuoted(&out, g.outputs()[i].name);
    absl::StrAppend(&out, ": ", value_text(g.outputs()[i].value));
  }
  out.append("\n}\n");
  return out;
}

}  // namespace kiln
