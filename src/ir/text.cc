// IR text format: PrintGraph writes a Graph as text, one node per line, and ParseGraph
// reads it back. Why: pass tests read as Before/Expected IR, and dumps (`--print-after`,
// `kiln inspect`) must be exact enough to re-parse and diff. The grammar is documented
// in include/kiln/ir/text.h and docs/ir.md.
// Limits: values are renumbered in print order and node ids are reassigned in text
// order; Graph::inputs() is taken to be the Input nodes in text order (the Graph API
// cannot express any other order); use-list order is not preserved (it is not part of
// the graph's meaning). Operands may refer forward, so non-topological (even cyclic)
// graphs print and parse; the verifier, not the parser, rejects them.
#include "kiln/ir/text.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "kiln/support/status.h"

namespace kiln {
namespace {

// ---------------------------------------------------------------------------------------
// Printing.

bool IsIdentStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsIdentChar(char c) { return IsIdentStart(c) || (c >= '0' && c <= '9'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsHexDigit(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
int HexValue(char c) {
  if (IsDigit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return c - 'A' + 10;
}

bool IsIdent(std::string_view s) {
  if (s.empty() || !IsIdentStart(s[0])) return false;
  for (char c : s)
    if (!IsIdentChar(c)) return false;
  return true;
}

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
      out->append("?");
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

// ---------------------------------------------------------------------------------------
// Parsing: a hand-written recursive-descent parser over the raw text (no token stream:
// a few places, such as `%N`, `#hex` and `domain.Op`, do not allow inner whitespace).

namespace {

struct NumTok {
  enum Kind { kInt, kFloat, kNan } kind = kInt;
  std::string_view text;  // as written, sign included
  bool negative = false;
  bool has_bits = false;  // nan:0x... form
  uint64_t bits = 0;
  size_t pos = 0;
};

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}
  absl::StatusOr<std::unique_ptr<Graph>> Parse();

 private:
  struct Ref {
    int64_t id = -1;  // -1: omitted (`_`)
    size_t pos = 0;
  };
  struct PendingOperand {
    Node* node;
    int operand;
    Ref ref;
  };

  // Lexing helpers.
  void SkipSpace();
  char Peek() {
    SkipSpace();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }
  bool AtEnd() {
    SkipSpace();
    return pos_ >= text_.size();
  }
  bool Consume(char c) {
    if (AtEnd() || text_[pos_] != c) return false;
    ++pos_;
    return true;
  }
  bool PeekWord(std::string_view w) {
    SkipSpace();
    if (text_.substr(pos_, w.size()) != w) return false;
    const size_t end = pos_ + w.size();
    return end >= text_.size() || !IsIdentChar(text_[end]);
  }
  bool ConsumeWord(std::string_view w) {
    if (!PeekWord(w)) return false;
    pos_ += w.size();
    return true;
  }
  absl::Status Expect(char c, std::string_view what) {
    if (Consume(c)) return absl::OkStatus();
    return Expected(what);
  }
  std::string Where(size_t pos) const;
  std::string Found(size_t pos) const;
  absl::Status Expected(std::string_view what) {
    SkipSpace();
    return absl::InvalidArgumentError(absl::StrCat("IR text ", Where(pos_), ": expected ",
                                                   std::string(what), ", found ", Found(pos_)));
  }
  absl::Status ErrorAt(size_t pos, std::string_view msg) const {
    return absl::InvalidArgumentError(absl::StrCat("IR text ", Where(pos), ": ", std::string(msg)));
  }

  absl::StatusOr<std::string> ParseIdent(std::string_view what);
  absl::StatusOr<std::string> ParseString(std::string_view what);
  absl::StatusOr<std::string> ParseName(std::string_view what);
  absl::StatusOr<NumTok> ScanNumber(std::string_view what);
  absl::StatusOr<int64_t> ParseInt(std::string_view what);
  absl::StatusOr<Ref> ParseValueRef(std::string_view what, bool allow_omitted);
  bool StringStartsStatement();

  // Number conversions.
  absl::StatusOr<int64_t> ToInt64(const NumTok& t);
  absl::StatusOr<float> ToF32(const NumTok& t);
  absl::StatusOr<double> ToF64(const NumTok& t);

  absl::StatusOr<Type> ParseType();
  absl::StatusOr<Attribute> ParseAttrValue();
  absl::StatusOr<Attribute> ParseList(int forced);  // forced: 0 auto, 1 ints, 2 floats, 3 strings
  absl::StatusOr<Tensor> ParseTensor();
  absl::Status ParseElement(DType dt, std::string* bytes);
  absl::Status ParseNode(Graph* g);

  std::string_view text_;
  size_t pos_ = 0;
  absl::flat_hash_map<int64_t, Value> defs_;
  std::vector<PendingOperand> pending_;
};

void Parser::SkipSpace() {
  while (pos_ < text_.size()) {
    const char c = text_[pos_];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++pos_;
    } else if (c == '/' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '/') {
      while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
    } else {
      break;
    }
  }
}

std::string Parser::Where(size_t pos) const {
  pos = std::min(pos, text_.size());
  int line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < pos; ++i) {
    if (text_[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return absl::StrCat(line, ":", pos - line_start + 1);
}

std::string Parser::Found(size_t pos) const {
  if (pos >= text_.size()) return "end of input";
  size_t end = pos;
  while (end < text_.size() && end - pos < 16 && text_[end] != ' ' && text_[end] != '\n' &&
         text_[end] != '\t' && text_[end] != '\r')
    ++end;
  if (end == pos) end = pos + 1;
  std::string s;
  AppendQuoted(&s, text_.substr(pos, end - pos));
  return s;
}

absl::StatusOr<std::string> Parser::ParseIdent(std::string_view what) {
  SkipSpace();
  if (pos_ >= text_.size() || !IsIdentStart(text_[pos_])) return Expected(what);
  const size_t start = pos_;
  while (pos_ < text_.size() && IsIdentChar(text_[pos_])) ++pos_;
  return std::string(text_.substr(start, pos_ - start));
}

absl::StatusOr<std::string> Parser::ParseString(std::string_view what) {
  if (Peek() != '"') return Expected(what);
  const size_t start = pos_++;
  std::string s;
  while (true) {
    if (pos_ >= text_.size()) return ErrorAt(start, "unterminated string");
    const char c = text_[pos_++];
    if (c == '"') break;
    if (c == '\n') return ErrorAt(start, "unterminated string (write a newline as \\n)");
    if (c != '\\') {
      s.push_back(c);
      continue;
    }
    if (pos_ >= text_.size()) return ErrorAt(start, "unterminated string");
    const char e = text_[pos_++];
    switch (e) {
      case 'n':
        s.push_back('\n');
        break;
      case 't':
        s.push_back('\t');
        break;
      case 'r':
        s.push_back('\r');
        break;
      case '"':
        s.push_back('"');
        break;
      case '\\':
        s.push_back('\\');
        break;
      case 'x':
        if (pos_ + 1 >= text_.size() || !IsHexDigit(text_[pos_]) || !IsHexDigit(text_[pos_ + 1]))
          return ErrorAt(pos_ - 2, "expected two hex digits after \\x");
        s.push_back(static_cast<char>(HexValue(text_[pos_]) * 16 + HexValue(text_[pos_ + 1])));
        pos_ += 2;
        break;
      default:
        return ErrorAt(pos_ - 2, "unknown escape in string (use \\n \\t \\r \\\" \\\\ \\xHH)");
    }
  }
  return s;
}

absl::StatusOr<std::string> Parser::ParseName(std::string_view what) {
  if (Peek() == '"') return ParseString(what);
  return ParseIdent(what);
}

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

absl::StatusOr<Parser::Ref> Parser::ParseValueRef(std::string_view what, bool allow_omitted) {
  SkipSpace();
  Ref ref;
  ref.pos = pos_;
  if (allow_omitted && ConsumeWord("_")) return ref;
  if (!Consume('%')) return Expected(what);
  const size_t start = pos_;
  while (pos_ < text_.size() && IsDigit(text_[pos_])) ++pos_;
  if (pos_ == start) return Expected("digits after '%'");
  auto r = std::from_chars(text_.data() + start, text_.data() + pos_, ref.id);
  if (r.ec != std::errc()) return ErrorAt(ref.pos, "value number out of range");
  if (pos_ < text_.size() && IsIdentChar(text_[pos_]))
    return ErrorAt(ref.pos, "malformed value name");
  return ref;
}

// After an output type, a string is the output's name unless it starts the next
// statement (a quoted op name of a node without results: `"op"(` or `"domain".op(`).
bool Parser::StringStartsStatement() {
  const size_t saved = pos_;
  bool starts = false;
  if (ParseString("").ok()) {
    const char c = Peek();
    starts = c == '(' || c == '.';
  }
  pos_ = saved;
  return starts;
}

absl::StatusOr<Type> Parser::ParseType() {
  Type t;
  SkipSpace();
  if (Consume('?')) {
    t.dtype = DType::kUndefined;
  } else {
    const size_t p = pos_;
    KILN_ASSIGN_OR_RETURN(std::string name, ParseIdent("a type (a dtype such as f32, or '?')"));
    std::optional<DType> dt = DTypeFromName(name);
    if (!dt) return ErrorAt(p, absl::StrCat("unknown dtype '", name, "'"));
    t.dtype = *dt;
  }
  if (!Consume('[')) return t;  // no shape: rank unknown
  if (Consume('*')) {
    KILN_RETURN_IF_ERROR(Expect(']', "']' after '*'"));
    return t;
  }
  t.shape.emplace();
  if (Consume(']')) return t;
  do {
    const char c = Peek();
    if (c == '?') {
      ++pos_;
      t.shape->push_back(Dim());
    } else if (c == '"') {
      KILN_ASSIGN_OR_RETURN(std::string s, ParseString("a dimension"));
      t.shape->push_back(Dim::Symbol(std::move(s)));
    } else if (IsIdentStart(c)) {
      KILN_ASSIGN_OR_RETURN(std::string s, ParseIdent("a dimension"));
      t.shape->push_back(Dim::Symbol(std::move(s)));
    } else {
      const size_t p = pos_;
      KILN_ASSIGN_OR_RETURN(int64_t v, ParseInt("a dimension (integer, symbol or '?')"));
      if (v < 0) return ErrorAt(p, "negative dimension");
      t.shape->push_back(Dim::Known(v));
    }
  } while (Consume(','));
  KILN_RETURN_IF_ERROR(Expect(']', "',' or ']' in a shape"));
  return t;
}

absl::StatusOr<Attribute> Parser::ParseAttrValue() {
  const char c = Peek();
  if (c == '"') {
    KILN_ASSIGN_OR_RETURN(std::string s, ParseString("a string"));
    return Attribute(std::move(s));
  }
  if (c == '[') return ParseList(0);
  if (PeekWord("tensor")) {
    KILN_ASSIGN_OR_RETURN(Tensor t, ParseTensor());
    return Attribute(std::move(t));
  }
  if (ConsumeWord("ints")) return ParseList(1);
  if (ConsumeWord("floats")) return ParseList(2);
  if (ConsumeWord("strings")) return ParseList(3);
  KILN_ASSIGN_OR_RETURN(NumTok tok,
                        ScanNumber("an attribute value (number, string, list or tensor<...>)"));
  if (tok.kind == NumTok::kInt) {
    KILN_ASSIGN_OR_RETURN(int64_t v, ToInt64(tok));
    return Attribute(v);
  }
  KILN_ASSIGN_OR_RETURN(float f, ToF32(tok));
  return Attribute(f);
}

absl::StatusOr<Attribute> Parser::ParseList(int forced) {
  const size_t start = (SkipSpace(), pos_);
  KILN_RETURN_IF_ERROR(Expect('[', "'[' starting a list"));
  std::vector<std::string> strs;
  std::vector<NumTok> nums;
  if (!Consume(']')) {
    do {
      if (Peek() == '"') {
        if (!nums.empty()) return ErrorAt(pos_, "a list mixes strings and numbers");
        KILN_ASSIGN_OR_RETURN(std::string s, ParseString("a string"));
        strs.push_back(std::move(s));
      } else {
        if (!strs.empty()) return ErrorAt(pos_, "a list mixes strings and numbers");
        KILN_ASSIGN_OR_RETURN(NumTok t, ScanNumber("a list element"));
        nums.push_back(t);
      }
    } while (Consume(','));
    KILN_RETURN_IF_ERROR(Expect(']', "',' or ']' in a list"));
  }
  if (forced == 0) {
    if (!strs.empty()) {
      forced = 3;
    } else if (!nums.empty()) {
      forced = 1;
      for (const NumTok& t : nums)
        if (t.kind != NumTok::kInt) forced = 2;
    } else {
      return ErrorAt(start, "an empty list needs its type: write ints[], floats[] or strings[]");
    }
  }
  if (forced == 3) {
    if (!nums.empty()) return ErrorAt(nums[0].pos, "expected a string in a strings list");
    return Attribute(std::move(strs));
  }
  if (!strs.empty()) return ErrorAt(start, "expected numbers in an ints/floats list");
  if (forced == 1) {
    std::vector<int64_t> v;
    for (const NumTok& t : nums) {
      KILN_ASSIGN_OR_RETURN(int64_t x, ToInt64(t));
      v.push_back(x);
    }
    return Attribute(std::move(v));
  }
  std::vector<float> v;
  for (const NumTok& t : nums) {
    KILN_ASSIGN_OR_RETURN(float x, ToF32(t));
    v.push_back(x);
  }
  return Attribute(std::move(v));
}

template <typename T>
void AppendBytes(std::string* bytes, T v) {
  char buf[sizeof(T)];
  std::memcpy(buf, &v, sizeof(T));
  bytes->append(buf, sizeof(T));
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

absl::Status Parser::ParseNode(Graph* g) {
  std::vector<Ref> results;
  if (Peek() == '%') {
    do {
      KILN_ASSIGN_OR_RETURN(Ref r, ParseValueRef("a result value '%N'", false));
      results.push_back(r);
    } while (Consume(','));
    KILN_RETURN_IF_ERROR(Expect('=', "'=' after the result values"));
  }
  SkipSpace();
  const size_t op_pos = pos_;
  std::vector<std::string> segs;
  {
    KILN_ASSIGN_OR_RETURN(std::string seg, ParseName("an op name, '%N =', 'return' or '}'"));
    segs.push_back(std::move(seg));
  }
  while (pos_ < text_.size() && text_[pos_] == '.') {
    ++pos_;
    if (pos_ >= text_.size() || !(IsIdentStart(text_[pos_]) || text_[pos_] == '"'))
      return Expected("an op name after '.'");
    KILN_ASSIGN_OR_RETURN(std::string seg, ParseName("an op name after '.'"));
    segs.push_back(std::move(seg));
  }
  std::string op = std::move(segs.back());
  segs.pop_back();
  std::string domain = absl::StrJoin(segs, ".");

  KILN_RETURN_IF_ERROR(Expect('(', "'(' after the op name"));
  std::vector<Ref> operands;
  if (!Consume(')')) {
    do {
      KILN_ASSIGN_OR_RETURN(Ref r, ParseValueRef("an operand ('%N' or '_')", true));
      operands.push_back(r);
    } while (Consume(','));
    KILN_RETURN_IF_ERROR(Expect(')', "',' or ')' after an operand"));
  }

  std::map<std::string, Attribute> attrs;
  if (Consume('{')) {
    if (!Consume('}')) {
      do {
        SkipSpace();
        const size_t p = pos_;
        KILN_ASSIGN_OR_RETURN(std::string name, ParseName("an attribute name"));
        if (attrs.count(name)) return ErrorAt(p, absl::StrCat("duplicate attribute '", name, "'"));
        KILN_RETURN_IF_ERROR(Expect('=', "'=' after the attribute name"));
        KILN_ASSIGN_OR_RETURN(Attribute a, ParseAttrValue());
        attrs.emplace(std::move(name), std::move(a));
      } while (Consume(','));
      KILN_RETURN_IF_ERROR(Expect('}', "',' or '}' after an attribute"));
    }
  }

  std::vector<Type> types(results.size());
  std::vector<std::string> names(results.size());
  if (Consume(':')) {
    if (results.empty()) return ErrorAt(pos_ - 1, "a node without results has no types");
    size_t i = 0;
    do {
      if (i == results.size())
        return ErrorAt((SkipSpace(), pos_),
                       absl::StrCat("more types than the ", results.size(), " results"));
      KILN_ASSIGN_OR_RETURN(types[i], ParseType());
      if (Peek() == '"' && !StringStartsStatement()) {
        KILN_ASSIGN_OR_RETURN(names[i], ParseString("an output name"));
      }
      ++i;
    } while (Consume(','));
    if (i != results.size())
      return Expected(absl::StrCat("',' and a type for each of the ", results.size(), " results"));
  }

  std::vector<std::string> provenance;
  if (Consume('@')) {
    do {
      KILN_ASSIGN_OR_RETURN(std::string s, ParseString("a quoted provenance name"));
      provenance.push_back(std::move(s));
    } while (Consume(','));
  }

  Node* n;
  if (op == "Input" && domain.empty()) {
    if (results.size() != 1 || !operands.empty())
      return ErrorAt(op_pos, "an Input node has no operands and exactly one result");
    n = g->AddInput(names[0], types[0]);
  } else {
    n = g->AddNode(op, std::vector<Value>(operands.size()), static_cast<int>(results.size()),
                   domain);
    for (size_t i = 0; i < results.size(); ++i) {
      n->set_output_type(static_cast<int>(i), types[i]);
      n->set_output_name(static_cast<int>(i), names[i]);
    }
  }
  for (auto& [name, a] : attrs) n->set_attr(name, std::move(a));
  n->set_provenance(std::move(provenance));
  for (size_t i = 0; i < results.size(); ++i) {
    if (!defs_.emplace(results[i].id, Value{n, static_cast<int>(i)}).second)
      return ErrorAt(results[i].pos, absl::StrCat("value %", results[i].id, " is defined twice"));
  }
  for (size_t i = 0; i < operands.size(); ++i)
    if (operands[i].id >= 0) pending_.push_back({n, static_cast<int>(i), operands[i]});
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Graph>> Parser::Parse() {
  auto g = std::make_unique<Graph>();
  if (!ConsumeWord("graph")) return Expected("'graph'");
  KILN_ASSIGN_OR_RETURN(std::string name, ParseName("the graph name"));
  if (!ConsumeWord("opset")) return Expected("'opset=' after the graph name");
  KILN_RETURN_IF_ERROR(Expect('=', "'=' after 'opset'"));
  KILN_ASSIGN_OR_RETURN(int64_t opset, ParseInt("the opset version"));
  KILN_RETURN_IF_ERROR(Expect('{', "'{' opening the graph body"));
  g->set_name(std::move(name));
  g->set_opset(opset);

  struct PendingOutput {
    std::string name;
    Ref ref;
  };
  std::vector<PendingOutput> outputs;
  bool returned = false;
  while (!Consume('}')) {
    if (AtEnd()) return Expected("'}' closing the graph");
    if (returned) return Expected("'}' after the return statement");
    if (ConsumeWord("return")) {
      returned = true;
      if (Peek() == '"') {
        do {
          KILN_ASSIGN_OR_RETURN(std::string oname, ParseString("a quoted graph output name"));
          KILN_RETURN_IF_ERROR(Expect(':', "':' after the graph output name"));
          KILN_ASSIGN_OR_RETURN(Ref r, ParseValueRef("a graph output value ('%N' or '_')", true));
          outputs.push_back({std::move(oname), r});
        } while (Consume(','));
      }
      continue;
    }
    KILN_RETURN_IF_ERROR(ParseNode(g.get()));
  }
  if (!AtEnd()) return Expected("end of input after the graph's '}'");

  for (const PendingOperand& p : pending_) {
    auto it = defs_.find(p.ref.id);
    if (it == defs_.end())
      return ErrorAt(p.ref.pos, absl::StrCat("value %", p.ref.id, " is used but never defined"));
    g->SetInput(p.node, p.operand, it->second);
  }
  for (PendingOutput& o : outputs) {
    Value v;
    if (o.ref.id >= 0) {
      auto it = defs_.find(o.ref.id);
      if (it == defs_.end())
        return ErrorAt(o.ref.pos, absl::StrCat("value %", o.ref.id, " is used but never defined"));
      v = it->second;
    }
    g->AddOutput(std::move(o.name), v);
  }
  return g;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Graph>> ParseGraph(std::string_view text) {
  return Parser(text).Parse();
}

}  // namespace kiln
